"""``tribunal kb ingest|verify|stats|search|delete|history``: collections on local disk.

These open the collections in ``data_dir/retrieval`` directly (no server
needed); a running ``tribunal serve retrieval`` on the same folder sees the
changes at its next search. Ingestion verifies every entry once (do its
supporting chunks entail its answer?) with the checker ``retrieval.verifier``
names; ``verify`` re-checks entries after a checker change and lists the ones
that cannot be served, with the reason. ``ingest`` and ``delete`` record every change
in the KB change audit (actor ``cli:<user>``), as the service does for Upsert and
Delete; ``history`` prints that trail.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core import Settings
    from ..kb import KbEntry
    from ..retrieval import AuditedWrites, KnowledgeBase

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
    ingest.add_argument(
        "--skip-match-vectors",
        action="store_true",
        help="do not embed the entries for the feature matcher now (each is then embedded "
        "at the first query that retrieves it)",
    )
    ingest.add_argument(
        "--self-evidenced",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set the collection's policy: serve entries without supporting documents (an "
        "FAQ whose answer is its own source); default: keep the collection's (off when new)",
    )
    ingest.set_defaults(func=_ingest)

    verify = actions.add_parser(
        "verify",
        help="verify entries again (after a checker change) and list those that cannot be served",
    )
    verify.add_argument("collection")
    verify.add_argument(
        "--all", action="store_true", dest="recheck_all", help="re-check every entry"
    )
    verify.add_argument("--json", action="store_true", help="print every entry as JSON lines")
    verify.set_defaults(func=_verify)

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

    history = actions.add_parser(
        "history", help="who changed the collection's entries, when, from which version to which"
    )
    history.add_argument("collection")
    history.add_argument("--entry", default=None, help="only this entry id")
    history.add_argument("--limit", type=int, default=1000, help="at most N changes (oldest first)")
    history.add_argument("--json", action="store_true", help="print changes as JSON lines")
    history.set_defaults(func=_history)

    for child in (ingest, verify, stats, search, delete, history):
        child.add_argument("--profile", default=None, help="profile name or YAML path")


def _open(args: argparse.Namespace) -> KnowledgeBase:
    from ..core import load_settings
    from ..retrieval import KnowledgeBase

    return KnowledgeBase.from_settings(load_settings(args.profile))


def _audited(args: argparse.Namespace, kb: KnowledgeBase) -> AuditedWrites:
    """``kb``'s writes, recorded in the KB change audit under the local user's name."""
    from ..core import load_settings
    from ..retrieval import AuditedWrites
    from ..retrieval.servicer import open_change_log

    return AuditedWrites(kb, open_change_log(load_settings(args.profile)))


def _actor() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name for this uid (a container)
        import os

        return f"cli:uid-{os.getuid()}"


def _ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..kb import deduplicate, read_entries

    kb = _open(args)
    writes = _audited(args, kb)
    try:
        settings = kb.settings
        entries, repeated = deduplicate(
            read_entries(
                args.path,
                record_format=args.fmt,
                max_chars=settings.chunk_size_chars,
                limit=args.limit,
            )
        )
        if repeated:
            print(f"{len(repeated)} id(s) appear more than once; the last record of each is kept")
        batch = min(250, settings.max_entries_per_request)
        total, cached = 0, 0
        counts: dict[str, int] = {}
        with tqdm(total=len(entries), desc=f"ingesting {args.collection}", unit="entry") as bar:
            for start in range(0, len(entries), batch):
                part = entries[start : start + batch]
                result = writes.upsert(
                    _actor(), args.collection, part, create=True, self_evidenced=args.self_evidenced
                )
                total, cached = result.total_entries, cached + result.cached
                for verdict, count in result.verdicts.items():
                    counts[verdict] = counts.get(verdict, 0) + count
                bar.update(len(part))
        chunks = sum(len(e.chunks) for e in entries)
        print(
            f"upserted {len(entries)} entries ({chunks} chunks) into {args.collection!r}; "
            f"it now holds {total}"
        )
        policy = kb.collection(args.collection).self_evidenced
        print(_summary(counts, policy, cached))
        if (
            counts.get("failed")
            or counts.get("unverified")
            or (counts.get("no_evidence") and not policy)
        ):
            print(f"not served until fixed: `tribunal kb verify {args.collection}` lists why")
        if not args.skip_match_vectors:
            from ..core import load_settings

            _match_vectors(load_settings(args.profile), entries)
    finally:
        kb.close()
    return 0


def _match_vectors(settings: Settings, entries: list[KbEntry]) -> None:
    """The feature matcher's vectors of the entries, stored now rather than at their first
    query (``data_dir/vectors``)."""
    from ..ensemble import precompute_entry_vectors

    new = precompute_entry_vectors(settings, entries, progress=True)
    if settings.ensemble.matcher == "features":
        print(f"match vectors: {new} new texts embedded into {settings.data_dir / 'vectors'}")


def _summary(counts: dict[str, int], self_evidenced: bool, cached: int) -> str:
    """One line: how many entries are verified, failed, unverified, self-evidenced."""
    no_evidence = counts.get("no_evidence", 0)
    parts = [
        f"verified {counts.get('verified', 0)}",
        f"failed {counts.get('failed', 0)}",
        f"unverified {counts.get('unverified', 0)}",
        f"self-evidenced {no_evidence}"
        if self_evidenced
        else f"without evidence {no_evidence} (not served: the collection is not self_evidenced)",
    ]
    return "verification: " + ", ".join(parts) + f"; {cached} verdict(s) from the cache"


def _verify(args: argparse.Namespace) -> int:
    from ..retrieval import SERVABLE

    kb = _open(args)
    try:
        report = kb.verify(args.collection, recheck_all=args.recheck_all)
        refused = [(i, v) for i, v in report.entries if v.verdict not in SERVABLE]
        if args.json:
            for entry_id, verification in report.entries:
                print(json.dumps({"id": entry_id, **verification.to_record()}, ensure_ascii=False))
        else:
            for entry_id, verification in refused:
                print(f"{entry_id}  {verification.verdict.value.upper()}  {verification.reason}")
        counts = report.counts()
        print(
            f"{args.collection}: {len(report.entries)} entries under checker "
            f"{report.checker_version}; re-checked {report.rechecked} "
            f"({report.cached} from the cache); "
            + ", ".join(f"{verdict} {n}" for verdict, n in sorted(counts.items()))
            + f"; {len(refused)} cannot be served"
        )
    finally:
        kb.close()
    return 1 if refused else 0


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
        result = _audited(args, kb).delete(_actor(), args.collection, args.ids)
        print(f"deleted {result.deleted}; not found: {', '.join(result.missing_ids) or 'none'}")
    finally:
        kb.close()
    return 0


def _history(args: argparse.Namespace) -> int:
    from ..core import InvalidArgumentError, load_settings
    from ..retrieval.servicer import open_change_log

    if args.limit < 1:
        raise InvalidArgumentError("--limit must be >= 1", field="limit")
    changes = open_change_log(load_settings(args.profile)).history(
        args.collection, entry_id=args.entry, limit=args.limit
    )
    for change in changes:
        if args.json:
            print(json.dumps(change.to_json(), ensure_ascii=False))
            continue
        when = change.created_at.isoformat(timespec="seconds") if change.created_at else "?"
        if change.op == "policy":
            what = f"policy self_evidenced={change.detail.get('self_evidenced')}"
        else:
            before = change.before_sha256[:12] or "-"
            after = change.after_sha256[:12] or "-"
            what = f"{change.op:<6} {change.entry_id}  {before} -> {after}"
        print(f"v{change.kb_version:<6} {when}  {change.actor:<20} {what}")
    if not changes:
        which = f" entry {args.entry!r} of" if args.entry else ""
        print(f"no recorded changes of{which} collection {args.collection!r}")
    return 0
