"""``tribunal review serve|stats|export|add-annotator|remove-annotator|annotators``.

Humans label the escalated items. ``add-annotator NAME`` registers an annotator and
prints the key they sign in with (the store keeps its sha256); ``remove-annotator``
revokes it. ``serve`` runs the review page (http://127.0.0.1:8765 by default;
loopback only unless ``--host`` says otherwise, and then only for the host names
``--allowed-host`` lists). ``stats`` prints queue progress and each annotator's
attention-check accuracy; ``export`` writes the votes as crowd-kit rows (task,
worker, label) for ``tribunal label aggregate``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, load_settings
from ..core.storage import Database

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("review", help="human review of escalated items (web page)")
    # The store options go with every action: `tribunal review serve --job dl19`.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", default=None, help="profile name or YAML path")
    common.add_argument("--database-url", default=None, help="default: settings.database_url")
    common.add_argument("--job", default=None, help="only the escalations of this label job")
    common.add_argument(
        "--votes-per-item", type=int, default=3, help="distinct annotators per item (default 3)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    serve = actions.add_parser("serve", parents=[common], help="run the review web page")
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name annotators open the page under (repeatable); requests for other "
        "names get 403. Loopback names are allowed when --host is a loopback address",
    )
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--attention", type=Path, default=None, help="JSONL of attention checks (known answers)"
    )
    serve.add_argument(
        "--attention-rate",
        type=float,
        default=0.2,
        help="share of served items that are attention checks (default 0.2: 1 in 5)",
    )
    serve.add_argument("--seed", type=int, default=0, help="seeds where attention checks fall")
    serve.set_defaults(func=_serve)

    stats = actions.add_parser(
        "stats", parents=[common], help="queue progress and attention accuracy (JSON)"
    )
    stats.set_defaults(func=_stats)

    export = actions.add_parser(
        "export", parents=[common], help="votes as JSONL rows: task, worker, label"
    )
    export.add_argument("--out", type=Path, required=True, help="JSONL file; '-' for stdout")
    export.add_argument(
        "--include-attention", action="store_true", help="also the attention-check votes"
    )
    export.add_argument(
        "--min-attention-accuracy",
        type=float,
        default=None,
        help="drop annotators below this attention accuracy (DREAM: 1.0 = pass all checks)",
    )
    export.set_defaults(func=_export)

    add = actions.add_parser(
        "add-annotator", parents=[common], help="register an annotator; prints their sign-in key"
    )
    add.add_argument("name", help="the name their votes are recorded under")
    add.set_defaults(func=_add_annotator)
    remove = actions.add_parser(
        "remove-annotator", parents=[common], help="revoke an annotator's key (votes stay)"
    )
    remove.add_argument("name")
    remove.set_defaults(func=_remove_annotator)
    listing = actions.add_parser("annotators", parents=[common], help="the annotators (JSON)")
    listing.set_defaults(func=_annotators)


def _database(args: argparse.Namespace) -> Database:
    url = args.database_url or load_settings(args.profile).database_url
    return Database(url)


def _serve(args: argparse.Namespace) -> int:
    # Imported here: the web stack (starlette, uvicorn) loads only for this command.
    from ..jobs import AnnotatorRegistry, ReviewQueue, debate_rounds, load_attention, review_server

    attention = load_attention(args.attention) if args.attention else []
    bare = sum(1 for item in attention if not debate_rounds(item.history))
    if bare:
        # Real items always show a debate; a check without one is easy to spot.
        print(
            f"warning: {bare} of {len(attention)} attention checks have no debate history "
            "and will stand out; add a 'history' (DREAM pairs each check with two arguments)",
            file=sys.stderr,
        )
    queue = ReviewQueue(
        _database(args),
        votes_per_item=args.votes_per_item,
        attention=attention,
        attention_rate=args.attention_rate if attention else 0.0,
        seed=args.seed,
        job=args.job,
        on_vote=_live_audit_hook(args, _database(args)),
    )
    annotators = AnnotatorRegistry(queue.db)
    if not any(not entry["revoked"] for entry in annotators.names()):
        print(
            "warning: no annotator can sign in yet: `tribunal review add-annotator NAME` "
            "prints a key",
            file=sys.stderr,
        )
    settings = load_settings(args.profile)
    from ..jobs._review_pick import entry_search
    from ..retrieval import PhrasingLinks, entry_questions

    server, sock = review_server(
        queue,
        annotators=annotators,
        host=args.host,
        port=args.port,
        allowed_hosts=args.allowed_host,
        # Queries can be linked to the KB entry that answers them (an admin approves).
        links=PhrasingLinks(queue.db, max_query_chars=settings.retrieval.max_question_chars),
        questions=entry_questions(settings.data_dir / "retrieval"),
        # An audited fallback's reviewer picks the entry that answers it, or none.
        search=entry_search(settings.data_dir / "retrieval"),
    )
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"review page: http://{shown}:{port}/  ({len(attention)} attention checks, "
        f"{args.votes_per_item} votes per item; Ctrl-C stops)",
        file=sys.stderr,
    )
    # uvicorn shuts down cleanly on Ctrl-C, then re-raises it: a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    return 0


def _live_audit_hook(args: argparse.Namespace, db: Any) -> Any:
    """After a vote on a live-audit item: recompute its collection's live bound (and enter
    the safe mode when the bound shows a violation)."""
    settings = load_settings(args.profile)

    def refresh(item_id: str) -> None:
        from ..audit import refresh_after_review

        refresh_after_review(db, settings, item_id)

    return refresh


def _stats(args: argparse.Namespace) -> int:
    from ..jobs import review_stats

    summary = review_stats(_database(args), votes_per_item=args.votes_per_item, job=args.job)
    print(json.dumps(summary, indent=2))
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.min_attention_accuracy is not None and not 0 <= args.min_attention_accuracy <= 1:
        raise InvalidArgumentError(
            "--min-attention-accuracy must be in [0, 1]", field="min_attention_accuracy"
        )
    from ..jobs import export_votes

    rows = export_votes(
        _database(args),
        job=args.job,
        include_attention=args.include_attention,
        min_attention_accuracy=args.min_attention_accuracy,
    )
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    if str(args.out) == "-":
        sys.stdout.write(lines)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(lines, encoding="utf-8")
        print(f"{len(rows)} votes -> {args.out}", file=sys.stderr)
    return 0


def _add_annotator(args: argparse.Namespace) -> int:
    from ..jobs import AnnotatorRegistry

    key = AnnotatorRegistry(_database(args)).add(args.name)
    print(key)
    print(
        f"annotator {args.name!r} signs in on the review page with the key above (shown "
        "once; the store keeps only its sha256)",
        file=sys.stderr,
    )
    return 0


def _remove_annotator(args: argparse.Namespace) -> int:
    from ..jobs import AnnotatorRegistry

    AnnotatorRegistry(_database(args)).remove(args.name)
    print(f"annotator {args.name!r} can no longer sign in; their votes stay", file=sys.stderr)
    return 0


def _annotators(args: argparse.Namespace) -> int:
    from ..jobs import AnnotatorRegistry

    print(json.dumps(AnnotatorRegistry(_database(args)).names(), indent=2))
    return 0
