"""Relevance judges from frozen embeddings: MPNet cosine (shipped), EmbeddingGemma cosine,
and small learned heads — trained, selected and tested on different queries.

The judged pairs' queries are split at random (``--seed``) into train (half of them),
selection and test (a quarter each). Judges:

- ``mpnet-cosine``: the shipped judge's ranking (its artifact is a monotone map of the
  MPNet query–passage cosine, so its AUROC is the cosine's);
- ``gemma-cosine``: EmbeddingGemma-300m with its retrieval prompts (``query`` /
  ``document``);
- learned heads, logistic regressions over features of the frozen vectors q and d:
  ``*-stats`` — [cos, mean / max / std of |q − d|, std of q ⊙ d] (6 weights);
  ``*-diagonal`` — [cos, q ⊙ d] (a learned diagonal similarity: 769 weights, ~3 KB, plus
  its standardisation), one per embedder and one over both embedders. Their L2 strength
  is chosen by grouped 5-fold cross-validation on the train queries (AUROC).

Selection: the highest AUROC on the selection queries; a judge replaces the MPNet cosine
only if the 95% interval of its AUROC gain there, from a bootstrap over selection
queries, lies above 0. The test queries are reported for every judge and decide nothing.
``--per-query N`` keeps at most N pairs per query (seeded), bounding the embedding time.

    tribunal-lab eval relevance-judges [--per-query 40] [--no-gemma]
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

from .._paths import data_root
from ._relevance_pairs import Pair, load_pairs, pair_vectors

__all__ = ["add_arguments", "run"]

Features = Callable[[NDArray[np.float32], NDArray[np.float32]], NDArray[np.float64]]
_C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None, help="judged pairs JSONL (TREC DL)")
    parser.add_argument("--relevant-at", type=int, default=2)
    parser.add_argument("--per-query", type=int, default=40, help="pairs per query (0: all)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--bootstrap", type=int, default=2000, help="query bootstrap resamples")
    parser.add_argument("--no-gemma", action="store_true", help="skip EmbeddingGemma")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--out", type=Path, default=Path(".build/eval/relevance-judges.json"))


def _subset(pairs: list[Pair], per_query: int, seed: int) -> list[Pair]:
    if per_query <= 0:
        return pairs
    rng = np.random.default_rng(seed)
    by_query: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_query.setdefault(pair.qid, []).append(pair)
    kept = []
    for qid in sorted(by_query):
        group = by_query[qid]
        order = rng.permutation(len(group))[:per_query]
        kept += [group[i] for i in sorted(order)]
    return kept


def _split(pairs: list[Pair], seed: int) -> NDArray[np.str_]:
    queries = sorted({p.qid for p in pairs})
    order = np.random.default_rng(seed).permutation(len(queries))
    n = len(queries)
    part = {}
    for rank, index in enumerate(order):
        part[queries[index]] = (
            "train" if rank < n // 2 else "selection" if rank < 3 * n // 4 else "test"
        )
    return np.array([part[p.qid] for p in pairs])


def _cosine(q: NDArray[np.float32], d: NDArray[np.float32]) -> NDArray[np.float64]:
    values: NDArray[np.float64] = np.einsum("ij,ij->i", q, d).astype(np.float64)
    return values[:, None]


def _stats(q: NDArray[np.float32], d: NDArray[np.float32]) -> NDArray[np.float64]:
    gap = np.abs(q - d)
    product = q * d
    columns = [_cosine(q, d)[:, 0], gap.mean(1), gap.max(1), gap.std(1), product.std(1)]
    return np.column_stack(columns).astype(np.float64)


def _diagonal(q: NDArray[np.float32], d: NDArray[np.float32]) -> NDArray[np.float64]:
    return np.column_stack([_cosine(q, d), q * d]).astype(np.float64)


def _auroc(y: NDArray[Any], p: NDArray[Any]) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def _fit_head(x: NDArray[Any], y: NDArray[Any], groups: NDArray[Any]) -> tuple[Any, float]:
    """Standardised logistic regression; C by grouped 5-fold CV AUROC on the train queries."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def model(c: float) -> Any:
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))

    best_c, best = _C_GRID[0], -1.0
    for c in _C_GRID:
        oof = np.zeros(y.size)
        for fit, held in GroupKFold(5).split(x, y, groups):
            oof[held] = model(c).fit(x[fit], y[fit]).predict_proba(x[held])[:, 1]
        score = _auroc(y, oof)
        if score > best:
            best_c, best = c, score
    return model(best_c).fit(x, y), best_c


def _best_bacc_threshold(y: NDArray[Any], p: NDArray[Any]) -> float:
    from sklearn.metrics import balanced_accuracy_score

    candidates = np.unique(p)
    scores = [balanced_accuracy_score(y, p >= t) for t in candidates]
    return float(candidates[int(np.argmax(scores))])


def _gain_ci(
    y: NDArray[Any], a: NDArray[Any], b: NDArray[Any], groups: NDArray[Any], *, n: int, seed: int
) -> list[float]:
    """95% interval of AUROC(a) − AUROC(b), resampling whole queries."""
    rng = np.random.default_rng(seed)
    queries = np.unique(groups)
    rows = {q: np.flatnonzero(groups == q) for q in queries}
    gains = []
    for _ in range(n):
        take = np.concatenate([rows[q] for q in rng.choice(queries, queries.size)])
        if np.unique(y[take]).size < 2:
            continue
        gains.append(_auroc(y[take], a[take]) - _auroc(y[take], b[take]))
    return [float(np.percentile(gains, 2.5)), float(np.percentile(gains, 97.5))]


def run(args: argparse.Namespace) -> int:
    from sklearn.metrics import balanced_accuracy_score
    from tribunal.core import load_settings

    started = time.perf_counter()
    settings = load_settings(args.profile)
    data = args.data or data_root() / "trec-dl-2019" / "dl19_judged_pairs.jsonl"
    pairs = _subset(load_pairs(data, args.relevant_at), args.per_query, args.seed)
    y = np.array([p.label for p in pairs])
    groups = np.array([p.qid for p in pairs])
    part = _split(pairs, args.seed)
    vectors = {"mpnet": pair_vectors(pairs, "embedder_large", settings)}
    if not args.no_gemma:
        vectors["gemma"] = pair_vectors(
            pairs, "embedder_gemma", settings, query_prompt="query", document_prompt="document"
        )
    judges: dict[str, tuple[NDArray[Any], dict[str, Any]]] = {}
    for name, (q, d) in vectors.items():
        judges[f"{name}-cosine"] = (_cosine(q, d)[:, 0], {"weights": 0})
    heads: dict[str, NDArray[Any]] = {}
    for name, (q, d) in vectors.items():
        heads[f"{name}-stats"] = _stats(q, d)
        heads[f"{name}-diagonal"] = _diagonal(q, d)
    if len(vectors) == 2:
        heads["both-diagonal"] = np.column_stack([heads["mpnet-diagonal"], heads["gemma-diagonal"]])
    train = part == "train"
    for name, x in heads.items():
        model, c = _fit_head(x[train], y[train], groups[train])
        judges[name] = (model.predict_proba(x)[:, 1], {"weights": x.shape[1] + 1, "C": c})

    rows = []
    baseline = judges["mpnet-cosine"][0]
    selection, test = part == "selection", part == "test"
    for name, (score, info) in judges.items():
        threshold = _best_bacc_threshold(y[selection], score[selection])
        rows.append(
            {
                "judge": name,
                **info,
                "selection_auroc": _auroc(y[selection], score[selection]),
                "selection_gain_ci": _gain_ci(
                    y[selection],
                    score[selection],
                    baseline[selection],
                    groups[selection],
                    n=args.bootstrap,
                    seed=args.seed,
                ),
                "test_auroc": _auroc(y[test], score[test]),
                "test_gain_ci": _gain_ci(
                    y[test],
                    score[test],
                    baseline[test],
                    groups[test],
                    n=args.bootstrap,
                    seed=args.seed,
                ),
                "test_bacc": float(balanced_accuracy_score(y[test], score[test] >= threshold)),
            }
        )
    winner = max(rows, key=lambda r: r["selection_auroc"])
    keep = winner["judge"] == "mpnet-cosine" or winner["selection_gain_ci"][0] <= 0
    result = {
        "date": dt.date.today().isoformat(),
        "data": str(data),
        "pairs": len(pairs),
        "queries": {k: len(set(groups[part == k])) for k in ("train", "selection", "test")},
        "items": {k: int((part == k).sum()) for k in ("train", "selection", "test")},
        "relevant": {k: int(y[part == k].sum()) for k in ("train", "selection", "test")},
        "judges": rows,
        "best_on_selection": winner["judge"],
        "decision": "keep mpnet-cosine" if keep else f"replace with {winner['judge']}",
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"{len(pairs)} pairs; queries train/selection/test {result['queries']}; items "
        f"{result['items']}; relevant {result['relevant']}",
        "",
        "| judge | weights | selection AUROC | gain vs MPNet [95% CI] | test AUROC | gain vs "
        "MPNet [95% CI] | test bAcc |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        sg, tg = row["selection_gain_ci"], row["test_gain_ci"]
        lines.append(
            f"| {row['judge']} | {row['weights']} | {row['selection_auroc']:.3f} | "
            f"[{sg[0]:+.3f}, {sg[1]:+.3f}] | {row['test_auroc']:.3f} | "
            f"[{tg[0]:+.3f}, {tg[1]:+.3f}] | {row['test_bacc']:.3f} |"
        )
    lines += ["", f"best on selection: {winner['judge']}; decision: {result['decision']}"]
    table = "\n".join(lines) + "\n"
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"-> {args.out} ({result['seconds']} s)")
    return 0
