"""CachingEmbedder on the real MiniLM: the same vectors as the model, only new texts
reach it, least recently used texts leave first."""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.core import Settings
from tribunal.embedding import CachingEmbedder, load_profile_embedder

from tests.integration._retrieval import CountingEmbedder


@pytest.mark.models
def test_only_new_texts_reach_the_model_and_vectors_match_it(tiny_settings: Settings) -> None:
    real = load_profile_embedder(tiny_settings)
    recording = CountingEmbedder(real)
    cached = CachingEmbedder(recording, max_texts=3)
    assert (cached.name, cached.dimension) == (real.name, real.dimension)

    texts = ["How does the virus spread?", "Wash your hands.", "How does the virus spread?"]
    first = cached.embed(texts)
    assert recording.calls == [["How does the virus spread?", "Wash your hands."]]
    np.testing.assert_allclose(first, real.embed(texts), atol=1e-5)

    second = cached.embed(["Wash your hands.", "Can pets carry it?"])
    assert recording.calls[-1] == ["Can pets carry it?"]  # the cached text is not re-embedded
    np.testing.assert_allclose(second[0], first[1], atol=0)

    # Capacity 3: "How does the virus spread?" is the least recently used; it leaves first.
    cached.embed(["Stay home if you are sick."])
    cached.embed(["Wash your hands.", "How does the virus spread?"])
    assert recording.calls[-1] == ["How does the virus spread?"]
    assert cached.embed([]).shape == (0, real.dimension)
    with pytest.raises(ValueError, match="max_texts must be >= 1"):
        CachingEmbedder(real, max_texts=0)
