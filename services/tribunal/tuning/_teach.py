"""Teaching the KB: the tune's *train* queries become phrasings of the entries that answer them.

A labelled query that an entry answers is one more way users ask that entry's
question. Added to the entry's phrasings (``KbEntry.questions``), it is found by
retrieval (one search unit per phrasing) and matched by the feature matcher (the
best phrasing of an entry decides), so queries worded like it find the right entry
with a clear margin over the other answers.

Only the split's ``train`` part teaches (:mod:`._split`):

- ``head`` queries never do: the matching head must be fitted on the scores that
  *unseen* queries get, not on a query matched against itself (cosine 1.0);
- ``held-out`` queries never do: ``tribunal calibrate`` certifies on them, and a
  certificate holds only for queries that nothing was fitted on. Were a held-out
  query a phrasing, it would score as a perfect match at calibration and the bound
  would be too optimistic for new queries.

The plan here is pure (no store, no model); ``tribunal tune`` writes it through the
phrasing links (proposed and approved by the tune, an audited, signed KB change).
Each phrasing is checked against the retrieval limits: a query longer than
``retrieval.max_question_chars`` is skipped, and when an entry would exceed
``retrieval.max_questions_per_item`` the most diverse of its candidates are kept
(greedy farthest point from the phrasings it has, by the embedder's cosine) and the
rest are recorded as dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..confidence import Traffic
from ..core import InvalidArgumentError
from ..kb import phrasing_key
from ._pair_features import EntryTexts
from ._split import TuneSplit, query_key

__all__ = ["TeachingPlan", "plan_teaching"]

Embed = Callable[[list[str]], NDArray[Any]]


@dataclass(frozen=True)
class TeachingPlan:
    """Which train queries become phrasings of which entries, and what was left out."""

    added: tuple[tuple[str, str], ...]
    """``(entry id, query)`` in the order they are written."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Why train queries (or query–entry pairs) did not teach: ``unanswerable`` (no
    answer in the KB), ``duplicate`` (the entry has that phrasing, or the same text came
    twice), ``too_long`` (over ``max_question_chars``), ``over_limit`` (the entry is full),
    ``rejected`` (a reviewer rejected that query as a phrasing of that entry)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """``(entry id, query)`` left out because the entry reached its phrasing limit."""

    def by_entry(self) -> dict[str, tuple[str, ...]]:
        """Per entry, the phrasings to add (in order)."""
        out: dict[str, list[str]] = {}
        for entry_id, query in self.added:
            out.setdefault(entry_id, []).append(query)
        return {entry_id: tuple(texts) for entry_id, texts in out.items()}

    def taught(self, entries: EntryTexts) -> EntryTexts:
        """``entries`` as the matcher sees them once the plan is written."""
        new = self.by_entry()
        phrasings = tuple(
            (*texts, *new.get(entry_id, ()))
            for entry_id, texts in zip(entries.ids, entries.all_phrasings(), strict=True)
        )
        return replace(entries, phrasings=phrasings)

    def record(self) -> dict[str, Any]:
        """What the tune's artifact stores: counts, and the query keys taught and dropped
        (:func:`~._split.query_key`, the identity the split records)."""
        return {
            "phrasings_added": len(self.added),
            "entries_taught": len(self.by_entry()),
            "skipped": dict(sorted(self.skipped.items())),
            "added": [{"entry": e, "query_key": query_key(q)} for e, q in self.added],
            "dropped": [{"entry": e, "query_key": query_key(q)} for e, q in self.dropped],
        }


def _most_diverse(
    have: Sequence[str], candidates: Sequence[str], room: int, embed: Embed
) -> list[int]:
    """Indices of ``room`` candidates, greedily each the farthest (lowest highest cosine)
    from the phrasings kept so far; ties keep the earlier candidate."""
    vectors = np.asarray(embed([*have, *candidates]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    kept_vectors = vectors[: len(have)]
    pool = vectors[len(have) :]
    nearest = (
        (pool @ kept_vectors.T).max(axis=1) if len(have) else np.full(len(candidates), -np.inf)
    )
    chosen: list[int] = []
    free = np.ones(len(candidates), dtype=bool)
    for _ in range(room):
        score = np.where(free, nearest, np.inf)
        pick = int(np.argmin(score))
        chosen.append(pick)
        free[pick] = False
        nearest = np.maximum(nearest, pool @ pool[pick])
    return sorted(chosen)


def _check_split(traffic: Traffic, split: TuneSplit) -> None:
    """The split is this traffic's, and no train query is also a head or held-out one."""
    parts = {"train": split.train, "head": split.head, "heldout": split.heldout}
    for name, rows in parts.items():
        if any(not 0 <= row < len(traffic.queries) for row in rows):
            raise InvalidArgumentError(
                f"the split's {name} part names a query outside the traffic "
                f"({len(traffic.queries)} queries): split this traffic, not another",
                field="split",
            )
    unseen = {query_key(traffic.queries[i].query) for i in (*split.head, *split.heldout)}
    leaked = [i for i in split.train if query_key(traffic.queries[i].query) in unseen]
    if leaked or set(split.train) & {*split.head, *split.heldout}:
        raise InvalidArgumentError(
            f"{len(leaked) or 'some'} train queries are also in the head or held-out part: "
            "they would be taught and then scored as unseen; split with split_for_tuning",
            field="split",
        )


def plan_teaching(
    traffic: Traffic,
    split: TuneSplit,
    entries: EntryTexts,
    *,
    max_question_chars: int,
    max_questions_per_item: int,
    embed: Embed | None = None,
    rejected: Collection[tuple[str, str]] = (),
) -> TeachingPlan:
    """The phrasings the split's train queries add (see the module docstring).

    Each answerable train query teaches each of its right entries that the KB holds,
    in traffic order. ``embed`` (texts -> vectors) picks the most diverse subset when
    an entry would pass ``max_questions_per_item``; without it the first ones in
    traffic order are kept. ``rejected``: ``(entry id, normalised query)`` pairs a
    reviewer rejected as phrasing links; they are not taught.

    Raises:
        InvalidArgumentError: a limit below 1, a split row outside the traffic, or
            parts that share a query (the head and held-out parts must stay unseen).
    """
    if max_question_chars < 1 or max_questions_per_item < 0:
        raise InvalidArgumentError(
            "max_question_chars must be >= 1 and max_questions_per_item >= 0",
            field="retrieval",
        )
    _check_split(traffic, split)
    column = {entry_id: j for j, entry_id in enumerate(entries.ids)}
    phrasings = entries.all_phrasings()
    known = [{phrasing_key(t) for t in texts} for texts in phrasings]
    # ``questions`` beside ``question``: the KB's limit counts the extra phrasings.
    room = [max(0, max_questions_per_item - (len(texts) - 1)) for texts in phrasings]
    skipped = {"unanswerable": 0, "duplicate": 0, "too_long": 0, "over_limit": 0, "rejected": 0}
    refused = set(rejected)
    candidates: dict[int, list[str]] = {}
    for row in split.train:
        query = traffic.queries[row]
        text = query.query.strip()
        targets = sorted(column[a] for a in query.answers if a in column)
        if not targets:
            skipped["unanswerable"] += 1
            continue
        if len(text) > max_question_chars:
            skipped["too_long"] += len(targets)
            continue
        for j in targets:
            if phrasing_key(text) in known[j]:
                skipped["duplicate"] += 1
                continue
            if (entries.ids[j], phrasing_key(text)) in refused:
                skipped["rejected"] += 1
                continue
            known[j].add(phrasing_key(text))
            candidates.setdefault(j, []).append(text)
    added: list[tuple[str, str]] = []
    dropped: list[tuple[str, str]] = []
    for j in sorted(candidates):
        texts = candidates[j]
        if len(texts) > room[j]:
            if embed is not None and room[j] > 0:
                keep = _most_diverse(phrasings[j], texts, room[j], embed)
            else:
                keep = list(range(room[j]))
            keep_set = set(keep)
            dropped.extend((entries.ids[j], t) for i, t in enumerate(texts) if i not in keep_set)
            skipped["over_limit"] += len(texts) - len(keep)
            texts = [texts[i] for i in keep]
        added.extend((entries.ids[j], t) for t in texts)
    return TeachingPlan(tuple(added), skipped, tuple(dropped))
