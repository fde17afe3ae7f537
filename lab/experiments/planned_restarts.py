"""Does splitting δ over a few planned starts certify more than one fixed sequence?

A fixed-sequence scan (``clopper-pearson``, ``ltt``) stops at its first failure; when the
most confident certify items hold an error, it stops at its planned start and certifies
nothing. *Fallback testing* (Wiens, 2003) splits δ over starts s₁ > s₂ > …: the level
gains δ·w_k at start s_k, is kept while tests pass and drops to 0 at a failure, so a
failed top no longer ends the scan. It controls the chance of any false pass at δ for
starts fixed in advance (here: chosen on the plan only), so it is as valid as the single
start. Whether it keeps *more coverage* is the question, answered here by simulation on
laws with a known rate, at the calibration sizes of a tuned BANKING77-sized traffic.

The rules compared, all on the product's plan grid and planned start
(:func:`tribunal.confidence._risk_plan.plan_start`):

- **1 start**: the product's `clopper-pearson` scan;
- **up to 2 / 3 starts**: the planned start, then further starts added greedily (equal
  shares of δ) while a bootstrap of the plan predicts at least 1 point more certified
  coverage (400 draws: the plan resampled, then a certify-sized draw from it).

Reported per law, sizes and α, over ``--splits`` seeded splits: mean certified coverage
of the certify part (0 when nothing is certified), the share of splits certified, and
the share whose exact rate at the certified threshold is above α (allowed: δ = 0.1).

    PYTHONPATH=services .venv/bin/python lab/experiments/planned_restarts.py --splits 200
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from tribunal.confidence import binomial_p_value
from tribunal.confidence._risk_plan import Labelled, plan_grid, plan_start
from tribunal.confidence._threshold import AcceptanceCurve

DELTA = 0.1
DRAWS = 400
MIN_GAIN = 0.01


@dataclass(frozen=True)
class Law:
    name: str
    shape: tuple[float, float]
    """Beta law of the confidences."""
    floor: float
    """Error chance added at every confidence (confident errors: out-of-scope look-alikes)."""

    def draw(
        self, rng: np.random.Generator, n: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        confidence = rng.beta(*self.shape, n)
        wrong = np.clip(0.6 * (1.0 - confidence) + self.floor, 0.0, 1.0)
        return confidence, (rng.random(n) >= wrong).astype(np.int64)

    def rate(self, threshold: float, sample: NDArray[np.float64]) -> float:
        """P(wrong | confidence ≥ threshold), on a large sample of the confidence law."""
        kept = sample[sample >= threshold]
        return float(np.clip(0.6 * (1.0 - kept) + self.floor, 0, 1).mean()) if kept.size else 0.0


LAWS = (
    Law("Beta(12, 1.5), no floor", (12.0, 1.5), 0.0),
    Law("Beta(6, 1), 1% floor", (6.0, 1.0), 0.01),
    Law("Beta(4, 1), 2% floor", (4.0, 1.0), 0.02),
)


def fallback_levels(
    p_values: NDArray[np.float64], added: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The level each test in scan order passed at (0: failed), along the last axis."""
    shape = np.broadcast_shapes(p_values.shape, np.shape(added))
    levels, carry = np.zeros(shape), np.zeros(shape[:-1])
    for index in range(shape[-1]):
        level = carry + added[..., index]
        passed = (level > 0.0) & (p_values[..., index] <= level)
        carry = np.where(passed, level, 0.0)
        levels[..., index] = carry
    return levels


def _mean_coverage(
    levels: NDArray[np.float64], coverage: NDArray[np.float64]
) -> NDArray[np.float64]:
    passed = levels > 0.0
    lowest = passed.shape[-1] - 1 - np.argmax(passed[..., ::-1], axis=-1)
    kept = np.take_along_axis(np.broadcast_to(coverage, passed.shape), lowest[..., None], -1)[
        ..., 0
    ]
    result: NDArray[np.float64] = np.where(passed.any(axis=-1), kept, 0.0).mean(axis=-1)
    return result


def plan_starts(
    plan: Labelled, grid: NDArray[np.float64], n: int, alpha: float, most: int
) -> list[int]:
    """The product's planned start, then greedy further starts the plan's bootstrap favours."""
    first = plan_start(plan, grid, n, alpha=alpha, delta=DELTA, test=binomial_p_value)
    rng = np.random.default_rng(0)
    resampled = rng.multinomial(plan.n, np.full(plan.n, 1.0 / plan.n), size=DRAWS) / plan.n
    counts = rng.multinomial(n, resampled)
    band = np.searchsorted(-grid, -plan.confidence, side="left")
    members = np.zeros((plan.n, grid.size + 1))
    members[np.arange(plan.n), band] = 1.0
    accepted = np.cumsum(counts @ members, axis=1)[:, : grid.size].round()
    errors = np.cumsum(counts @ (members * ~plan.correct[:, None]), axis=1)[:, : grid.size].round()
    p_values = np.where(accepted > 0, stats.binom.cdf(errors, accepted, alpha), 1.0)
    coverage = accepted / n
    chosen = [first]
    single = np.zeros(grid.size)
    single[first] = DELTA
    best = float(_mean_coverage(fallback_levels(p_values, single), coverage))
    while len(chosen) < most:
        candidates = [i for i in range(grid.size) if i not in chosen]
        share = DELTA / (len(chosen) + 1)
        added = np.zeros((len(candidates), grid.size))
        added[:, chosen] = share
        added[np.arange(len(candidates)), candidates] = share
        scores = _mean_coverage(fallback_levels(p_values[None], added[:, None, :]), coverage)
        pick = int(np.argmax(scores))
        if scores[pick] < best + MIN_GAIN:
            break
        chosen.append(candidates[pick])
        best = float(scores[pick])
    return sorted(chosen)


def certify(plan: Labelled, tested: Labelled, alpha: float, most: int) -> float | None:
    """The lowest threshold the Clopper–Pearson fallback scan passes (None: none)."""
    grid = plan_grid(plan)
    starts = plan_starts(plan, grid, tested.n, alpha, most)
    curve = AcceptanceCurve.of(tested.confidence, tested.correct)
    bounds = [float(grid[i]) for i in starts] + [-np.inf]
    thresholds: list[float] = []
    added: list[float] = []
    for start, below in itertools.pairwise(bounds):
        between = curve.thresholds[(curve.thresholds < start) & (curve.thresholds > below)]
        thresholds += [start, *between.tolist()]
        added += [DELTA / len(starts)] + [0.0] * between.size
    counts = np.array([curve.at(t) for t in thresholds])
    p_values = np.where(counts[:, 0] > 0, stats.binom.cdf(counts[:, 1], counts[:, 0], alpha), 1.0)
    passed = np.flatnonzero(fallback_levels(p_values, np.array(added)) > 0.0)
    return thresholds[int(passed[-1])] if passed.size else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", type=int, default=200)
    args = parser.parse_args()
    print("| law | plan / certify | α | 1 start | up to 2 | up to 3 |")
    print("|---|---|---|---|---|---|")
    started = time.perf_counter()
    for law in LAWS:
        sample = law.draw(np.random.default_rng(99), 1_000_000)[0]
        for plan_size, certify_size in ((100, 224), (165, 372)):
            for alpha in (0.05, 0.1):
                cells = []
                for most in (1, 2, 3):
                    coverage, certified, above = [], 0, 0
                    for seed in range(args.splits):
                        rng = np.random.default_rng(seed)
                        plan = Labelled.of(*law.draw(rng, plan_size))
                        tested = Labelled.of(*law.draw(rng, certify_size))
                        threshold = certify(plan, tested, alpha, most)
                        if threshold is None:
                            coverage.append(0.0)
                            continue
                        certified += 1
                        coverage.append(float((tested.confidence >= threshold).mean()))
                        above += law.rate(threshold, sample) > alpha
                    cells.append(
                        f"{np.mean(coverage):.3f} ({certified / args.splits:.2f}; "
                        f"{above / args.splits:.3f})"
                    )
                print(
                    f"| {law.name} | {plan_size} / {certify_size} | {alpha} | "
                    + " | ".join(cells)
                    + " |",
                    flush=True,
                )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
