"""What a newcomer's first commands install: `make demo` the runtime and the main job's
models only; `make test` the dev set and every model, nothing compiled; `make llm` the
llama.cpp backend; no command but `make browser` asks for sudo."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest
from tribunal.commands.models import install_selection, main_job_model_keys
from tribunal.core import InvalidArgumentError, load_settings

ROOT = Path(__file__).resolve().parents[2]
MINILM, MPNET, GEMMA = "all-minilm-l6-v2", "all-mpnet-base-v2", "embeddinggemma-300m"
LLMS = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m",
    "qwen2.5-coder-0.5b-instruct",
    "smollm2-135m-instruct-q4_1",
}


def _ids(pairs: list[tuple[str, object]]) -> set[str]:
    return {artifact.id for _, artifact in pairs}  # type: ignore[attr-defined]


def test_the_main_job_installs_the_retrieval_embedder_and_the_matchers_model() -> None:
    settings = load_settings("tiny")
    # Retrieval embeds with MiniLM; the shipped feature matcher's artifact names MPNet.
    assert main_job_model_keys(settings) == ("embedder", "embedder_large")
    wanted, notes = install_selection(settings)
    assert _ids(wanted) == {MINILM, MPNET}
    assert len(notes) == 2
    assert "--with-llms" in notes[0]
    assert all(llm in notes[0] for llm in LLMS)
    assert GEMMA in notes[1]
    assert _ids(install_selection(settings, with_llms=True)[0]) == {MINILM, MPNET} | LLMS
    assert _ids(install_selection(settings, optional=True)[0]) == {MINILM, MPNET, GEMMA}
    everything = install_selection(settings, with_llms=True, optional=True)
    assert _ids(everything[0]) == {MINILM, MPNET, GEMMA} | LLMS
    assert everything[1] == []
    assert _ids(install_selection(settings, only=[GEMMA])[0]) == {GEMMA}
    with pytest.raises(InvalidArgumentError, match="unknown artifact"):
        install_selection(settings, only=["no-such-model"])


def test_a_judge_panel_matcher_makes_the_judges_part_of_the_main_job() -> None:
    settings = load_settings("tiny", ensemble={"matcher": "judges"})
    assert set(main_job_model_keys(settings)) == {"embedder", "llm_strong", "llm_weak", "llm_tiny"}
    assert _ids(install_selection(settings)[0]) == {MINILM} | LLMS


def _dry_run(target: str, tmp_path: Path) -> str:
    """The commands `make TARGET` would run on a fresh clone (nothing installed yet)."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_make_demo_installs_the_runtime_only_and_make_test_needs_no_sudo(tmp_path: Path) -> None:
    demo = _dry_run("demo", tmp_path)
    assert "pip install --progress-bar off --no-compile -e '.[cpu]'" in demo
    assert ".[dev]" not in demo
    assert "CMAKE_ARGS" not in demo  # no llama.cpp build
    assert "tribunal models install --profile tiny\n" in demo  # no --with-llms
    assert "tribunal demo --profile tiny --data ../shared/data/covid-qa" in demo
    test = _dry_run("test", tmp_path)
    assert "pip install --progress-bar off --no-compile -e '.[dev]'" in test
    assert "models install --profile tiny --with-llms" in test
    assert "sudo" not in test
    assert "apt-get" not in test
    assert "CMAKE_ARGS" not in test  # llama.cpp is `make llm`'s build, not `make test`'s
    llm = _dry_run("llm", tmp_path)
    assert "CMAKE_ARGS=" in llm
    assert "-e '.[llamacpp]'" in llm
    assert "--with-llms" in llm


def test_the_dev_set_compiles_nothing_and_ci_builds_llama_cpp_before_the_tests() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dev = project["optional-dependencies"]["dev"]
    assert not any("llamacpp" in line or "llama-cpp" in line for line in dev)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("\nmake llm\n") < ci.index("\nmake test\n")
    assert "TRIBUNAL_REQUIRE_LLAMACPP=1" in ci


def test_each_install_set_has_its_own_stamp(tmp_path: Path) -> None:
    """After `make demo`'s install, `make test` adds the dev set without redoing the
    runtime; after `make test`, `make demo` installs nothing."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / ".installed-runtime").touch()
    test = _dry_run("install", tmp_path)
    assert "-e '.[dev]'" in test
    assert "-e '.[cpu]'" not in test
    assert "-m venv" not in test
    (venv / "bin" / ".installed-dev").touch()
    assert "pip install" not in _dry_run("demo-models", tmp_path)
    assert "pip install" not in _dry_run("install", tmp_path)
