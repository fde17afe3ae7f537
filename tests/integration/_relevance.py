"""Relevance artifacts for tests: the tiny profile's cheapest features, coefficients chosen.

The features are the 135M model's P(yes) under ``relevance/yesno@1`` (on the backend the
tests run the models on: llama.cpp or transformers) and the MiniLM query-chunk cosine. The
coefficients are chosen by each test, not fitted: the tests check the serving path and
the routing, not the judge's skill (the lead fits the shipped artifact on TREC DL).
"""

from __future__ import annotations

from pathlib import Path

from tribunal.ensemble import RelevanceArtifact
from tribunal.ensemble._relevance import RelevanceFeature

from ._llm_backend import LLM_BACKEND

TINY_FEATURES = (
    RelevanceFeature("llm_tiny/yesno", "llm_p_yes", "llm_tiny", "relevance/yesno@1"),
    RelevanceFeature("embedder/cosine", "cosine", "embedder"),
)


def tiny_artifact(
    *,
    coef: tuple[float, float] = (1.0, 2.0),
    intercept: float = -0.5,
    threshold: float = 0.5,
    band: tuple[float, float] = (0.3, 0.7),
    version: str = "rel-test",
) -> RelevanceArtifact:
    return RelevanceArtifact(
        version=version,
        features=TINY_FEATURES,
        coef=coef,
        intercept=intercept,
        threshold=threshold,
        band_low=band[0],
        band_high=band[1],
        backend=LLM_BACKEND,
        fitted_on={"data": "chosen by the test", "n": 0},
    )


def write_tiny_artifact(path: Path, **options: object) -> Path:
    tiny_artifact(**options).save(path)  # type: ignore[arg-type]
    return path
