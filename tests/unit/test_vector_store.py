"""VectorStore: vectors survive a reopen, one file never mixes models, a torn row is
recomputed; CachingEmbedder reads through it before the model runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.embedding import CachingEmbedder, VectorStore


class CountingHash:
    """A deterministic embedder (vectors from the text's bytes) that records its calls."""

    name = "hash-4"
    dimension = 4

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        rows = [[len(t), sum(map(ord, t)) % 97, t.count(" "), 1.0] for t in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), 4)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


def test_vectors_survive_a_reopen_and_models_never_mix(tmp_path: Path) -> None:
    store = VectorStore.for_model(tmp_path, model="org/model v1", dimension=4)
    assert store.path == tmp_path / "vectors" / "org_model_v1.sqlite"
    vectors = CountingHash().embed(["a question", "an answer"])
    store.put(["a question", "an answer"], vectors)
    store.close()

    again = VectorStore.for_model(tmp_path, model="org/model v1", dimension=4)
    found = again.get(["an answer", "never stored", "a question"])
    assert sorted(found) == ["a question", "an answer"]
    np.testing.assert_array_equal(found["an answer"], vectors[1])
    assert len(again) == 2
    again.close()
    with pytest.raises(ValueError, match="holds vectors of org/model v1, not other"):
        VectorStore(again.path, model="other", dimension=4)


def test_a_row_of_the_wrong_length_is_not_served(tmp_path: Path) -> None:
    store = VectorStore.for_model(tmp_path, model="m", dimension=4)
    store.put(["text"], CountingHash().embed(["text"]))
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE vectors SET vector = ?", (b"\x00" * 8,))
    assert store.get(["text"]) == {}


def test_caching_embedder_reads_through_the_store(tmp_path: Path) -> None:
    first = CountingHash()
    writer = CachingEmbedder(
        first, store=VectorStore.for_model(tmp_path, model=first.name, dimension=4)
    )
    written = writer.embed(["q1", "entry answer", "q1"])
    assert first.calls == [["q1", "entry answer"]]

    # Another process on the same data directory: nothing reaches its model.
    second = CountingHash()
    reader = CachingEmbedder(
        second, store=VectorStore.for_model(tmp_path, model=second.name, dimension=4)
    )
    read = reader.embed(["entry answer", "new text"])
    assert second.calls == [["new text"]]
    np.testing.assert_array_equal(read[0], written[1])
    assert reader.embed([]).shape == (0, 4)
