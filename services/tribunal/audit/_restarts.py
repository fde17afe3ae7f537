"""Restarted confidence sequences: a live bound that can see a change.

The cumulative sequence bounds the running rate since the calibrator started serving.
After a shift, the answers served before it dilute the new error rate: a rate well above
α since the shift may stay below α averaged since the start. So the monitor also runs
sequences **restarted** at points it chooses while serving — when the shift warning
comes on, and, when configured, every ``audit.restart_every`` accepted answers — each on
the answers served after its start, all side by side; the fail-safe trips when *any* of
them has its lower end above α.

**Splitting δ.** The cumulative sequence gets δ/2; the k-th restart gets
``δ_k = (δ/2) · 6 / (π² k²)`` (declared before any data: Σ_k δ_k = δ/2 however many
restarts come). By the union bound, with probability ≥ 1 − δ every sequence holds its own
target — the running rate of the answers since its start — at every time at once. When
no answer's rate ever exceeds α, every target is ≤ α, so a trip needs some sequence to
miss its target from below: probability ≤ δ/4 + Σ_k δ_k / 2 = δ/2 over the whole run.

**Why a start chosen while serving is valid.** The k-th sequence is a product of one
factor per answer served after its start ``s_k``. When ``s_k`` is a stopping time — the
decision to restart there uses only what was known then (the signals and verdicts of
answers served before it), never a verdict on an answer after it — the product from
``s_k`` on is, given everything known at ``s_k``, again a nonnegative supermartingale
starting at 1, and Ville's inequality bounds the chance it ever reaches ``2/δ_k`` by
``δ_k/2`` on each side. The shift warning (a test on the signals of answers already
served) and the schedule (a count of answers already served) are such rules. A start is
recorded at the moment it is decided and its sequence holds only answers served strictly
after that moment; it is never back-dated. Choosing a start in hindsight — scanning past
points for the one whose bound looks worst — would break the guarantee, and is never done.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from ..core import InvalidArgumentError

__all__ = ["Restart", "cumulative_delta", "restart_delta"]

SHIFT = "shift"
"""A restart because the shift warning came on."""
SCHEDULE = "schedule"
"""A restart because ``audit.restart_every`` accepted answers were served since the last."""


def cumulative_delta(delta: float) -> float:
    """The cumulative sequence's share of δ."""
    return delta / 2.0


def restart_delta(delta: float, index: int) -> float:
    """δ_k of the ``index``-th restart (from 1): (δ/2) · 6 / (π² k²)."""
    if index < 1:
        raise InvalidArgumentError(f"restarts are numbered from 1, got {index}", field="index")
    return delta / 2.0 * 6.0 / (math.pi**2 * index**2)


@dataclass(frozen=True)
class Restart:
    """One restarted sequence: its number, when it started and why."""

    index: int
    at: dt.datetime
    """Its sequence holds the accepted answers served strictly after this UTC time."""
    reason: str
    """``shift`` or ``schedule``."""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "at": self.at.isoformat(), "reason": self.reason}

    @classmethod
    def from_json(cls, data: Any) -> Restart | None:
        """None for anything that is not a recorded restart (an older state's detail)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                int(data["index"]),
                as_utc(dt.datetime.fromisoformat(data["at"])),
                str(data["reason"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def as_utc(moment: dt.datetime) -> dt.datetime:
    """SQLite returns naive datetimes; they were written in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
