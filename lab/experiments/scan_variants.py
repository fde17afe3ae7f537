"""Two changes to the certify scan around its planned start, against the product's.

`clopper-pearson` tests its planned start, then every distinct certify confidence below
it, and stops at the first failure. With a few hundred certify queries the plan (the
calibrator's fit queries) is as noisy as the certify part: at α = 0.05 a plan that saw
one error too many starts the scan high, where the bound allows few errors (2 at 100
accepted, 9 at 270), and an early cluster then ends it; a plan that saw one too few
starts it where the certify part fails. Two changes, each as valid as the product's (the
tested thresholds and levels are fixed by the plan):

- **step k**: below the start, test the plan's grid thinned to one point every k of the
  plan's items instead of every certify value: fewer chances to stop, but it can only
  stop on a grid point;
- **safety net w**: fallback testing (Wiens, 2003) over two starts — the product's,
  with (1 − w)·δ, and the grid point the plan gives the best chance of passing alone at
  w·δ; the level of a start that passes is carried down, so when the planned start
  fails the other may still certify.

Two kinds of data:

- ``--work``: folders of `tribunal-lab eval coverage` (recorded signals): the
  product's calibration replayed over ``--seeds`` calibration splits (held-out report
  share 0.1, as the evaluation calibrates), each certified threshold applied to the test
  split no step read;
- simulated laws with a known rate (``--splits`` draws per cell): a confidence's
  quantile q (0: most confident) is wrong with chance ``floor + slope·q^power``, at the
  plan and certify sizes of a 1,200- and a 2,000-query traffic.

Each cell: mean answered share (0 when nothing is certified), then (share of splits
certified; share whose rate at the threshold is above α: exact for the laws, realized on
the test split for the recorded runs — allowed: δ = 0.1).

    PYTHONPATH=services .venv/bin/python lab/experiments/scan_variants.py --splits 300 \\
        --work .build/eval/leftout-1200-seed0/banking77/work/taught
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from tribunal.commands._calibration_signals import read_signals
from tribunal.confidence import CalibrationConfig, binomial_p_value, read_traffic
from tribunal.confidence._calibrate import _candidate_rows, decisions
from tribunal.confidence._kinds import make_calibrator
from tribunal.confidence._risk_plan import Labelled, pass_chances, plan_grid, plan_start
from tribunal.confidence._threshold import AcceptanceCurve
from tribunal.confidence._traffic import split_traffic

DELTA = 0.1
HOLDOUT = 0.1
"""Calibration's held-out report share, as ``tribunal-lab eval coverage`` sets it."""
ALPHAS = (0.05, 0.1)
STEPS: tuple[float | None, ...] = (None, 0.02, 0.05, 0.1)
"""None: every certify value (the product); else the plan grid's step below the start."""

Scan = Callable[[Labelled, Labelled, float], float | None]


def scan(step: float | None) -> Scan:
    def certify(plan: Labelled, tested: Labelled, alpha: float) -> float | None:
        grid = plan_grid(plan)
        if not grid.size:
            return None
        start = float(
            grid[plan_start(plan, grid, tested.n, alpha=alpha, delta=DELTA, test=binomial_p_value)]
        )
        curve = AcceptanceCurve.of(tested.confidence, tested.correct)
        below = curve.thresholds if step is None else plan_grid(plan, step)
        thresholds = np.concatenate([[start], below[below < start]])
        counts = np.array([curve.at(float(t)) for t in thresholds])
        accepted, errors = counts[:, 0], counts[:, 1]
        failed = np.flatnonzero(
            (accepted == 0) | (stats.binom.cdf(errors, np.maximum(accepted, 1), alpha) > DELTA)
        )
        passed = int(failed[0]) if failed.size else thresholds.size
        return float(thresholds[passed - 1]) if passed else None

    return certify


def safety_net(share: float) -> Scan:
    """Fallback testing over two planned starts: the product's (with 1 − ``share`` of δ)
    and the grid point the plan gives the best chance of passing at ``share``·δ alone."""

    def certify(plan: Labelled, tested: Labelled, alpha: float) -> float | None:
        grid = plan_grid(plan)
        if not grid.size:
            return None
        test = binomial_p_value
        planned = plan_start(
            plan, grid, tested.n, alpha=alpha, delta=DELTA * (1 - share), test=test
        )
        chance = pass_chances(plan, grid, tested.n, alpha=alpha, delta=DELTA * share, test=test)[1]
        safe = int(np.argmax(chance))
        levels = {float(grid[planned]): DELTA * (1 - share)}
        levels[float(grid[safe])] = levels.get(float(grid[safe]), 0.0) + DELTA * share
        curve = AcceptanceCurve.of(tested.confidence, tested.correct)
        top = max(levels)
        thresholds = np.unique(
            np.concatenate([list(levels), curve.thresholds[curve.thresholds < top]])
        )[::-1]
        level, lowest = 0.0, None
        for threshold in thresholds:
            level += levels.get(float(threshold), 0.0)
            accepted, errors = curve.at(float(threshold))
            if level > 0 and accepted and stats.binom.cdf(errors, accepted, alpha) <= level:
                lowest = float(threshold)
            else:
                level = 0.0
        return lowest

    return certify


RULES: dict[str, Scan] = {
    **{"every value" if s is None else f"step {s:g}": scan(s) for s in STEPS},
    **{f"safety net {w:g}": safety_net(w) for w in (0.1, 0.2, 0.3)},
}


@dataclass(frozen=True)
class Law:
    name: str
    floor: float
    slope: float
    power: float

    def draw(self, rng: np.random.Generator, n: int) -> Labelled:
        quantile = rng.random(n)
        wrong = rng.random(n) < self.floor + self.slope * quantile**self.power
        return Labelled.of(1.0 - quantile, ~wrong)

    def rate(self, threshold: float) -> float:
        """P(wrong | confidence ≥ threshold): the mean of the wrong chance over q ≤ 1 − t."""
        top = 1.0 - threshold
        return self.floor + self.slope * top**self.power / (self.power + 1.0) if top > 0 else 0.0


LAWS = (
    Law("1% + 12%·q²", 0.01, 0.12, 2.0),
    Law("2% + 8%·q", 0.02, 0.08, 1.0),
    Law("0.5% + 30%·q³", 0.005, 0.30, 3.0),
    Law("1% + 95%·q^3.4", 0.01, 0.95, 3.4),
)
SIZES = ((600, 540), (1000, 900))
"""(plan, certify): the calibrator's fit queries and the certify part at 1,200 and 2,000."""


def _cell(answered: list[float], certified: int, above: int, splits: int) -> str:
    return f"{np.mean(answered):.3f} ({certified / splits:.2f}; {above / splits:.3f})"


def simulated(splits: int) -> None:
    print("| law | plan / certify | α | " + " | ".join(RULES) + " |")
    print("|---|---|---|" + "---|" * len(RULES))
    for law in LAWS:
        for plan_size, certify_size in SIZES:
            for alpha in ALPHAS:
                cells = []
                for certify in RULES.values():
                    answered, certified, above = [], 0, 0
                    for seed in range(splits):
                        rng = np.random.default_rng(seed)
                        plan, tested = law.draw(rng, plan_size), law.draw(rng, certify_size)
                        threshold = certify(plan, tested, alpha)
                        if threshold is None:
                            answered.append(0.0)
                            continue
                        certified += 1
                        answered.append(float((tested.confidence >= threshold).mean()))
                        above += law.rate(threshold) > alpha
                    cells.append(_cell(answered, certified, above, splits))
                print(
                    f"| {law.name} | {plan_size} / {certify_size} | {alpha} | "
                    + " | ".join(cells)
                    + " |",
                    flush=True,
                )


def _parts(recorded_run: tuple[Any, ...], seed: int) -> tuple[Labelled, Labelled, Labelled]:
    """(plan, certify, test) of one calibration split of a recorded run."""
    traffic, observed, test, test_observed = recorded_run
    config = CalibrationConfig(seed=seed, holdout_fraction=HOLDOUT)
    split = split_traffic(
        traffic.queries,
        holdout_fraction=config.holdout_fraction,
        fit_fraction=config.fit_fraction,
        seed=seed,
    )
    calibrator = make_calibrator(config.calibrator, score=config.score, signals=config.signals)
    calibrator.fit(*_candidate_rows(traffic, observed, split.fit))

    def labelled(traffic_: Any, observed_: Any, rows: NDArray[np.int64]) -> Labelled:
        confidence, right, _ = decisions(calibrator, traffic_, observed_, rows)
        return Labelled.of(confidence, right)

    return (
        labelled(traffic, observed, split.fit),
        labelled(traffic, observed, split.risk),
        labelled(test, test_observed, np.arange(len(test))),
    )


def _read_run(work: Path) -> tuple[Any, ...]:
    """A recorded run's traffic and test split with their signals, read once."""
    traffic = read_traffic(work / "calibration.jsonl")
    test = read_traffic(work / "test.jsonl")
    return (
        traffic,
        read_signals(work / "traffic-signals.jsonl", traffic)[0],
        test,
        read_signals(work / "test-signals.jsonl", test)[0],
    )


def recorded(work: Path, seeds: int) -> None:
    print(f"\n{work} — {seeds} calibration splits, answered share of the test split")
    print("| α | " + " | ".join(RULES) + " |")
    print("|---|" + "---|" * len(RULES))
    run = _read_run(work)
    parts = [_parts(run, seed) for seed in range(seeds)]
    for alpha in ALPHAS:
        cells = []
        for certify in RULES.values():
            answered, certified, above = [], 0, 0
            for plan, tested, test in parts:
                threshold = certify(plan, tested, alpha)
                if threshold is None:
                    answered.append(0.0)
                    continue
                certified += 1
                accepted, wrong = test.at(threshold)
                answered.append(accepted / test.n)
                above += accepted > 0 and wrong / accepted > alpha
            cells.append(_cell(answered, certified, above, seeds))
        print(f"| {alpha} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", type=int, default=300, help="draws per simulated cell")
    parser.add_argument("--seeds", type=int, default=50, help="calibration splits per --work")
    parser.add_argument("--work", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    started = time.perf_counter()
    if args.splits:
        simulated(args.splits)
    for work in args.work:
        recorded(work, args.seeds)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
