"""EmbeddingGemma-300m against MPNet in the feature matcher, decided on the selection half.

The feature matcher (``ensemble.matcher: features``) is a logistic regression over
cos(query, question), cos(query, answer), cos(query, question + answer) and the
token-set ratio. This computes those features on the matching set with each
embedder — MPNet as the product does (no prompts), EmbeddingGemma with its task
prompts: ``STS`` on both sides for query–question, ``query`` / ``document`` for
query–answer and query–(question + answer) — and compares them where the shipped
matcher was selected: the selection half of the same grouped split (seed 13,
half), by out-of-fold AUROC of the regression (5 folds), with a paired bootstrap
of the difference over selection items. The test half is reported afterwards,
for information; it decides nothing.

    .venv/bin/python lab/experiments/embeddinggemma_matching.py \
        --out .build/eval/gemma-vs-mpnet.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz import fuzz, utils
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler
from tribunal.core import load_embedder, load_settings
from tribunal.embedding import load_profile_embedder
from tribunal.ensemble import match_feature_values, read_items
from tribunal_lab._paths import data_root
from tribunal_lab.datasets.matching import build_items
from tribunal_lab.evaluation._matching_table import grouped_stratified_split

FEATURES = ("cos_question", "cos_answer", "cos_question_answer", "token_set")


def gemma_features(
    items: list[Any], settings: Any, key: str, *, max_tokens: int, cache: Path
) -> dict[str, np.ndarray]:
    """The four features with EmbeddingGemma's task prompts (texts cut at ``max_tokens``,
    as MPNet cuts at 384; vectors cached in ``cache`` so a rerun resumes)."""
    model = load_embedder(settings, key)
    model.max_seq_length = max_tokens
    queries = [i.query for i in items]
    questions = [i.candidate.question for i in items]
    answers = [i.candidate.answer for i in items]
    both = [f"{q} {a}" for q, a in zip(questions, answers, strict=True)]

    def encode(texts: list[str], prompt_name: str) -> dict[str, np.ndarray]:
        unique = list(dict.fromkeys(texts))
        path = cache / f"{prompt_name}-{max_tokens}.npz"
        stored: dict[str, np.ndarray] = {}
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                stored = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
        missing = [t for t in unique if t not in stored]
        for start in range(0, len(missing), 64):
            block = missing[start : start + 64]
            vectors = model.encode(
                block, normalize_embeddings=True, batch_size=16, prompt_name=prompt_name
            )
            stored.update(zip(block, vectors, strict=True))
            cache.mkdir(parents=True, exist_ok=True)
            names = list(stored)
            np.savez(path, texts=np.array(names), vectors=np.stack([stored[t] for t in names]))
            print(f"{prompt_name}: {len(stored)} of {len(unique)} texts", flush=True)
        return {t: stored[t] for t in unique}

    sts = encode([*queries, *questions], prompt_name="STS")
    query = encode(queries, prompt_name="query")
    document = encode([*answers, *both], prompt_name="document")

    def cosine(
        left: dict[str, np.ndarray], lt: list[str], right: dict[str, np.ndarray], rt: list[str]
    ) -> np.ndarray:
        return np.array([float(left[a] @ right[b]) for a, b in zip(lt, rt, strict=True)])

    return {
        "cos_question": cosine(sts, queries, sts, questions),
        "cos_answer": cosine(query, queries, document, answers),
        "cos_question_answer": cosine(query, queries, document, both),
        "token_set": np.array(
            [
                fuzz.token_set_ratio(q, c, processor=utils.default_process) / 100
                for q, c in zip(queries, questions, strict=True)
            ]
        ),
    }


def out_of_fold(x: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """5-fold out-of-fold P(match) of the standardised logistic regression."""
    out = np.zeros(y.size)
    for fit, apply in StratifiedKFold(5, shuffle=True, random_state=seed).split(x, y):
        scaler = StandardScaler().fit(x[fit])
        model = LogisticRegression(max_iter=1000).fit(scaler.transform(x[fit]), y[fit])
        out[apply] = model.predict_proba(scaler.transform(x[apply]))[:, 1]
    return out


def fitted(x: np.ndarray, y: np.ndarray, fit: np.ndarray, apply: np.ndarray) -> np.ndarray:
    scaler = StandardScaler().fit(x[fit])
    model = LogisticRegression(max_iter=1000).fit(scaler.transform(x[fit]), y[fit])
    return np.asarray(model.predict_proba(scaler.transform(x[apply]))[:, 1], dtype=float)


def paired_bootstrap(y: np.ndarray, a: np.ndarray, b: np.ndarray, seed: int) -> list[float]:
    """95% percentile interval of AUROC(a) − AUROC(b) over resampled items."""
    rng = np.random.default_rng(seed)
    deltas = []
    for _ in range(2000):
        index = rng.integers(0, y.size, y.size)
        if y[index].min() == y[index].max():
            continue
        deltas.append(roc_auc_score(y[index], a[index]) - roc_auc_score(y[index], b[index]))
    low, high = np.percentile(deltas, [2.5, 97.5])
    return [float(low), float(high)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=Path(".build/ensemble/dataset"))
    parser.add_argument("--gemma", default="embedder_gemma", help="profile model key")
    parser.add_argument("--mpnet", default="embedder_large", help="profile model key")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=Path(".build/eval/gemma-vs-mpnet.json"))
    parser.add_argument("--max-tokens", type=int, default=512, help="EmbeddingGemma's cut")
    parser.add_argument("--cache", type=Path, default=Path(".build/eval/gemma-cache"))
    args = parser.parse_args()
    settings = load_settings("tiny")
    if (args.dataset / "items.jsonl").is_file():
        items = read_items(args.dataset)
    else:
        items = build_items(settings, data_root(), args.dataset, seed=args.seed)
    labels = np.array([i.label for i in items])
    sources = [i.source for i in items]
    selection, test = grouped_stratified_split(
        sources, labels, [i.group for i in items], args.seed, 0.5
    )
    tables, seconds = {}, {}
    started = time.perf_counter()
    mpnet = load_profile_embedder(settings, args.mpnet)
    tables["mpnet"] = match_feature_values(
        [i.query for i in items],
        [i.candidate.question for i in items],
        [i.candidate.answer for i in items],
        mpnet,
    )
    seconds["mpnet"] = time.perf_counter() - started
    started = time.perf_counter()
    tables["gemma"] = gemma_features(
        items, settings, args.gemma, max_tokens=args.max_tokens, cache=args.cache
    )
    seconds["gemma"] = time.perf_counter() - started
    result: dict[str, Any] = {
        "items": len(items),
        "selection": int(selection.size),
        "test": int(test.size),
        "seed": args.seed,
        "feature_seconds": seconds,
        "gemma_max_tokens": args.max_tokens,
    }
    oof, test_p = {}, {}
    for name, table in tables.items():
        x = np.column_stack([table[f] for f in FEATURES])
        oof[name] = out_of_fold(x[selection], labels[selection], args.seed)
        test_p[name] = fitted(x, labels, selection, test)
        per_feature = {
            f: float(roc_auc_score(labels[selection], table[f][selection])) for f in FEATURES
        }
        covid = np.array([sources[i].startswith("covid") for i in selection])
        result[name] = {
            "selection_oof_auroc": float(roc_auc_score(labels[selection], oof[name])),
            "selection_oof_auroc_covid": float(
                roc_auc_score(labels[selection][covid], oof[name][covid])
            ),
            "selection_feature_auroc": per_feature,
            "test_auroc": float(roc_auc_score(labels[test], test_p[name])),
        }
    result["selection_delta_ci95"] = paired_bootstrap(
        labels[selection], oof["gemma"], oof["mpnet"], args.seed
    )
    result["winner_on_selection"] = (
        "gemma"
        if result["gemma"]["selection_oof_auroc"] > result["mpnet"]["selection_oof_auroc"]
        else "mpnet"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
