"""The LLM engine on the real Qwen2.5-Coder-1.5B, on every backend installed here.

llama.cpp and transformers run in process; the openai backend talks to a real
llama-cpp-python server started on 127.0.0.1 by the fixture (stopped by PID).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import BaseModel, field_validator
from tribunal.core import Settings, model_path
from tribunal.core.llm import (
    LLMEngine,
    MalformedOutputError,
    PromptTooLongError,
    create_engine,
    shared_engine,
)
from tribunal.prompts import get_prompt

from ._llm_backend import HAS_LLAMACPP, LLM_BACKEND, MISSING, needs_llamacpp

pytestmark = pytest.mark.models


PARIS = "Is Paris the capital of France? Answer yes or no."
BERLIN = "Is Berlin the capital of France? Answer yes or no."
JUDGE = get_prompt("relevance")
ITEMS = [
    ("capital of france", "Paris is the capital and largest city of France."),
    ("capital of france", "Berlin is the capital of Germany."),
    ("how many legs does a spider have", "Spiders have eight legs."),
    ("how many legs does a spider have", "The cat sat on the mat."),
]


class Capital(BaseModel):
    country: str
    capital: str


class Palindrome(BaseModel):
    """A schema no answer satisfies: every word is rejected."""

    word: str

    @field_validator("word")
    @classmethod
    def _never(cls, value: str) -> str:
        raise ValueError("must be a 40-letter palindrome made of digits and letters only")


@pytest.fixture(scope="module")
def module_settings() -> Settings:
    from tribunal.core import load_settings

    return load_settings("tiny")


@pytest.fixture(scope="module", params=["transformers", "llamacpp"])
def strong(request: pytest.FixtureRequest, module_settings: Settings) -> LLMEngine[Any]:
    """The 1.5B model on each in-process backend."""
    if request.param == "llamacpp" and not HAS_LLAMACPP:
        pytest.skip(MISSING)
    return shared_engine(module_settings, "llm_strong", backend=request.param)


# Properties of the engine itself (batching, prefix reuse, locking) hold for any model:
# the 0.5B model keeps the tests short (the 1.5B one is under test above and below).
@pytest.fixture(
    scope="module", params=[("transformers", "llm_weak"), ("llamacpp", "llm_weak")], ids=str
)
def engine(request: pytest.FixtureRequest, module_settings: Settings) -> LLMEngine[Any]:
    backend, key = request.param
    if backend == "llamacpp" and not HAS_LLAMACPP:
        pytest.skip(MISSING)
    return shared_engine(module_settings, key, backend=backend)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(
    module_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real OpenAI-compatible server (llama-cpp-python's) on 127.0.0.1."""
    if not HAS_LLAMACPP or importlib.util.find_spec("sse_starlette") is None:
        pytest.skip("llama-cpp-python[server] not installed")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path(module_settings, "llm_strong")),
        "--model_alias", "llm_strong",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", str(os.cpu_count() or 1),
        # The GGUF's own chat template, as the in-process backends use.
        "--chat_format", "chat_template.default",
    ]  # fmt: skip
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{base}/models", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None, f"server exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "server did not start in 120 s"
            time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def openai_engine(module_settings: Settings, llama_server: str) -> LLMEngine[Any]:
    settings = module_settings.model_copy(
        update={
            "llm": module_settings.llm.model_copy(
                update={
                    "openai_base_url": llama_server,
                    "openai_model": "llm_strong",
                    "openai_response_format": "json_object",
                    "openai_concurrency": 2,
                }
            )
        }
    )
    return create_engine(settings, "llm_strong", backend="openai")


def test_paris_is_yes_and_berlin_is_no(strong: LLMEngine[Any]) -> None:
    result = strong.judge([PARIS, BERLIN])
    assert result.p_yes[0] > 0.9, result
    assert result.p_yes[1] < 0.1, result
    assert min(result.yes_no_mass) > 0.5  # the model answers yes or no at all
    assert result.usage.prompt_tokens > 20
    assert result.usage.completion_tokens == 0
    assert result.usage.seconds > 0


def test_openai_backend_reads_p_yes_from_top_logprobs(openai_engine: LLMEngine[Any]) -> None:
    p_paris, p_berlin = openai_engine.p_yes([PARIS, BERLIN])
    assert p_paris > 0.9
    assert p_berlin < 0.1
    [answer] = openai_engine.generate_json(
        ["Name the capital of France. Give country and capital."], Capital, max_new_tokens=48
    )
    assert answer.value.capital.lower() == "paris"


def test_batched_equals_one_by_one_and_prefix_reuse_changes_nothing(
    engine: LLMEngine[Any],
) -> None:
    prompts = [JUDGE.render(query=q, passage=p) for q, p in ITEMS]
    batched = engine.judge(prompts)
    assert batched.prompt_ids == ["relevance/yesno@1"] * 4
    assert batched.usage.cached_tokens > 0  # the instructions were computed once
    single = [engine.judge([p]).p_yes[0] for p in prompts]
    original = engine.settings
    engine.settings = original.model_copy(update={"prefix_cache": False})
    try:
        fresh = engine.judge(prompts)
    finally:
        engine.settings = original
    assert fresh.usage.cached_tokens == 0
    # Rounding, not logic: bfloat16 logits (transformers) move P(yes) by a step or so;
    # llama.cpp picks other matmul kernels when a reused prefix shortens the tokens it
    # evaluates (seen: 0.566 vs 0.585 for the 0.5B model near P = 0.5).
    tolerance = 0.04 if engine.backend == "transformers" else 0.03
    assert batched.p_yes == pytest.approx(single, abs=tolerance)
    assert batched.p_yes == pytest.approx(fresh.p_yes, abs=tolerance)
    # And the judge ranks these easy pairs right.
    assert batched.p_yes[0] > batched.p_yes[1]
    assert batched.p_yes[2] > batched.p_yes[3]


def test_threads_and_asyncio_share_one_engine_safely(engine: LLMEngine[Any]) -> None:
    expected = engine.p_yes([PARIS, BERLIN])
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(lambda p: engine.p_yes([p])[0], [PARIS, BERLIN]))

    async def both() -> list[list[float]]:
        return list(await asyncio.gather(engine.ap_yes([PARIS]), engine.ap_yes([BERLIN])))

    gathered = asyncio.run(both())
    tolerance = 0.04 if engine.backend == "transformers" else 0.03
    assert threaded == pytest.approx(expected, abs=tolerance)
    assert [gathered[0][0], gathered[1][0]] == pytest.approx(expected, abs=tolerance)


@needs_llamacpp
def test_json_generation_returns_a_valid_object(module_settings: Settings) -> None:
    engine = shared_engine(module_settings, "llm_strong", backend="llamacpp")
    [result] = engine.generate_json(
        ["Name the capital of France. Give country and capital."], Capital, max_new_tokens=32
    )
    assert result.value.capital.lower() == "paris"
    assert result.usage.completion_tokens > 0
    assert result.usage.seconds > 0
    schema = {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}},
        "required": ["answer"],
    }
    [verdict] = engine.generate_json([PARIS], schema, max_new_tokens=24)
    assert verdict.value == {"answer": "yes"}


def test_json_generation_works_on_transformers(module_settings: Settings) -> None:
    engine = shared_engine(module_settings, "llm_strong", backend="transformers")
    schema = {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}},
        "required": ["answer"],
    }
    # Short answers: bfloat16 decoding on a CPU reads all 3 GB of weights per token.
    results = engine.generate_json([PARIS, BERLIN], schema, max_new_tokens=16)
    assert [r.value for r in results] == [{"answer": "yes"}, {"answer": "no"}]
    assert all(r.prompt_id is None and r.attempts >= 1 for r in results)


@needs_llamacpp
def test_unsatisfiable_schema_is_retried_then_refused(module_settings: Settings) -> None:
    # The retry loop is shared by every backend; the 135M model keeps it quick.
    engine = shared_engine(module_settings, "llm_tiny", backend="llamacpp")
    with pytest.raises(MalformedOutputError) as caught:
        engine.generate_json(["Give one word in JSON."], Palindrome, max_new_tokens=16, retries=1)
    error = caught.value
    assert error.attempts == 2  # the first answer and one retry, then no made-up value
    assert len(error.outputs) == 2
    assert error.field == "prompts[0]"


def test_prompt_length_is_bounded_and_templates_truncate_to_fit(
    module_settings: Settings,
) -> None:
    backend = LLM_BACKEND
    settings = module_settings.model_copy(
        update={"llm": module_settings.llm.model_copy(update={"max_prompt_tokens": 160})}
    )
    engine = shared_engine(settings, "llm_strong", backend=backend)
    long_passage = " ".join(f"sentence {i} says nothing at all." for i in range(200))
    with pytest.raises(PromptTooLongError) as caught:
        engine.p_yes([JUDGE.render(query="capital of france", passage=long_passage)])
    assert caught.value.tokens > caught.value.limit == 160
    assert caught.value.field == "prompts[0]"
    fitted = JUDGE.render(engine, query="capital of france", passage=long_passage)
    assert 140 < engine.count_tokens(fitted) <= 160
    assert "[…]" in fitted.messages[-1].content
    assert fitted.messages[-1].content.endswith(JUDGE.question)  # the question survives
    [p_yes] = engine.p_yes([fitted])
    assert 0.0 <= p_yes <= 1.0
    with pytest.raises(PromptTooLongError):
        JUDGE.render(engine, query="why " * 300, passage="short")


def test_converted_weights_are_cached_on_disk(module_settings: Settings) -> None:
    shared_engine(module_settings, "llm_strong", backend="transformers")
    folder = Path(module_settings.model_dir) / "converted" / "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert (folder / "config.json").is_file()
    assert (folder / "model.safetensors").is_file()
    assert "quantization_config" not in (folder / "config.json").read_text()
