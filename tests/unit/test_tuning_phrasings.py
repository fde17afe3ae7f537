"""The tune sees an entry's phrasings as the served matcher does: every question feature is
the maximum over the entry's phrasings, and each phrasing can be a training positive."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tribunal.confidence import read_traffic
from tribunal.ensemble import MATCH_FEATURES, match_feature_values
from tribunal.tuning import EntryTexts, pair_features, split_for_tuning
from tribunal.tuning._contrastive import contrastive_examples


class HashEmbedder:
    """Deterministic unit vectors from a text's bytes (no model)."""

    name = "hash-8"
    dimension = 8

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        rows = [
            [sum(ord(c) * (k + 1) for c in t) % (13 + k) + 1.0 for k in range(8)] for t in texts
        ]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), 8)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


ENTRIES = EntryTexts(
    ids=("card", "rate", "pin"),
    questions=("where is my card", "what is the exchange rate", "how do I change my pin"),
    answers=("Card arrival.", "Exchange rate.", "Change pin."),
    phrasings=(
        ("where is my card", "my card has not arrived yet", "card still missing"),
        ("what is the exchange rate",),
        ("how do I change my pin", "new pin please"),
    ),
)
QUERIES = ("card not arrived", "exchange rate today", "pin change", "nothing related at all")


def test_pair_features_equal_the_served_matchers_features_with_phrasings() -> None:
    embedder = HashEmbedder()
    matrix = pair_features(QUERIES, ENTRIES, embedder)
    rows = [(i, j) for i in range(len(QUERIES)) for j in range(len(ENTRIES.ids))]
    served = match_feature_values(
        [QUERIES[i] for i, _ in rows],
        [ENTRIES.questions[j] for _, j in rows],
        [ENTRIES.answers[j] for _, j in rows],
        embedder,
        phrasings=[ENTRIES.phrasings[j] for _, j in rows],
    )
    for name in MATCH_FEATURES:
        got = np.asarray([matrix.values[name][i, j] for i, j in rows])
        np.testing.assert_allclose(got, served[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_without_phrasings_an_entry_is_its_question_alone() -> None:
    plain = EntryTexts(ENTRIES.ids, ENTRIES.questions, ENTRIES.answers)
    assert plain.all_phrasings() == tuple((q,) for q in ENTRIES.questions)


def test_examples_use_the_phrasings_as_positives_and_pairs(tmp_path: Path) -> None:
    rows = [{"query": f"card question {i}", "answers": ["card"]} for i in range(12)]
    rows += [{"query": f"pin question {i}", "answers": ["pin"]} for i in range(12)]
    rows += [{"query": f"weather {i}", "answers": []} for i in range(6)]
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    traffic = read_traffic(path)
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    columns, counts = contrastive_examples(traffic, split, ENTRIES, HashEmbedder(), seed=0)
    answerable_train = sum(1 for i in split.train if traffic.queries[i].answers)
    # One triple per answerable train query; consecutive phrasings of each entry pair up.
    assert counts == {"query_triples": answerable_train, "phrasing_pairs": 3, "answer_pairs": 0}
    by_entry = {text: j for j, texts in enumerate(ENTRIES.phrasings) for text in texts}
    for anchor, positive, negative in zip(
        columns["anchor"], columns["positive"], columns["negative"], strict=True
    ):
        # The negative is always another entry's phrasing than the positive's.
        assert by_entry[positive] != by_entry[negative]
        if anchor in by_entry:
            assert by_entry[anchor] == by_entry[positive]
    again, _ = contrastive_examples(traffic, split, ENTRIES, HashEmbedder(), seed=0)
    assert again == columns


def test_a_served_entry_with_phrasings_hashes_as_its_writer_signed_it() -> None:
    """The gateway checks the served entry's sha256 against the signed one: its
    phrasings are part of the entry, so they must be part of what it hashes."""
    from tribunal.gateway._provenance import ProvenanceMemory
    from tribunal.kb import KbEntry, entry_sha256, entry_to_proto

    entry = KbEntry("card", "where is my card", "Card arrival.", questions=("card missing",))
    assert ProvenanceMemory().entry_sha256(entry_to_proto(entry)) == entry_sha256(entry)
