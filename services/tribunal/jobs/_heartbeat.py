"""A runner's heartbeat: its item leases renewed on a timer while it works.

A runner that hands its items to something it cannot interrupt to renew leases (Ray
Data's actor pool, a long remote call) holds them with a :class:`LeaseHeartbeat`: a
daemon thread renews the owner's leases every third of ``lease_s``. While the runner's
process lives its leases stay current; when it stops — ``kill -9`` included — they lapse
within ``lease_s``, at once on the same host (:meth:`JobStore.lease_holders` sees the
process gone). ``tribunal label status`` reads exactly that to tell a running job from
an abandoned one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import TracebackType

from ._store import JobStore

__all__ = ["LeaseHeartbeat"]

log = logging.getLogger(__name__)


class LeaseHeartbeat:
    """Renews ``owner``'s leases on ``item_ids`` of ``job`` until stopped (a context manager)."""

    def __init__(
        self, store: JobStore, job: str, owner: str, item_ids: Sequence[str], *, lease_s: float
    ) -> None:
        if lease_s <= 0:
            raise ValueError("lease_s must be > 0")
        self.store, self.job, self.owner = store, job, owner
        self.item_ids = list(item_ids)
        self.lease_s = lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                held = self.store.renew(self.job, self.owner, self.item_ids, lease_s=self.lease_s)
            except Exception:  # a store hiccup: the next beat tries again
                log.warning("lease renewal failed", exc_info=True)
                continue
            if held == 0:
                return  # every item finished (or taken over): nothing left to hold

    def start(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> LeaseHeartbeat:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
