"""Numbered steps of a long command, each said when it starts and timed when it ends.

A first run (``tribunal demo``) loads models and embeds a knowledge base before it
answers anything: the user sees which step runs, how long each took, and (from the
step's own progress bar) the rate and ETA of the long ones.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

__all__ = ["Steps"]


class Steps:
    """``with steps.step("what"):`` prints ``[i/n] what ...`` and ``[i/n] done in X s``.

    Args:
        total: How many steps the command has (for ``i/n``).
        out: Where the lines go (default standard output).
    """

    def __init__(self, total: int, out: IO[str] | None = None) -> None:
        self.total = total
        self.out = out or sys.stdout
        self.done = 0
        self.seconds_: dict[str, float] = {}
        """Each finished step's wall time, by its description."""
        self._started = time.perf_counter()

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.done += 1
        tag = f"[{self.done}/{self.total}]"
        print(f"{tag} {what} ...", file=self.out, flush=True)
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        self.seconds_[what] = seconds
        print(f"{tag} done in {seconds:.1f} s", file=self.out, flush=True)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the first step was made possible (construction)."""
        return time.perf_counter() - self._started
