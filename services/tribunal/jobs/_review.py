"""The human review queue: which item an annotator labels next, and the votes.

Items are the open escalations (debates that ended in disagreement, DREAM §3.3)
plus attention checks: items with a known answer (DREAM appendix F.2) mixed in
at a seeded rate and served exactly like real items, so an annotator cannot tell
them apart; their votes are scored silently into a per-annotator accuracy.

Rules:

- an item stays in the queue until ``votes_per_item`` distinct annotators voted
  (DREAM: three workers per chunk, majority vote);
- an annotator never gets an item they already voted on, and a second vote for
  the same (item, annotator) changes nothing (idempotent double submit);
- the queue is served oldest first, so annotators converge on the same items
  and items close early instead of every item collecting one vote;
- whether the next item is an attention check depends only on (seed, annotator,
  number of votes the annotator has cast), so the assignment is reproducible and
  survives a server restart; attention checks are only served while real work
  is left for the annotator.

::

    queue = ReviewQueue(Database(url), attention=load_attention("checks.jsonl"))
    item = queue.next_item("ann")          # None when nothing is left for "ann"
    queue.vote("ann", item.token, "relevant", seconds=12.5)

Attention checks are read in :mod:`._review_attention`, the items and the page's view of
them built in :mod:`._review_items`, and the queue's stats and vote export computed in
:mod:`._review_reports`; their names are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite

from ..core import FailedPreconditionError, InvalidArgumentError, NotFoundError
from ..core.storage import Database, EscalationRow
from ._review_attention import ATTENTION_PREFIX, AttentionItem, load_attention
from ._review_audit import is_audited_fallback, no_entry_here, picked_entry
from ._review_items import (
    LABELS,
    Highlight,
    ReviewItem,
    _attention_item,
    _attention_token,
    _escalation_item,
    debate_rounds,
    evidence_quotes,
    highlight,
    item_view,
)
from ._review_reports import _in_job, _prepare, _vote_counts, export_votes, review_stats
from ._review_tables import ReviewVoteRow

__all__ = [
    "ATTENTION_PREFIX",
    "LABELS",
    "AttentionItem",
    "Highlight",
    "ReviewItem",
    "ReviewQueue",
    "VoteResult",
    "debate_rounds",
    "evidence_quotes",
    "export_votes",
    "highlight",
    "item_view",
    "load_attention",
    "review_stats",
    "validate_annotator",
]

_MAX_ANNOTATOR = 128


@dataclass(frozen=True)
class VoteResult:
    stored: bool
    """False when this annotator had already voted on the item (nothing changed)."""
    label: str
    """The label on record (the first one, for a repeated submit)."""
    labelled: int
    """Votes this annotator has cast in total."""


def validate_annotator(name: str) -> str:
    """An annotator name, stripped; INVALID_ARGUMENT when empty or too long."""
    cleaned = name.strip()
    if not cleaned or len(cleaned) > _MAX_ANNOTATOR:
        raise InvalidArgumentError(
            f"annotator must be 1..{_MAX_ANNOTATOR} characters, got {len(cleaned)}",
            field="annotator",
        )
    return cleaned


class ReviewQueue:
    """Serves items to annotators and records their votes. Safe across threads."""

    def __init__(
        self,
        db: Database,
        *,
        votes_per_item: int = 3,
        attention: Sequence[AttentionItem] = (),
        attention_rate: float = 0.2,
        seed: int = 0,
        job: str | None = None,
        on_vote: Callable[[str], None] | None = None,
    ) -> None:
        if votes_per_item < 1:
            raise InvalidArgumentError("--votes-per-item must be >= 1", field="votes_per_item")
        if not 0.0 <= attention_rate < 1.0:
            raise InvalidArgumentError(
                f"--attention-rate must be in [0, 1), got {attention_rate}", field="attention_rate"
            )
        self.db = db
        self.votes_per_item = votes_per_item
        self.attention = sorted(attention, key=lambda item: item.id)
        self.attention_rate = attention_rate
        self.seed = seed
        self.job = job
        self.on_vote = on_vote
        """Called with the item's id after each stored vote on a real item (the live audit
        monitor recomputes its bound there)."""
        self._attention_by_token = {_attention_token(item): item for item in self.attention}
        # One review server is one process: this lock makes "check the item is still
        # open, then insert" atomic on SQLite; PostgreSQL also locks the escalation row.
        self._lock = threading.Lock()
        _prepare(db)

    # -- serving --------------------------------------------------------------------------

    def next_item(self, annotator: str, *, exclude: Collection[str] = ()) -> ReviewItem | None:
        """The annotator's next item, or None when nothing is left for them.

        ``exclude``: tokens to pass over (items the annotator skipped in this session).
        """
        annotator = validate_annotator(annotator)
        mine = select(ReviewVoteRow.item_key).where(ReviewVoteRow.annotator == annotator)
        counts = _vote_counts()
        statement = (
            select(EscalationRow)
            .outerjoin(counts, counts.c.item_key == EscalationRow.id)
            .where(
                EscalationRow.status == "open",
                func.coalesce(counts.c.votes, 0) < self.votes_per_item,
                EscalationRow.id.not_in(mine),
            )
            .order_by(EscalationRow.created_at, EscalationRow.id)
            .limit(1)
        )
        if exclude:
            statement = statement.where(EscalationRow.id.not_in(list(exclude)))
        statement = _in_job(statement, self.job)
        with self.db.session() as session:
            row = session.scalars(statement).first()
            if row is None:
                return None
            real = _escalation_item(row)
            voted = set(session.scalars(mine).all())
        check = self._attention_for(annotator, len(voted), voted, exclude)
        return check if check is not None else real

    def _attention_for(
        self, annotator: str, position: int, voted: set[str], exclude: Collection[str]
    ) -> ReviewItem | None:
        if not self.attention or self.attention_rate <= 0.0:
            return None
        # A string seed is hashed with SHA-512: the same on every run and platform.
        rng = random.Random(f"{self.seed}:{annotator}:{position}")
        if rng.random() >= self.attention_rate:
            return None
        candidates = [
            item
            for item in self.attention
            if item.key not in voted and _attention_token(item) not in exclude
        ]
        return _attention_item(rng.choice(candidates)) if candidates else None

    def labelled(self, annotator: str) -> int:
        """Votes the annotator has cast (real and attention items alike)."""
        statement = select(func.count()).where(
            ReviewVoteRow.annotator == validate_annotator(annotator)
        )
        with self.db.session() as session:
            return int(session.scalar(statement) or 0)

    # -- voting ---------------------------------------------------------------------------

    def vote(
        self,
        annotator: str,
        token: str,
        label: str,
        *,
        seconds: float | None = None,
        entry_id: str | None = None,
    ) -> VoteResult:
        """Record a vote; a repeated (token, annotator) vote is a no-op.

        ``entry_id``: on an audited fallback, the entry the annotator picked as the one
        that answers the query (with label ``relevant``; ``irrelevant`` says none does).
        """
        annotator = validate_annotator(annotator)
        label = label.strip().lower()
        if label not in LABELS:
            raise InvalidArgumentError(
                f"label must be one of {', '.join(LABELS)}, got {label!r}", field="label"
            )
        entry_id = picked_entry(entry_id, label)
        if seconds is not None and (not math.isfinite(seconds) or seconds < 0):
            raise InvalidArgumentError(
                f"seconds must be a finite number >= 0, got {seconds}", field="seconds"
            )
        check = self._attention_by_token.get(token)
        with self._lock, self.db.session() as session:
            expected_entry = None
            if check is not None:
                key, expected = check.key, check.label
                no_entry_here(entry_id, unless=check.pick_entry is not None)
                expected_entry = check.pick_entry
            else:
                statement = select(EscalationRow).where(EscalationRow.id == token)
                statement = _in_job(statement, self.job)
                if self.db.dialect == "postgresql":
                    statement = statement.with_for_update()
                row = session.scalars(statement).first()
                if row is None or row.status != "open":
                    raise NotFoundError(f"no open review item {token!r}")
                key, expected = row.id, None
                no_entry_here(entry_id, unless=is_audited_fallback(row))
            existing = session.scalars(
                select(ReviewVoteRow.label).where(
                    ReviewVoteRow.item_key == key, ReviewVoteRow.annotator == annotator
                )
            ).first()
            stored = False
            if existing is None:
                if check is None:
                    votes = session.scalar(
                        select(func.count()).where(ReviewVoteRow.item_key == key)
                    )
                    if int(votes or 0) >= self.votes_per_item:
                        raise FailedPreconditionError(
                            f"item {token} already has {votes} votes; fetch the next item"
                        )
                insert = postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
                result = session.execute(
                    insert(ReviewVoteRow)
                    .values(
                        id=uuid.uuid4().hex,
                        item_key=key,
                        job=self.job,
                        annotator=annotator,
                        label=label,
                        entry_id=entry_id,
                        expected_entry_id=expected_entry,
                        is_attention=check is not None,
                        expected_label=expected,
                        created_at=dt.datetime.now(dt.UTC),
                        seconds=seconds,
                    )
                    .on_conflict_do_nothing(index_elements=["item_key", "annotator"])
                )
                stored = bool(getattr(result, "rowcount", 0))
            if not stored:
                existing = session.scalars(
                    select(ReviewVoteRow.label).where(
                        ReviewVoteRow.item_key == key, ReviewVoteRow.annotator == annotator
                    )
                ).first()
            labelled = session.scalar(
                select(func.count()).where(ReviewVoteRow.annotator == annotator)
            )
        if stored and check is None and self.on_vote is not None:
            self.on_vote(key)
        return VoteResult(
            stored=stored,
            label=label if stored else str(existing),
            labelled=int(labelled or 0),
        )

    def pick_target(self, token: str) -> tuple[str, str] | None:
        """(collection, audit id) of an item that asks which entry answers — an open
        audited fallback, or an attention check in that form (audit id "") — else None."""
        check = self._attention_by_token.get(token)
        if check is not None:
            if check.pick_entry is None:
                return None
            return str(check.history.get("collection", "")), ""
        with self.db.session() as session:
            row = session.get(EscalationRow, token)
            if row is None or row.status != "open" or not is_audited_fallback(row):
                return None
            history = row.history if isinstance(row.history, dict) else {}
            return str(history.get("collection", "")), str(row.audit_id or "")

    def stats(self) -> dict[str, Any]:
        return review_stats(self.db, votes_per_item=self.votes_per_item, job=self.job)
