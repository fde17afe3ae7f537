"""A collection is searched with the model its store records: re-embedding swaps every
vector and that name at once, a process holding the old model reopens, a stale write is
refused, and searches report the model (calibrations are bound to it). Fake embedders:
deterministic vectors, no model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.core import FailedPreconditionError, InternalError, RetrievalSettings
from tribunal.kb import KbEntry
from tribunal.retrieval import KnowledgeBase, SearchQuery
from tribunal.retrieval._retrieval_models import RetrievalModels
from tribunal.retrieval._store import EntryStore, RetrievalModelChangedError


class LetterEmbedder:
    """Unit vectors of letter counts (``dimension`` letters), so a text finds itself;
    ``texts`` lists every text it embedded."""

    def __init__(self, name: str, dimension: int) -> None:
        self.name = name
        self.dimension = dimension
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        self.texts.extend(texts)
        rows = np.ones((len(texts), self.dimension), dtype=np.float32) * 0.01
        for row, text in enumerate(texts):
            for char in text.lower():
                if char.isalpha():
                    rows[row, (ord(char) - ord("a")) % self.dimension] += 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


ENTRIES = [
    KbEntry("card", "Where is my new card?", "It arrives in five days."),
    KbEntry("pin", "How do I change my PIN?", "In the app, under security."),
    KbEntry("rate", "What exchange rate do you use?", "The daily market rate."),
]
TUNED = "tuned:tm-000000000001"


def _models(profile: LetterEmbedder, tuned: LetterEmbedder) -> RetrievalModels:
    def load(collection: str, model: str) -> LetterEmbedder:
        if model != TUNED:
            raise FailedPreconditionError(f"no model {model} for {collection}")
        return tuned

    return RetrievalModels(profile, profile_version="profile@0123456789ab", load=load)


def _kb(root: Path, profile: LetterEmbedder, tuned: LetterEmbedder) -> KnowledgeBase:
    return KnowledgeBase(
        root, profile, RetrievalSettings(), checker=None, models=_models(profile, tuned)
    )


def _ingested(
    root: Path, profile: LetterEmbedder, tuned: LetterEmbedder, *collections: str
) -> KnowledgeBase:
    """A knowledge base with ``ENTRIES`` in each collection (default: ``faq``)."""
    kb = _kb(root, profile, tuned)
    for name in collections or ("faq",):
        kb.upsert(name, ENTRIES, create=True, self_evidenced=True)
    return kb


def _query(text: str, collection: str = "faq") -> SearchQuery:
    return SearchQuery(text=text, collection=collection, top_k=3)


@pytest.fixture
def embedders() -> tuple[LetterEmbedder, LetterEmbedder]:
    return LetterEmbedder("profile-model", 16), LetterEmbedder(TUNED, 24)


def test_reembedding_swaps_every_vector_and_the_reported_model(
    tmp_path: Path, embedders: tuple[LetterEmbedder, LetterEmbedder]
) -> None:
    profile, tuned = embedders
    kb = _ingested(tmp_path, profile, tuned)
    before = kb.search(_query("change my PIN"))
    assert before.retrieval_model == "profile@0123456789ab"
    assert before.hits[0].entry.id == "pin"
    content = before.kb_content_version

    units = kb.reembed("faq", TUNED)
    assert units == len(tuned.texts) == 6  # each entry's question and answer
    stats = kb.stats("faq")[0]
    assert (stats.embedder, stats.dimension) == (TUNED, 24)
    profile.texts.clear()
    after = kb.search(_query("change my PIN"))
    assert after.retrieval_model == TUNED
    assert after.hits[0].entry.id == "pin"
    assert after.hits[0].dense_score == pytest.approx(
        float(tuned.embed(["change my PIN"])[0] @ tuned.embed([ENTRIES[1].question])[0]), abs=1e-5
    )
    assert profile.texts == []  # the query went to the tuned model only
    assert after.kb_content_version == content  # entries untouched
    kb.close()

    # A restart opens it with the model its store records; back to the profile works too.
    reopened = _kb(tmp_path, profile, tuned)
    assert reopened.search(_query("exchange rate")).retrieval_model == TUNED
    reopened.reembed("faq", profile.name)
    assert reopened.search(_query("exchange rate")).retrieval_model == "profile@0123456789ab"
    assert reopened.stats("faq")[0].dimension == 16
    reopened.close()


def test_a_process_holding_the_old_model_reopens_and_a_stale_write_is_refused(
    tmp_path: Path, embedders: tuple[LetterEmbedder, LetterEmbedder]
) -> None:
    profile, tuned = embedders
    writer = _ingested(tmp_path, profile, tuned)
    server = _kb(tmp_path, profile, tuned)
    assert server.search(_query("new card")).retrieval_model == "profile@0123456789ab"
    stale = EntryStore(tmp_path / "faq" / "entries.sqlite3", dimension=16, embedder=profile.name)

    writer.reembed("faq", TUNED)

    # The serving process notices at its next search and reopens with the new model.
    found = server.search(_query("new card"))
    assert (found.retrieval_model, found.hits[0].entry.id) == (TUNED, "card")
    server.upsert("faq", [KbEntry("fee", "Is there a card fee?", "No fee.")])
    assert writer.search(_query("card fee")).hits[0].entry.id == "fee"
    # A store opened under the old model may not mix its vectors in.
    vector = profile.embed(["Any fee?"])
    with pytest.raises(RetrievalModelChangedError, match="re-embedded with 'tuned:tm-"):
        stale.write([(KbEntry("x", "Any fee?", "No."), ["question"], ["Any fee?"], vector)])
    stale.close()
    # And a store opened with the wrong model is refused with the command that fixes it.
    with pytest.raises(ValueError, match="tribunal kb reembed"):
        EntryStore(tmp_path / "faq" / "entries.sqlite3", dimension=16, embedder=profile.name)
    writer.close()
    server.close()


def test_a_collection_of_a_model_this_service_cannot_load_fails_alone(
    tmp_path: Path, embedders: tuple[LetterEmbedder, LetterEmbedder]
) -> None:
    profile, tuned = embedders
    kb = _ingested(tmp_path, profile, tuned)
    kb.upsert("other", ENTRIES[:1], create=True, self_evidenced=True)
    kb.reembed("faq", TUNED)
    kb.close()
    plain = KnowledgeBase(tmp_path, profile, RetrievalSettings(), checker=None)
    assert (
        "tribunal kb reembed --collection faq --model profile"
        in (plain.failed_collections()["faq"])
    )
    assert plain.search(_query("new card", "other")).hits[0].entry.id == "card"
    plain.close()


def test_a_batch_over_two_models_embeds_each_query_once_with_its_collections_model(
    tmp_path: Path, embedders: tuple[LetterEmbedder, LetterEmbedder]
) -> None:
    profile, tuned = embedders
    kb = _ingested(tmp_path, profile, tuned, "faq", "other")
    kb.reembed("faq", TUNED)
    profile.texts.clear()
    tuned.texts.clear()
    results = kb.search_batch(
        [_query("new card"), _query("exchange rate", "other"), _query("my PIN")]
    )
    assert [r.retrieval_model for r in results] == [TUNED, "profile@0123456789ab", TUNED]
    assert [r.hits[0].entry.id for r in results] == ["card", "rate", "pin"]
    assert (tuned.texts, profile.texts) == (["new card", "my PIN"], ["exchange rate"])
    # Vectors computed elsewhere are the profile model's: refused for a tuned collection.
    with pytest.raises(InternalError, match="profile model's"):
        kb.search_batch([_query("new card")], query_vectors=profile.embed(["new card"]))
    kb.close()


def test_writes_that_land_while_re_embedding_are_embedded_too(
    tmp_path: Path, embedders: tuple[LetterEmbedder, LetterEmbedder]
) -> None:
    profile, tuned = embedders
    kb = _ingested(tmp_path, profile, tuned)
    store = kb.collection("faq").store
    late = KbEntry("late", "Can I freeze my card?", "Yes, in the app.")
    passes: list[list[str]] = []

    def embed_with_a_write(texts: list[str]) -> NDArray[np.float32]:
        passes.append(texts)
        if len(passes) == 1:  # another writer lands during the first pass
            other = EntryStore(store.path, dimension=16, embedder=profile.name)
            written = [late.question, late.answer]
            other.write([(late, ["question", "answer"], written, profile.embed(written))])
            other.close()
        return tuned.embed(texts)

    assert store.reembed(TUNED, 24, embed_with_a_write) == 8
    assert [len(p) for p in passes] == [6, 2]  # only the new texts embedded again
    _, _, _, texts, vectors = store.all_units()
    np.testing.assert_allclose(vectors, tuned.embed(texts), atol=1e-6)
    kb.close()
