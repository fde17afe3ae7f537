"""The split unit calibration used before it split by query, to replay older artifacts."""

from __future__ import annotations

from dataclasses import replace

from tribunal.confidence import Traffic

__all__ = ["by_answer_set"]


def by_answer_set(traffic: Traffic) -> Traffic:
    """The traffic with each answerable query grouped with every query of its answer set
    (an unanswerable or fit-only one keeps its group): calibration's split unit before it
    split by query."""
    return replace(
        traffic,
        queries=tuple(
            replace(q, group="answers:" + "\x00".join(sorted(q.answers)))
            if q.answers and not q.fit_only
            else q
            for q in traffic.queries
        ),
    )
