"""The relevance judge a label job uses, scored as shipped on a labelled file.

The judge is the product's :class:`tribunal.ensemble.RelevanceJudge` on a relevance
artifact (``--artifact``, default the profile's: ``ensemble.relevance_artifact``, the data
folder's or the shipped one), on the profile's models — nothing is refitted. The file is
relevance pairs (``{"query", "passage", "label"}`` or a graded ``relevance`` with
``--relevant-at``; the TREC DL judged pairs read as they are — docs/evaluation.md).

Rows, each with the decision point it applies and whose it is:

- **judge mode** at the artifact's threshold (``--mode judge`` of a label job);
- **cascade** with the artifact's band: the judge decides outside it (relevant at
  P ≥ high, irrelevant at P ≤ low); the items inside go to the debate, which is not run
  here — the row gives the judge's balanced accuracy on the items it decides and the
  share it would send to the debate;
- by default, also the best threshold on these same items (an oracle, marked so); with
  ``--select-split F``, a threshold and a band (escalating at most ``--max-escalation``)
  selected on a seeded, label-stratified share, every row reported on the rest.

Figures with 95% bootstrap intervals: balanced accuracy, class recalls, AUROC, the share
escalated, seconds and prompt tokens per item. Writes JSON and markdown.

    tribunal-lab eval relevance --data pairs.jsonl [--artifact REL.json] [--select-split 0.5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.core import InvalidArgumentError

from ._labelled import RelevancePair, detect_kind, read_relevance_pairs
from ._scoring import (
    Threshold,
    add_scoring_arguments,
    best_threshold,
    ci_text,
    decision_row,
    interval,
    parts,
)
from ._sweep_stats import select_band

__all__ = ["add_arguments", "cascade_row", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, required=True, help="relevance pairs (JSONL; docs/evaluation.md)"
    )
    parser.add_argument(
        "--artifact",
        type=Path,
        default=None,
        help="the relevance artifact to score (default: the profile's)",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--relevant-at", type=int, default=2, help="graded files: relevant at this grade or above"
    )
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of N pairs (0: all)")
    parser.add_argument("--seed", type=int, default=13, help="sample, split and bootstrap seed")
    parser.add_argument(
        "--max-escalation",
        type=float,
        default=0.15,
        help="--select-split: most items a selected band may send to the debate (share)",
    )
    add_scoring_arguments(parser)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/eval/relevance.json"),
        help="JSON report (markdown beside it, .md)",
    )


def cascade_row(
    y: np.ndarray,
    p: np.ndarray,
    low: float,
    high: float,
    threshold: Threshold,
    *,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """The judge's part of the cascade: decided outside [low, high], escalated inside."""
    from tribunal.core.metrics import balanced_accuracy

    def decided(values: np.ndarray) -> np.ndarray:
        return (values >= high) | (values <= low)

    def kept_bacc(truth: np.ndarray, values: np.ndarray) -> float:
        keep = decided(values)
        if len(set(truth[keep].tolist())) < 2:
            return float("nan")
        return balanced_accuracy(truth[keep], (values[keep] >= high).astype(np.int64))

    keep = decided(p)
    return {
        "threshold": threshold.to_dict(),
        "n": int(y.size),
        "positives": int(y.sum()),
        "decided": int(keep.sum()),
        "balanced_accuracy_decided": interval(kept_bacc, y, p, resamples=resamples, seed=seed),
        "escalated": interval(
            lambda _t, values: float((~decided(values)).mean()),
            y,
            p,
            resamples=resamples,
            seed=seed,
        ),
    }


def _score(settings: Any, artifact: Any, pairs: list[RelevancePair]) -> tuple[Any, Any, float]:
    """P(relevant) and prompt tokens per pair, and seconds per pair, from the real judge."""
    from tqdm import tqdm
    from tribunal.ensemble import RelevanceItem, RelevanceJudge

    judge = RelevanceJudge.from_settings(settings, artifact)
    size = judge.max_items_per_request
    p: list[float] = []
    tokens: list[int] = []
    started = time.perf_counter()
    with tqdm(total=len(pairs), desc="judging", unit="pair") as bar:
        for start in range(0, len(pairs), size):
            part = pairs[start : start + size]
            verdicts = judge.judge(
                [RelevanceItem(x.query, x.passage, tuple(x.answers)) for x in part]
            )
            p.extend(v.p_relevant for v in verdicts)
            tokens.extend(v.prompt_tokens for v in verdicts)
            bar.update(len(part))
    seconds = (time.perf_counter() - started) / max(len(pairs), 1)
    return np.array(p, dtype=np.float64), np.array(tokens, dtype=np.float64), seconds


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.ensemble import RelevanceArtifact, relevance_artifact_path

    kind = detect_kind(args.data)
    if kind != "relevance":
        raise InvalidArgumentError(
            f"{args.data} holds {kind} records; the relevance judge scores relevance pairs "
            "(query, passage, label) — docs/evaluation.md",
            field="data",
        )
    pairs = read_relevance_pairs(args.data, relevant_at=args.relevant_at)
    if 0 < args.sample < len(pairs):
        pairs = random.Random(args.seed).sample(pairs, args.sample)
    settings = load_settings(args.profile)
    path = args.artifact or relevance_artifact_path(settings)
    artifact = RelevanceArtifact.load(path)
    p, tokens, seconds = _score(settings, artifact, pairs)
    y = np.array([x.label for x in pairs], dtype=np.int64)
    selection, reported = parts(y, args.select_split, args.seed)
    yr, pr = y[reported], p[reported]
    common = {"resamples": args.resamples, "seed": args.seed}
    rows: dict[str, Any] = {}
    mine = "the artifact's (chosen on its own selection data)"
    t = artifact.threshold
    rows["judge mode"] = decision_row(
        yr, pr, (pr >= t).astype(np.int64), Threshold(f"P ≥ {t:.3f}", mine), **common
    )
    low, high = artifact.band_low, artifact.band_high
    rows["cascade, the artifact's band"] = cascade_row(
        yr, pr, low, high, Threshold(f"band {low:.3f}–{high:.3f}", mine), **common
    )
    if args.select_split is None:
        oracle = best_threshold(yr, pr)
        rows["judge, oracle threshold"] = decision_row(
            yr,
            pr,
            (pr >= oracle).astype(np.int64),
            Threshold(f"P ≥ {oracle:.3f}", "oracle: the best on these same pairs (optimistic)"),
            **common,
        )
    else:
        ys, ps = y[selection], p[selection]
        chosen = best_threshold(ys, ps)
        where = "selected on the selection part"
        rows["judge, selected threshold"] = decision_row(
            yr,
            pr,
            (pr >= chosen).astype(np.int64),
            Threshold(f"P ≥ {chosen:.3f}", f"{where} (max bAcc)"),
            **common,
        )
        band = select_band(ys, ps, args.max_escalation)
        b_low = max(0.0, band.low) if np.isfinite(band.low) else 0.0
        b_high = min(1.0, band.high) if np.isfinite(band.high) else 1.0
        rows["cascade, selected band"] = cascade_row(
            yr,
            pr,
            b_low,
            b_high,
            Threshold(
                f"band {b_low:.3f}–{b_high:.3f}",
                f"{where} (max bAcc of decided items, ≤ {args.max_escalation:.0%} escalated)",
            ),
            **common,
        )
    report = {
        "date": dt.date.today().isoformat(),
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "data": str(args.data),
        "artifact": {"path": str(path), "version": artifact.version},
        "features": [f.name for f in artifact.features],
        "pairs": len(pairs),
        "reported_pairs": int(reported.size),
        "select_split": args.select_split,
        "seconds_per_pair": seconds,
        "prompt_tokens_per_pair": float(tokens.mean()) if tokens.size else 0.0,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    markdown = _markdown(report)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def _markdown(report: dict[str, Any]) -> str:
    where = (
        f"all {report['reported_pairs']} pairs"
        if report["select_split"] is None
        else f"the {report['reported_pairs']} pairs not selected on"
    )
    lines = [
        f"# Relevance judge {report['artifact']['version']} ({', '.join(report['features'])}) "
        f"on {report['data']}",
        "",
        f"`{report['command']}` ({report['date']}); reported on {where}; "
        f"{report['seconds_per_pair']:.3f} s and {report['prompt_tokens_per_pair']:.0f} prompt "
        "tokens per pair.",
        "",
        "| row | decision point applied | whose | bAcc [95% CI] | recall + / − | AUROC [95% CI] "
        "| escalated to the debate |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in report["rows"].items():
        applied, whose = row["threshold"]["applied"], row["threshold"]["source"]
        if "decided" in row:
            lines.append(
                f"| {name} | {applied} | {whose} | {ci_text(row['balanced_accuracy_decided'])} "
                f"on the {row['decided']} decided | – | – | {ci_text(row['escalated'])} |"
            )
            continue
        recalls = "/".join(
            "–" if r is None else f"{r:.2f}"
            for r in (row["recall_positive"], row["recall_negative"])
        )
        lines.append(
            f"| {name} | {applied} | {whose} | {ci_text(row['balanced_accuracy'])} | "
            f"{recalls} | {ci_text(row['auroc'])} | 0 |"
        )
    return "\n".join(lines) + "\n"
