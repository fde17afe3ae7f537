"""The risk-control methods compared: certified coverage and realized risk over many splits.

For each domain, α and method, over ``--splits`` random splits: how often a threshold is
certified, the test coverage it gives (0 when none is: the coverage a team gets), and
whether the realized hallucination rate at it stays ≤ α.

- **Real domains** (``covid``, ``banking77``; :mod:`._risk_signals`): every query's
  candidate signals are recorded once with the gateway's own retrieval and matching,
  then each split is ``tribunal calibrate``'s: a seeded split by group into fit (the
  monotone calibrator; also the plan of the risk-control test), certify and test
  (``--test-fraction``) parts; the gateway's decision is replayed on each query. The
  realized rate is measured on the split's test queries (finite: on a small test part a
  valid threshold can land above α by chance), and on the population the certify part
  was drawn from — every query not fitted on, certify and test together — where the
  guarantee allows a rate above α in at most δ of the splits.
- **Synthetic** (``synthetic``): confidences and errors drawn from known laws, the true
  rate P(wrong | confidence ≥ λ) computed exactly, so validity is measured without test
  noise. Three laws: calibrated confidences bunched high; 30% out-of-scope queries with
  low confidences; and an over-confident top band (confidences ≥ 0.95 right only 60% of
  the time), where the rate is not monotone in λ.

    tribunal-lab eval risk-methods --domain covid banking77 synthetic --splits 200
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from .._paths import cache_dir, data_root

__all__ = ["add_arguments", "run"]

ALPHAS = (0.05, 0.1, 0.2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--domain",
        nargs="+",
        default=["covid", "banking77", "synthetic"],
        choices=("covid", "banking77", "synthetic"),
    )
    parser.add_argument("--splits", type=int, default=200, help="random splits per domain")
    parser.add_argument("--alpha", type=float, nargs="+", default=list(ALPHAS))
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.3,
        help="real domains: share of the queries (by group) kept as the test part",
    )
    parser.add_argument(
        "--plan",
        choices=("fit", "split"),
        default="fit",
        help="what plans the test: the calibrator's fit queries (as tribunal calibrate "
        "does), or a seeded 30%% of the certify queries",
    )
    parser.add_argument("--data", type=Path, default=data_root(), help="data sets folder")
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="run no model: use the queries whose signals are already recorded",
    )
    parser.add_argument("--out", type=Path, default=Path(".build/risk-methods"))


# -- one split ---------------------------------------------------------------------------


def _certify(
    plan: tuple[NDArray[np.float64], NDArray[np.int64]] | None,
    certify: tuple[NDArray[np.float64], NDArray[np.int64]],
    alphas: list[float],
    delta: float,
) -> dict[tuple[str, float], float | None]:
    from tribunal.confidence import RISK_METHODS, select_threshold

    return {
        (method, alpha): select_threshold(
            *certify, alpha=alpha, delta=delta, method=method, plan=plan
        ).threshold
        for method in RISK_METHODS
        for alpha in alphas
    }


def _real_splits(domain: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per (split, method, α): certified?, test accepted / wrong / n."""
    from tribunal.confidence import make_calibrator
    from tribunal.confidence._calibrate import _candidate_rows
    from tribunal.confidence._traffic import split_traffic

    traffic, observed = domain.traffic, domain.observed
    # Every candidate once, flat: the calibrator scores them all in one call per split,
    # and each query's decision is its first best-scored candidate, as the gateway picks.
    flat = [c.signals for candidates in observed for c in candidates]
    right = np.array(
        [
            int(traffic.queries[q].is_right(c.entry_id))
            for q, candidates in enumerate(observed)
            for c in candidates
        ],
        dtype=np.int64,
    )
    starts = np.r_[0, np.cumsum([len(c) for c in observed])][:-1]

    def decided(scores: NDArray[np.float64], rows: NDArray[np.int64]) -> tuple[Any, Any]:
        confidence = np.zeros(rows.size)
        correct = np.zeros(rows.size, dtype=np.int64)
        for position, row in enumerate(rows):
            count = len(observed[int(row)])
            if not count:
                continue  # no candidate: never accepted, counted wrong
            first = int(starts[int(row)])
            best = first + int(np.argmax(scores[first : first + count]))
            confidence[position], correct[position] = scores[best], right[best]
        return confidence, correct

    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for seed in range(args.splits):
        split = split_traffic(
            traffic.queries, holdout_fraction=args.test_fraction, fit_fraction=0.3, seed=seed
        )
        signals, labels = _candidate_rows(traffic, observed, split.fit)
        calibrator = make_calibrator("monotone").fit(signals, labels)
        scores = np.asarray(calibrator.predict(flat), dtype=np.float64)
        fit = decided(scores, split.fit)
        certify = decided(scores, split.risk)
        test_conf, test_right = decided(scores, split.holdout)
        plan = fit if args.plan == "fit" else None
        # The population the certify part was drawn from: every query not fitted on.
        pop_conf = np.concatenate([certify[0], test_conf])
        pop_wrong = np.concatenate([certify[1], test_right]) == 0
        for (method, alpha), threshold in _certify(plan, certify, args.alpha, args.delta).items():
            accepted = (
                np.zeros(test_conf.size, bool) if threshold is None else test_conf >= threshold
            )
            pop = np.zeros(pop_conf.size, bool) if threshold is None else pop_conf >= threshold
            rows.append(
                {
                    "split": seed,
                    "method": method,
                    "alpha": alpha,
                    "certified": threshold is not None,
                    "coverage": float(accepted.mean()),
                    "accepted": int(accepted.sum()),
                    "wrong": int((accepted & (test_right == 0)).sum()),
                    "risk": float((accepted & (test_right == 0)).sum() / accepted.sum())
                    if accepted.any()
                    else None,
                    "population_risk": float((pop & pop_wrong).sum() / pop.sum())
                    if pop.any()
                    else None,
                    "sizes": [int(split.fit.size), int(split.risk.size), int(split.holdout.size)],
                }
            )
        _progress(domain.name, seed + 1, args.splits, started)
    return rows


# -- synthetic laws with an exact rate ------------------------------------------------------


def _beta_tail(a: float, b: float, lam: NDArray[np.float64]) -> tuple[Any, Any]:
    """P(C ≥ λ) and E[C · 1{C ≥ λ}] for C ~ Beta(a, b)."""
    mass = special.betainc(a, b, 1.0) - special.betainc(a, b, lam)
    mean = a / (a + b) * (1.0 - special.betainc(a + 1, b, lam))
    return mass, mean


class _Law:
    """Confidence C and right/wrong with P(wrong | C ≥ λ) known in closed form."""

    def __init__(
        self,
        name: str,
        draw: Callable[[np.random.Generator, int], tuple[Any, Any]],
        rate: Callable[[float], float],
    ) -> None:
        self.name, self.draw, self.rate = name, draw, rate


def _laws() -> list[_Law]:
    def bunched(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
        c = rng.beta(12.0, 1.5, n)
        return c, (rng.random(n) < c).astype(np.int64)

    def bunched_rate(lam: float) -> float:
        mass, mean = _beta_tail(12.0, 1.5, np.asarray(lam))
        return float((mass - mean) / mass) if mass > 0 else 0.0

    def out_of_scope(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
        inside = rng.random(n) >= 0.3
        c = np.where(inside, rng.beta(6.0, 2.0, n), rng.beta(2.0, 5.0, n))
        right = inside & (rng.random(n) < c)
        return c, right.astype(np.int64)

    def out_of_scope_rate(lam: float) -> float:
        m_in, e_in = _beta_tail(6.0, 2.0, np.asarray(lam))
        m_out, _ = _beta_tail(2.0, 5.0, np.asarray(lam))
        mass = 0.7 * m_in + 0.3 * m_out
        wrong = 0.7 * (m_in - e_in) + 0.3 * m_out
        return float(wrong / mass) if mass > 0 else 0.0

    def top_band(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
        c = rng.random(n)
        p = np.where(c >= 0.95, 0.6, c)
        return c, (rng.random(n) < p).astype(np.int64)

    def top_band_rate(lam: float) -> float:
        # C ~ U(0, 1); wrong with 1 − c below 0.95, with 0.4 at or above it.
        if lam >= 1.0:
            return 0.0
        low = min(max(lam, 0.0), 0.95)
        below = (0.95 - low) - (0.95**2 - low**2) / 2.0 if low < 0.95 else 0.0
        top = 0.4 * (1.0 - max(lam, 0.95))
        return (below + top) / (1.0 - max(lam, 0.0))

    return [
        _Law("bunched high", bunched, bunched_rate),
        _Law("30% out of scope", out_of_scope, out_of_scope_rate),
        _Law("over-confident top", top_band, top_band_rate),
    ]


def _synthetic_splits(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Plan 150 and certify 350 draws per split (as a 500-query calibration); exact rate."""
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    laws = _laws()
    total = args.splits * len(laws)
    done = 0
    for law in laws:
        for seed in range(args.splits):
            rng = np.random.default_rng([seed, len(law.name)])
            plan = law.draw(rng, 150)
            certify = law.draw(rng, 350)
            test_conf, _ = law.draw(rng, 20_000)
            for (method, alpha), threshold in _certify(
                plan if args.plan == "fit" else None, certify, args.alpha, args.delta
            ).items():
                rate = None if threshold is None else law.rate(threshold)
                rows.append(
                    {
                        "split": seed,
                        "law": law.name,
                        "method": method,
                        "alpha": alpha,
                        "certified": threshold is not None,
                        "coverage": 0.0
                        if threshold is None
                        else float((test_conf >= threshold).mean()),
                        "risk": rate,
                    }
                )
            done += 1
            _progress("synthetic", done, total, started)
    return rows


def _progress(name: str, done: int, total: int, started: float) -> None:
    if done % 20 and done != total:
        return
    rate = done / max(time.perf_counter() - started, 1e-9)
    print(
        f"{name}: {done}/{total} splits ({rate:.1f}/s, ETA {(total - done) / rate:.0f} s)",
        flush=True,
    )


# -- summary ---------------------------------------------------------------------------------


def summarise(rows: list[dict[str, Any]], alpha: float, delta: float) -> dict[str, Any]:
    """Per method at one α: certified share, mean test coverage (0 when not certified),
    the share of splits whose realized rate exceeds α (the guarantee allows δ), and the
    share of certified splits whose rate stays ≤ α."""
    certified = [r for r in rows if r["certified"]]
    over = [r for r in certified if r["risk"] is not None and r["risk"] > alpha]
    population = [r.get("population_risk", r["risk"]) for r in certified]
    over_population = [p for p in population if p is not None and p > alpha]
    pooled_wrong = sum(r.get("wrong", 0) for r in certified)
    pooled_accepted = sum(r.get("accepted", 0) for r in certified)
    return {
        "splits": len(rows),
        "certified": len(certified) / len(rows),
        "coverage": float(np.mean([r["coverage"] for r in rows])),
        "coverage_when_certified": float(np.mean([r["coverage"] for r in certified]))
        if certified
        else None,
        "over_alpha": len(over) / len(rows),
        "held_when_certified": 1.0 - len(over) / len(certified) if certified else None,
        "pooled_risk": pooled_wrong / pooled_accepted if pooled_accepted else None,
        "over_alpha_population": len(over_population) / len(rows),
        "valid": len(over_population) / len(rows) <= delta,
    }


def _markdown(summary: dict[str, Any]) -> str:
    lines = [
        "| domain | α | method | certified | test coverage (mean, 0 if none) | coverage when "
        "certified | test rate > α | test rate ≤ α (certified) | pooled test rate "
        "| population rate > α |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value: float | None, digits: int = 3) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    for domain, per_alpha in summary["domains"].items():
        for alpha, per_method in per_alpha.items():
            best = max(m["coverage"] for m in per_method.values())
            for method, s in per_method.items():
                coverage = cell(s["coverage"])
                if s["coverage"] == best and best > 0:
                    coverage = f"**{coverage}**"
                lines.append(
                    f"| {domain} | {alpha} | `{method}` | {cell(s['certified'], 2)} | {coverage} "
                    f"| {cell(s['coverage_when_certified'])} | {cell(s['over_alpha'])} "
                    f"| {cell(s['held_when_certified'])} | {cell(s['pooled_risk'])} "
                    f"| {cell(s['over_alpha_population'])} |"
                )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ._risk_signals import record_domain

    rows_by_domain: dict[str, list[dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    for name in args.domain:
        if name == "synthetic":
            rows = _synthetic_splits(args)
            for law in dict.fromkeys(r["law"] for r in rows):
                rows_by_domain[f"synthetic: {law}"] = [r for r in rows if r["law"] == law]
            continue
        domain = record_domain(
            name, args.data, cache_dir("risk-methods"), args.profile, cached_only=args.cached_only
        )
        sizes[name] = len(domain.traffic)
        rows_by_domain[name] = _real_splits(domain, args)
    summary: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "delta": args.delta,
        "splits": args.splits,
        "plan": args.plan,
        "test_fraction": args.test_fraction,
        "queries": sizes,
        "domains": {
            domain: {
                str(alpha): {
                    method: summarise(
                        [r for r in rows if r["alpha"] == alpha and r["method"] == method],
                        alpha,
                        args.delta,
                    )
                    for method in dict.fromkeys(r["method"] for r in rows)
                }
                for alpha in args.alpha
            }
            for domain, rows in rows_by_domain.items()
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "risk-methods.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "risk-methods.md").write_text(_markdown(summary))
    print(_markdown(summary))
    return 0
