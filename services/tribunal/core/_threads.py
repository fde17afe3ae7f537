"""How many threads torch and FAISS may use inside one operation, set once per process.

Both parallelise each operation over a pool of OpenMP threads sized to the machine.
A service calls them from several threads at once (server threads, a micro-batching
worker per model, Serve's replica threads), and on a machine shared with other
processes: pools that outnumber the free cores spin against each other. Measured on
2 cores under load, one MPNet query embedding took 5.5–6.5 s with two torch threads
against 0.55 s with one. The policy is applied when the first model loads, before any
parallel region runs (torch fixes its inter-op pool at first use).
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["apply_thread_policy", "available_cpus", "use_torch_threads"]

_applied: int | None = None
_lock = threading.Lock()


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def _omp_threads() -> int | None:
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def apply_thread_policy(threads: int | None) -> int:
    """Limit torch's and FAISS's intra-op threads to ``threads`` (None: ``OMP_NUM_THREADS``
    where set, else the available CPUs); the first call in a process wins and later
    calls return its value."""
    global _applied
    with _lock:
        if _applied is not None:
            return _applied
        count = threads if threads is not None else _omp_threads() or available_cpus()
        import torch

        torch.set_num_threads(count)
        # One inter-op thread: the services already run their own threads. Raises when
        # an earlier parallel region fixed the pool; then it stays as it is.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(1)
        try:
            import faiss

            faiss.omp_set_num_threads(count)
        except ImportError:  # pragma: no cover - faiss is a runtime dependency
            pass
        _applied = count
        return count


def use_torch_threads(count: int) -> None:
    """Let torch use ``count`` threads for the operations the calling thread runs from
    now on (torch keeps the count per calling thread; other threads keep theirs)."""
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
