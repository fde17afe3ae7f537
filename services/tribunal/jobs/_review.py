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
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import random
import re
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import Select, func, select
from sqlalchemy.dialects import postgresql, sqlite

from ..core import FailedPreconditionError, InvalidArgumentError, NotFoundError, jsonl_rows
from ..core.storage import Base, Database, EscalationRow
from ._review_audit import is_audited_fallback, no_entry_here, picked_entry
from ._review_tables import ReviewVoteRow
from ._tables import JobItemRow

__all__ = [
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

LABELS: tuple[str, ...] = ("relevant", "irrelevant")
ATTENTION_PREFIX = "attention:"
_MAX_ANNOTATOR = 128


# -- attention checks ----------------------------------------------------------------------


class _AttentionPick(BaseModel):
    """An attention check in the form of an audited fallback: which entry answers?"""

    model_config = ConfigDict(extra="forbid")

    collection: str = Field(min_length=1)
    candidates: list[str] = Field(default_factory=list)
    entry: str | None = None
    """The entry that answers the query; null: none does."""


class _AttentionLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    query: str = Field(min_length=1)
    chunk: str = Field(min_length=1)
    answers: list[str] = Field(default_factory=list)
    label: Literal["relevant", "irrelevant"]
    history: dict[str, Any] = Field(default_factory=dict)
    """Optional debate shown with the item (DREAM pairs each check with two arguments)."""
    pick: _AttentionPick | None = None
    """Shown as an audited fallback: the annotator picks the entry (``label`` relevant
    when ``pick.entry`` is set, irrelevant when none answers)."""

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        # qrels-style grades are accepted too: 1 (or any positive) relevant, 0 irrelevant.
        if isinstance(value, bool):
            return "relevant" if value else "irrelevant"
        if isinstance(value, int):
            return "relevant" if value > 0 else "irrelevant"
        return value.strip().lower() if isinstance(value, str) else value


@dataclass(frozen=True)
class AttentionItem:
    """An item with a known answer; its votes measure the annotator, not the item."""

    id: str
    query: str
    chunk: str
    label: str
    answers: tuple[str, ...] = ()
    history: dict[str, Any] = field(default_factory=dict)
    pick_entry: str | None = None
    """For a check shown as an audited fallback: the entry that answers ("" for none)."""

    @property
    def key(self) -> str:
        return f"{ATTENTION_PREFIX}{self.id}"


def load_attention(path: str | Path) -> list[AttentionItem]:
    """Read attention checks from JSONL: ``{"query", "chunk", "answers", "label"}`` per line.

    ``id`` defaults to the line number; ``history`` (a debate, as in escalations) is
    optional. Blank lines are skipped.
    """
    source = Path(path).expanduser()
    if not source.is_file():
        raise NotFoundError(f"--attention {source}: no such file")
    items: list[AttentionItem] = []
    seen: set[str] = set()
    for row in jsonl_rows(source, field="attention"):
        try:
            parsed = _AttentionLine.model_validate(row.value)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"{row.where}: not an attention item (need query, chunk, answers, "
                f"label relevant|irrelevant): {exc}",
                field="attention",
            ) from None
        item_id = parsed.id or str(row.number)
        history, pick_entry = parsed.history, None
        if parsed.pick is not None:
            pick_entry = parsed.pick.entry or ""
            if (parsed.label == "relevant") != bool(pick_entry):
                raise InvalidArgumentError(
                    f"{row.where}: a pick check's label is relevant with pick.entry set, "
                    "irrelevant with none",
                    field="attention",
                )
            history = {
                **history,
                "collection": parsed.pick.collection,
                "candidates": list(parsed.pick.candidates),
                "kb_entry_id": parsed.pick.candidates[0] if parsed.pick.candidates else "",
            }
        if item_id in seen:
            raise InvalidArgumentError(
                f"{row.where}: duplicate attention id {item_id!r}", field="attention"
            )
        seen.add(item_id)
        items.append(
            AttentionItem(
                id=item_id,
                query=parsed.query,
                chunk=parsed.chunk,
                label=parsed.label,
                answers=tuple(parsed.answers),
                history=history,
                pick_entry=pick_entry,
            )
        )
    return items


# -- what the annotator sees ----------------------------------------------------------------


@dataclass(frozen=True)
class Highlight:
    """The passage cut into segments; ``marked`` segments are cited quotes."""

    segments: tuple[tuple[str, bool], ...]
    missing: tuple[str, ...]
    """Quotes that do not occur in the passage (the agent misquoted or paraphrased)."""


def highlight(chunk: str, quotes: Iterable[str]) -> Highlight:
    """Mark every case-insensitive exact occurrence of each quote; overlaps merge."""
    spans: list[tuple[int, int]] = []
    missing: list[str] = []
    for quote in quotes:
        # re with IGNORECASE keeps offsets into the original text (str.lower() can
        # change a string's length, e.g. for "İ").
        found = [m.span() for m in re.finditer(re.escape(quote), chunk, re.IGNORECASE)]
        if found:
            spans.extend(found)
        else:
            missing.append(quote)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments: list[tuple[str, bool]] = []
    position = 0
    for start, end in merged:
        if start > position:
            segments.append((chunk[position:start], False))
        segments.append((chunk[start:end], True))
        position = end
    if position < len(chunk) or not segments:
        segments.append((chunk[position:], False))
    return Highlight(segments=tuple(segments), missing=tuple(missing))


def _label_name(value: Any) -> str:
    text = str(value or "").removeprefix("LABEL_").lower()
    return text if text in LABELS else ""


def debate_rounds(history: Any) -> list[dict[str, Any]]:
    """The debate of an escalation (``MessageToDict`` of a DebateResult) as plain rounds.

    Tolerant of any JSON: escalations from the answer path carry no debate, and
    anything that is not a round or a turn is left out.
    """
    rounds = history.get("rounds") if isinstance(history, dict) else None
    if not isinstance(rounds, list):
        return []
    result: list[dict[str, Any]] = []
    for index, entry in enumerate(rounds, start=1):
        if not isinstance(entry, dict):
            continue
        turns = [
            {
                "agent": str(turn.get("agent", "")),
                "model": str(turn.get("model", "")),
                "label": _label_name(turn.get("label")),
                "evidence": str(turn.get("evidence", "")),
                "rationale": str(turn.get("rationale", "")),
                "evidence_found": bool(turn.get("evidence_found", False)),
            }
            for turn in entry.get("turns", [])
            if isinstance(turn, dict)
        ]
        number = entry.get("number", index)
        result.append({"number": number if isinstance(number, int) else index, "turns": turns})
    return result


def evidence_quotes(history: Any) -> list[str]:
    """The distinct non-empty evidence quotes of the debate, in order of appearance."""
    quotes: list[str] = []
    for round_ in debate_rounds(history):
        for turn in round_["turns"]:
            quote = turn["evidence"].strip()
            if quote and quote not in quotes:
                quotes.append(quote)
    return quotes


@dataclass(frozen=True)
class ReviewItem:
    """One item to label; ``token`` is all the browser learns about its identity."""

    key: str
    token: str
    query: str
    chunk: str
    answers: tuple[str, ...]
    history: dict[str, Any]
    is_attention: bool = False
    expected_label: str | None = None
    audit_id: str = ""
    """Set on an audited fallback: the decision whose candidates the page offers."""


def item_view(item: ReviewItem) -> dict[str, Any]:
    """The JSON the page renders. Nothing in it says whether the item is an attention check."""
    marked = highlight(item.chunk, evidence_quotes(item.history))
    outcome = item.history.get("outcome", "") if isinstance(item.history, dict) else ""
    return {
        "item": item.token,
        "query": item.query,
        "answers": list(item.answers),
        "passage": [{"text": text, "mark": mark} for text, mark in marked.segments],
        "missing_quotes": list(marked.missing),
        "rounds": debate_rounds(item.history),
        "outcome": str(outcome).removeprefix("DEBATE_OUTCOME_").lower(),
    }


def _attention_token(item: AttentionItem) -> str:
    # Same shape as an escalation id (32 hex digits), so the token gives nothing away.
    return hashlib.sha256(item.key.encode()).hexdigest()[:32]


def _escalation_item(row: EscalationRow) -> ReviewItem:
    return ReviewItem(
        key=row.id,
        token=row.id,
        query=row.query,
        chunk=row.chunk,
        answers=tuple(row.answers),
        history=row.history if isinstance(row.history, dict) else {},
        audit_id=row.audit_id or "" if is_audited_fallback(row) else "",
    )


def _attention_item(item: AttentionItem) -> ReviewItem:
    return ReviewItem(
        key=item.key,
        token=_attention_token(item),
        query=item.query,
        chunk=item.chunk,
        answers=item.answers,
        history=item.history,
        is_attention=True,
        expected_label=item.label,
        # A pick check asks as an audited fallback does; its token stands for the audit id.
        audit_id=_attention_token(item) if item.pick_entry is not None else "",
    )


# -- the queue ------------------------------------------------------------------------------


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


# -- reporting ------------------------------------------------------------------------------


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
