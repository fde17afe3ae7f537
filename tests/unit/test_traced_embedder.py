"""The embedders' traced forward pass on the real models: the vectors sentence-transformers'
own ``encode`` gives, for any batch and length; models it cannot trace keep ``encode``."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from tribunal.core import Settings
from tribunal.embedding import load_profile_embedder
from tribunal.embedding._embedding import SentenceTransformerEmbedder
from tribunal.embedding._traced import trace_encoder

TEXTS = [
    "Is it safe to travel?",
    "Can the virus spread through food?",
    "What should I do if I have been in contact with someone who has COVID-19 and I feel "
    "fine but I am worried about my family?",
    "mask",
    " ".join(["Wash your hands often with soap and water."] * 80),  # past the length limit
]


@pytest.mark.models
@pytest.mark.parametrize("key", ["embedder", "embedder_large"])
def test_traced_vectors_are_encodes_for_every_batch(tiny_settings: Settings, key: str) -> None:
    embedder = load_profile_embedder(tiny_settings, key)
    assert embedder.traced_ is not None
    expected = embedder.model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    for size in (1, 2, 5):
        for start in range(0, len(TEXTS), size):
            got = embedder.traced_(TEXTS[start : start + size])
            np.testing.assert_allclose(got, expected[start : start + size], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(embedder.embed(TEXTS), axis=1), 1.0, atol=1e-5)


@pytest.mark.models
def test_untraceable_models_and_the_setting_off_keep_encode(tiny_settings: Settings) -> None:
    loaded = load_profile_embedder(tiny_settings)
    unnormalised = SentenceTransformer(modules=[loaded.model[0], loaded.model[1]])
    assert trace_encoder(unnormalised) is None
    plain = SentenceTransformerEmbedder(loaded.model, name="minilm", traced=False)
    assert plain.traced_ is None
    np.testing.assert_allclose(plain.embed(TEXTS), loaded.embed(TEXTS), atol=1e-5)
    off = tiny_settings.model_copy(
        update={"retrieval": tiny_settings.retrieval.model_copy(update={"traced_embedder": False})}
    )
    assert load_profile_embedder(off).traced_ is None
