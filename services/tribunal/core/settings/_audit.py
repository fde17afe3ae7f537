"""Live audits: the sampled share of decisions people review, the live bound, the fail-safe
and the shift warning."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ._base import Section

__all__ = ["AuditSettings"]


class AuditSettings(Section):
    """Which served decisions go to human review, and what a shown violation does."""

    accept_share: float = Field(0.0, ge=0.0, le=1.0)
    """Share of ACCEPTed answers sent to the review queue (a seeded coin per decision, its
    probability recorded in the audit row); 0: no live audit."""
    accept_strata: dict[str, float] = Field(default_factory=dict)
    """Stratified sampling: confidence upper bound -> share for ACCEPTs below it (e.g.
    ``{"0.9": 0.2}``: answers under confidence 0.9 audited at 20%, the rest at
    ``accept_share``). Keys are numbers in (0, 1]; each share in (0, 1]."""
    fallback_share: float = Field(0.0, ge=0.0, le=1.0)
    """Share of FALLBACKs with a candidate sent to review (does the best candidate, the entry
    that would have been served, answer the query?)."""
    seed: int = Field(0, ge=0)
    """Seed of the audit coin (hashed with the decision's id: reproducible, independent of
    whether the answer is right)."""
    daily_budget: int = Field(500, ge=0, le=10_000_000)
    """Most audit items one gateway process queues per UTC day; past it, answers are served
    unaudited (inclusion probability 0, outside the live bound's stream)."""
    votes_per_item: int = Field(1, ge=1, le=10)
    """Votes an audit item needs before its verdict counts (majority; a tie counts as
    wrong)."""
    delta: float = Field(0.05, gt=0.0, lt=1.0)
    """The live bound holds at every time at once with probability >= 1 - delta."""
    safe_mode: Literal["fallback", "escalate", "stricter"] = "fallback"
    """What a collection does once the live bound's lower end rises above alpha:
    ``fallback`` on everything, ``escalate`` to humans what would have been answered, or
    ``stricter``: accept only at the artifact's threshold for ``safe_alpha``."""
    safe_alpha: float | None = Field(None, gt=0.0, lt=1.0)
    """``stricter`` safe mode: the lower alpha whose certified threshold is served."""
    shift_window: int = Field(500, ge=20, le=1_000_000)
    """Latest answer decisions compared with the calibration traffic's reference sample."""
    shift_level: float = Field(0.001, gt=0.0, lt=1.0)
    """Level of the shift test (Bonferroni over the signals compared); it is repeated after
    every review, so it is kept small."""
    restart_on_shift: bool = True
    """Start a fresh live bound when the shift warning comes on, beside the cumulative one
    (which the answers before a shift dilute); the fail-safe trips on either."""
    restart_every: int = Field(0, ge=0, le=100_000_000)
    """Also start a fresh live bound every this many accepted answers (0: never)."""

    @model_validator(mode="after")
    def _check(self) -> AuditSettings:
        for key, share in self.accept_strata.items():
            try:
                bound = float(key)
            except ValueError:
                raise ValueError(f"accept_strata key {key!r} is not a number") from None
            if not 0.0 < bound <= 1.0 or not 0.0 < share <= 1.0:
                raise ValueError(
                    f"accept_strata {key}: {share}: bounds in (0, 1], shares in (0, 1]"
                )
        if self.safe_mode == "stricter" and self.safe_alpha is None:
            raise ValueError("safe_mode stricter needs safe_alpha (the stricter alpha)")
        return self

    def min_accept_share(self) -> float:
        """π_min of the ACCEPT stream: the smallest positive share an accepted answer can
        have (answers with share 0 are outside the stream); 0 when nothing is audited."""
        shares = [s for s in (self.accept_share, *self.accept_strata.values()) if s > 0.0]
        return min(shares) if shares else 0.0
