"""``tribunal tune``'s KB write: the teaching plan as proposed, approved phrasing links.

Each ``(entry, query)`` of the plan becomes a phrasing link proposed by the tune and
approved by it (one audited, signed KB change per entry, naming its links), exactly
what ``tribunal kb phrasings approve`` does for a reviewed link; the approved links
are then listed by ``tribunal kb phrasings list`` and ``kb history`` like any other.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core import Settings
    from ..tuning import TeachingPlan

__all__ = ["rejected_links", "tune_actor", "write_teaching"]


def tune_actor() -> str:
    """Who the KB change audit names: the tune, run by the local user."""
    from ._actors import cli_actor

    return f"tribunal-tune ({cli_actor()})"


def rejected_links(settings: Settings, collection: str) -> set[tuple[str, str]]:
    """``(entry id, normalised query)`` of the collection's links a reviewer rejected: the
    tune does not teach them again."""
    from ..core.storage import Database
    from ..kb import phrasing_key
    from ..retrieval import PhrasingLinks

    db = Database(settings.database_url)
    db.create_schema()
    links = PhrasingLinks(db, max_query_chars=settings.retrieval.max_question_chars)
    return {
        (link.entry_id, phrasing_key(link.query))
        for link in links.links(collection=collection, status="rejected", limit=10_000_000)
    }


def write_teaching(
    settings: Settings, collection: str, plan: TeachingPlan, *, actor: str
) -> dict[str, Any]:
    """Propose and approve the plan's links (the KB writer signs the changed entries);
    what was written (links approved, entries, links a reviewer had rejected before and
    that stay so, KB version, time). No match vectors are stored: the tune's
    own matcher serves the collection next and embeds its entries at their first match.

    Raises:
        NotFoundError: the collection or an entry is gone.
        FailedPreconditionError: an entry changed while it was being taught (nothing of
            that entry written: run the tune again).
    """
    from tqdm import tqdm

    from ..core.storage import Database
    from ..retrieval import AuditedWrites, KnowledgeBase, PhrasingLinks, writer_signer
    from ..retrieval.servicer import open_change_log

    started = time.perf_counter()
    by_entry = plan.by_entry()
    if not by_entry:
        return {
            "links": 0,
            "entries": 0,
            "rejected_before": 0,
            "kb_version": None,
            "seconds": 0.0,
        }
    db = Database(settings.database_url)
    db.create_schema()
    links = PhrasingLinks(db, max_query_chars=settings.retrieval.max_question_chars)
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    version = 0
    approved = 0
    rejected = 0
    try:
        writes = AuditedWrites(kb, open_change_log(settings))
        with tqdm(total=len(plan.added), desc=f"teaching {collection}", unit="phrasing") as bar:
            for entry_id, texts in by_entry.items():
                found = [
                    links.add(actor, collection=collection, entry_id=entry_id, query=text)[0]
                    for text in texts
                ]
                # A link a reviewer rejected stays rejected; one approved before is done.
                rejected += sum(1 for link in found if link.status == "rejected")
                pending = [link.id for link in found if link.status == "pending"]
                done = links.approve_entry(
                    actor, pending, writes, note="taught by tribunal tune from its train part"
                )
                approved += len(done)
                version = max([version, *(link.kb_version for link in done)])
                bar.update(len(texts))
    finally:
        kb.close()
    return {
        "links": approved,
        "entries": len(by_entry),
        "rejected_before": rejected,
        "kb_version": version,
        "seconds": round(time.perf_counter() - started, 1),
    }
