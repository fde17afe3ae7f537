"""Several phrasings per entry vs one entry per phrasing, side by side on BANKING77.

Two KBs of the same 77 intents, built from the same five seeded training queries per
intent: **phrased** — 77 entries, the first query as ``question`` and the other four as
``questions``; **separate** — 385 entries, one per query. BANKING77 has no answers, so
every entry of an intent carries the same answer text, made from the intent's name
("Card arrival."). A seeded sample of test queries (``--per-intent`` of each intent) is
searched in both with the tiny profile's hybrid retrieval (MiniLM + BM25, RRF), and the
top ``--candidates`` hits are matched by the shipped feature matcher (MPNet features).

Reported per KB: top-1 and top-5 right-intent rate (an entry is right when its intent is
the query's), and the AUROC of the top hit's P(match) margin for right vs wrong, with
the margin taken two ways: against every other candidate (how the gateway computed it
before answers were grouped), and against candidates with *another answer* (how it does
now). A top hit with no rival answer among the candidates gets its P(match) as margin
(the rival's P(match) taken as 0). Side by side in one run; nothing is fitted here.

    nice -n 10 .venv/bin/python bench/phrasings.py [--per-intent 10] [--candidates 5]
        [--out .build/bench/phrasings.json]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score
from tribunal.core import load_settings
from tribunal.ensemble import FeatureMatcher, MatchRequestItem, precompute_entry_vectors
from tribunal.gateway._candidates import candidate_signals
from tribunal.kb import KbEntry, entry_to_proto
from tribunal.retrieval import KnowledgeBase, SearchQuery
from tribunal.retrieval._types import SearchResult
from tribunal.v1 import ensemble_pb2, retrieval_pb2
from tribunal_lab._paths import data_root

PHRASINGS_PER_INTENT = 5


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _answer(intent: str) -> str:
    return intent.replace("_", " ").capitalize() + "."


def build_kbs(train: list[dict[str, str]], seed: int) -> tuple[list[KbEntry], list[KbEntry]]:
    """The phrased KB (77 entries) and the separate one (385), from the same queries."""
    by_intent: dict[str, list[str]] = defaultdict(list)
    for row in train:
        by_intent[row["intent"]].append(row["query"])
    rng = random.Random(seed)
    phrased, separate = [], []
    for intent in sorted(by_intent):
        chosen = rng.sample(sorted(set(by_intent[intent])), PHRASINGS_PER_INTENT)
        phrased.append(KbEntry(intent, chosen[0], _answer(intent), questions=tuple(chosen[1:])))
        separate += [KbEntry(f"{intent}#{i}", q, _answer(intent)) for i, q in enumerate(chosen)]
    return phrased, separate


def _intent(entry_id: str) -> str:
    return entry_id.split("#", maxsplit=1)[0]


def _margins(result: SearchResult, p_match: list[float]) -> tuple[float, float]:
    """The top hit's margin against every other candidate, and against other answers
    (the gateway's own computation); no rival: its P(match)."""
    hits = [
        retrieval_pb2.SearchHit(entry=entry_to_proto(h.entry), score=h.score, rank=h.rank)
        for h in result.hits
    ]
    signals = candidate_signals(hits, [ensemble_pb2.MatchResponse(p_match=p) for p in p_match])
    top = signals[0]
    by_answer = (
        top.ensemble_p_match_margin if top.HasField("ensemble_p_match_margin") else p_match[0]
    )
    by_candidate = p_match[0] - max(p_match[1:]) if len(p_match) > 1 else p_match[0]
    return by_candidate, by_answer


def measure(
    kb: KnowledgeBase,
    matcher: FeatureMatcher,
    collection: str,
    queries: list[dict[str, str]],
    candidates: int,
) -> dict[str, Any]:
    started = time.perf_counter()
    top1 = top5 = 0
    right: list[int] = []
    by_candidate: list[float] = []
    by_answer: list[float] = []
    no_rival = 0
    step = 32  # searches per batch (one embedder pass), and their candidates matched together
    for start in range(0, len(queries), step):
        part = queries[start : start + step]
        results = kb.search_batch(
            [SearchQuery(collection, row["query"], top_k=max(5, candidates)) for row in part]
        )
        heads = [result.hits[:candidates] for result in results]
        items = [
            MatchRequestItem(row["query"], h.entry)
            for row, head in zip(part, heads, strict=True)
            for h in head
        ]
        p_all = [m.p_match for m in matcher.match(items)]
        offset = 0
        for row, result, head in zip(part, results, heads, strict=True):
            p_match, offset = p_all[offset : offset + len(head)], offset + len(head)
            intents = [_intent(h.entry.id) for h in result.hits]
            top1 += intents[0] == row["intent"]
            top5 += row["intent"] in intents[:5]
            candidate_margin, answer_margin = _margins(SearchResult(hits=tuple(head)), p_match)
            no_rival += len({h.entry.answer for h in head}) == 1
            right.append(int(intents[0] == row["intent"]))
            by_candidate.append(candidate_margin)
            by_answer.append(answer_margin)
        done = start + len(part)
        rate = done / (time.perf_counter() - started)
        print(
            f"  {collection}: {done}/{len(queries)} ({rate:.1f} q/s, "
            f"ETA {(len(queries) - done) / rate:.0f} s)",
            flush=True,
        )
    n = len(queries)
    return {
        "entries": kb.stats(collection)[0].entries,
        "queries": n,
        "top1": top1 / n,
        "top5": top5 / n,
        "margin_auroc_vs_candidates": float(roc_auc_score(right, by_candidate)),
        "margin_auroc_vs_answers": float(roc_auc_score(right, by_answer)),
        "top_hit_without_rival_answer": no_rival,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="BANKING77 folder (default: the lab's data/banking77)",
    )
    parser.add_argument("--per-intent", type=int, default=10, help="test queries per intent")
    parser.add_argument("--candidates", type=int, default=5, help="hits matched per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/phrasings.json"))
    args = parser.parse_args()

    data = args.data or data_root() / "banking77"
    phrased, separate = build_kbs(_rows(data / "train.jsonl"), args.seed)
    test = _rows(data / "test.jsonl")
    by_intent: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in test:
        by_intent[row["intent"]].append(row)
    rng = random.Random(args.seed)
    sample = [
        row
        for intent in sorted(by_intent)
        for row in rng.sample(by_intent[intent], min(args.per_intent, len(by_intent[intent])))
    ]
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(
            "tiny",
            data_dir=data_dir,
            ensemble={"matcher": "features", "max_items_per_request": 1000},
            retrieval={"verifier": "none"},
        )
        kb = KnowledgeBase.from_settings(settings, checker=None)
        print("ingesting both KBs (MiniLM) ...", flush=True)
        kb.upsert("phrased", phrased, create=True)
        kb.upsert("separate", separate, create=True)
        matcher = FeatureMatcher.from_settings(settings)
        print("embedding the entries for the feature matcher (MPNet) ...", flush=True)
        precompute_entry_vectors(settings, [*phrased, *separate], progress=True)
        results = {
            "phrased": measure(kb, matcher, "phrased", sample, args.candidates),
            "separate": measure(kb, matcher, "separate", sample, args.candidates),
        }
        kb.close()
    report = {
        "seed": args.seed,
        "per_intent": args.per_intent,
        "candidates": args.candidates,
        "matcher": matcher.artifact.version,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print("| KB | entries | top-1 | top-5 | margin AUROC vs other candidates | vs other answers |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['entries']} | {r['top1']:.3f} | {r['top5']:.3f} | "
            f"{r['margin_auroc_vs_candidates']:.3f} | {r['margin_auroc_vs_answers']:.3f} |"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
