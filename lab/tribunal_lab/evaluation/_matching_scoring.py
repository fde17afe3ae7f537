"""``tribunal-lab eval matching-features --data FILE``: a given feature matcher, not refitted.

The matcher (``--artifact``, default the profile's: ``ensemble.features_artifact``, the
data folder's or the shipped one) scores every pair of a labelled file with its own
embedder and regression — nothing is fitted. Two inputs:

- **matching pairs** (``query``, ``question``, ``answer``, ``label``);
- **labelled traffic** (``query``, ``answers``) with ``--collection C``: each query's
  top ``--candidates`` entries of the collection, retrieved as the gateway does
  (hybrid search), become pairs labelled by whether the entry is one of its answers;
  the report adds the query level — the top candidate by P(match), accepted at the
  threshold, is right when it answers the query, a refusal when none does.

Rows: the artifact's own threshold (its max-accuracy cut, fitted on its own selection
data) on every item, and the best threshold on these items (an oracle, marked so).
``--select-split F`` instead selects max-accuracy, risk (Clopper–Pearson bound ≤ α at
1 − δ) and empirical thresholds on a seeded, grouped share and reports every row,
the artifact's included, on the rest. Figures: accuracy, hallucination (wrong /
accepted), coverage, false-positive rate, AUROC, with 95% bootstrap intervals.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
from typing import Any

import numpy as np
from tribunal.confidence import json_ready, select_risk_threshold
from tribunal.core import InvalidArgumentError

from ._labelled import MatchingPair, detect_kind, read_matching_pairs, read_traffic_queries
from ._matching_table import grouped_stratified_split
from ._scoring import ci_text

__all__ = ["score_artifact", "traffic_pairs"]

_ARTIFACT = "the artifact's (its max-accuracy cut, fitted on its own selection data)"
_ORACLE = "oracle: the max-accuracy cut on these same items (optimistic)"


def traffic_pairs(
    settings: Any, collection: str, path: Any, candidates: int
) -> tuple[list[MatchingPair], dict[str, tuple[str, ...]]]:
    """Each labelled query's top ``candidates`` entries of ``collection`` as matching pairs;
    also every query id's answers."""
    from tqdm import tqdm
    from tribunal.retrieval import KnowledgeBase, SearchQuery

    queries = read_traffic_queries(path)
    kb = KnowledgeBase.from_settings(settings)
    pairs: list[MatchingPair] = []
    try:
        for asked in tqdm(queries, desc="retrieving", unit="query"):
            result = kb.search(SearchQuery(collection, asked.query, top_k=candidates))
            for hit in result.hits[:candidates]:
                entry = hit.entry
                if not entry.question or not entry.answer:
                    raise InvalidArgumentError(
                        f"entry {entry.id!r} of {collection!r} has no question and answer: the "
                        "feature matcher compares a query with an FAQ-style entry",
                        field="collection",
                    )
                pairs.append(
                    MatchingPair(
                        id=f"{asked.id}:{entry.id}",
                        query=asked.query,
                        question=entry.question,
                        answer=entry.answer,
                        label=int(entry.id in asked.answers),
                        group=asked.id,
                        source="answerable" if asked.answers else "unanswerable",
                    )
                )
    finally:
        kb.close()
    return pairs, {q.id: q.answers for q in queries}


def _thresholds(
    y: np.ndarray,
    p: np.ndarray,
    artifact_threshold: float,
    selection: np.ndarray | None,
    *,
    alpha: float,
    delta: float,
) -> dict[str, tuple[float | None, str]]:
    from ._matching_points import empirical_risk_threshold, max_accuracy_threshold

    points: dict[str, tuple[float | None, str]] = {"artifact": (artifact_threshold, _ARTIFACT)}
    if selection is None:
        points["oracle"] = (max_accuracy_threshold(y, p), _ORACLE)
        return points
    ys, ps = y[selection], p[selection]
    where = "selected on the selection part"
    points["max-accuracy"] = (max_accuracy_threshold(ys, ps), f"{where} (max accuracy)")
    risk = select_risk_threshold(ps, ys, alpha=alpha, delta=delta)
    points["risk"] = (risk.threshold, f"{where} (bound ≤ α={alpha} at 1 − δ={1 - delta:g})")
    points["empirical"] = (empirical_risk_threshold(ys, ps, alpha), f"{where} (≤ α, no bound)")
    return points


def _query_level(
    pairs: list[MatchingPair], p: np.ndarray, answers: dict[str, tuple[str, ...]], keep: set[str]
) -> tuple[np.ndarray, np.ndarray, int]:
    """Per query of ``keep``: (top candidate answers it, its P(match)); and how many of the
    queries have no candidate at all (always refused)."""
    best: dict[str, tuple[float, int]] = {}
    for pair, score in zip(pairs, p, strict=True):
        if pair.group in keep and (pair.group not in best or score > best[pair.group][0]):
            best[pair.group] = (float(score), pair.label)
    ordered = sorted(best)
    top_right = np.array([best[q][1] for q in ordered], dtype=np.int64)
    top_p = np.array([best[q][0] for q in ordered], dtype=np.float64)
    return top_right, top_p, len(keep - set(best))


def score_artifact(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.embedding import load_profile_embedder
    from tribunal.ensemble import MatchFeaturesArtifact, features_path, match_feature_values

    from ._matching_points import report_points as _report

    settings = load_settings(args.profile)
    path = args.artifact or features_path(settings)
    artifact = MatchFeaturesArtifact.load(path)
    kind = detect_kind(args.data)
    answers: dict[str, tuple[str, ...]] | None = None
    if kind == "matching":
        pairs = read_matching_pairs(args.data)
    elif kind == "traffic":
        if not args.collection:
            raise InvalidArgumentError(
                f"{args.data} is labelled traffic: name the KB collection it asks (--collection)",
                field="collection",
            )
        count = args.candidates or settings.gateway.candidates
        pairs, answers = traffic_pairs(settings, args.collection, args.data, count)
    else:
        raise InvalidArgumentError(
            f"{args.data} holds {kind} pairs; the matcher scores matching pairs or labelled "
            "traffic (docs/evaluation.md)",
            field="data",
        )
    embedder = load_profile_embedder(settings, artifact.embedder.model_key)
    if embedder.name != artifact.embedder.name:
        raise InvalidArgumentError(
            f"{path} was fitted with embedder {artifact.embedder.name}; model "
            f"{artifact.embedder.model_key!r} of this profile is {embedder.name}",
            field="artifact",
        )
    started = time.perf_counter()
    values = match_feature_values(
        [x.query for x in pairs],
        [x.question for x in pairs],
        [x.answer for x in pairs],
        embedder,
        progress=not args.no_progress,
    )
    p = artifact.p_match({name: values[name] for name in artifact.features})
    seconds = time.perf_counter() - started
    y = np.array([x.label for x in pairs], dtype=np.int64)
    if args.select_split is None:
        selection, reported = None, np.arange(y.size)
    else:
        selection, reported = grouped_stratified_split(
            [x.source for x in pairs], y, [x.group for x in pairs], args.seed, args.select_split
        )
    points = _thresholds(y, p, artifact.threshold, selection, alpha=args.alpha, delta=args.delta)
    values_only = {name: value for name, (value, _) in points.items()}
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "data": str(args.data),
        "kind": kind,
        "collection": args.collection if kind == "traffic" else None,
        "artifact": {"path": str(path), "version": artifact.version},
        "embedder": embedder.name,
        "select_split": args.select_split,
        "seed": args.seed,
        "items": int(y.size),
        "reported_items": int(reported.size),
        "feature_seconds_per_item": seconds / max(y.size, 1),
        "thresholds": {name: {"value": v, "source": s} for name, (v, s) in points.items()},
        "pairs": _report(y[reported], p[reported], values_only, args.resamples, args.seed),
    }
    if answers is not None:
        keep = {pairs[i].group for i in reported.tolist()}
        if selection is None:
            keep = set(answers)  # every query, those without candidates included
        top_right, top_p, without = _query_level(pairs, p, answers, keep)
        result["queries"] = {
            "without_candidates": without,
            **_report(top_right, top_p, values_only, args.resamples, args.seed),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(json_ready(result), indent=2) + "\n", encoding="utf-8")
    markdown = scoring_markdown(result)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def _number(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3f}"


def scoring_markdown(result: dict[str, Any]) -> str:
    where = (
        f"all {result['reported_items']} items"
        if result["select_split"] is None
        else f"the {result['reported_items']} items not selected on "
        f"(--select-split {result['select_split']}, seed {result['seed']})"
    )
    lines = [
        f"# Feature matcher {result['artifact']['version']} on {result['data']}",
        "",
        f"`{result['command']}` ({result['date']}); embedder {result['embedder']}; nothing "
        f"fitted on the file except the rows marked selected or oracle. Reported on {where}.",
    ]
    sections = [("pairs", "(query, entry) pairs")]
    if "queries" in result:
        sections.append(("queries", "queries: the top candidate by P(match)"))
    for key, title in sections:
        report = result[key]
        lines += [
            "",
            f"## {title}: {report['n']} ({report['positives']} positive), AUROC "
            f"{ci_text(report['auroc'])}",
            "",
            "| row | threshold | whose | accuracy [95% CI] | hallucination [95% CI] "
            "(wrong/accepted) | coverage [95% CI] | FPR |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, point in result["thresholds"].items():
            row = report[name]
            lines.append(
                f"| {name} | {_number(point['value'])} | {point['source']} | "
                f"{ci_text(row['accuracy'])} | {ci_text(row['hallucination'])} "
                f"({row['wrong']}/{row['accepted']}) | {ci_text(row['coverage'])} | "
                f"{_number(row['false_positive_rate'])} |"
            )
        if key == "queries" and report.get("without_candidates"):
            lines.append(
                f"\n{report['without_candidates']} queries had no candidate (always refused)."
            )
    return "\n".join(lines) + "\n"
