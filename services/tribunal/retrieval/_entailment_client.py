"""The entailment service as the retrieval service's checker (``retrieval.verifier: service``).

A gRPC client of ``EntailmentService.Check``. The verdicts it stores carry the
checker version the service reports, so an entry verified by a differently
configured entailment service is not current for a gateway that expects its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import grpc

from ..core import InternalError, UnavailableError
from ..core.server import bearer_metadata, open_channel
from ..v1 import entailment_pb2, entailment_pb2_grpc
from ._verification import ClaimCheck

__all__ = ["EntailmentServiceChecker"]

_LABELS = {
    entailment_pb2.ENTAILMENT_LABEL_ENTAILED: "entailed",
    entailment_pb2.ENTAILMENT_LABEL_NEUTRAL: "neutral",
    entailment_pb2.ENTAILMENT_LABEL_CONTRADICTED: "contradicted",
    entailment_pb2.ENTAILMENT_LABEL_QUOTE_NOT_FOUND: "quote_not_found",
}


class EntailmentServiceChecker:
    """Checks (premise, hypothesis) pairs with a remote entailment service."""

    def __init__(
        self,
        address: str,
        *,
        version: str,
        models: tuple[str, ...],
        max_hypothesis_chars: int,
        max_pairs: int,
        token: str | None = None,
        tls_ca: Path | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
        timeout_s: float = 600.0,
    ) -> None:
        self.address = address
        self.version = version
        self.models = models
        self.max_hypothesis_chars = max_hypothesis_chars
        self.max_pairs = max_pairs
        self.timeout_s = timeout_s
        self._metadata = bearer_metadata(token)
        self._token = token
        self._tls_ca = tls_ca
        self._max_message_bytes = max_message_bytes
        self._stub: entailment_pb2_grpc.EntailmentServiceStub | None = None
        self._lock = threading.Lock()

    def _client(self) -> entailment_pb2_grpc.EntailmentServiceStub:
        with self._lock:
            if self._stub is None:
                channel = open_channel(
                    self.address,
                    tls_ca=self._tls_ca,
                    sends_credentials=bool(self._token),
                    max_message_bytes=self._max_message_bytes,
                    what="the entailment service",
                )
                self._stub = entailment_pb2_grpc.EntailmentServiceStub(channel)  # type: ignore[no-untyped-call]
            return self._stub

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[ClaimCheck]:
        request = entailment_pb2.CheckRequest(
            pairs=[entailment_pb2.EntailmentPair(premise=p, hypothesis=h) for p, h in pairs]
        )
        try:
            response = self._client().Check(
                request, timeout=self.timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise UnavailableError(
                f"entailment service at {self.address} failed: {exc.code().name}: "  # type: ignore[attr-defined]
                f"{exc.details()}"  # type: ignore[attr-defined]
            ) from exc
        if len(response.results) != len(pairs):
            raise InternalError(
                f"entailment service returned {len(response.results)} results for "
                f"{len(pairs)} pairs"
            )
        if response.checker_version:
            self.version = response.checker_version
        out = []
        for result in response.results:
            label = _LABELS.get(result.label)
            if label is None:
                raise InternalError(f"entailment service returned label {result.label}")
            out.append(ClaimCheck(result.p_entail, label))
        return out
