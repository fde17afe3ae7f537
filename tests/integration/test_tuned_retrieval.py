"""A collection re-embedded with its tuned model (``tribunal kb reembed --model tuned``):
retrieval and the feature matcher share that model, so a query costs one forward pass
instead of one per model, and the calibration binds the retrieval model the searches
report. Real MiniLM (the tune's model is a copy of it), in-process stages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.commands._calibration_signals import observe_traffic
from tribunal.confidence import LabelledQuery, Traffic, embedder_version
from tribunal.core import load_settings, model_path
from tribunal.embedding import shared_profile_embedder
from tribunal.ensemble import (
    FeatureEmbedder,
    MatchFeaturesArtifact,
    TunedMatcher,
    features_path,
    tuned_embedder,
    tuned_root,
)
from tribunal.retrieval import KnowledgeBase, writer_signer

from tests.integration._retrieval import ENTRIES, CountingEmbedder

pytestmark = pytest.mark.models

QUERIES = (
    ("how is the virus transmitted", ("spread",)),
    ("incubation period length", ("incubation",)),
    ("can cats get covid", ("pets",)),
)
AFTER = (
    ("how many days to wash hands", ("handwashing",)),
    ("do I need a face mask outside", ("masks",)),
)


def _tune(data: Path) -> TunedMatcher:
    """A tune of collection ``faq`` whose model is a copy of MiniLM and whose head is the
    shipped regression's weights: what ``tribunal tune --encoder-epochs 0 --base embedder``
    writes, without the minutes of fitting."""
    settings = load_settings("tiny", data_dir=str(data))
    staged = tuned_root(data, "faq") / "staged"
    shutil.copytree(model_path(settings, "embedder"), staged / "model")
    MatchFeaturesArtifact.load(features_path(settings)).model_copy(
        update={"embedder": FeatureEmbedder(model_key="tuned", name="all-minilm-l6-v2+tuned:faq")}
    ).save(staged / "match-features.json")
    sealed = TunedMatcher.seal(staged, {"binding": {"collection": "faq"}, "split": {}})
    final = staged.rename(staged.parent / sealed.version)
    (staged.parent / "current").write_text(sealed.version)
    return TunedMatcher.load(final)


def _traffic(rows: tuple[tuple[str, tuple[str, ...]], ...]) -> Traffic:
    queries = tuple(LabelledQuery(q, frozenset(a), f"row:{i}") for i, (q, a) in enumerate(rows))
    return Traffic(queries, sha256="2" * 64, source="traffic.jsonl")


def _queries_embedded(counting: CountingEmbedder, queries: Traffic) -> list[str]:
    wanted = {item.query for item in queries.queries}
    return sorted(text for call in counting.calls for text in call if text in wanted)


def test_a_tuned_collection_embeds_each_query_once_and_binds_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(data))
    monkeypatch.setenv("TRIBUNAL_GATEWAY__COLLECTION", "faq")
    monkeypatch.setenv("TRIBUNAL_ENSEMBLE__MATCHER", "features")
    settings = load_settings("tiny")
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, checker=None, signer=signer)
    kb.upsert("faq", ENTRIES, create=True, self_evidenced=True)
    kb.close()
    tuned = _tune(data)

    # Count what reaches each model: the process's shared embedders, as the stages use them.
    profile = shared_profile_embedder(settings)
    shared_tuned = tuned_embedder(settings, tuned, "all-minilm-l6-v2+tuned:faq")
    assert shared_tuned is not profile
    profile.inner = profile_count = CountingEmbedder(profile.inner)  # type: ignore[arg-type]
    shared_tuned.inner = tuned_count = CountingEmbedder(shared_tuned.inner)  # type: ignore[arg-type]

    # Searched with the profile's model, matched with the tuned one: two passes per query.
    before = _traffic(QUERIES)
    _, binding = observe_traffic(settings, "faq", before)
    assert binding.embedder == embedder_version(settings)
    assert binding.matcher == f"features:{tuned.version}"
    assert _queries_embedded(profile_count, before) == sorted(q for q, _ in QUERIES)
    assert _queries_embedded(tuned_count, before) == sorted(q for q, _ in QUERIES)

    assert main(["kb", "reembed", "--collection", "faq", "--model", "tuned"]) == 0
    after = _traffic(AFTER)
    observed, binding = observe_traffic(settings, "faq", after)
    assert binding.embedder == f"tuned:{tuned.version}"
    assert binding.matcher == f"features:{tuned.version}"
    # One pass per query: retrieval's, whose vector the matcher found in the shared memory.
    assert _queries_embedded(tuned_count, after) == sorted(q for q, _ in AFTER)
    assert _queries_embedded(profile_count, after) == []
    # And the tuned retrieval found the right entries.
    first = [next(c.entry_id for c in found if c.signals.retrieval_rank == 1) for found in observed]
    assert first == ["handwashing", "masks"]
