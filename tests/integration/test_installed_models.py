"""The tiny profile's real weights are installed and match their pinned sha256."""

from __future__ import annotations

import pytest
from tribunal.commands._model_probe import probe_model
from tribunal.core import Settings
from tribunal.core.models import ModelStore, get_artifact


@pytest.mark.models
def test_tiny_profile_has_three_ggufs_minilm_mpnet_and_gemma_with_matching_sha256(
    tiny_settings: Settings,
) -> None:
    """Every model `make models` installs matches its sha256; the optional one
    (EmbeddingGemma, `tribunal models install --optional`) too where it is installed."""
    store = ModelStore(tiny_settings.model_dir, progress=False)
    artifacts = [get_artifact(s.artifact) for s in tiny_settings.models.values() if s.artifact]
    assert sorted(a.kind for a in artifacts) == [
        "gguf",
        "gguf",
        "gguf",
        "sentence-transformer",
        "sentence-transformer-zip",
        "sentence-transformer-zip",
    ]
    assert [a.id for a in artifacts if a.optional] == ["embeddinggemma-300m"]
    for artifact in artifacts:
        if artifact.optional and store.status(artifact) != "installed":
            continue
        assert store.verify(artifact), f"{artifact.id} does not match its sha256"
    assert (store.path_of(get_artifact("all-minilm-l6-v2")) / "modules.json").is_file()
    mpnet = store.path_of(get_artifact("all-mpnet-base-v2"))
    assert (mpnet / "modules.json").is_file()
    assert not (mpnet / "desktop.ini").exists()  # the zip's junk is left out


@pytest.mark.models
def test_probes_load_the_real_models(tiny_settings: Settings) -> None:
    embedder = probe_model(tiny_settings, "embedder")
    assert "dim=384" in embedder
    paraphrase = float(embedder.split("cos(paraphrase)=")[1].split()[0])
    unrelated = float(embedder.split("cos(unrelated)=")[1].split()[0])
    assert paraphrase > unrelated + 0.3
    # A second embedder of the profile probes itself, not the embedder role's model.
    large = probe_model(tiny_settings, "embedder_large")
    assert "dim=768" in large
    paraphrase = float(large.split("cos(paraphrase)=")[1].split()[0])
    unrelated = float(large.split("cos(unrelated)=")[1].split()[0])
    assert paraphrase > unrelated + 0.3
    strong = probe_model(tiny_settings, "llm_strong")
    assert "arch=qwen2" in strong
    assert "chat_template=yes" in strong
    if "p_yes(paris)=" in strong:  # the yes/no probe runs where llama-cpp-python is installed
        assert float(strong.split("p_yes(paris)=")[1].split()[0]) > 0.9
        assert float(strong.split("p_yes(berlin)=")[1].split()[0]) < 0.1
