"""``tribunal kb ingest|stats|search|delete``: knowledge-base collections on local disk.

These open the collections in ``data_dir/retrieval`` directly (no server
needed); a running ``tribunal serve retrieval`` on the same folder sees the
changes at its next search.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..retrieval import KnowledgeBase

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("kb", help="ingest, inspect and search knowledge-base collections")
    actions = parser.add_subparsers(dest="kb_command", required=True, metavar="ACTION")

    ingest = actions.add_parser("ingest", help="chunk, embed and upsert a JSONL file")
    ingest.add_argument("path", type=Path, help="JSONL: COVID-FAQ, {id,text,title} or entries")
    ingest.add_argument("--collection", required=True, help="collection name (created if needed)")
    ingest.add_argument(
        "--format", choices=("auto", "faq", "corpus", "entries"), default="auto", dest="fmt"
    )
    ingest.add_argument("--limit", type=int, default=None, help="only the first N records")
    ingest.set_defaults(func=_ingest)

    stats = actions.add_parser("stats", help="sizes and index types of the collections")
    stats.add_argument("--collection", default="", help="one collection (default: all)")
    stats.set_defaults(func=_stats)

    search = actions.add_parser("search", help="search a collection")
    search.add_argument("collection")
    search.add_argument("query")
    search.add_argument("--top-k", type=int, default=5)
    search.add_argument("--mode", choices=("hybrid", "dense", "sparse"), default="hybrid")
    search.add_argument("--json", action="store_true", help="print hits as JSON lines")
    search.set_defaults(func=_search)

    delete = actions.add_parser("delete", help="delete entries by id")
    delete.add_argument("collection")
    delete.add_argument("ids", nargs="+")
    delete.set_defaults(func=_delete)

    for child in (ingest, stats, search, delete):
        child.add_argument("--profile", default=None, help="profile name or YAML path")


def _open(args: argparse.Namespace) -> KnowledgeBase:
    from ..core import load_settings
    from ..retrieval import KnowledgeBase

    return KnowledgeBase.from_settings(load_settings(args.profile))


def _ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..retrieval import deduplicate, read_entries

    kb = _open(args)
    try:
        settings = kb.settings
        entries, repeated = deduplicate(
            read_entries(
                args.path,
                record_format=args.fmt,
                max_chars=settings.chunk_max_chars,
                limit=args.limit,
            )
        )
        if repeated:
            print(f"{len(repeated)} id(s) appear more than once; the last record of each is kept")
        batch = min(250, settings.upsert_max_entries)
        total = 0
        with tqdm(total=len(entries), desc=f"ingesting {args.collection}", unit="entry") as bar:
            for start in range(0, len(entries), batch):
                part = entries[start : start + batch]
                total = kb.upsert(args.collection, part, create=True).total_entries
                bar.update(len(part))
        chunks = sum(len(e.chunks) for e in entries)
        print(
            f"upserted {len(entries)} entries ({chunks} chunks) into {args.collection!r}; "
            f"it now holds {total}"
        )
    finally:
        kb.close()
    return 0


def _stats(args: argparse.Namespace) -> int:
    kb = _open(args)
    try:
        for s in kb.stats(args.collection):
            print(
                f"{s.name}: {s.entries} entries, {s.chunks} indexed units, {s.index_type} "
                f"(dim {s.dimension}, {s.embedder}{', GPU' if s.gpu else ''})"
            )
        if not kb.collection_names():
            print(f"no collections in {kb.root}")
    finally:
        kb.close()
    return 0


def _search(args: argparse.Namespace) -> int:
    from ..retrieval import SearchMode, SearchQuery

    kb = _open(args)
    try:
        query = SearchQuery(args.collection, args.query, args.top_k, SearchMode(args.mode))
        result = kb.search(query)
        for hit in result.hits:
            if args.json:
                print(
                    json.dumps(
                        {
                            "rank": hit.rank,
                            "id": hit.entry.id,
                            "score": hit.score,
                            "matched": hit.matched_unit_id,
                            "dense_rank": hit.dense_rank,
                            "sparse_rank": hit.sparse_rank,
                            "question": hit.entry.question,
                            "answer": hit.entry.answer,
                        },
                        ensure_ascii=False,
                    )
                )
            else:
                title = hit.entry.question or hit.entry.metadata.get("title", "")
                print(f"{hit.rank:>3}. {hit.score:.4f}  {hit.entry.id}  {title[:90]}")
    finally:
        kb.close()
    return 0


def _delete(args: argparse.Namespace) -> int:
    kb = _open(args)
    try:
        result = kb.delete(args.collection, args.ids)
        print(f"deleted {result.deleted}; not found: {', '.join(result.missing_ids) or 'none'}")
    finally:
        kb.close()
    return 0
