"""The human review queue on SQLite and PostgreSQL: assignment, votes, attention checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from tribunal.core import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tribunal.core.storage import Database
from tribunal.jobs._review import (
    ReviewQueue,
    export_votes,
    item_view,
    load_attention,
    review_stats,
)
from tribunal.jobs._review_tables import ReviewVoteRow
from tribunal.jobs._tables import JobItemRow

from tests.integration._review_items import ESCALATIONS, seed_escalations, write_attention


def _label_all(queue: ReviewQueue, annotator: str, label: str = "relevant") -> list[str]:
    """Take items until the queue is empty for ``annotator``; returns the item keys."""
    keys: list[str] = []
    while (item := queue.next_item(annotator)) is not None:
        keys.append(item.key)
        assert queue.vote(annotator, item.token, label).stored
        assert len(keys) < 20, "the queue never ran dry"
    return keys


def test_assignment_is_exact_on_a_fixed_seed(database_url: str, tmp_path: Path) -> None:
    db = Database(database_url)
    e1, e2, e3 = seed_escalations(db, 3)
    attention = load_attention(write_attention(tmp_path / "checks.jsonl"))
    queue = ReviewQueue(db, attention=attention, attention_rate=0.2, seed=7)
    # seed 7: the draws for "ann" at positions 0..4 are 0.040, 0.168, 0.363, 0.178, 0.151
    # against the 0.2 rate: both checks first (each once), then the real items oldest
    # first; at position 3 a check is drawn but none is left unseen.
    assert _label_all(queue, "ann") == ["attention:a1", "attention:a2", e1, e2, e3]
    # A fresh queue on the same seed (a restarted server) assigns the same way; "ned"'s
    # draws are 0.758, 0.102, 0.336, 0.087: checks interleave with the real items.
    again = ReviewQueue(db, attention=attention, attention_rate=0.2, seed=7)
    assert _label_all(again, "ned") == [e1, "attention:a2", e2, "attention:a1", e3]
    # "sam" draws nothing under 0.2 (0.687, 0.529, 0.937): real items only.
    assert _label_all(again, "sam") == [e1, e2, e3]
    # After three distinct annotators every real item is closed.
    assert queue.next_item("zoe") is None
    db.close()


def test_double_vote_is_idempotent(database_url: str) -> None:
    db = Database(database_url)
    (e1,) = seed_escalations(db, 1)
    queue = ReviewQueue(db)
    first = queue.vote("ann", e1, "relevant", seconds=4.5)
    again = queue.vote(" ann ", e1, "irrelevant", seconds=9.0)
    assert (first.stored, first.label, first.labelled) == (True, "relevant", 1)
    assert (again.stored, again.label, again.labelled) == (False, "relevant", 1)
    with db.session() as session:
        rows = session.scalars(select(ReviewVoteRow)).all()
        assert [(r.item_key, r.annotator, r.label, r.seconds, r.is_attention) for r in rows] == [
            (e1, "ann", "relevant", 4.5, False)
        ]
    db.close()


def test_item_closes_after_n_annotators(database_url: str) -> None:
    db = Database(database_url)
    e1, e2 = seed_escalations(db, 2)
    queue = ReviewQueue(db, votes_per_item=2)
    for annotator, label in (("ann", "relevant"), ("bob", "irrelevant")):
        item = queue.next_item(annotator)
        assert item is not None
        assert item.key == e1
        queue.vote(annotator, item.token, label)
    # e1 has its two votes: the next annotator starts on e2 and cannot vote on e1.
    item = queue.next_item("cat")
    assert item is not None
    assert item.key == e2
    with pytest.raises(FailedPreconditionError, match="already has 2 votes"):
        queue.vote("cat", e1, "relevant")
    assert queue.stats()["items"] == {"waiting": 1, "in_progress": 0, "done": 1}
    db.close()


def test_an_annotator_never_sees_an_item_twice(database_url: str) -> None:
    db = Database(database_url)
    e1, e2, e3 = seed_escalations(db, 3)
    queue = ReviewQueue(db, votes_per_item=3)
    queue.vote("ann", e1, "relevant")
    item = queue.next_item("ann")
    assert item is not None
    assert item.key == e2
    # Skipping (this session only) passes over e2 without voting on it.
    skipped = queue.next_item("ann", exclude=[e2])
    assert skipped is not None
    assert skipped.key == e3
    queue.vote("ann", e2, "irrelevant")
    queue.vote("ann", e3, "irrelevant")
    # Others have not voted, so the items are open, but not for "ann".
    assert queue.next_item("ann") is None
    next_for_bob = queue.next_item("bob")
    assert next_for_bob is not None
    assert next_for_bob.key == e1
    db.close()


def test_attention_votes_are_scored_silently_and_exported_apart(
    database_url: str, tmp_path: Path
) -> None:
    db = Database(database_url)
    e1, _e2 = seed_escalations(db, 2)
    attention = load_attention(write_attention(tmp_path / "checks.jsonl"))
    queue = ReviewQueue(db, attention=attention, attention_rate=0.5, seed=0)
    check = next(i for i in attention if i.id == "a1")
    token = next(t for t, item in queue._attention_by_token.items() if item is check)
    # The token looks like an escalation id and the view says nothing about checks.
    assert len(token) == 32
    assert int(token, 16) >= 0
    view = item_view(queue._attention_for("ann", 0, set(), ()) or pytest.fail("no check"))
    assert set(view) == {"item", "query", "answers", "passage", "missing_quotes", "rounds"} | {
        "outcome"
    }
    result = queue.vote("ann", token, "irrelevant")  # wrong: a1 is relevant
    assert (result.stored, result.label) == (True, "irrelevant")
    queue.vote("ann", e1, "relevant")
    queue.vote("bob", token, "relevant")
    queue.vote("bob", e1, "irrelevant")
    stats = review_stats(db)
    assert stats["votes"] == 2
    assert stats["attention_votes"] == 2
    assert stats["items"] == {"waiting": 1, "in_progress": 1, "done": 0}
    assert stats["annotators"] == [
        {
            "annotator": "ann",
            "votes": 2,
            "attention_seen": 1,
            "attention_correct": 0,
            "attention_accuracy": 0.0,
        },
        {
            "annotator": "bob",
            "votes": 2,
            "attention_seen": 1,
            "attention_correct": 1,
            "attention_accuracy": 1.0,
        },
    ]
    assert export_votes(db) == [
        {"task": e1, "worker": "ann", "label": "relevant", "job": None},
        {"task": e1, "worker": "bob", "label": "irrelevant", "job": None},
    ]
    # DREAM F.2: only annotators who pass every check count.
    assert export_votes(db, min_attention_accuracy=1.0) == [
        {"task": e1, "worker": "bob", "label": "irrelevant", "job": None}
    ]
    assert [row["task"] for row in export_votes(db, include_attention=True)] == [
        "attention:a1",
        e1,
        "attention:a1",
        e1,
    ]
    db.close()


def test_job_restricts_the_queue_and_tags_the_votes(database_url: str) -> None:
    db = Database(database_url)
    e1, e2 = seed_escalations(db, 2)
    queue = ReviewQueue(db, job="covid-1")
    # No item of the job has reached the human queue yet.
    assert queue.next_item("ann") is None
    with db.session() as session:
        session.add(
            JobItemRow(
                job="covid-1",
                item_id=ESCALATIONS[1].item_id,
                position=0,
                query=ESCALATIONS[1].query,
                chunk=ESCALATIONS[1].chunk,
                escalation_id=e2,
            )
        )
    item = queue.next_item("ann")
    assert item is not None
    assert item.key == e2
    queue.vote("ann", e2, "relevant")
    with pytest.raises(NotFoundError):
        queue.vote("ann", e1, "relevant")  # not an item of this job
    assert export_votes(db, job="covid-1") == [
        {"task": e2, "worker": "ann", "label": "relevant", "job": "covid-1"}
    ]
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(ReviewVoteRow)) == 1
    db.close()


def test_bad_votes_and_attention_files_say_what_to_fix(database_url: str, tmp_path: Path) -> None:
    db = Database(database_url)
    (e1,) = seed_escalations(db, 1)
    queue = ReviewQueue(db)
    with pytest.raises(InvalidArgumentError, match="label must be one of relevant, irrelevant"):
        queue.vote("ann", e1, "maybe")
    with pytest.raises(InvalidArgumentError, match=r"annotator must be 1\.\.128"):
        queue.vote("  ", e1, "relevant")
    with pytest.raises(InvalidArgumentError, match="seconds"):
        queue.vote("ann", e1, "relevant", seconds=-1.0)
    with pytest.raises(NotFoundError, match="no open review item 'nope'"):
        queue.vote("ann", "nope", "relevant")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q", "chunk": "c", "label": "relevant"}\n{"query": "q"}\n')
    with pytest.raises(InvalidArgumentError, match=r"bad.jsonl:2: not an attention item"):
        load_attention(bad)
    twice = write_attention(tmp_path / "twice.jsonl")
    twice.write_text(twice.read_text() * 2)
    with pytest.raises(InvalidArgumentError, match="duplicate attention id 'a1'"):
        load_attention(twice)
    with pytest.raises(NotFoundError, match="no such file"):
        load_attention(tmp_path / "absent.jsonl")
    db.close()
