"""Matching from cheap features alone: does a KB entry answer the query, without an LLM?

Items are the ensemble's matching set (``tribunal-lab dataset matching``; built here
with no judging when ``--dataset`` has no ``items.jsonl`` yet). Features per item:

- ``cos_question``, ``cos_answer``, ``cos_question_answer``: the profile embedder's
  (MiniLM's; ``--embedder MODEL_KEY`` for another, e.g. MPNet) cosine of the query
  with the candidate's question, its answer, and question + " " + answer (normalised
  vectors);
- ``token_set``: rapidfuzz's token-set ratio / 100 of the query and the question;
- ``dense_score``, ``bm25_score``, ``rrf_score``: what retrieval returned — COVID items
  only (STS-B pairs were never retrieved), so they enter a separate ablation on the
  COVID sources.

The split keeps a query's items together (a COVID query's top-1 and held-out items
share it) and is stratified by source and label: groups with the same (source, label)
make-up are shuffled with ``numpy.random.default_rng(seed)`` and ``round(n · fraction)``
go to selection. Every fitted thing — logistic regression (standardised features,
out-of-fold on selection), thresholds — sees selection items only. Operating points:
``max-accuracy`` (a midpoint cut), ``risk`` (:func:`tribunal.confidence.select_risk_threshold`:
Clopper–Pearson upper bound on hallucination ≤ α at 1 − δ) and ``empirical`` (lowest
threshold whose selection hallucination ≤ α). Reported on the test half, overall and
per source, with 95% bootstrap intervals: accuracy, hallucination (accepted but wrong /
accepted), coverage (share accepted), AUROC; the false-positive rate (RAL2M's "Hallu")
is listed beside it. Writes JSON and a markdown table.

    tribunal-lab eval matching-features [--dataset .build/ensemble/dataset] [--embedder KEY]
        [--out F.json] [--export-artifact MATCHER.json] [--signals S.jsonl [--signals-sources S...]]

``--export-artifact`` writes the LR over the embedding features as the product's feature
matcher (``ensemble.matcher: features``); ``--signals`` labelled signals of items the
regression never saw (out-of-fold on selection) for ``tribunal confidence fit``.

``--data FILE`` scores a given matcher (``--artifact``, default the profile's) on a
labelled file instead, fitting nothing: matching pairs, or labelled traffic of a KB
collection (``--collection``) — :mod:`._matching_scoring`.

    tribunal-lab eval matching-features --data FILE [--artifact MATCHER.json]
        [--collection C] [--select-split 0.5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.confidence import json_ready, select_risk_threshold
from tribunal.core import InvalidArgumentError

from .._paths import data_root
from ._matching_artifact import LOGISTIC_SCORER, matcher_artifact, write_signals
from ._matching_points import (
    _report,
    empirical_risk_threshold,
    max_accuracy_threshold,
    outcome,
)
from ._matching_report import markdown_report
from ._matching_table import (
    COVID_SOURCES,
    EMBEDDING_FEATURES,
    RETRIEVAL_FEATURES,
    FeatureTable,
    Floats,
    Ints,
    Scorer,
    compute_features,
    grouped_stratified_split,
)
from ._scoring import select_split_fraction
from ._sweep_stats import auroc, oof_ensemble

__all__ = [
    "EMBEDDING_FEATURES",
    "RETRIEVAL_FEATURES",
    "FeatureTable",
    "Scorer",
    "add_arguments",
    "compute_features",
    "empirical_risk_threshold",
    "evaluate_table",
    "grouped_stratified_split",
    "markdown_report",
    "max_accuracy_threshold",
    "outcome",
    "run",
]


def _scores(
    table: FeatureTable, scorer: Scorer, scope: Ints, selection: Ints, seed: int
) -> tuple[Floats, dict[str, Any]]:
    """The scorer's score on the ``scope`` items (selection ones out-of-fold for an LR).

    Missing values (a retriever that did not return the item) are filled with the
    selection minimum of that feature: "not found" is a low score.
    """
    local_selection = np.flatnonzero(np.isin(scope, selection))
    if np.unique(table.labels[scope][local_selection]).size < 2:
        raise InvalidArgumentError(
            f"the selection half of {scorer.name}'s items has one class only; "
            "use more items (or another --seed / --fraction)",
            field="dataset",
        )
    columns = []
    for name in scorer.features:
        values = table.features[name][scope].copy()
        chosen = values[local_selection]
        fill = float(np.nanmin(chosen)) if np.isfinite(chosen).any() else 0.0
        values[~np.isfinite(values)] = fill
        columns.append(values)
    x = np.column_stack(columns)
    if scorer.kind == "feature":
        return x[:, 0], {}
    mean = x[local_selection].mean(axis=0)
    std = x[local_selection].std(axis=0)
    std[std == 0] = 1.0
    probability, weights = oof_ensemble(
        (x - mean) / std, table.labels[scope], local_selection, seed=seed
    )
    weights["features"] = list(scorer.features)
    weights["mean"], weights["std"] = mean.tolist(), std.tolist()
    return probability, weights


def _scopes(judges: tuple[str, ...] = ()) -> list[tuple[str, tuple[str, ...] | None, list[Scorer]]]:
    """Scorers per scope; ``judges`` (feature names ``judge:<name>``) add each judge alone
    and the regressions with them."""
    embedding = [Scorer(name, (name,), "feature") for name in EMBEDDING_FEATURES]
    retrieval = [Scorer(name, (name,), "feature") for name in RETRIEVAL_FEATURES]
    lr = Scorer("logistic(embedding)", EMBEDDING_FEATURES, "logistic")
    lr_all = Scorer(
        "logistic(embedding+retrieval)", EMBEDDING_FEATURES + RETRIEVAL_FEATURES, "logistic"
    )
    with_judges: list[Scorer] = []
    covid_judges: list[Scorer] = []
    if judges:
        alone = [Scorer(name, (name,), "feature") for name in judges]
        both = Scorer("logistic(embedding+judges)", EMBEDDING_FEATURES + judges, "logistic")
        everything = Scorer(
            "logistic(embedding+retrieval+judges)",
            EMBEDDING_FEATURES + RETRIEVAL_FEATURES + judges,
            "logistic",
        )
        with_judges = [*alone, both]
        covid_judges = [*alone, both, everything]
        if len(judges) > 1:
            only = Scorer("logistic(judges)", judges, "logistic")
            with_judges.append(only)
    return [
        ("all", None, [*embedding, lr, *with_judges]),
        ("covid (retrieval ablation)", COVID_SOURCES, [*retrieval, lr, lr_all, *covid_judges]),
    ]


def evaluate_table(
    table: FeatureTable,
    *,
    seed: int = 13,
    fraction: float = 0.5,
    alpha: float = 0.05,
    delta: float = 0.1,
    resamples: int = 1000,
    progress: bool = False,
    split: tuple[Ints, Ints] | None = None,
    scores: dict[tuple[str, str], tuple[Ints, Floats]] | None = None,
) -> dict[str, Any]:
    """Split, fit every scorer's model and operating points on selection, report on test.

    ``split``: (selection, test) indices to use instead of :func:`grouped_stratified_split`.
    ``scores``: when given, filled with ``(scope, scorer) -> (item indices, score)``, the
    selection items' scores out-of-fold for a regression.
    """
    from tqdm import tqdm

    selection, test = split or grouped_stratified_split(
        table.sources, table.labels, table.groups, seed, fraction
    )
    sources = np.array(table.sources)
    judges = tuple(sorted(name for name in table.features if name.startswith("judge:")))
    scopes = _scopes(judges)
    result: dict[str, Any] = {
        "seed": seed,
        "fraction": fraction,
        "alpha": alpha,
        "delta": delta,
        "resamples": resamples,
        "split": {
            "selection": _sizes(table, selection),
            "test": _sizes(table, test),
        },
        "scopes": {},
    }
    total = sum(len(scorers) for _, _, scorers in scopes)
    with tqdm(total=total, desc="scorers", unit="scorer", disable=not progress) as bar:
        for scope_name, wanted, scorers in scopes:
            inside = np.ones(sources.size, bool) if wanted is None else np.isin(sources, wanted)
            scope = np.flatnonzero(inside)
            local_sel = np.flatnonzero(np.isin(scope, selection))
            local_test = np.flatnonzero(np.isin(scope, test))
            y = table.labels[scope]
            rows: dict[str, Any] = {}
            for scorer in scorers:
                score, weights = _scores(table, scorer, scope, selection, seed)
                if scores is not None:
                    scores[scope_name, scorer.name] = (scope, score)
                ys, ss = y[local_sel], score[local_sel]
                risk = select_risk_threshold(ss, ys, alpha=alpha, delta=delta)
                thresholds = {
                    "max-accuracy": max_accuracy_threshold(ys, ss),
                    "risk": risk.threshold,
                    "empirical": empirical_risk_threshold(ys, ss, alpha),
                }
                fitted = {
                    "thresholds": thresholds,
                    "risk": risk.to_dict(),
                    "selection": {
                        point: outcome(ys, np.zeros(ys.size, bool) if t is None else ss >= t)
                        for point, t in thresholds.items()
                    },
                    "selection_auroc": auroc(ys, ss),
                    "model": weights,
                }
                test_sources = sources[scope][local_test]
                per_source = {
                    name: _report(
                        y[local_test][test_sources == name],
                        score[local_test][test_sources == name],
                        thresholds,
                        resamples,
                        seed,
                    )
                    for name in sorted(set(test_sources))
                }
                rows[scorer.name] = {
                    "features": list(scorer.features),
                    "kind": scorer.kind,
                    "fitted_on_selection": fitted,
                    "test": _report(y[local_test], score[local_test], thresholds, resamples, seed),
                    "test_per_source": per_source,
                }
                bar.update()
            result["scopes"][scope_name] = rows
    return result


def _sizes(table: FeatureTable, index: Ints) -> dict[str, Any]:
    sources = np.array(table.sources)[index]
    labels = table.labels[index]
    return {
        "items": int(index.size),
        "positives": int(labels.sum()),
        "per_source": {
            name: {
                "items": int((sources == name).sum()),
                "positives": int(labels[sources == name].sum()),
            }
            for name in sorted(set(sources))
        },
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        type=Path,
        default=Path(".build/ensemble/dataset"),
        help="matching set folder (items.jsonl); built without judging when missing",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root(),
        help="a labelled FILE to score --artifact on (matching pairs, or labelled traffic with "
        "--collection; docs/evaluation.md), or the data sets FOLDER (to build items and fit)",
    )
    parser.add_argument(
        "--collection",
        default="",
        help="--data FILE of labelled traffic: the KB collection it asks (candidates retrieved)",
    )
    parser.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="labelled traffic: candidates per query (default gateway.candidates)",
    )
    parser.add_argument(
        "--select-split",
        type=select_split_fraction,
        default=None,
        metavar="FRACTION",
        help="--data FILE: select thresholds on this seeded share (grouped by query) and "
        "report on the rest (default: report on all items at the artifact's threshold)",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--embedder",
        default=None,
        metavar="MODEL_KEY",
        help="embedder model of the profile for the cosine features (default: the "
        "embedder role, e.g. embedder_large for MPNet in tiny)",
    )
    parser.add_argument("--seed", type=int, default=13, help="split and fold seed")
    parser.add_argument("--fraction", type=float, default=0.5, help="share in selection")
    parser.add_argument("--alpha", type=float, default=0.05, help="hallucination target")
    parser.add_argument("--delta", type=float, default=0.1, help="risk threshold's δ")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/eval/matching-features.json"),
        help="JSON report (markdown beside it, .md)",
    )
    parser.add_argument(
        "--judges",
        nargs="+",
        default=None,
        metavar="JUDGE",
        help="also compare with these LLM judges' P(yes) from the dataset's judgments "
        "(e.g. llm_strong/ral2m llm_strong/ral2m-augmented): each alone and in the "
        "regressions; every item must be judged",
    )
    parser.add_argument(
        "--artifact",
        type=Path,
        default=None,
        help="--data FILE: the feature matcher to score (default: the profile's)",
    )
    parser.add_argument(
        "--export-artifact",
        type=Path,
        default=None,
        help="also write the feature matcher (the LR over the embedding features, fitted "
        "on selection) as a tribunal.match-features/1 JSON file, for ensemble.matcher: features",
    )
    parser.add_argument(
        "--signals",
        type=Path,
        default=None,
        help="also write labelled signals (P(match) of the LR over the embedding features "
        "on items it never saw: out-of-fold on selection, the artifact's on test, plus the "
        "retrieval scores) as JSONL for `tribunal confidence fit`",
    )
    parser.add_argument(
        "--signals-sources",
        nargs="+",
        default=None,
        metavar="SOURCE",
        help="only these sources' items in --signals (e.g. covid-qa covid-qa-heldout: the "
        "FAQ traffic a gateway sees); default: all",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.embedding import load_profile_embedder
    from tribunal.ensemble import read_items

    from ..datasets.matching import SOURCES, build_items

    data = getattr(args, "data", None)
    if data is not None and data.is_file():
        from ._matching_scoring import score_artifact

        return score_artifact(args)
    if getattr(args, "artifact", None) is not None:
        raise InvalidArgumentError(
            "--artifact scores a given matcher on --data FILE; to write the matcher this "
            "command fits, use --export-artifact",
            field="artifact",
        )
    if not 0 < args.fraction < 1:
        raise InvalidArgumentError("--fraction must be in (0, 1)", field="fraction")
    unknown = sorted(set(getattr(args, "signals_sources", None) or ()) - set(SOURCES))
    if unknown:
        raise InvalidArgumentError(
            f"--signals-sources: unknown {unknown}; the matching set has {', '.join(SOURCES)}",
            field="signals_sources",
        )
    settings = load_settings(args.profile)
    embedder_key = args.embedder or (settings.roles.embedder if settings.roles else None)
    spec = settings.models.get(embedder_key) if embedder_key else None
    if spec is None or spec.kind != "embedder":
        embedders = settings.model_keys("embedder")
        raise InvalidArgumentError(
            f"--embedder {embedder_key!r} is not an embedder model of profile "
            f"{settings.profile!r}: {', '.join(embedders) or 'none'}",
            field="embedder",
        )
    if (args.dataset / "items.jsonl").is_file():
        items = read_items(args.dataset)
    else:
        items = build_items(settings, args.data, args.dataset, seed=args.seed)
    embedder = load_profile_embedder(settings, embedder_key)
    started = time.perf_counter()
    table = compute_features(items, embedder, progress=not args.no_progress)
    feature_seconds = time.perf_counter() - started
    if getattr(args, "judges", None):
        from ._matching_judges import add_judge_features

        table = add_judge_features(table, args.dataset, args.judges)
    split = grouped_stratified_split(
        table.sources, table.labels, table.groups, args.seed, args.fraction
    )
    scores: dict[tuple[str, str], tuple[Ints, Floats]] = {}
    result = evaluate_table(
        table,
        seed=args.seed,
        fraction=args.fraction,
        alpha=args.alpha,
        delta=args.delta,
        resamples=args.resamples,
        progress=not args.no_progress,
        split=split,
        scores=scores,
    )
    if args.export_artifact is not None or args.signals is not None:
        artifact = matcher_artifact(
            result,
            embedder_key=str(embedder_key),
            embedder_name=embedder.name,
            dataset=str(args.dataset),
        )
        if args.export_artifact is not None:
            artifact.save(args.export_artifact)
            print(f"wrote feature matcher {artifact.version} to {args.export_artifact}")
        if args.signals is not None:
            counts = write_signals(
                args.signals,
                artifact,
                table,
                split=split,
                oof=scores["all", LOGISTIC_SCORER],
                items=items,
                sources=args.signals_sources,
            )
            print(f"wrote signals to {args.signals}: {counts}")
    result = {
        "date": dt.date.today().isoformat(),
        "dataset": str(args.dataset),
        "items": len(items),
        "embedder": embedder.name,
        "feature_seconds_per_item": feature_seconds / max(len(items), 1),
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(json_ready(result), indent=2) + "\n", encoding="utf-8")
    markdown = markdown_report(result)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0
