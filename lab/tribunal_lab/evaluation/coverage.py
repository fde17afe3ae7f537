"""Certified coverage before and after phrasings and tuning, realized on an untouched test split.

For one domain (:mod:`._coverage_domains`: BANKING77 or the COVID FAQ), seeded, four
conditions of one KB:

- **one**: one phrasing per entry, the shipped matcher;
- **phrased**: several phrasings per entry, the shipped matcher;
- **taught**: the phrased KB (COVID: the one-phrasing FAQ) with ``tribunal tune
  --encoder-epochs 0`` run on the traffic: its train part's queries become phrasings
  of their entries (approved phrasing links) and the matching head is refitted on
  them, each with its own phrasing left out; calibration then certifies on the tune's
  held-out part only and fits the calibrator on the train part observed the same way,
  as ``tribunal calibrate`` does (``--tune-heldout-fraction 0.3 --tune-head-fraction
  0.25``: the split with a head part kept apart);
- **tuned**: the same with the encoder also fine-tuned (``--epochs``, default 1).

Each step is the product's own code: ingestion into a collection of a fresh data
directory, ``tribunal tune``'s :func:`~tribunal.commands.tune.tune_collection`,
``tribunal calibrate``'s stage runner (the gateway's retrieval and matcher, in
process) and :func:`tribunal.confidence.calibrate`, once per risk-control method. The
test queries go through the same stages; each is decided as the gateway decides (the
highest-confidence candidate, answered when its confidence reaches the certified
threshold). Realized hallucination = wrong among answered (an out-of-scope query
answered is wrong); coverage = answered right / answerable; answered = answered / all.

    tribunal-lab eval coverage --domain banking77 [--traffic 2000]
    tribunal-lab eval coverage --domain covid

The recorded signals are kept in ``--out``'s work folder: ``--reuse`` skips the stages
already run (same domain and options).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import data_root
from ._coverage_domains import CoverageDomain, LabelledRow

__all__ = ["add_arguments", "run"]

ALPHAS = (0.05, 0.1, 0.2)
CONDITIONS = ("one", "phrased", "taught", "tuned")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domain", choices=("banking77", "covid"), required=True)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw and split (0)")
    parser.add_argument(
        "--traffic", type=int, default=2000, help="banking77: labelled traffic queries (2000)"
    )
    parser.add_argument(
        "--test-size",
        type=int,
        default=None,
        help="banking77: a seeded sample of test.jsonl (default: all 3,080)",
    )
    parser.add_argument(
        "--phrasings", type=int, default=5, help="banking77: phrasings per entry (5)"
    )
    parser.add_argument(
        "--heldout-intents",
        type=int,
        default=10,
        help="banking77: intents left out of the KB, their queries out of scope (10)",
    )
    parser.add_argument(
        "--test-share", type=float, default=0.3, help="covid: share of the 240 queries (0.3)"
    )
    parser.add_argument(
        "--oos-share", type=float, default=0.1, help="covid: out-of-scope share (0.1)"
    )
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS))
    parser.add_argument(
        "--epochs",
        type=float,
        default=1.0,
        help="tribunal tune --encoder-epochs of the tuned condition (1; taught: 0)",
    )
    parser.add_argument(
        "--base", default=None, help="tribunal tune --base (default: the matcher's embedder)"
    )
    parser.add_argument(
        "--tuned-retrieval",
        action="store_true",
        help="taught and tuned: re-embed the collection with its tune (`tribunal kb reembed "
        "--model tuned`), so retrieval and matching share one model",
    )
    parser.add_argument("--delta", type=float, default=None, help="default: the profile's")
    parser.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.1,
        help="tribunal calibrate --holdout-fraction (0.1: the test split is the held-out "
        "report here, so calibration keeps more queries to certify on)",
    )
    parser.add_argument(
        "--tune-heldout-fraction",
        type=float,
        default=None,
        help="tribunal tune --heldout-fraction (default: the tune's)",
    )
    parser.add_argument(
        "--tune-head-fraction",
        type=float,
        default=None,
        help="tribunal tune --head-fraction (default: the tune's; 0.25 with 0.3 held out "
        "is the split before the head was fitted on the train part)",
    )
    parser.add_argument("--reuse", action="store_true", help="reuse recorded signals and tunes")
    parser.add_argument("--out", type=Path, default=Path(".build/eval/coverage"))


def _domain(args: argparse.Namespace, chunk_chars: int) -> CoverageDomain:
    from ._coverage_domains import banking77_domain, covid_domain

    if args.domain == "banking77":
        return banking77_domain(
            data_root() / "banking77",
            seed=args.seed,
            traffic_size=args.traffic,
            heldout_intents=args.heldout_intents,
            phrasings=args.phrasings,
            test_size=args.test_size,
        )
    return covid_domain(
        data_root() / "covid-qa",
        data_root() / "banking77",
        seed=args.seed,
        test_share=args.test_share,
        oos_share=args.oos_share,
        chunk_chars=chunk_chars,
    )


def _write_rows(path: Path, rows: tuple[LabelledRow, ...] | list[LabelledRow]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def _ingest(settings: Any, collection: str, entries: tuple[Any, ...]) -> None:
    from tribunal.retrieval import KnowledgeBase, writer_signer

    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    try:
        kb.upsert(collection, list(entries), create=True, self_evidenced=True)
    finally:
        kb.close()


def _observed(
    settings: Any, collection: str, traffic: Any, cache: Path, reuse: bool
) -> tuple[list[Any], Any]:
    """Every query through ``tribunal calibrate``'s stage runner (recorded once)."""
    from tribunal.commands._calibration_signals import observe_traffic, read_signals, write_signals

    if reuse and cache.is_file():
        return read_signals(cache, traffic)
    started = time.perf_counter()
    observed, binding = observe_traffic(settings, collection, traffic)
    rate = len(traffic) / (time.perf_counter() - started)
    print(f"    {len(traffic)} queries through retrieval + matching ({rate:.1f} queries/s)")
    write_signals(cache, traffic, observed, binding)
    return observed, binding


def _realized(
    confidence: np.ndarray[Any, Any], right: np.ndarray[Any, Any], answerable: int, threshold: Any
) -> dict[str, Any]:
    if threshold is None:
        answered = np.zeros(confidence.size, dtype=bool)
    else:
        answered = confidence >= threshold
    count = int(answered.sum())
    wrong = int((answered & (right == 0)).sum())
    return {
        "queries": int(confidence.size),
        "answerable": answerable,
        "answered": count,
        "wrong": wrong,
        "hallucination": wrong / count if count else None,
        "coverage": (count - wrong) / answerable if answerable else None,
        "answered_share": count / confidence.size if confidence.size else None,
    }


def _certify(  # noqa: PLR0917 - one call site, every argument named by its role
    settings: Any,
    traffic: Any,
    observed: list[Any],
    binding: Any,
    test: Any,
    test_observed: list[Any],
    delta: float | None,
    holdout_fraction: float,
) -> list[dict[str, Any]]:
    """Per risk-control method: ``tribunal calibrate``'s fit and certificate, then the
    test split decided as the gateway decides."""
    from tribunal.confidence import RISK_METHODS, CalibrationConfig, calibrate
    from tribunal.confidence._calibrate import decisions

    rows: list[dict[str, Any]] = []
    everything = np.arange(len(test), dtype=np.int64)
    for method in RISK_METHODS:
        config = CalibrationConfig.from_settings(
            settings.confidence,
            method=method,
            alphas=ALPHAS,
            delta=delta,
            holdout_fraction=holdout_fraction,
        )
        result = calibrate(traffic, observed, config, binding)
        confidence, right, _ = decisions(
            result.artifact.calibrator, test, test_observed, everything
        )
        for threshold in result.artifact.thresholds:
            rows.append(
                {
                    "method": method,
                    **threshold.to_dict(),
                    "certified": threshold.certified,
                    "test": _realized(confidence, right, test.answerable, threshold.threshold),
                    "calibration_split": result.report["traffic"]["split"],
                    "risk_curve": result.report["curves"]["risk"],
                }
            )
    return rows


def _tune(
    settings: Any,
    name: str,
    traffic: Any,
    config: Any,
    *,
    record: dict[str, Any],
    base: str | None,
    tuned_retrieval: bool,
) -> tuple[Any, Any]:
    """``tribunal tune`` on the traffic (and, ``tuned_retrieval``, ``tribunal kb reembed
    --model tuned``), then what ``tribunal calibrate`` keeps: the tuned matcher served,
    the traffic cut to the tune's held-out part."""
    from tribunal.commands.calibrate import tuned_part
    from tribunal.commands.tune import tune_collection
    from tribunal.ensemble import tuned_model_name
    from tribunal.retrieval import KnowledgeBase

    print(f"[{name}] tribunal tune on {len(traffic)} labelled queries ...", flush=True)
    started = time.perf_counter()
    _, directory, outcome = tune_collection(settings, name, traffic, config, base=base)
    record["tune"] = {
        "seconds": round(time.perf_counter() - started, 1),
        "examples": outcome.examples,
        "metrics": outcome.metrics,
        "encoder_epochs": config.epochs,
        "version": directory.name,
    }
    print(f"    tune took {record['tune']['seconds']:.0f} s: {outcome.metrics}", flush=True)
    if tuned_retrieval:
        started = time.perf_counter()
        kb = KnowledgeBase.from_settings(settings, checker=None)
        try:
            units = kb.reembed(name, tuned_model_name(directory.name), progress=True)
        finally:
            kb.close()
        record["tune"]["reembed_seconds"] = round(time.perf_counter() - started, 1)
        print(f"    re-embedded {units} units with the tune", flush=True)
    return tuned_part(settings, name, traffic)


def _condition(
    name: str,
    domain: CoverageDomain,
    settings: Any,
    args: argparse.Namespace,
    work: Path,
) -> dict[str, Any]:
    from tribunal.confidence import read_traffic
    from tribunal.tuning import TuneConfig, split_for_tuning

    from ._coverage_domains import with_phrasings

    traffic = read_traffic(_write_rows(work / "traffic.jsonl", domain.traffic))
    test = read_traffic(_write_rows(work / "test.jsonl", domain.test))
    tune_config = TuneConfig(
        seed=args.seed,
        epochs=args.epochs if name == "tuned" else 0.0,
        heldout_fraction=args.tune_heldout_fraction,
        head_fraction=args.tune_head_fraction,
    )
    record: dict[str, Any] = {"condition": name}
    entries = domain.one
    if name in {"taught", "tuned"}:  # the tune itself teaches the KB from its train part
        entries = domain.phrased if domain.phrased is not None else domain.one
    elif name != "one":
        if domain.phrased is not None:
            entries = domain.phrased
        else:  # the tune's fit part becomes phrasings (reviewed links, approved)
            split = split_for_tuning(
                traffic.queries,
                heldout_fraction=tune_config.heldout_share,
                head_fraction=tune_config.head_share,
                seed=tune_config.seed,
            )
            entries, added = with_phrasings(domain.one, [domain.traffic[i] for i in split.fit])
            record["phrasings_added_from_fit_part"] = added
    record["phrasings"] = sum(len(e.phrasings()) for e in entries)  # before any teaching
    calibration, stored = work / "calibration.jsonl", work / "condition.json"
    if args.reuse and stored.is_file() and calibration.is_file():
        print(f"[{name}] reusing the recorded signals in {work}", flush=True)
        record = json.loads(stored.read_text())
        traffic = read_traffic(calibration)
        observed, binding = _observed(settings, name, traffic, work / "traffic-signals.jsonl", True)
        test_observed, _ = _observed(settings, name, test, work / "test-signals.jsonl", True)
    else:
        _ingest(settings, name, entries)
        if name == "phrased" and domain.phrased is None:
            # Calibrate on the part the phrasings did not come from (the tune's held-out).
            from dataclasses import replace

            heldout = set(split.heldout)
            traffic = replace(
                traffic, queries=tuple(q for i, q in enumerate(traffic.queries) if i in heldout)
            )
        if name in {"taught", "tuned"}:
            settings, traffic = _tune(
                settings,
                name,
                traffic,
                tune_config,
                record=record,
                base=args.base,
                tuned_retrieval=args.tuned_retrieval,
            )
        _write_rows(
            calibration,
            [
                {"query": q.query, "answers": sorted(q.answers)}
                | ({"fit_only": True} if q.fit_only else {})
                | ({"taught": True} if q.taught else {})
                for q in traffic.queries
            ],
        )
        print(f"[{name}] calibration traffic: {len(traffic)} queries", flush=True)
        observed, binding = _observed(
            settings, name, traffic, work / "traffic-signals.jsonl", False
        )
        print(f"[{name}] test split: {len(test)} queries", flush=True)
        test_observed, _ = _observed(settings, name, test, work / "test-signals.jsonl", False)
        stored.write_text(json.dumps(record, indent=1) + "\n")
    record["matcher"] = binding.matcher
    record["retrieval_model"] = binding.embedder
    record["calibration_queries"] = len(traffic)
    record["fit_only_queries"] = sum(1 for q in traffic.queries if q.fit_only)
    # Queries a stage failed on (no candidate: never answered); 0 unless the machine stalls.
    record["without_candidates"] = {
        "calibration": sum(1 for found in observed if not found),
        "test": sum(1 for found in test_observed if not found),
    }
    record["rows"] = _certify(
        settings,
        traffic,
        observed,
        binding,
        test,
        test_observed,
        args.delta,
        args.holdout_fraction,
    )
    return record


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings

    from ._coverage_report import coverage_markdown, queries_needed

    started = time.perf_counter()
    out = args.out / args.domain
    base = load_settings(args.profile)
    domain = _domain(args, base.retrieval.chunk_size_chars)
    print(
        f"{domain.name}: {len(domain.one)} entries, {len(domain.traffic)} traffic queries "
        f"({sum(1 for r in domain.traffic if r['answers'])} answerable), {len(domain.test)} "
        f"test queries; {domain.described.get('out_of_scope')}",
        flush=True,
    )
    results = []
    for index, name in enumerate(args.conditions):
        work = out / "work" / name
        if work.exists() and not args.reuse:
            shutil.rmtree(work)
        work.mkdir(parents=True, exist_ok=True)
        settings = load_settings(
            args.profile,
            data_dir=str(work / "data"),
            # A loaded machine must not turn slow stages into fallbacks: the demo's caps.
            gateway={
                **base.gateway.model_dump(),
                "discovery": "in-process",
                "deadline_s": 1800.0,
                "stage_timeout_s": dict.fromkeys(base.gateway.stage_timeout_s, 900.0),
            },
        )
        begun = time.perf_counter()
        results.append(_condition(name, domain, settings, args, work))
        spent = time.perf_counter() - begun
        left = len(args.conditions) - index - 1
        print(
            f"[{name}] done in {spent:.0f} s; {left} condition(s) left, ETA ~{spent * left:.0f} s",
            flush=True,
        )
    report = {
        "domain": domain.name,
        "described": domain.described,
        "options": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"
        },
        "traffic_queries": len(domain.traffic),
        "test_queries": len(domain.test),
        "test_answerable": sum(1 for r in domain.test if r["answers"]),
        "conditions": results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    report["needed"] = queries_needed(report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.json").write_text(json.dumps(report, indent=1, default=_default) + "\n")
    table = coverage_markdown(report)
    (out / "coverage.md").write_text(table)
    print(table)
    print(f"wrote {out / 'coverage.json'} and {out / 'coverage.md'}")
    return 0


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return str(value)
