"""Entry vectors across ``tribunal tune`` (no encoder fine-tune): the tune reads the
vectors the KB stored at ingestion and stores those of the phrasings it teaches, so the
tuned matcher it leaves — in this process or another — embeds only queries.

A real tune on BANKING77 queries (8 intents; the tiny profile's feature matcher, MPNet,
served before the tune), in seconds."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from tribunal.commands.tune import tune_collection
from tribunal.confidence import LabelledQuery, Traffic
from tribunal.core import load_settings
from tribunal.embedding import VectorStore
from tribunal.ensemble import TunedMatcher, precompute_entry_vectors
from tribunal.ensemble._feature_matcher import FeatureMatcher
from tribunal.ensemble._match_features import entry_texts
from tribunal.ensemble._matcher import MatchRequestItem
from tribunal.kb import KbEntry
from tribunal.retrieval import KnowledgeBase, writer_signer
from tribunal.tuning import TuneConfig
from tribunal_lab.datasets.banking77 import read_banking77

from tests.conftest import SHARED

pytestmark = pytest.mark.models

BASE = "all-mpnet-base-v2"
INTENTS = 8


def _bank(seed: int = 3) -> tuple[list[KbEntry], Traffic]:
    """8 intents as KB entries (two phrasings each, a two-sentence answer) and 20 other
    queries of each as labelled traffic, plus 16 queries of other intents (out of scope)."""
    _, _, by_intent = read_banking77(SHARED / "data" / "banking77")
    rng = random.Random(seed)
    intents = rng.sample(sorted(by_intent), INTENTS + 4)
    entries, rows = [], []
    for intent in intents[:INTENTS]:
        queries = rng.sample(sorted(set(by_intent[intent])), 22)
        name = intent.replace("_", " ")
        answer = f"About {name}: our help pages explain it. Call us if it is still open."
        entries.append(KbEntry(intent, queries[0], answer, questions=(queries[1],)))
        rows += [(q, (intent,)) for q in queries[2:]]
    for intent in intents[INTENTS:]:
        rows += [(q, ()) for q in rng.sample(sorted(set(by_intent[intent])), 4)]
    traffic = Traffic(
        tuple(LabelledQuery(q, frozenset(a), f"row:{i}") for i, (q, a) in enumerate(rows)),
        sha256="3" * 64,
        source="traffic.jsonl",
    )
    return entries, traffic


def test_a_tune_without_fine_tune_shares_the_kbs_entry_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(data))
    monkeypatch.setenv("TRIBUNAL_ENSEMBLE__MATCHER", "features")
    settings = load_settings("tiny")
    entries, traffic = _bank()
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, checker=None, signer=signer)
    kb.upsert("bank", entries, create=True, self_evidenced=True)
    kb.close()
    # What `tribunal kb ingest` does: each phrasing, the answer, each phrasing + answer.
    assert precompute_entry_vectors(settings, entries) == INTENTS * 5

    config = TuneConfig(seed=0, epochs=0.0, min_train_answerable=10, min_heldout=10)
    tuned, _, outcome = tune_collection(settings, "bank", traffic, config)
    taught = outcome.metrics["teaching"]["phrasings_added"]
    assert taught > 0
    assert tuned.weights_unchanged
    assert tuned.vectors_name == BASE
    # No head part without a fine-tune: the head fits on every train query, each with
    # the phrasing it taught left out.
    assert outcome.split.head == ()
    assert outcome.head.fitted_on["part"] == "train, left out"
    assert outcome.head.fitted_on["queries"] == len(outcome.split.train)

    # Every taught entry's texts are in the base model's store, as the tune embedded them.
    served = load_settings("tiny", gateway={"collection": "bank"})
    kb = KnowledgeBase.from_settings(served, checker=None)
    try:
        stored_entries = list(kb.collection("bank").store.iter_entries())
    finally:
        kb.close()
    texts = list(
        dict.fromkeys(
            text
            for entry in stored_entries
            for phrasing in entry.phrasings()
            for text in entry_texts(phrasing, entry.answer)
        )
    )
    assert len(texts) == INTENTS * 5 + 2 * taught
    store = VectorStore.for_model(data, model=BASE, dimension=768)
    try:
        vectors = store.get(texts)
    finally:
        store.close()
    assert set(vectors) == set(texts)

    # A fresh tuned matcher embeds the query only: every entry text comes from the store,
    # and the stored vectors are the tuned model's own.
    matcher = FeatureMatcher.from_settings(served)
    assert matcher.version == tuned.version
    model = matcher.embedder
    before = model.texts_  # type: ignore[attr-defined]
    query = "the card I ordered never came"
    items = [MatchRequestItem(query=query, candidate=entry) for entry in stored_entries]
    results = matcher.match(items)
    assert len(results) == INTENTS
    assert model.texts_ - before == 1  # type: ignore[attr-defined]
    sample = texts[:: max(1, len(texts) // 12)]
    fresh = model.embed(sample)
    assert np.abs(fresh - np.stack([vectors[t] for t in sample])).max() < 1e-4

    # A new entry of the tuned collection gets its vectors at ingestion, in the same store.
    extra = KbEntry("extra", "Can I freeze my card?", "Yes: in the app, under Cards.")
    assert precompute_entry_vectors(served, [extra]) == 3
    assert precompute_entry_vectors(served, [extra]) == 0


def test_a_fine_tuned_model_keeps_its_vectors_apart(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "weights.bin").write_bytes(b"\0" * 8)
    fine_tuned = TunedMatcher.seal(
        staged, {"base": {"model_key": "embedder", "name": BASE}, "config": {"epochs": 1.0}}
    )
    assert not fine_tuned.weights_unchanged
    assert fine_tuned.vectors_name == f"tuned:{fine_tuned.version}"
    as_base = TunedMatcher.seal(
        staged, {"base": {"model_key": "embedder", "name": BASE}, "config": {"epochs": 0.0}}
    )
    assert as_base.vectors_name == BASE
    # A manifest that does not say how it was tuned is taken as fine-tuned.
    unknown = TunedMatcher.seal(staged, {"base": {"model_key": "embedder", "name": BASE}})
    assert unknown.vectors_name == f"tuned:{unknown.version}"
