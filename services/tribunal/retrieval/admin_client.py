"""The KB writer's side of ``Upsert`` and ``Delete`` over gRPC: write, check, sign.

A retrieval server never holds the writer's private key. It verifies and stores what an
admin sends and returns, unsigned, the served records of the write and the collection
head (``to_sign``). The writer checks that each record describes exactly what it sent
(collection, entry id, entry and answer sha256 recomputed from its own entries) before
it signs them and sends them back with ``Sign``; a record that does not is refused, not
signed. Until then the new entries are stored but never served.

Usage::

    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    signer, _ = writer_signer(settings)
    written, signed = signed_upsert(stub, request, signer, metadata=[("authorization", ...)])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import FailedPreconditionError
from ..kb import answer_sha256, entry_from_proto, entry_sha256
from ..v1 import retrieval_pb2
from ._signing import ENTRY_KIND, HEAD_KIND, KbSigner, SignatureError, parse_record

__all__ = ["signed_delete", "signed_upsert"]


def _check(
    records: Sequence[retrieval_pb2.SignedRecord],
    collection: str,
    sent: dict[str, tuple[str, str]],
) -> list[bytes]:
    """The records to sign, each checked against what the writer sent."""
    out: list[bytes] = []
    heads = 0
    for item in records:
        try:
            record = parse_record(bytes(item.record))
        except SignatureError as exc:
            raise FailedPreconditionError(f"retrieval returned a bad record: {exc}") from exc
        if record.get("collection") != collection:
            raise FailedPreconditionError(
                f"retrieval returned a record of collection {record.get('collection')!r}: "
                "not signed"
            )
        if record["kind"] == HEAD_KIND:
            heads += 1
        elif record["kind"] == ENTRY_KIND:
            expected = sent.get(str(record.get("entry_id")))
            got = (record.get("entry_sha256"), record.get("answer_sha256"))
            if expected is None or got != expected:
                raise FailedPreconditionError(
                    f"retrieval returned a record of entry {record.get('entry_id')!r} that is "
                    "not what was sent: not signed"
                )
        out.append(bytes(item.record))
    if heads != 1:
        raise FailedPreconditionError(f"retrieval returned {heads} head records, not one")
    return out


def _send(
    stub: Any, collection: str, signer: KbSigner, records: Sequence[bytes], **call: Any
) -> retrieval_pb2.SignResponse:
    signed = [signer.sign(record) for record in records]
    request = retrieval_pb2.SignRequest(
        collection=collection,
        records=[
            retrieval_pb2.SignedRecord(record=s.record, key_id=s.key_id, signature=s.signature)
            for s in signed
        ],
    )
    response: retrieval_pb2.SignResponse = stub.Sign(request, **call)
    return response


def signed_upsert(
    stub: Any, request: retrieval_pb2.UpsertRequest, signer: KbSigner, **call: Any
) -> tuple[retrieval_pb2.UpsertResponse, retrieval_pb2.SignResponse]:
    """``Upsert``, then sign and store the records it returned (``call``: the stub's
    keyword arguments, e.g. ``metadata`` and ``timeout``).

    Raises:
        FailedPreconditionError: retrieval returned a record that is not what was sent.
        grpc.RpcError: a call failed.
    """
    sent = {}
    for message in request.entries:
        entry = entry_from_proto(message)
        sent[entry.id] = (entry_sha256(entry), answer_sha256(entry.answer))
    written: retrieval_pb2.UpsertResponse = stub.Upsert(request, **call)
    records = _check(written.to_sign, request.collection, sent)
    return written, _send(stub, request.collection, signer, records, **call)


def signed_delete(
    stub: Any, request: retrieval_pb2.DeleteRequest, signer: KbSigner, **call: Any
) -> tuple[retrieval_pb2.DeleteResponse, retrieval_pb2.SignResponse]:
    """``Delete``, then sign and store the collection head it returned."""
    deleted: retrieval_pb2.DeleteResponse = stub.Delete(request, **call)
    records = _check(deleted.to_sign, request.collection, {})
    return deleted, _send(stub, request.collection, signer, records, **call)
