"""One thread at a time in a process's CPU-bound Python sections.

A service answers many requests at once, each on its own thread, and their Python work
(a search's candidate lists and stored entries, the matcher's features, confidence, the
gateway's checks) shares one interpreter lock. Such work gives the lock up dozens of
times per call — around every SQLite statement, FAISS search and NumPy operation on a
few hundred values — and while another thread is waiting for it, every release hands
it over: the waiting thread is woken on the other core, runs a moment, and the first
thread must wait in turn. On a 2-core host a search took 1.6–1.7× the CPU with 2 or 16
threads searching at once as with one; taking turns, 1.2–1.3× (``bench/python_turns.py``).
Where the models share the cores with this work, CPU lost to hand-overs is CPU their
passes do not get.

A thread takes a turn only around a section that waits for no model pass, stage call,
database round trip or commit to disk, so a turn is short; and no thread waits for a
turn while holding a lock such a section takes, so turns cannot deadlock. Turns nest
(the lock is reentrant). Model passes run outside turns and are not slowed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["python_turn", "take_python_turns"]

_turn = threading.RLock()
_taking = True


def take_python_turns(enabled: bool) -> bool:
    """Whether CPU-bound sections take turns (the default) from now on; returns the
    previous value. Off: they run at once, as plain threads (for comparison)."""
    global _taking
    previous, _taking = _taking, enabled
    return previous


@contextmanager
def python_turn() -> Iterator[None]:
    """Run the block while no other thread runs a CPU-bound section of this process.
    Only for a block that waits for no model pass, stage call or database round trip."""
    if not _taking:
        yield
        return
    with _turn:
        yield
