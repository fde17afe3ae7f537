"""Relevance probes that did not make it into the product (negative results).

Two ideas for a better TREC DL 2019 relevance ranker than MPNet's cosine, measured on
the sweep's 300 pairs (seed 13) and its selection/test split:

- ``query-likelihood``: UPR-style scoring (Sachan et al. 2022; Zhuang et al. 2023, LLMs
  as zero-shot query-likelihood models). The score is the log-probability of the query's
  tokens when a GGUF LLM is asked to "write a search query that this passage answers",
  read from llama.cpp's logits, minus the same with no passage (pointwise mutual
  information, so that scores compare across queries). Per-item rows go to ``--out``
  (resumable).
- ``pool-normalised``: the query–passage cosine of an embedder over *every* judged
  passage of a query (3,834 pairs), standardised within the query's pool (z-score,
  rank, distance to the pool's best) — what a bulk labelling job that sees a query's
  whole pool could compute.

``report`` puts the probes (and, with ``--scores``, any per-item P(relevant) file such as
``relevance_cross_encoder.py``'s) beside the embedder cosines through the sweep's own analysis
(``tribunal.evaluation.sweep.analyse``: thresholds, bands and ensembles fitted on the
selection half, figures on the test half). Run from the repository root::

    .venv/bin/python lab/experiments/relevance_probes.py query-likelihood llm_strong \\
        --out lab/results/probes/ql-llm_strong.json
    .venv/bin/python lab/experiments/relevance_probes.py pool-normalised embedder
    .venv/bin/python lab/experiments/relevance_probes.py report \\
        --ql lab/results/probes/ql-llm_strong.json --cosines embedder embedder_large
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit
from tqdm import tqdm
from tribunal.core import load_settings, model_path
from tribunal_lab import data_root, read_jsonl
from tribunal_lab.evaluation import sweep
from tribunal_lab.evaluation._sweep_stats import Judge, auroc
from tribunal_lab.evaluation.judge import Item, load_items

DATA = data_root()
_SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"


def _items() -> list[Item]:
    return load_items("trec-dl", DATA, trec_pairs=300, seed=13)


class _QueryLikelihood:
    """Mean and summed log P(query tokens | prompt) from a llama.cpp model (ChatML)."""

    def __init__(self, gguf: Path) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            model_path=str(gguf), n_ctx=1024, n_threads=1, logits_all=True, verbose=False
        )

    def score(self, passage: str | None, query: str) -> tuple[float, float]:
        user = (
            f"Passage: {passage}\n\nWrite a search query that this passage answers."
            if passage is not None
            else "Write a search query."
        )
        head = f"{_SYSTEM}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        prefix = self.llm.tokenize(head.encode(), add_bos=False, special=True)
        target = self.llm.tokenize(query.encode(), add_bos=False, special=False)
        tokens = prefix + target
        self.llm.reset()  # type: ignore[no-untyped-call]  # llama_cpp leaves it unannotated
        self.llm.eval(tokens)
        # Row t predicts token t + 1: the query's tokens are predicted by rows
        # len(prefix) - 1 ... len(tokens) - 2.
        rows = np.asarray(self.llm.scores[len(prefix) - 1 : len(tokens) - 1], dtype=np.float64)
        top = rows.max(axis=1)
        log_z = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))
        log_p = rows[np.arange(len(target)), target] - log_z
        return float(log_p.mean()), float(log_p.sum())


def query_likelihood(args: argparse.Namespace) -> None:
    scorer = _QueryLikelihood(model_path(load_settings("tiny"), args.model))
    done: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    prior: dict[str, tuple[float, float]] = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for n, item in enumerate(tqdm(_items(), desc=f"query likelihood {args.model}")):
        if item.id in done:
            continue
        query = item.fields["query"]
        if query not in prior:
            prior[query] = scorer.score(None, query)
        mean, total = scorer.score(item.fields["passage"], query)
        done[item.id] = {
            "label": item.label,
            "mean": mean,
            "sum": total,
            "prior_mean": prior[query][0],
            "prior_sum": prior[query][1],
        }
        if n % 20 == 0:
            args.out.write_text(json.dumps(done))
    args.out.write_text(json.dumps(done))


def pool_normalised(args: argparse.Namespace) -> None:
    from tribunal.embedding import load_profile_embedder

    rows = list(read_jsonl(DATA / "trec-dl-2019" / "dl19_judged_pairs.jsonl"))
    embedder = load_profile_embedder(load_settings("tiny"), args.model)
    queries = sorted({r["query"] for r in rows})
    query_vectors = dict(zip(queries, np.asarray(embedder.embed(queries)), strict=True))
    passages = np.asarray(embedder.embed([r["passage"] for r in rows], progress=True))
    cosine = np.array([query_vectors[r["query"]] @ passages[i] for i, r in enumerate(rows)])
    y = np.array([int(r["relevance"] >= 2) for r in rows])
    qid = np.array([r["qid"] for r in rows])
    variants = {"raw": cosine, "z": np.zeros_like(cosine), "rank": np.zeros_like(cosine)}
    variants["minus pool max"] = np.zeros_like(cosine)
    for q in np.unique(qid):
        pool = qid == q
        c = cosine[pool]
        variants["z"][pool] = (c - c.mean()) / (c.std() + 1e-9)
        variants["rank"][pool] = (np.argsort(np.argsort(c)) + 0.5) / pool.sum()
        variants["minus pool max"][pool] = c - c.max()
    index = {f"{r['qid']}:{r['pid']}": i for i, r in enumerate(rows)}
    sample = np.array([index[item.id] for item in _items()])
    print(f"| {args.model} cosine | AUROC, all {len(rows)} pairs | AUROC, the 300 pairs |")
    print("|---|---|---|")
    for name, values in variants.items():
        print(f"| {name} | {auroc(y, values):.3f} | {auroc(y[sample], values[sample]):.3f} |")


def report(args: argparse.Namespace) -> None:
    items = _items()
    y = np.array([item.label for item in items])
    zeros = np.zeros(len(items))
    judges: dict[str, Judge] = {}
    settings = load_settings("tiny")
    for key in args.cosines:
        judge = sweep._cosine_judge(settings, key, items, ("query", "passage"))
        judges[judge.name] = judge
    for path in args.ql:
        rows = json.loads(path.read_text())
        missing = [item.id for item in items if item.id not in rows]
        if missing:
            sys.exit(f"{path}: {len(missing)} of the 300 pairs are not scored yet")
        scores = {
            "ql-mean": [rows[i.id]["mean"] for i in items],
            "ql-pmi-mean": [rows[i.id]["mean"] - rows[i.id]["prior_mean"] for i in items],
            # /10 keeps expit away from 0 and 1 (the judge stores a probability).
            "ql-pmi-sum": [(rows[i.id]["sum"] - rows[i.id]["prior_sum"]) / 10 for i in items],
        }
        for kind, values in scores.items():
            name = f"{path.stem}:{kind}"
            judges[name] = Judge(name, "single", (name,), expit(np.array(values)), zeros, zeros)
    for path in args.scores:  # {"p_relevant": {item id: P(relevant)}}, e.g. the cross-encoder
        rows = json.loads(path.read_text())["p_relevant"]
        missing = [item.id for item in items if item.id not in rows]
        if missing:
            sys.exit(f"{path}: {len(missing)} of the 300 pairs are not scored yet")
        p = np.array([rows[i.id] for i in items])
        name = f"{path.stem}:p_relevant"  # the sweep groups judges by "model:" prefix
        judges[name] = Judge(name, "single", (name,), p, zeros, zeros)
    for name, judge in judges.items():
        print(f"{name}: AUROC on all 300 {auroc(y, judge.p_yes):.3f}")
    result = sweep.analyse(judges, y, task="relevance", seed=13, max_escalation=0.15)
    result.update(task="relevance", date="-", items=len(items), engines={"backend": "-"})
    print(sweep.markdown(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(required=True)
    ql = commands.add_parser("query-likelihood", help="score the 300 pairs with an LLM")
    ql.add_argument("model", help="GGUF LLM model key of the tiny profile")
    ql.add_argument("--out", type=Path, required=True)
    ql.set_defaults(run=query_likelihood)
    pool = commands.add_parser("pool-normalised", help="cosines standardised per query")
    pool.add_argument("model", help="embedder model key of the tiny profile")
    pool.set_defaults(run=pool_normalised)
    rep = commands.add_parser("report", help="the sweep's analysis of the probes")
    rep.add_argument("--ql", type=Path, nargs="*", default=[])
    rep.add_argument("--cosines", nargs="*", default=[])
    rep.add_argument("--scores", type=Path, nargs="*", default=[], help="per-item P(relevant)")
    rep.set_defaults(run=report)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
