"""The process's cores, shared by every model's forward passes.

Under load, passes run side by side, one core each, instead of one at a time over every
core: a pass spread over every core waits, at each operation, for the thread that lost
its core to the service's other threads, while a single-threaded pass only loses the
time taken from it. On 2 cores (``bench/gateway.py``) the two embedders alone did
1.14–1.26× the queries/s side by side, and the gateway at 16 clients 1.06–1.18× those of
one pass at a time. A lone pass (a single request, no other pass running) or a long
call (ingestion) still takes every core: alone, it is faster that way.
"""

from __future__ import annotations

import threading

__all__ = ["ComputeLanes", "process_lanes"]


class ComputeLanes:
    """Lanes handed to forward passes, each an equal share of the cores; thread-safe.

    Args:
        cores: The threads the passes share (the process's torch threads).
        lanes: Passes that may run at once (default: one per core); each gets
            ``cores // lanes`` threads, a pass holding every lane gets ``cores``.
    """

    def __init__(self, cores: int, lanes: int | None = None) -> None:
        if cores < 1 or (lanes is not None and lanes < 1):
            raise ValueError("cores >= 1 and lanes >= 1")
        self.cores = cores
        self.lanes = min(lanes or cores, cores)
        self._free = self.lanes
        self._whole_waiting = 0
        self._changed = threading.Condition()

    def threads(self, lanes: int) -> int:
        """Threads a pass holding ``lanes`` lanes may use."""
        return self.cores if lanes >= self.lanes else lanes * (self.cores // self.lanes)

    def take_one(self) -> None:
        """Wait for a lane (behind any long call waiting for all of them) and take it."""
        with self._changed:
            while self._free < 1 or self._whole_waiting:
                self._changed.wait()
            self._free -= 1

    def take_rest(self) -> int:
        """Take every other lane if all of them are free (a lone pass, holding one lane
        already); returns how many were taken (0: some are busy)."""
        with self._changed:
            if self._free != self.lanes - 1 or self._whole_waiting:
                return 0
            self._free = 0
            return self.lanes - 1

    def take_all(self) -> None:
        """Wait until every lane is free and take them all. Passes arriving meanwhile
        wait behind it: under steady load the lanes would otherwise never all be free."""
        with self._changed:
            self._whole_waiting += 1
            try:
                while self._free < self.lanes:
                    self._changed.wait()
            finally:
                self._whole_waiting -= 1
            self._free = 0

    def give(self, lanes: int) -> None:
        """Hand back ``lanes`` taken before."""
        with self._changed:
            self._free += lanes
            self._changed.notify_all()

    def widen(self, *, whole: bool, lone: bool) -> int:
        """The lanes a pass holds, given the one it took: every lane for a long call
        (``whole``: it runs alone, as fast as it can; waits for them), every lane for a
        lone pass (a single call with nothing queued) when all are free, else the one."""
        if whole:
            self.give(1)
            self.take_all()
            return self.lanes
        return 1 + (self.take_rest() if lone else 0)


_PROCESS_LANES: dict[tuple[int, int | None], ComputeLanes] = {}
_PROCESS_LOCK = threading.Lock()


def process_lanes(lanes: int | None = None) -> ComputeLanes:
    """This process's lanes over the threads torch may use
    (:func:`~tribunal.core.apply_thread_policy`): one set per ``lanes`` setting, shared
    by every model's embedder made with it."""
    from ..core import apply_thread_policy

    cores = apply_thread_policy(None)
    with _PROCESS_LOCK:
        found = _PROCESS_LANES.get((cores, lanes))
        if found is None:
            found = _PROCESS_LANES[(cores, lanes)] = ComputeLanes(cores, lanes)
        return found
