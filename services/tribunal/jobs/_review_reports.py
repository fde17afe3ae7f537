"""The review queue's tables in use and what is read back from them: queue progress and,
per annotator, votes and attention-check accuracy (``review_stats``), and the votes as
crowd-kit rows (``export_votes``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select

from ..core.storage import Base, Database, EscalationRow
from ._review_tables import ReviewVoteRow
from ._tables import JobItemRow

__all__ = ["export_votes", "review_stats"]


def _prepare(db: Database) -> None:
    # Base.metadata holds every table once its module is imported; create_all skips
    # existing ones. Called explicitly because the Database may have prepared its
    # schema before this module was imported.
    db.create_schema()
    tables = [Base.metadata.tables[row.__tablename__] for row in (ReviewVoteRow, JobItemRow)]
    Base.metadata.create_all(db.engine, tables=tables)


def _in_job(statement: Select[Any], job: str | None) -> Select[Any]:
    if job is None:
        return statement
    members = select(JobItemRow.escalation_id).where(
        JobItemRow.job == job, JobItemRow.escalation_id.is_not(None)
    )
    return statement.where(EscalationRow.id.in_(members))


def _vote_counts() -> Any:
    return (
        select(ReviewVoteRow.item_key, func.count().label("votes"))
        .group_by(ReviewVoteRow.item_key)
        .subquery()
    )


def review_stats(
    db: Database, *, votes_per_item: int = 3, job: str | None = None
) -> dict[str, Any]:
    """Queue progress and, per annotator, votes and attention-check accuracy."""
    _prepare(db)
    counts = _vote_counts()
    statement = _in_job(
        select(EscalationRow.id, func.coalesce(counts.c.votes, 0))
        .outerjoin(counts, counts.c.item_key == EscalationRow.id)
        .where(EscalationRow.status == "open"),
        job,
    )
    votes_query = select(
        ReviewVoteRow.annotator,
        ReviewVoteRow.is_attention,
        ReviewVoteRow.label,
        ReviewVoteRow.expected_label,
        ReviewVoteRow.entry_id,
        ReviewVoteRow.expected_entry_id,
    )
    if job is not None:
        votes_query = votes_query.where(ReviewVoteRow.job == job)
    with db.session() as session:
        per_item = [int(votes) for _, votes in session.execute(statement)]
        votes = session.execute(votes_query).all()
    annotators: dict[str, dict[str, Any]] = {}
    for annotator, is_attention, label, expected, picked, expected_pick in votes:
        entry = annotators.setdefault(
            annotator,
            {"annotator": annotator, "votes": 0, "attention_seen": 0, "attention_correct": 0},
        )
        entry["votes"] += 1
        if is_attention:
            entry["attention_seen"] += 1
            # A pick check is passed by the right label and, when an entry answers, that entry.
            right_pick = expected_pick is None or (picked or "") == expected_pick
            entry["attention_correct"] += int(label == expected and right_pick)
    for entry in annotators.values():
        seen = entry["attention_seen"]
        entry["attention_accuracy"] = round(entry["attention_correct"] / seen, 4) if seen else None
    return {
        "votes_per_item": votes_per_item,
        "job": job,
        "items": {
            "waiting": sum(1 for n in per_item if n == 0),
            "in_progress": sum(1 for n in per_item if 0 < n < votes_per_item),
            "done": sum(1 for n in per_item if n >= votes_per_item),
        },
        "votes": sum(1 for row in votes if not row[1]),
        "attention_votes": sum(1 for row in votes if row[1]),
        "annotators": [annotators[name] for name in sorted(annotators)],
    }


def export_votes(
    db: Database,
    *,
    job: str | None = None,
    include_attention: bool = False,
    min_attention_accuracy: float | None = None,
) -> list[dict[str, Any]]:
    """Votes as crowd-kit rows ``{"task", "worker", "label"}``, oldest first.

    ``min_attention_accuracy``: leave out every vote of annotators whose attention-check
    accuracy is below it (DREAM F.2 accepts only annotators who pass all checks: 1.0).
    Annotators who saw no check are kept. The filter looks only at attention items, never
    at the votes being aggregated.
    """
    _prepare(db)
    statement = select(ReviewVoteRow).order_by(ReviewVoteRow.created_at, ReviewVoteRow.id)
    if job is not None:
        statement = statement.where(ReviewVoteRow.job == job)
    with db.session() as session:
        rows = session.scalars(statement).all()
    rejected: set[str] = set()
    if min_attention_accuracy is not None:
        for entry in review_stats(db, job=job)["annotators"]:
            accuracy = entry["attention_accuracy"]
            if accuracy is not None and accuracy < min_attention_accuracy:
                rejected.add(entry["annotator"])
    return [
        {"task": row.item_key, "worker": row.annotator, "label": row.label, "job": row.job}
        for row in rows
        if (include_attention or not row.is_attention) and row.annotator not in rejected
    ]
