"""Answer-equivalence classes of a KB: entries that answer the same question alike.

Several entries of one KB can answer one query — the same FAQ question asked and
answered by two agencies — so a labelled query must list *every* entry that
answers it, or a right answer is counted as a hallucination. The classes are
built in two steps and stored with both, so a reviewer can rerun and diff them:

1. **Rule** (:func:`candidate_links`): link two entries when the cosine of their
   questions under an embedder is ≥ ``question_cosine`` *and* rapidfuzz's
   token-set ratio of their answers is ≥ ``answer_ratio`` (the same intent, and
   answers that share their content).
2. **Review**: a person reads every link and rejects the ones that are not the
   same question (risk of *infection* vs risk of *severe illness*), and adds the
   ones the rule missed, each with a reason.

Classes are the connected components of the reviewed links
(:func:`classes_from_links`, ``scipy.sparse.csgraph``); an entry in no link is a
class of its own and is not listed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, InvalidArgumentError, NotFoundError

__all__ = [
    "CLASSES_FORMAT",
    "AnswerClasses",
    "ClassRule",
    "ReviewedLink",
    "candidate_links",
    "classes_from_links",
]

CLASSES_FORMAT = "tribunal.answer-classes/1"


@dataclass(frozen=True)
class ClassRule:
    """The linking rule: embedder and the two thresholds."""

    embedder: str
    """Model key of the profile's embedder the questions are embedded with."""
    question_cosine: float = 0.85
    answer_ratio: float = 0.5

    def __post_init__(self) -> None:
        for name in ("question_cosine", "answer_ratio"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InvalidArgumentError(f"{name} must be in (0, 1], got {value}", field=name)


@dataclass(frozen=True)
class ReviewedLink:
    """A reviewer's decision on one pair of entries."""

    pair: tuple[str, str]
    """The two entry ids, sorted."""
    reason: str

    @classmethod
    def of(cls, a: str, b: str, reason: str) -> ReviewedLink:
        first, second = sorted((a, b))
        return cls((first, second), reason)


def candidate_links(
    ids: Sequence[str],
    question_vectors: NDArray[np.float32] | NDArray[np.float64],
    answers: Sequence[str],
    rule: ClassRule,
) -> list[tuple[str, str, float, float]]:
    """Pairs the rule links: ``(id_a, id_b, question cosine, answer ratio)``, ids sorted
    within a pair, pairs sorted.

    ``question_vectors`` are unit-length rows in ``ids`` order.
    """
    from rapidfuzz import fuzz, utils

    if not len(ids) == len(answers) == len(question_vectors):
        raise InvalidArgumentError("ids, vectors and answers differ in length", field="kb")
    vectors = np.asarray(question_vectors, dtype=np.float64)
    cosine = vectors @ vectors.T
    links = []
    rows, cols = np.nonzero(np.triu(cosine >= rule.question_cosine, k=1))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        ratio = fuzz.token_set_ratio(answers[i], answers[j], processor=utils.default_process)
        if ratio / 100 >= rule.answer_ratio:
            a, b = sorted((ids[i], ids[j]))
            links.append((a, b, round(float(cosine[i, j]), 4), round(ratio / 100, 4)))
    return sorted(links)


def classes_from_links(ids: Sequence[str], links: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components with ≥ 2 entries, each sorted, ordered by their first id."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    index = {entry_id: i for i, entry_id in enumerate(ids)}
    pairs = [(index[a], index[b]) for a, b in links]
    if not pairs:
        return []
    rows = [p[0] for p in pairs]
    cols = [p[1] for p in pairs]
    graph = coo_matrix((np.ones(len(pairs)), (rows, cols)), shape=(len(ids), len(ids)))
    _, labels = connected_components(graph, directed=False)
    groups: dict[int, list[str]] = {}
    for entry_id, label in zip(ids, labels, strict=True):
        groups.setdefault(int(label), []).append(entry_id)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


@dataclass(frozen=True)
class AnswerClasses:
    """A KB's reviewed answer-equivalence classes (see the module docstring)."""

    kb: Mapping[str, Any]
    """The KB they were built from: ``source``, ``sha256`` of its file, ``entries``."""
    rule: ClassRule
    links: tuple[tuple[str, str, float, float], ...]
    """What the rule linked (before review)."""
    rejected: tuple[ReviewedLink, ...] = ()
    added: tuple[ReviewedLink, ...] = ()
    classes: tuple[tuple[str, ...], ...] = ()
    """The reviewed classes (≥ 2 entries each)."""
    entries: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Question and source of every entry in a class, for a reader of the file."""

    @classmethod
    def build(
        cls,
        kb: Mapping[str, Any],
        ids: Sequence[str],
        links: Sequence[tuple[str, str, float, float]],
        rule: ClassRule,
        *,
        rejected: Sequence[ReviewedLink] = (),
        added: Sequence[ReviewedLink] = (),
        described: Mapping[str, Mapping[str, str]] | None = None,
    ) -> AnswerClasses:
        """Apply the review to the rule's links and take the components.

        Raises:
            FailedPreconditionError: a rejected pair the rule did not link, or a pair
                naming an entry the KB does not have (a stale review).
        """
        known = set(ids)
        linked = {(a, b) for a, b, _, _ in links}
        for review in (*rejected, *added):
            missing = [e for e in review.pair if e not in known]
            if missing:
                raise FailedPreconditionError(
                    f"the review names entry {missing[0]} that the KB does not have"
                )
        stale = [r.pair for r in rejected if r.pair not in linked]
        if stale:
            raise FailedPreconditionError(
                f"the review rejects {stale[0]}, which the rule no longer links; update it"
            )
        kept = (linked - {r.pair for r in rejected}) | {r.pair for r in added}
        classes = tuple(tuple(c) for c in classes_from_links(ids, sorted(kept)))
        in_class = {e for c in classes for e in c}
        entries = {e: dict(described[e]) for e in sorted(in_class) if described and e in described}
        return cls(kb, rule, tuple(links), tuple(rejected), tuple(added), classes, entries)

    def class_of(self, entry_id: str) -> frozenset[str]:
        """Every entry equivalent to ``entry_id`` (itself included)."""
        for members in self.classes:
            if entry_id in members:
                return frozenset(members)
        return frozenset({entry_id})

    def expand(self, entry_ids: Iterable[str]) -> frozenset[str]:
        """The union of the classes of ``entry_ids``."""
        out: set[str] = set()
        for entry_id in entry_ids:
            out |= self.class_of(entry_id)
        return frozenset(out)

    def differences(self, other: AnswerClasses) -> list[str]:
        """What differs from ``other`` in links and classes (empty: the same)."""
        lines = []
        mine = {(a, b) for a, b, _, _ in self.links}
        theirs = {(a, b) for a, b, _, _ in other.links}
        lines += [f"rule now links {p} (not in the file)" for p in sorted(mine - theirs)]
        lines += [f"rule no longer links {p} (in the file)" for p in sorted(theirs - mine)]
        new, old = set(self.classes), set(other.classes)
        lines += [f"class now: {list(c)}" for c in sorted(new - old)]
        lines += [f"class in the file only: {list(c)}" for c in sorted(old - new)]
        return lines

    # -- files -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": CLASSES_FORMAT,
            "kb": dict(self.kb),
            "method": {
                "rule": "link two entries when cos(question, question) under the embedder "
                ">= question_cosine and rapidfuzz token_set_ratio(answer, answer) / 100 >= "
                "answer_ratio; apply the review (rejected / added links); classes are the "
                "connected components",
                "embedder": self.rule.embedder,
                "question_cosine": self.rule.question_cosine,
                "answer_ratio": self.rule.answer_ratio,
            },
            "links": [list(link) for link in self.links],
            "review": {
                "rejected": [{"pair": list(r.pair), "reason": r.reason} for r in self.rejected],
                "added": [{"pair": list(r.pair), "reason": r.reason} for r in self.added],
            },
            "classes": [list(c) for c in self.classes],
            "entries": {k: dict(v) for k, v in self.entries.items()},
        }

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> AnswerClasses:
        """Read a classes file.

        Raises:
            NotFoundError: no such file.
            FailedPreconditionError: not a classes file of this format.
        """
        if not path.is_file():
            raise NotFoundError(f"answer-classes file {path} does not exist")
        try:
            data = json.loads(path.read_text())
            if data.get("format") != CLASSES_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {CLASSES_FORMAT}")
            method = data["method"]

            def reviewed(items: list[dict[str, Any]]) -> tuple[ReviewedLink, ...]:
                return tuple(
                    ReviewedLink.of(i["pair"][0], i["pair"][1], i["reason"]) for i in items
                )

            return cls(
                kb=data["kb"],
                rule=ClassRule(
                    method["embedder"], method["question_cosine"], method["answer_ratio"]
                ),
                links=tuple((a, b, float(c), float(r)) for a, b, c, r in data["links"]),
                rejected=reviewed(data["review"]["rejected"]),
                added=reviewed(data["review"]["added"]),
                classes=tuple(tuple(c) for c in data["classes"]),
                entries=data.get("entries", {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FailedPreconditionError(f"{path} is not an answer-classes file: {exc}") from None


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (the KB file the classes were built from)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
