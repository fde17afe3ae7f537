"""LLMs made ready before a stage needs them, and freed when a process is done with them.

- ``tribunal models install --with-llms`` on the transformers backend leaves every GGUF
  LLM of the profile converted, so no stage pays the conversion at its first request;
  on llama.cpp, which reads the GGUF itself, it converts nothing;
- :func:`release_shared_engines` forgets the shared engines: the next request builds a
  new one, and the old one's weights can be freed.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core import load_settings
from tribunal.core.llm import converted_source, release_shared_engines, shared_engine
from tribunal.core.models import get_artifact

pytestmark = pytest.mark.models


def test_install_with_llms_leaves_each_gguf_llm_converted_for_transformers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "install", "--profile", "tiny", "--with-llms", "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "for transformers" in line]
    settings = load_settings("tiny")
    gguf_llms = [
        spec.artifact
        for spec in settings.models.values()
        if spec.kind == "llm" and spec.artifact and not get_artifact(spec.artifact).optional
    ]
    assert sorted(line.split()[2] for line in lines) == sorted(gguf_llms)
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
