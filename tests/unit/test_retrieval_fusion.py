"""Reciprocal rank fusion and reranking order."""

from __future__ import annotations

import pytest
from tribunal.kb import Chunk, KbEntry
from tribunal.retrieval._fusion import reciprocal_rank_fusion
from tribunal.retrieval._rerank import rerank_order, rerank_passage


def test_rrf_scores_are_sums_of_reciprocal_ranks_with_k_60() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_orders_by_fused_score_and_agreement_beats_one_list() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c", "d"], ["d", "c", "x", "y"]])
    ids = [item for item, _ in fused]
    # c (ranks 3 and 2) beats a (rank 1 in one list only): both retrievers agree on it.
    assert ids.index("c") < ids.index("a")
    assert ids[:2] == ["d", "c"] or ids[:2] == ["c", "d"]
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)


def test_rrf_ties_break_by_best_rank_then_list_order() -> None:
    assert [i for i, _ in reciprocal_rank_fusion([["a", "b"], ["c", "d"]])] == ["a", "c", "b", "d"]


def test_rrf_handles_empty_lists_and_rejects_bad_k() -> None:
    assert reciprocal_rank_fusion([[], []]) == []
    assert [i for i, _ in reciprocal_rank_fusion([[], ["z"]])] == ["z"]
    with pytest.raises(ValueError, match="k must be"):
        reciprocal_rank_fusion([["a"]], k=0)


def test_rerank_order_sorts_by_score_and_keeps_fused_order_on_ties() -> None:
    assert rerank_order([0.2, 0.9, 0.2, 0.5]) == [1, 3, 0, 2]


def test_rerank_passage_pairs_a_matched_question_with_its_answer() -> None:
    entry = KbEntry("e", "Q?", "A.", chunks=(Chunk("c0", "text", "T"),))
    assert rerank_passage(entry, "question") == "Q?\nA."
    assert rerank_passage(entry, "c0") == "T\ntext"


@pytest.mark.parametrize("package", ["retrieval", "kb", "embedding"])
def test_the_domain_package_imports_neither_grpc_nor_ray(package: str) -> None:
    import subprocess
    import sys

    probe = (
        f"import sys, tribunal.{package}; "
        "print(sorted(m for m in ('grpc', 'ray') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_rerank_prompt_is_registered_and_puts_the_document_first() -> None:
    from tribunal.prompts import get_prompt
    from tribunal.retrieval._rerank import rerank_prompt

    template = rerank_prompt()
    assert get_prompt(template.id) is template
    prompt = template.render(query="does zinc help colds?", passage="Zinc trial results.")
    assert prompt.prompt_id == "relevance/rerank-document-first@1"
    text = prompt.messages[-1].content
    assert text.index("Zinc trial results.") < text.index("does zinc help colds?")
    assert text.endswith("Answer yes or no.")
