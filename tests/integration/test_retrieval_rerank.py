"""Reranking the fused head: the tiny profile's LLM yes/no checker, and the cross-encoder path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tribunal.core import Settings, model_path
from tribunal.retrieval import KnowledgeBase, SearchQuery, load_profile_reranker
from tribunal.retrieval._rerank import CrossEncoderReranker, LazyReranker, LlmReranker
from tribunal.retrieval.servicer import profile_reranker

from tests.integration._retrieval import COLLECTION, ENTRIES, minilm

pytestmark = pytest.mark.models


def test_the_llm_reranker_reorders_the_head_by_p_yes(
    tiny_settings: Settings, tmp_path: Path
) -> None:
    reranker = load_profile_reranker(tiny_settings)  # Qwen2.5-Coder-1.5B, profile backend
    assert isinstance(reranker, LlmReranker)
    kb = KnowledgeBase(
        tmp_path, minilm(), tiny_settings.retrieval.model_copy(update={"rerank_head": 3}), reranker
    )
    kb.upsert(COLLECTION, ENTRIES, create=True)
    query = SearchQuery(COLLECTION, "Can my cat get sick from the coronavirus?", 4, rerank=True)
    result = kb.search(query)
    head, tail = result.hits[:3], result.hits[3:]
    assert head[0].entry.id == "pets"
    scores = [h.rerank_score for h in head]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert [h.score for h in head] == scores  # the ordering score is the reranker's
    assert all(h.rerank_score is None for h in tail)  # beyond the head: fused order
    assert [h.rank for h in result.hits] == [1, 2, 3, 4]
    assert "rerank" in result.stage_milliseconds
    kb.close()


def test_the_service_loads_its_reranker_only_when_a_search_asks(tiny_settings: Settings) -> None:
    reranker = profile_reranker(tiny_settings)
    assert isinstance(reranker, LazyReranker)
    assert reranker.name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert reranker._loaded is None
    off = tiny_settings.model_copy(
        update={"retrieval": tiny_settings.retrieval.model_copy(update={"rerank_enabled": False})}
    )
    assert profile_reranker(off) is None


def test_a_cross_encoder_reranker_scores_probabilities(tiny_settings: Settings) -> None:
    from sentence_transformers import CrossEncoder

    # No reranking cross-encoder is installable offline: MiniLM's real encoder with a
    # freshly initialised one-logit head exercises the same code path.
    torch.manual_seed(0)
    model = CrossEncoder(str(model_path(tiny_settings, "embedder")), num_labels=1, device="cpu")
    reranker = CrossEncoderReranker(model, name="minilm-untrained-head")
    scores = reranker.score("how does the virus spread", ["droplets", "cats", "handwashing"])
    assert len(scores) == 3
    assert all(0.0 < s < 1.0 for s in scores)
    assert reranker.score("anything", []) == []
