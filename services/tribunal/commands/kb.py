"""``tribunal kb ingest|verify|stats|search|sign|delete|history|phrasings|reembed``: collections
on disk.

These open the collections in ``data_dir/retrieval`` directly (no server
needed); a running ``tribunal serve retrieval`` on the same folder sees the
changes at its next search. Ingestion verifies every entry once (do its
supporting chunks entail its answer?) with the checker ``retrieval.verifier``
names; ``verify`` re-checks entries after a checker change and lists the ones
that cannot be served, with the reason. ``ingest`` and ``delete`` record every change
in the KB change audit (actor ``cli:<user>``), as the service does for Upsert and
Delete; ``history`` prints that trail. ``phrasings list|approve|reject|export`` handles
the queries people linked to the entry that answers them on the review page: an approved
link becomes a phrasing of that entry (an audited change) and a line of labelled traffic.
The commands that change a collection (``ingest``,
``verify``, ``delete``, ``sign``) sign what they change with the KB writer's private
key (``retrieval.signing_key_file``, made at first use): the gateway serves only signed
entries.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ._actors import cli_actor
from ._kb_reembed import register_reembed

if TYPE_CHECKING:
    from ..core import Settings
    from ..kb import KbEntry
    from ..retrieval import AuditedWrites, KbSigner, KnowledgeBase, PhrasingLinks

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

    sign = actions.add_parser(
        "sign",
        help="sign every entry's served record and the collection version with the KB "
        "writer's key (existing KBs; after a key rotation)",
    )
    sign.add_argument("collections", nargs="*", help="collections to sign (default: all)")
    sign.add_argument(
        "--new-key",
        action="store_true",
        help="rotate: make a new signing key first (the old public key stays trusted until "
        "you remove it from gateway.kb_trusted_keys)",
    )
    sign.set_defaults(func=_sign)

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

    for child in (ingest, verify, stats, search, sign, delete, history):
        child.add_argument("--profile", default=None, help="profile name or YAML path")
    _register_phrasings(actions)
    register_reembed(actions)


def _register_phrasings(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    phrasings = actions.add_parser(
        "phrasings",
        help="queries linked on the review page to the entry that answers them: approve one "
        "as a new phrasing of the entry, or reject it; export the approved ones as traffic",
    )
    verbs = phrasings.add_subparsers(dest="phrasings_command", required=True, metavar="ACTION")
    listing = verbs.add_parser("list", help="the links, oldest first")
    listing.add_argument("--collection", default=None, help="one collection (default: all)")
    listing.add_argument(
        "--status", choices=("pending", "approved", "rejected", "all"), default="pending"
    )
    listing.add_argument("--limit", type=int, default=1000)
    listing.add_argument("--json", action="store_true", help="print links as JSON lines")
    listing.set_defaults(func=_phrasings_list)
    approve = verbs.add_parser(
        "approve", help="add each link's query to its entry's phrasings (an audited KB change)"
    )
    approve.add_argument("links", nargs="+", help="link ids (`kb phrasings list` shows them)")
    approve.add_argument("--note", default="", help="a note kept with the decision")
    approve.add_argument(
        "--skip-match-vectors",
        action="store_true",
        help="do not embed the new phrasings for the feature matcher now",
    )
    approve.set_defaults(func=_phrasings_approve)
    reject = verbs.add_parser("reject", help="refuse links (the KB is not changed)")
    reject.add_argument("links", nargs="+", help="link ids")
    reject.add_argument("--reason", required=True, help="why the query is not that entry's")
    reject.set_defaults(func=_phrasings_reject)
    export = verbs.add_parser(
        "export",
        help="approved links as labelled traffic (JSONL: query, collection, answers) for "
        "tribunal calibrate --traffic and tribunal tune --traffic",
    )
    export.add_argument("--collection", default=None, help="one collection (default: all)")
    export.add_argument("-o", "--output", type=Path, required=True, help="JSONL file to write")
    export.set_defaults(func=_phrasings_export)
    for child in (listing, approve, reject, export):
        child.add_argument("--profile", default=None, help="profile name or YAML path")


def _open(args: argparse.Namespace, *, writer: bool = False) -> KnowledgeBase:
    """The local collections; ``writer``: with the KB writer's signer, so every change
    is signed (the key is made at first use)."""
    from ..core import load_settings
    from ..retrieval import KnowledgeBase

    settings = load_settings(args.profile)
    signer = _signer(settings, rotate=getattr(args, "new_key", False)) if writer else None
    return KnowledgeBase.from_settings(settings, signer=signer)


def _signer(settings: Settings, *, rotate: bool = False) -> KbSigner:
    """The KB writer's signer; says where a new key was made."""
    import sys

    from ..retrieval import key_paths, writer_signer

    signer, created = writer_signer(settings, rotate=rotate)
    if created:
        private, trusted = key_paths(settings)
        print(
            f"created the KB signing key {signer.key_id}: private key {private} (0600, keep "
            f"it with the KB's writers only), public key in {trusted} (the gateway's "
            "gateway.kb_trusted_keys)",
            file=sys.stderr,
        )
    return signer


def _audited(args: argparse.Namespace, kb: KnowledgeBase) -> AuditedWrites:
    """``kb``'s writes, recorded in the KB change audit under the local user's name."""
    from ..core import load_settings
    from ..retrieval import AuditedWrites
    from ..retrieval.servicer import open_change_log

    return AuditedWrites(kb, open_change_log(load_settings(args.profile)))


def _ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..core import load_settings
    from ..retrieval import read_entries_checked
    from ..retrieval._validation import check_collection_name

    # Every line is checked before the KB is opened: a bad file writes nothing.
    check_collection_name(args.collection)
    profile = load_settings(args.profile)
    entries, repeated = read_entries_checked(
        args.path,
        record_format=args.fmt,
        settings=profile.retrieval,
        max_id_chars=profile.server.max_id_chars,
        limit=args.limit,
    )
    kb = _open(args, writer=True)
    writes = _audited(args, kb)
    try:
        settings = kb.settings
        if repeated:
            print(f"{len(repeated)} id(s) appear more than once; the last record of each is kept")
        batch = min(250, settings.max_entries_per_request)
        total, cached = 0, 0
        counts: dict[str, int] = {}
        with tqdm(total=len(entries), desc=f"ingesting {args.collection}", unit="entry") as bar:
            for start in range(0, len(entries), batch):
                part = entries[start : start + batch]
                result = writes.upsert(
                    cli_actor(),
                    args.collection,
                    part,
                    create=True,
                    self_evidenced=args.self_evidenced,
                )
                total, cached = result.total_entries, cached + result.cached
                for verdict, count in result.verdicts.items():
                    counts[verdict] = counts.get(verdict, 0) + count
                bar.update(len(part))
        chunks = sum(len(e.chunks) for e in entries)
        phrasings = sum(len(e.questions) for e in entries)
        extra = f", {phrasings} more phrasings" if phrasings else ""
        print(
            f"upserted {len(entries)} entries ({chunks} chunks{extra}) into "
            f"{args.collection!r}; it now holds {total}"
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

            _match_vectors(load_settings(args.profile), args.collection, entries)
    finally:
        kb.close()
    return 0


def _match_vectors(settings: Settings, collection: str, entries: list[KbEntry]) -> None:
    """The feature matcher's vectors of the entries, stored now rather than at their first
    query (``data_dir/vectors``; a tuned collection's, its tuned model's)."""
    from ..ensemble import precompute_entry_vectors

    new = precompute_entry_vectors(settings, entries, collection=collection, progress=True)
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

    kb = _open(args, writer=True)
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
                            "matched_question": _matched_question(hit.entry, hit.matched_unit_id),
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
                matched = _matched_question(hit.entry, hit.matched_unit_id)
                if matched and matched != hit.entry.question:
                    print(f"       matched phrasing: {matched[:90]}")
    finally:
        kb.close()
    return 0


def _matched_question(entry: KbEntry, unit_id: str) -> str | None:
    """The phrasing of the question that matched best (None: a chunk or the answer did)."""
    from ..kb import phrasing_index

    index = phrasing_index(unit_id)
    phrasings = entry.phrasings()
    return phrasings[index] if index is not None and index < len(phrasings) else None


def _sign(args: argparse.Namespace) -> int:
    kb = _open(args, writer=True)
    try:
        assert kb.signer is not None
        names = args.collections or kb.collection_names()
        for name in names:
            result = kb.sign(name, kb.signer)
            print(
                f"{name}: signed {result.stored} record(s) with key {kb.signer.key_id}"
                + (f"; {result.stale} changed meanwhile (run again)" if result.stale else "")
            )
        if not names:
            print(f"no collections in {kb.root}")
    finally:
        kb.close()
    return 0


def _delete(args: argparse.Namespace) -> int:
    kb = _open(args, writer=True)
    try:
        result = _audited(args, kb).delete(cli_actor(), args.collection, args.ids)
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
        elif change.op == "model":
            what = f"model  {change.detail.get('before')} -> {change.detail.get('model')}"
        else:
            before = change.before_sha256[:12] or "-"
            after = change.after_sha256[:12] or "-"
            what = f"{change.op:<6} {change.entry_id}  {before} -> {after}"
        print(f"v{change.kb_version:<6} {when}  {change.actor:<20} {what}")
    if not changes:
        which = f" entry {args.entry!r} of" if args.entry else ""
        print(f"no recorded changes of{which} collection {args.collection!r}")
    return 0


# -- tribunal kb phrasings ----------------------------------------------------------------


def _links(settings: Settings) -> PhrasingLinks:
    from ..core.storage import Database
    from ..retrieval import PhrasingLinks

    db = Database(settings.database_url)
    db.create_schema()
    return PhrasingLinks(db, max_query_chars=settings.retrieval.max_question_chars)


def _phrasings_list(args: argparse.Namespace) -> int:
    from ..core import InvalidArgumentError, load_settings

    if args.limit < 1:
        raise InvalidArgumentError("--limit must be >= 1", field="limit")
    status = None if args.status == "all" else args.status
    links = _links(load_settings(args.profile)).links(
        collection=args.collection, status=status, limit=args.limit
    )
    for link in links:
        if args.json:
            print(json.dumps(link.to_json(), ensure_ascii=False))
            continue
        decided = f"  {link.status} by {link.decided_by}" if link.status != "pending" else ""
        print(
            f"{link.id}  {link.collection}/{link.entry_id}  {link.query[:80]!r}  "
            f"(by {link.proposed_by}{', decision ' + link.audit_id if link.audit_id else ''})"
            f"{decided}"
        )
    if not links and not args.json:
        print(f"no {'' if status is None else status + ' '}phrasing links")
    return 0


def _phrasings_approve(args: argparse.Namespace) -> int:
    from ..core import load_settings

    settings = load_settings(args.profile)
    links = _links(settings)
    # An approved phrasing changes the entry: the writer signs it, or the gateway would
    # no longer serve the entry.
    kb = _open(args, writer=True)
    try:
        writes = _audited(args, kb)
        approved = []
        for link_id in args.links:
            link = links.approve(cli_actor(), link_id, writes, note=args.note)
            approved.append(link)
            print(
                f"approved {link.id}: {link.query[:80]!r} is a phrasing of "
                f"{link.collection}/{link.entry_id} (KB version {link.kb_version})"
            )
        if not args.skip_match_vectors:
            for name in sorted({link.collection for link in approved}):
                ids = [link.entry_id for link in approved if link.collection == name]
                _match_vectors(settings, name, list(kb.collection(name).entries(ids).values()))
    finally:
        kb.close()
    return 0


def _phrasings_reject(args: argparse.Namespace) -> int:
    from ..core import load_settings

    links = _links(load_settings(args.profile))
    for link_id in args.links:
        link = links.reject(cli_actor(), link_id, args.reason)
        print(f"rejected {link.id}: {link.query[:80]!r} is not {link.entry_id}'s")
    return 0


def _phrasings_export(args: argparse.Namespace) -> int:
    from ..core import load_settings

    rows = _links(load_settings(args.profile)).traffic(collection=args.collection)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as sink:
        for row in rows:
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} labelled queries to {args.output}")
    return 0
