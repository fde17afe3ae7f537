"""An anytime-valid confidence sequence on the live hallucination rate of audited answers.

**Setting.** The accepted answers of one collection and calibrator version arrive one by
one. Answer ``i`` is wrong with ``W_i = 1``. It is audited (``Z_i = 1``) with a recorded
probability ``π_i ≥ π_min``, drawn independently of whether it is wrong (a seeded coin;
``π_i`` may depend on the answer's confidence band: stratified sampling). The inverse
inclusion-probability weighted observation ``Y_i = Z_i W_i / π_i`` is known for every
answer (0 when not audited) and ``E[Y_i | past] = μ_i := P(W_i = 1 | past)``. The target at
time ``t`` is the running live rate ``μ̄_t = (1/t) Σ μ_i``: it may drift; nothing is
assumed about the traffic (no exchangeability) — only that the audit coin is random.

**Method: a discrete mixture of Bennett (sub-Poisson) supermartingales** (Howard, Ramdas,
McAuliffe & Sekhon, *Time-uniform Chernoff bounds via nonnegative supermartingales*,
Probab. Surveys 2020, the sub-Poisson case; discrete mixtures as in their *Time-uniform,
nonparametric, nonasymptotic confidence sequences*, Ann. Statist. 2021). With
``ξ_i = Y_i − μ_i`` and ``b = 1/π_min``: ``ξ_i ≤ b`` and ``Var(ξ_i | past) ≤ E[Y_i²|past]
≤ b μ_i``, so Bennett's lemma gives ``E exp(λ ξ_i) ≤ exp(μ_i φ(λb)/b)``, ``φ(u) = e^u −
1 − u``; and ``−ξ_i ≤ μ_i ≤ 1`` gives ``E exp(−λ ξ_i) ≤ exp(b μ_i φ(λ))``. For every fixed
``λ ≥ 0`` both products are nonnegative supermartingales; writing ``Σ μ_i = t m`` at the
true ``m = μ̄_t``, their logarithms are

- rate above m: ``(u ΣY − t m (e^u − 1)) / b`` with ``u = λ b``;
- rate below m: ``λ (t m − ΣY) − b φ(λ) t m``.

A uniform mixture over a grid of λ fixed before any data is again a supermartingale, and
Ville's inequality bounds the chance that it ever reaches ``2/δ`` by ``δ/2``. So with
probability ≥ 1 − δ, at every time at once, ``μ̄_t`` lies in ``[L_t, U_t]``, the values of
``m`` where neither mixture has reached ``2/δ`` (each mixture is monotone in ``m``, so the
set is an interval; it is found by bisection).

**Why not a library.** ``confseq`` (the authors' package) publishes only a source
distribution whose C++ extension needs Boost and pybind11 2.6 (which predates Python 3.11)
and imports matplotlib and multiprocess at import; and its betting and predictable-mixture
sequences assume one constant conditional mean in [0, 1], while here the observations are
inverse-probability weighted (up to ``1/π_min``) and the target is a drifting running
mean. ``expectation`` is not on PyPI for this Python. The supermartingales above are a few
lines of numpy and are checked in the tests on 500 seeded streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core import InvalidArgumentError

__all__ = ["RateConfidenceSequence", "RunningBound"]

_BISECTION_STEPS = 48


@dataclass(frozen=True)
class RunningBound:
    """The sequence at one time: ``[lower, upper]`` holds the running rate (1 − δ)."""

    accepted: int
    """Answers in the stream so far (t)."""
    audited: int
    """Of them, audited with a verdict."""
    wrong: int
    """Audited and found wrong."""
    weighted_wrong: float
    """Σ Y_i: the inverse-probability weighted count of wrong answers."""
    lower: float
    upper: float
    delta: float

    @property
    def estimate(self) -> float:
        """The unbiased (Horvitz–Thompson) estimate of the rate, ΣY / t."""
        return self.weighted_wrong / self.accepted if self.accepted else 0.0


@dataclass(frozen=True)
class RateConfidenceSequence:
    """Anytime-valid two-sided bound on the running rate of a 0/1 stream sampled with
    inclusion probabilities ≥ ``min_inclusion`` (see the module docstring).

    Args:
        delta: The sequence holds at every time with probability ≥ 1 − δ
            (δ/2 on each side).
        min_inclusion: π_min, the smallest inclusion probability any answer of the stream
            can have (the configuration's smallest audit share): fixed before the data.
        grid_size: Points of the λ mixture on each side.
    """

    delta: float = 0.05
    min_inclusion: float = 1.0
    grid_size: int = 32

    def __post_init__(self) -> None:
        if not 0.0 < self.delta < 1.0:
            raise InvalidArgumentError(f"delta must be in (0, 1), got {self.delta}", field="delta")
        if not 0.0 < self.min_inclusion <= 1.0:
            raise InvalidArgumentError(
                f"min_inclusion must be in (0, 1], got {self.min_inclusion}",
                field="min_inclusion",
            )
        if self.grid_size < 2:
            raise InvalidArgumentError("grid_size must be >= 2", field="grid_size")

    @property
    def scale(self) -> float:
        """b = 1/π_min: the largest weighted observation."""
        return 1.0 / self.min_inclusion

    @property
    def log_level(self) -> float:
        """log(2/δ): the level either mixture must reach to exclude a rate."""
        return math.log(2.0 / self.delta)

    def _above_grid(self) -> NDArray[np.float64]:
        # u = λb; the best u against rate m when the observed rate is r is log(r/m).
        return np.geomspace(1e-2, 6.0, self.grid_size)

    def _below_grid(self) -> NDArray[np.float64]:
        # Only λ with λ − bφ(λ) > 0 can exclude a rate from above; find where it turns.
        b, low, high = self.scale, 0.0, 10.0
        for _ in range(_BISECTION_STEPS):
            mid = (low + high) / 2.0
            low, high = (mid, high) if mid - b * (math.expm1(mid) - mid) > 0.0 else (low, mid)
        return np.geomspace(1e-4, 0.9, self.grid_size) * low

    def log_evidence_above(
        self, weighted_wrong: ArrayLike, accepted: ArrayLike, rate: ArrayLike
    ) -> NDArray[np.float64]:
        """Log of the mixture that grows when the running rate exceeds ``rate``
        (broadcast over the three arrays)."""
        y, t, m = (np.asarray(v, dtype=np.float64) for v in (weighted_wrong, accepted, rate))
        total: NDArray[np.float64] | None = None
        for u in self._above_grid():
            term = (u * y - t * m * math.expm1(u)) / self.scale
            total = term if total is None else np.logaddexp(total, term)
        assert total is not None
        return np.asarray(total - math.log(self.grid_size), dtype=np.float64)

    def log_evidence_below(
        self, weighted_wrong: ArrayLike, accepted: ArrayLike, rate: ArrayLike
    ) -> NDArray[np.float64]:
        """Log of the mixture that grows when the running rate is below ``rate``."""
        y, t, m = (np.asarray(v, dtype=np.float64) for v in (weighted_wrong, accepted, rate))
        b = self.scale
        total: NDArray[np.float64] | None = None
        for lam in self._below_grid():
            term = lam * (t * m - y) - b * (math.expm1(lam) - lam) * t * m
            total = term if total is None else np.logaddexp(total, term)
        assert total is not None
        return np.asarray(total - math.log(self.grid_size), dtype=np.float64)

    def excludes_at_or_below(
        self, weighted_wrong: ArrayLike, accepted: ArrayLike, rate: ArrayLike
    ) -> NDArray[np.bool_]:
        """True where the lower bound is above ``rate``: a rate ≤ ``rate`` is excluded."""
        return self.log_evidence_above(weighted_wrong, accepted, rate) >= self.log_level

    def excludes_at_or_above(
        self, weighted_wrong: ArrayLike, accepted: ArrayLike, rate: ArrayLike
    ) -> NDArray[np.bool_]:
        """True where the upper bound is below ``rate``."""
        return self.log_evidence_below(weighted_wrong, accepted, rate) >= self.log_level

    def bounds(self, weighted_wrong: float, accepted: int) -> tuple[float, float]:
        """``(L_t, U_t)`` for one time; ``(0, 1)`` before any answer."""
        lower, upper = self.bounds_many([weighted_wrong], [accepted])
        return float(lower[0]), float(upper[0])

    def bounds_many(
        self, weighted_wrong: ArrayLike, accepted: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(L_t, U_t)`` at many times at once (bisection on arrays)."""
        y = np.asarray(weighted_wrong, dtype=np.float64)
        t = np.asarray(accepted, dtype=np.float64)
        # Lower end: the largest rate the "above" mixture excludes (0 if it excludes none).
        low, high = np.zeros_like(y), np.ones_like(y)
        for _ in range(_BISECTION_STEPS):
            mid = (low + high) / 2.0
            excluded = self.excludes_at_or_below(y, t, mid)
            low, high = np.where(excluded, mid, low), np.where(excluded, high, mid)
        lower = np.where(self.excludes_at_or_below(y, t, 0.0) & (t > 0), low, 0.0)
        # Upper end: the smallest rate the "below" mixture excludes (1 if it excludes none).
        low, high = np.zeros_like(y), np.ones_like(y)
        for _ in range(_BISECTION_STEPS):
            mid = (low + high) / 2.0
            excluded = self.excludes_at_or_above(y, t, mid)
            low, high = np.where(excluded, low, mid), np.where(excluded, mid, high)
        upper = np.where(self.excludes_at_or_above(y, t, 1.0) & (t > 0), high, 1.0)
        return lower, np.maximum(upper, lower)

    def running(self, wrong: ArrayLike, audited: ArrayLike, inclusion: ArrayLike) -> RunningBound:
        """The bound after a stream: per answer, whether it was audited, found wrong (0 when
        not audited), and its inclusion probability. The bound is intersected over time
        (a confidence sequence may be), so it is the tightest seen so far."""
        z = np.asarray(audited, dtype=bool)
        w = np.asarray(wrong, dtype=bool) & z
        p = np.asarray(inclusion, dtype=np.float64)
        if not (z.shape == w.shape == p.shape):
            raise InvalidArgumentError("wrong, audited and inclusion differ in length")
        if p.size and (np.any(p < self.min_inclusion - 1e-12) or np.any(p > 1.0)):
            raise InvalidArgumentError(
                f"inclusion probabilities must lie in [{self.min_inclusion}, 1]",
                field="inclusion",
            )
        y = np.where(w, 1.0 / np.where(p > 0, p, 1.0), 0.0)
        cumulative = np.cumsum(y)
        t = np.arange(1, y.size + 1, dtype=np.float64)
        lower, upper = 0.0, 1.0
        if y.size:
            # The running intersection: L only rises when a wrong answer arrives, and U
            # only falls between them, so its minimum is just before each one or at the end.
            hits = np.flatnonzero(w)
            if hits.size:
                lows, _ = self.bounds_many(cumulative[hits], hits + 1)
                lower = float(lows.max())
            ends = np.append(hits - 1, y.size - 1)
            ends = ends[ends >= 0]
            _, highs = self.bounds_many(cumulative[ends], ends + 1)
            upper = float(highs.min())
        return RunningBound(
            accepted=int(t.size),
            audited=int(z.sum()),
            wrong=int(w.sum()),
            weighted_wrong=float(cumulative[-1]) if y.size else 0.0,
            lower=lower,
            upper=max(upper, lower),
            delta=self.delta,
        )
