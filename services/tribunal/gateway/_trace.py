"""What one gateway request did, stage by stage: the raw material of its audit record."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..v1 import common_pb2

__all__ = ["RequestTrace"]


@dataclass
class RequestTrace:
    """Latencies, signals and versions gathered while a request runs (thread-safe)."""

    kind: str
    request_id: str
    query: str
    collection: str = ""
    started: float = field(default_factory=time.perf_counter)
    latencies_ms: dict[str, float] = field(default_factory=dict)
    candidate_ids: list[str] = field(default_factory=list)
    signals: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage (recorded even when it fails)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.latencies_ms[name] = (time.perf_counter() - started) * 1000.0

    def total_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0

    def latency_messages(self) -> list[common_pb2.StageLatency]:
        with self._lock:
            return [
                common_pb2.StageLatency(stage=name, milliseconds=ms)
                for name, ms in self.latencies_ms.items()
            ]
