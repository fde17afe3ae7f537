"""Which served decisions go to human review, with what probability.

Each ACCEPT (and each FALLBACK that had a candidate) gets an inclusion probability from
the configuration — ``accept_share``, or the share of its confidence stratum — and a coin
seeded by (seed, decision id): uniform, reproducible, and independent of whether the
answer is right, which is all the live bound assumes. The probability is recorded on
every decision, audited or not, so the bound can weight each verdict by its inverse.

A daily budget caps reviewer load. It is checked *before* the coin, from this process's
own count, so whether an answer could be audited depends only on what came before it;
once spent, answers are served with probability 0 (outside the bound's stream) until the
next UTC day.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..core.settings import AuditSettings

__all__ = ["AUDIT_REASON", "AuditDraw", "AuditSampler"]

AUDIT_REASON = "audit_sample"
"""The escalation reason of an audit item in the review queue."""


@dataclass(frozen=True)
class AuditDraw:
    """The audit coin of one decision."""

    inclusion: float
    """Its probability of being audited (0: not eligible, or the budget is spent)."""
    sampled: bool
    stratum: str
    """``accept``, ``accept<0.9`` (a confidence stratum), ``fallback`` or ``none``."""
    min_inclusion: float
    """π_min of its stream when it was drawn (the configuration's smallest share)."""

    def to_json(self) -> dict[str, object]:
        return {
            "p": self.inclusion,
            "sampled": self.sampled,
            "stratum": self.stratum,
            "min_p": self.min_inclusion,
        }


def _uniform(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class AuditSampler:
    """Draws the audit coin; thread-safe.

    Args:
        settings: Shares, strata, seed and daily budget.
        queued_today: Audit items already queued today (read once per UTC day, so a
            restarted process keeps counting); None: start from 0.
        clock: The current UTC time (tests pass a fixed one).
    """

    def __init__(
        self,
        settings: AuditSettings,
        *,
        queued_today: Callable[[dt.datetime], int] | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self._queued_today = queued_today
        self._clock = clock
        self._strata = sorted((float(k), v) for k, v in settings.accept_strata.items())
        self._lock = threading.Lock()
        self._day: dt.date | None = None
        self._spent = 0

    def inclusion(self, decision: str, confidence: float | None) -> tuple[float, str]:
        """The configured probability and stratum of a decision (before the budget)."""
        if decision == "ACCEPT":
            for bound, share in self._strata:
                if confidence is not None and confidence < bound:
                    return share, f"accept<{bound:g}"
            return self.settings.accept_share, "accept"
        if decision == "FALLBACK":
            return self.settings.fallback_share, "fallback"
        return 0.0, "none"

    def draw(self, key: str, decision: str, confidence: float | None) -> AuditDraw:
        """The coin for decision ``key`` (its audit id). Counts a sampled one against
        today's budget."""
        share, stratum = self.inclusion(decision, confidence)
        minimum = self.settings.min_accept_share() if decision == "ACCEPT" else share
        if share <= 0.0:
            return AuditDraw(0.0, False, stratum, minimum)
        with self._lock:
            today = self._clock().date()
            if today != self._day:
                start = dt.datetime.combine(today, dt.time(), tzinfo=dt.UTC)
                self._day = today
                self._spent = self._queued_today(start) if self._queued_today else 0
            if self._spent >= self.settings.daily_budget:
                return AuditDraw(0.0, False, f"{stratum}:budget_spent", minimum)
            sampled = _uniform(self.settings.seed, key) < share
            if sampled:
                self._spent += 1
        return AuditDraw(share, sampled, stratum, minimum)
