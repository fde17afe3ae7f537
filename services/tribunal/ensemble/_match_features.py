"""Cheap matching features of (query, KB entry) pairs: embedding cosines and a fuzzy ratio.

One function computes them for both the evaluation that fits the feature matcher
(``tribunal-lab eval matching-features``) and the :class:`FeatureMatcher` that serves it, so
the served model sees exactly the features it was fitted on.

- ``cos_question``, ``cos_answer``, ``cos_question_answer``: the embedder's cosine of the
  query with the candidate's question, its answer, and question + " " + answer (the
  embedder returns normalised vectors, so the dot product is the cosine);
- ``token_set``: rapidfuzz's token-set ratio / 100 of the query and the question.

An entry with several phrasings of its question (``KbEntry.questions``) is one answer
asked several ways: each question feature is the maximum over its phrasings (the
phrasing closest to the query decides), ``cos_answer`` is the answer's alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..core import python_turn

if TYPE_CHECKING:
    from ..embedding import Embedder

__all__ = ["MATCH_FEATURES", "match_feature_values"]

MATCH_FEATURES: tuple[str, ...] = (
    "cos_question",
    "cos_answer",
    "cos_question_answer",
    "token_set",
)
"""Every feature :func:`match_feature_values` computes, in this order."""


def entry_texts(question: str, answer: str) -> tuple[str, str, str]:
    """The texts of one KB entry the features embed: its question, its answer, both."""
    return question, answer, f"{question} {answer}"


def match_feature_values(
    queries: Sequence[str],
    questions: Sequence[str],
    answers: Sequence[str],
    embedder: Embedder,
    *,
    progress: bool = False,
    entry_embedder: Embedder | None = None,
    phrasings: Sequence[Sequence[str]] | None = None,
) -> dict[str, NDArray[np.float64]]:
    """The :data:`MATCH_FEATURES` of each (query, question, answer) triple.

    Every distinct text is embedded once (a batch of queries against one entry shares
    the entry's vectors); the entries' texts with ``entry_embedder`` where given (one
    that keeps them, :func:`precompute_entry_vectors`), else with ``embedder``.

    ``phrasings``: per triple, every phrasing of its entry's question (``questions[i]``
    among them); the question features are then maxima over them.
    """
    if phrasings is None:
        return _pair_feature_values(
            queries, questions, answers, embedder, progress=progress, entry_embedder=entry_embedder
        )
    if not len(phrasings) == len(queries) == len(answers):
        raise ValueError("queries, phrasings and answers differ in length")
    owner = [i for i, texts in enumerate(phrasings) for _ in (texts or [questions[i]])]
    flat = [text for i, texts in enumerate(phrasings) for text in (texts or [questions[i]])]
    values = _pair_feature_values(
        [queries[i] for i in owner],
        flat,
        [answers[i] for i in owner],
        embedder,
        progress=progress,
        entry_embedder=entry_embedder,
    )
    rows = np.asarray(owner, dtype=np.int64)
    out: dict[str, NDArray[np.float64]] = {}
    with python_turn():
        for name, column in values.items():
            # The question features: the best phrasing's; cos_answer is the same for every
            # phrasing of an entry, so its maximum is itself.
            reduced = np.full(len(queries), -np.inf)
            np.maximum.at(reduced, rows, column)
            out[name] = reduced
    return out


def _pair_feature_values(
    queries: Sequence[str],
    questions: Sequence[str],
    answers: Sequence[str],
    embedder: Embedder,
    *,
    progress: bool,
    entry_embedder: Embedder | None,
) -> dict[str, NDArray[np.float64]]:
    from rapidfuzz import fuzz, utils

    if not len(queries) == len(questions) == len(answers):
        raise ValueError("queries, questions and answers differ in length")
    both = [entry_texts(q, a)[2] for q, a in zip(questions, answers, strict=True)]
    if entry_embedder is None:
        unique = list(dict.fromkeys([*queries, *questions, *answers, *both]))
        vectors = embedder.embed(unique, progress=progress).astype(np.float64)
    else:
        asked = list(dict.fromkeys(queries))
        entries = [t for t in dict.fromkeys([*questions, *answers, *both]) if t not in asked]
        unique = asked + entries
        vectors = np.concatenate(
            [
                embedder.embed(asked, progress=progress),
                entry_embedder.embed(entries, progress=progress),
            ]
        ).astype(np.float64)
    row = {text: i for i, text in enumerate(unique)}

    def cosine(texts: Sequence[str]) -> NDArray[np.float64]:
        right = vectors[[row[t] for t in texts]]
        products: NDArray[np.float64] = np.einsum("ij,ij->i", left, right)
        return products

    with python_turn():  # the vectors are in: what is left waits for no other thread
        left = vectors[[row[q] for q in queries]]
        return {
            "cos_question": cosine(questions),
            "cos_answer": cosine(answers),
            "cos_question_answer": cosine(both),
            "token_set": np.array(
                [
                    fuzz.token_set_ratio(q, c, processor=utils.default_process) / 100
                    for q, c in zip(queries, questions, strict=True)
                ],
                dtype=np.float64,
            ),
        }
