"""Labelled traffic for one KB collection, and its grouped calibration / held-out split.

One query a line (JSONL)::

    {"query": "Can my dog catch it?", "answers": ["faq-1a2b", "faq-9f8e"]}

``answers`` lists the ids of *every* entry that correctly answers the query —
several when entries are equivalent (the same intent and answer content from
different sources), none when the KB cannot answer it. The split unit is the
query: labelled traffic is a random sample of queries, and only a random split
of *queries* leaves the certify part a random sample of the traffic (a split by
answer set would certify on whole intents, whose error rates differ, and the
binomial bound would not account for that). Repeats of one text (case and
spacing aside) stay together; an optional ``group`` keeps other rows together
(the turns of one conversation, say). An optional ``weight``
in (0, 1] says the query was drawn with inclusion probability π_floor / weight (the
reviewed live audits: ``tribunal calibrate --from-audit``); a file with weights is
certified by the inverse-probability-weighted test (:mod:`._weighted`), which needs a
weight on every row. An optional ``fit_only: true`` marks a query an earlier step
was fitted on (a tune's fit part): it may fit the calibrator, never certify or be
reported; ``taught: true`` (implying ``fit_only``) marks one a tune taught the KB, whose
signals are observed with its own phrasing left out. Other keys are ignored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError, NotFoundError, jsonl_rows

__all__ = [
    "LabelledQuery",
    "Traffic",
    "TrafficSplit",
    "query_digest",
    "query_group",
    "read_traffic",
    "split_traffic",
]


@dataclass(frozen=True)
class LabelledQuery:
    """One query and the entries that answer it."""

    query: str
    answers: frozenset[str]
    """Ids of every entry that correctly answers the query (empty: none does)."""
    group: str
    """Rows of one group are never split apart."""
    weight: float = 1.0
    """π_floor / π: the inverse of the query's inclusion probability, scaled into (0, 1]."""
    fit_only: bool = False
    """An earlier step was fitted on this query: it may fit the calibrator, never certify."""
    taught: bool = False
    """A tune taught this query to the KB as a phrasing (with ``fit_only``): its signals
    are observed with that phrasing left out, as a query the KB was not taught gets them."""

    def is_right(self, entry_id: str) -> bool:
        return entry_id in self.answers


@dataclass(frozen=True)
class Traffic:
    """The labelled queries of one file."""

    queries: tuple[LabelledQuery, ...]
    sha256: str
    """sha256 of the file's bytes."""
    source: str
    """The file name."""
    weighted: bool = False
    """The rows carry inclusion weights: certify with the weighted test."""

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def answerable(self) -> int:
        return sum(1 for q in self.queries if q.answers)


def query_digest(query: str) -> str:
    """sha256 (hex) of a query's whitespace- and case-normalised text: one identity for
    every split, so spacing or capitals never make two copies of a query."""
    return hashlib.sha256(" ".join(query.casefold().split()).encode()).hexdigest()


def query_group(query: str) -> str:
    """The split unit of a row without an explicit ``group``: its normalised text, so
    repeats of one query never straddle two parts."""
    return "query:" + query_digest(query)[:16]


def _group(row: dict[str, Any], query: str) -> str:
    given = row.get("group")
    if isinstance(given, str) and given.strip():
        return "group:" + given
    return query_group(query)


def read_traffic(path: Path) -> Traffic:
    """Read labelled traffic (see the module docstring).

    Raises:
        NotFoundError: no such file.
        InvalidArgumentError: a bad line (the message names the line and field), or
            no rows.
    """
    if not path.is_file():
        raise NotFoundError(f"traffic file {path} does not exist")
    queries: list[LabelledQuery] = []
    weighted: set[bool] = set()
    for where, _, row in jsonl_rows(path, field="traffic"):
        query = row.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgumentError(
                f"{where}: 'query' must be a non-empty string", field="query"
            )
        answers = row.get("answers")
        if not isinstance(answers, list) or not all(
            isinstance(a, str) and a.strip() for a in answers
        ):
            raise InvalidArgumentError(
                f"{where}: 'answers' must be a list of entry ids (empty when no entry "
                "answers the query)",
                field="answers",
            )
        ids = frozenset(answers)
        weight = row.get("weight", 1.0)
        weighted.add("weight" in row)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not 0.0 < float(weight) <= 1.0
        ):
            raise InvalidArgumentError(
                f"{where}: 'weight' must be a number in (0, 1] (pi_floor / pi)", field="weight"
            )
        flags = {name: row.get(name, False) for name in ("fit_only", "taught")}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"{where}: '{name}' must be true or false", field=name)
        queries.append(
            LabelledQuery(
                query,
                ids,
                _group(row, query),
                float(weight),
                # A taught query was fitted on: it never certifies.
                fit_only=flags["fit_only"] or flags["taught"],
                taught=flags["taught"],
            )
        )
    if not queries:
        raise InvalidArgumentError(f"{path} holds no queries", field="traffic")
    if len(weighted) > 1:
        raise InvalidArgumentError(
            f"{path}: some rows carry a 'weight' and some do not; weight every row or none",
            field="weight",
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Traffic(tuple(queries), digest, path.name, weighted=weighted == {True})


@dataclass(frozen=True)
class TrafficSplit:
    """Query indices of each part; disjoint, together every query, groups kept whole."""

    fit: NDArray[np.int64]
    """Queries whose candidates fit the calibrator."""
    risk: NDArray[np.int64]
    """Queries the thresholds are certified on (never seen by the calibrator)."""
    holdout: NDArray[np.int64]
    """Queries kept for the held-out report only."""

    def sizes(self) -> dict[str, int]:
        return {name: int(getattr(self, name).size) for name in ("fit", "risk", "holdout")}


def split_traffic(
    queries: tuple[LabelledQuery, ...],
    *,
    holdout_fraction: float,
    fit_fraction: float,
    seed: int,
) -> TrafficSplit:
    """Seeded split by group: ``holdout_fraction`` of the groups held out, then
    ``fit_fraction`` of the remaining groups fit the calibrator, the rest certify.

    Queries marked ``fit_only`` (an earlier step was fitted on them) all fit the
    calibrator; when there are any, the other groups are split into held-out and
    certify parts only, so every query nothing was fitted on can certify.

    Groups are shuffled with ``numpy.random.default_rng(seed)`` and cut by
    cumulative query count, so the parts' sizes are close to the fractions in
    queries, not only in groups.

    Raises:
        InvalidArgumentError: a fraction outside [0, 1), a group mixing fit-only and
            other queries, or too few groups for three parts.
    """
    for name, value in (("holdout_fraction", holdout_fraction), ("fit_fraction", fit_fraction)):
        if not 0.0 <= value < 1.0:
            raise InvalidArgumentError(f"{name} must be in [0, 1), got {value}", field=name)
    fit_only = {q.group for q in queries if q.fit_only}
    mixed = fit_only & {q.group for q in queries if not q.fit_only}
    if mixed:
        raise InvalidArgumentError(
            f"{len(mixed)} group(s) hold both fit-only and other queries (e.g. "
            f"{sorted(mixed)[0]!r}); a query fitted on must not be certified on again",
            field="traffic",
        )
    groups = sorted({q.group for q in queries} - fit_only)
    if len(groups) + bool(fit_only) < 3:
        raise InvalidArgumentError(
            f"the traffic has {len(groups)} group(s); at least 3 are needed to fit, certify "
            "and hold out",
            field="traffic",
        )
    rng = np.random.default_rng(seed)
    order = [groups[i] for i in rng.permutation(len(groups))]
    sizes = dict.fromkeys(groups, 0)
    for q in queries:
        if not q.fit_only:
            sizes[q.group] += 1

    def cut(names: list[str], fraction: float) -> tuple[list[str], list[str]]:
        total = sum(sizes[g] for g in names)
        taken: list[str] = []
        count = 0
        for name in names:
            if count >= fraction * total:
                break
            taken.append(name)
            count += sizes[name]
        return taken, names[len(taken) :]

    held, rest = cut(order, holdout_fraction)
    fit, risk = ([], rest) if fit_only else cut(rest, fit_fraction)
    part = {
        **dict.fromkeys(fit_only, "fit"),
        **dict.fromkeys(held, "holdout"),
        **dict.fromkeys(fit, "fit"),
        **dict.fromkeys(risk, "risk"),
    }
    index: dict[str, list[int]] = {"fit": [], "risk": [], "holdout": []}
    for i, q in enumerate(queries):
        index[part[q.group]].append(i)
    if not index["fit"] or not index["risk"]:
        raise InvalidArgumentError(
            "the split left no queries to fit or to certify on; lower the held-out or fit "
            "fraction, or label more traffic",
            field="traffic",
        )
    return TrafficSplit(
        *(np.asarray(index[name], dtype=np.int64) for name in ("fit", "risk", "holdout"))
    )
