"""The gateway's ``Answer`` and ``Label`` as load-test calls over one gRPC channel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

from ._runner import Call, Outcome
from ._schedule import check_loopback

__all__ = ["DEFAULT_ITEMS", "DEFAULT_QUERIES", "GatewayClient", "LabelItem", "read_inputs"]

DEFAULT_QUERIES: tuple[str, ...] = (
    "How long is the incubation period?",
    "Can pets spread the virus?",
    "How does the virus spread?",
    "What are the symptoms?",
    "Should I wear a mask outside?",
    "What is the capital of France?",
)


@dataclass(frozen=True)
class LabelItem:
    query: str
    chunk: str
    answers: tuple[str, ...] = field(default_factory=tuple)


DEFAULT_ITEMS: tuple[LabelItem, ...] = (
    LabelItem(
        "how long is the incubation period",
        "Symptoms usually appear 2 to 14 days after exposure to the virus.",
        ("2 to 14 days",),
    ),
    LabelItem(
        "can pets spread the virus",
        "The capital of France is Paris, a city on the Seine.",
        ("rarely",),
    ),
)


def read_inputs(path: Path | None, method: str) -> list[str] | list[LabelItem]:
    """Queries (``Answer``: text lines, or JSONL with ``query``) or items (``Label``: JSONL
    with ``query``, ``chunk``, ``answers``); the built-in examples when ``path`` is None."""
    if path is None:
        return list(DEFAULT_QUERIES) if method == "Answer" else list(DEFAULT_ITEMS)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if method == "Answer":
        return [json.loads(x)["query"] if x.lstrip().startswith("{") else x for x in lines]
    rows = [json.loads(line) for line in lines]
    return [LabelItem(r["query"], r["chunk"], tuple(r.get("answers", ()))) for r in rows]


def _channel(target: str, tls_dir: Path | None) -> grpc.Channel:
    """Plaintext, or mutual TLS with the files ``tribunal serve deploy`` writes into its
    temp dir's ``tls/`` (``ca.crt``, ``client.crt``, ``client.key``)."""
    if tls_dir is None:
        return grpc.insecure_channel(target)
    files = [tls_dir / name for name in ("ca.crt", "client.key", "client.crt")]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise SystemExit(f"--tls-dir {tls_dir}: missing {', '.join(missing)}")
    ca, key, cert = (path.read_bytes() for path in files)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert
    )
    return grpc.secure_channel(target, credentials)


class GatewayClient:
    """One channel to a gateway (direct, or Serve's gRPC proxy with ``application``)."""

    def __init__(
        self,
        target: str,
        *,
        application: str | None = None,
        token: str | None = None,
        timeout_s: float = 120.0,
        collection: str = "",
        tls_dir: Path | None = None,
    ) -> None:
        check_loopback(target)
        self.channel = _channel(target, tls_dir)
        self.stub = gateway_pb2_grpc.GatewayServiceStub(self.channel)  # type: ignore[no-untyped-call]
        metadata: list[tuple[str, str]] = []
        if application:
            metadata.append(("application", application))
        if token:
            metadata.append(("authorization", f"Bearer {token}"))
        self.metadata = tuple(metadata)
        self.timeout_s = timeout_s
        self.collection = collection

    def answer_call(self, queries: Sequence[str]) -> Call:
        def call(index: int) -> Outcome:
            request = gateway_pb2.AnswerRequest(
                query=queries[index % len(queries)], collection=self.collection
            )
            try:
                reply = self.stub.Answer(request, timeout=self.timeout_s, metadata=self.metadata)
            except grpc.RpcError as exc:
                return Outcome(exc.code().name if hasattr(exc, "code") else "UNKNOWN")
            decision = common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_")
            if reply.fallback_reason:  # FALLBACK:LOW_CONFIDENCE, FALLBACK:STAGE_TIMEOUT, ...
                reason = gateway_pb2.FallbackReason.Name(reply.fallback_reason)
                decision = f"{decision}:{reason.removeprefix('FALLBACK_REASON_')}"
            return Outcome("OK", decision)

        return call

    def label_call(self, items: Sequence[LabelItem]) -> Call:
        def call(index: int) -> Outcome:
            item = items[index % len(items)]
            request = gateway_pb2.LabelRequest(
                query=item.query, chunk=item.chunk, answers=list(item.answers)
            )
            try:
                reply = self.stub.Label(request, timeout=self.timeout_s, metadata=self.metadata)
            except grpc.RpcError as exc:
                return Outcome(exc.code().name if hasattr(exc, "code") else "UNKNOWN")
            if reply.label == common_pb2.LABEL_UNSPECIFIED:  # queued for humans: no label
                source = gateway_pb2.LabelSource.Name(reply.source)
                return Outcome("OK", source.removeprefix("LABEL_SOURCE_"))
            return Outcome("OK", common_pb2.Label.Name(reply.label).removeprefix("LABEL_"))

        return call

    def close(self) -> None:
        self.channel.close()
