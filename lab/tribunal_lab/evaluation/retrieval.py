"""Retrieval quality on BEIR SciFact: BM25, dense, hybrid (RRF) and hybrid + rerank.

The corpus goes through the real service code: chunked, embedded (progress
bar) and upserted into a collection under ``data_dir/retrieval-eval``, which
later runs reuse without re-embedding. Every test query is searched in each
mode through :class:`~tribunal.retrieval.KnowledgeBase` (top 100), and
nDCG@10 and Recall@100 are computed with ``ir-measures`` (pytrec_eval).
Reranking, slow with an LLM on CPU, runs on the first ``--rerank-queries``
queries; hybrid is reported on the same subset beside it. Writes JSON and a
markdown table.

    tribunal-lab eval retrieval [--data DATA/scifact] [--rerank-queries 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tribunal.core import jsonl_rows

if TYPE_CHECKING:
    from tribunal.retrieval import KnowledgeBase, SearchMode

from .._paths import data_root

__all__ = ["add_arguments", "run"]

COLLECTION = "beir-scifact"
_MEASURES = ("nDCG@10", "R@100")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root() / "scifact",
        help="folder with corpus.jsonl, beir_queries_test.jsonl, beir_qrels_test.tsv",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/eval/retrieval-scifact.json"),
        help="JSON report path (the markdown table goes beside it, .md)",
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="evaluate only the first N queries"
    )
    parser.add_argument(
        "--rerank-queries",
        type=int,
        default=0,
        help="also evaluate hybrid+rerank on the first N queries (needs the profile's reranker)",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="re-ingest the corpus even if the index exists"
    )
    parser.add_argument(
        "--rerank-backend",
        choices=("transformers", "llamacpp", "openai"),
        default=None,
        help="LLM backend of the reranker (default: the profile's llm_backend)",
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [row.value for row in jsonl_rows(path)]


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            fields = line.rstrip("\n").split("\t")
            if number == 0 and fields[0] == "query-id":
                continue  # BEIR's header
            if len(fields) == 3:
                qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return qrels


def _ingest(kb: KnowledgeBase, corpus_path: Path, *, rebuild: bool) -> tuple[int, float]:
    """Make sure the corpus is indexed; returns (entries, seconds spent ingesting)."""
    from tqdm import tqdm
    from tribunal.kb import deduplicate, read_entries

    settings = kb.settings
    entries, _ = deduplicate(read_entries(corpus_path, max_chars=settings.chunk_size_chars))
    exists = COLLECTION in kb.collection_names()
    if exists and not rebuild and len(kb.collection(COLLECTION)) == len(entries):
        return len(entries), 0.0
    if exists:
        stale = kb.collection(COLLECTION)
        ids = [e.id for e in stale.store.iter_entries()]
        for start in range(0, len(ids), settings.max_entries_per_request):
            kb.delete(COLLECTION, ids[start : start + settings.max_entries_per_request])
    started = time.perf_counter()
    batch = min(250, settings.max_entries_per_request)  # small batches keep the bar moving
    with tqdm(total=len(entries), desc="embedding corpus", unit="doc") as bar:
        for start in range(0, len(entries), batch):
            kb.upsert(COLLECTION, entries[start : start + batch], create=True)
            bar.update(min(batch, len(entries) - start))
    kb.collection(COLLECTION).snapshot()
    return len(entries), time.perf_counter() - started


def _run_mode(
    kb: KnowledgeBase,
    queries: Sequence[tuple[str, str]],
    mode: SearchMode,
    *,
    rerank: bool = False,
) -> tuple[dict[str, list[str]], float]:
    """Ranked doc ids per query id, and seconds per query."""
    from tqdm import tqdm
    from tribunal.retrieval import SearchQuery

    top_k = min(100, kb.settings.max_top_k)
    batch = 1 if rerank else kb.settings.max_searches_per_request
    runs: dict[str, list[str]] = {}
    started = time.perf_counter()
    label = f"{mode.value}{'+rerank' if rerank else ''}"
    with tqdm(total=len(queries), desc=f"searching ({label})", unit="query") as bar:
        for start in range(0, len(queries), batch):
            part = queries[start : start + batch]
            results = kb.search_batch(
                [SearchQuery(COLLECTION, text, top_k, mode, rerank) for _, text in part]
            )
            for (query_id, _), result in zip(part, results, strict=True):
                runs[query_id] = [hit.entry.id for hit in result.hits]
            bar.update(len(part))
    return runs, (time.perf_counter() - started) / max(1, len(queries))


def score_runs(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """nDCG@10 and Recall@100 (ir-measures / pytrec_eval), averaged over the run's queries."""
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in _MEASURES]
    qrel_rows = [
        ir_measures.Qrel(query_id, doc_id, grade)
        for query_id, docs in qrels.items()
        if query_id in runs
        for doc_id, grade in docs.items()
    ]
    # Scores that strictly decrease with rank: the evaluator sees exactly our order.
    run_rows = [
        ir_measures.ScoredDoc(query_id, doc_id, float(len(ranked) - rank))
        for query_id, ranked in runs.items()
        for rank, doc_id in enumerate(ranked)
    ]
    aggregate = ir_measures.calc_aggregate(measures, qrel_rows, run_rows)
    return {str(measure): float(aggregate.get(measure, 0.0)) for measure in measures}


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Retrieval on BEIR SciFact ({report['corpus_documents']} documents, "
        f"embedder {report['embedder']}, index {report['index_type']})",
        "",
        "| retriever | queries | nDCG@10 | Recall@100 | ms/query |",
        "|---|---|---|---|---|",
    ]
    for row in report["results"]:
        lines.append(
            f"| {row['retriever']} | {row['queries']} | {row['nDCG@10']:.4f} | "
            f"{row['R@100']:.4f} | {row['ms_per_query']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.embedding import load_profile_embedder
    from tribunal.retrieval import KnowledgeBase, SearchMode

    data: Path = args.data
    for name in ("corpus.jsonl", "beir_queries_test.jsonl", "beir_qrels_test.tsv"):
        if not (data / name).is_file():
            print(f"tribunal: error: {data / name} not found; pass --data DIR", file=sys.stderr)
            return 2
    settings = load_settings(args.profile)
    reranker = None
    if args.rerank_queries:
        from tribunal.retrieval import load_profile_reranker

        reranker = load_profile_reranker(settings, backend=args.rerank_backend)
    kb = KnowledgeBase(
        settings.data_dir / "retrieval-eval",
        load_profile_embedder(settings),
        settings.retrieval,
        reranker,
    )
    try:
        documents, ingest_seconds = _ingest(kb, data / "corpus.jsonl", rebuild=args.rebuild)
        qrels = _read_qrels(data / "beir_qrels_test.tsv")
        queries = [
            (str(q["_id"]), str(q["text"]))
            for q in _read_jsonl(data / "beir_queries_test.jsonl")
            if str(q["_id"]) in qrels
        ][: args.queries]
        results: list[dict[str, Any]] = []
        for label, mode in (
            ("BM25", SearchMode.SPARSE),
            ("dense", SearchMode.DENSE),
            ("hybrid (RRF k=60)", SearchMode.HYBRID),
        ):
            runs, seconds = _run_mode(kb, queries, mode)
            results.append(
                {"retriever": label, "queries": len(runs), "ms_per_query": seconds * 1000}
                | score_runs(runs, qrels)
            )
        if reranker is not None:
            subset = queries[: args.rerank_queries]
            for label, rerank in (("hybrid (subset)", False), ("hybrid + rerank (subset)", True)):
                runs, seconds = _run_mode(kb, subset, SearchMode.HYBRID, rerank=rerank)
                results.append(
                    {"retriever": label, "queries": len(runs), "ms_per_query": seconds * 1000}
                    | score_runs(runs, qrels)
                )
        stats = kb.stats(COLLECTION)[0]
        report: dict[str, Any] = {
            "dataset": "BEIR SciFact (test)",
            "data": str(data),
            "profile": settings.profile,
            "embedder": stats.embedder,
            "index_type": stats.index_type,
            "corpus_documents": documents,
            "indexed_units": stats.chunks,
            "ingest_seconds": ingest_seconds,
            "rerank_head": settings.retrieval.rerank_head if reranker is not None else None,
            "reranker": reranker.name if reranker is not None else None,
            "results": results,
        }
    finally:
        kb.close()
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    table = _markdown(report)
    out.with_suffix(".md").write_text(table)
    print(table)
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0
