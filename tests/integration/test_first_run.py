"""What a first run loads: only what the main job uses, when a stage first needs it.

- ingesting self-evidenced entries (an FAQ whose answers are their own source) builds
  no entailment checker and no LLM engine;
- the in-process gateway loads the stages ``Answer`` calls (retrieval, ensemble,
  confidence) and nothing else; another stage loads at its first call, and one whose
  weights are missing answers with the command that installs them;
- `tribunal ask` on a collection the calibrator is not bound to says so once, with the
  command that fixes it, and asks nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.confidence import FitConfig, fit_artifact
from tribunal.core import FailedPreconditionError, load_settings
from tribunal.core.llm import _factory
from tribunal.gateway import ANSWER_STAGES
from tribunal.gateway._local_transport import LocalTransport
from tribunal.gateway._wiring import connect_stages
from tribunal.kb import deduplicate, read_entries
from tribunal.retrieval import KnowledgeBase
from tribunal.retrieval._checkers import LazyChecker
from tribunal.v1 import debate_pb2, entailment_pb2

from tests.conftest import SHARED
from tests.unit._confidence_data import synthetic_data

FAQ = SHARED / "data" / "covid-qa" / "faq_kb_en.jsonl"


def _faq(limit: int) -> list[object]:
    return list(read_entries(FAQ, record_format="faq", max_chars=10_000, limit=limit))


@pytest.mark.models
def test_a_self_evidenced_ingest_loads_no_checker(tmp_path: Path) -> None:
    settings = load_settings("tiny", data_dir=tmp_path)
    assert settings.retrieval.verifier == "local"  # a checker is configured, lazily
    engines = set(_factory._shared)
    kb = KnowledgeBase.from_settings(settings)
    try:
        # The whole FAQ: one answer's chunk lost the `")` its sentence ends with when split,
        # and was taken for an outside document, which loaded the LLM checkers.
        entries, _ = deduplicate(
            read_entries(FAQ, record_format="faq", max_chars=settings.retrieval.chunk_size_chars)
        )
        result = kb.upsert("faq", entries, create=True, self_evidenced=True)  # type: ignore[arg-type]
        assert result.total_entries == 210
        assert result.verdicts == {"no_evidence": 210}
        checker = kb.checker
        assert isinstance(checker, LazyChecker)
        assert checker._checker is None  # never built
    finally:
        kb.close()
    assert set(_factory._shared) == engines  # no LLM engine was created


@pytest.fixture
def calibrated(tmp_path: Path) -> Path:
    artifact = fit_artifact(synthetic_data(300), FitConfig(calibrator="platt", alphas=(0.05,)))
    return artifact.save(tmp_path / "calibrator.json")


def test_a_stage_loads_at_its_first_call(tmp_path: Path, calibrated: Path) -> None:
    settings = load_settings(
        "tiny",
        data_dir=tmp_path,
        model_dir=tmp_path / "no-models",  # nothing installed: a load that needs one fails
        confidence={"artifact_path": calibrated, "alpha": 0.05},
        entailment={"fast_backend": "lexical", "two_stage": False},
    )
    local = LocalTransport(
        settings, ("confidence", "entailment", "debate"), max_workers=2, preload=("confidence",)
    )
    try:
        assert local.loaded_stages == ("confidence",)
        pair = entailment_pb2.EntailmentPair(
            premise="Paris is the capital of France.", hypothesis="Paris is in France."
        )
        check = entailment_pb2.CheckRequest(pairs=[pair])
        reply = local.call("entailment", "Check", check, timeout_s=60)
        assert len(reply.results) == 1
        assert local.loaded_stages == ("confidence", "entailment")
        # The debate's LLM is not installed: its first call says which command installs it,
        # and the next fails at once with the same message (no second load).
        assess = debate_pb2.AssessRequest(query="q", chunk="c", answers=["a"])
        for _ in range(2):
            with pytest.raises(FailedPreconditionError) as error:
                local.call("debate", "Assess", assess, timeout_s=60)
            assert "tribunal models install --only qwen2.5-coder-1.5b-instruct-q4_k_m" in str(
                error.value
            )
            assert "--with-llms" in str(error.value)
        assert local.loaded_stages == ("confidence", "entailment")
    finally:
        local.close()


@pytest.mark.models
@pytest.mark.slow
def test_the_in_process_gateway_loads_only_the_answer_stages(tmp_path: Path) -> None:
    settings = load_settings("tiny", data_dir=tmp_path, gateway={"discovery": "in-process"})
    engines = set(_factory._shared)
    transport, host = connect_stages(settings)
    try:
        assert host is None
        assert isinstance(transport, LocalTransport)
        assert transport.loaded_stages == ANSWER_STAGES
        assert set(_factory._shared) == engines  # no entailment checker, no debater
    finally:
        transport.close()


@pytest.mark.models
def test_ask_on_a_collection_the_calibrator_is_not_bound_to_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings("tiny")  # TRIBUNAL_DATA_DIR: this test's folder
    kb = KnowledgeBase.from_settings(settings)
    try:
        kb.upsert("mine", _faq(5), create=True, self_evidenced=True)  # type: ignore[arg-type]
    finally:
        kb.close()
    loads: list[object] = []
    monkeypatch.setattr(LocalTransport, "__init__", lambda *a, **k: loads.append(a))
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"query": f"q{i}?"}) + "\n" for i in range(450)))
    assert main(["ask", "--file", str(queries), "--collection", "mine", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("is certified for collection 'covid-faq' at content version") == 1
    assert "'mine' is at kb-" in err
    assert "so no question is asked" in err
    assert "`tribunal calibrate --collection mine --traffic LABELLED.jsonl`" in err
    assert loads == []
