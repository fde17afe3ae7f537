"""`tribunal ask` and `tribunal demo` say, once and before any question runs, when the
calibrator they answer with cannot accept anything, with how many labelled queries would
certify the α asked (the shipped tiny calibrator certifies thresholds at α = 0.1 and 0.2,
not 0.05, for two candidates per query and the shipped matcher)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from tribunal.cli import main
from tribunal.commands._calibration_check import check_calibration
from tribunal.commands.demo import _faq_entries, strictest_alpha
from tribunal.confidence import (
    CalibratorArtifact,
    artifact_not_certified,
    default_artifact_path,
    queries_to_certify,
)
from tribunal.core import load_settings
from tribunal.ensemble import TunedMatcher, tuned_root
from tribunal.gateway import AnswerPipeline
from tribunal.retrieval import stored_content_version
from tribunal.retrieval._store import EntryStore

from tests.conftest import SHARED


@pytest.fixture
def stage_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The stages anything asked LocalTransport to serve (none: no retrieval ran)."""
    from tribunal.gateway import _local_transport

    asked: list[tuple[str, ...]] = []

    def refuse(self: object, settings: object, stages: tuple[str, ...], **_: object) -> None:
        asked.append(tuple(stages))
        raise AssertionError("no stage may load")

    monkeypatch.setattr(_local_transport.LocalTransport, "__init__", refuse)
    return asked


def _queries(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "queries.jsonl"
    rows = [{"query": f"question {i}?", "answers": []} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_an_uncertified_alpha_stops_before_any_question(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stage_loads: list[tuple[str, ...]]
) -> None:
    out = tmp_path / "answers.jsonl"
    argv = ["ask", "--file", str(_queries(tmp_path, 450)), "--out", str(out), "--no-progress"]
    assert main([*argv, "--alpha", "0.05"]) == 2
    err = capsys.readouterr().err
    assert err.count("certifies no threshold at alpha=0.05") == 1
    assert "ask at a certified alpha (--alpha 0.1 or 0.2)" in err
    assert "`tribunal calibrate --collection default --traffic LABELLED.jsonl`" in err
    assert "--plain-threshold P" in err
    # With how many labelled queries would certify it, from the calibrator's certify split.
    artifact = CalibratorArtifact.load(default_artifact_path(load_settings("tiny")))
    curve, data = artifact.metrics["certify_curve"], artifact.training_data
    estimate = queries_to_certify(
        curve["accepted"],
        curve["errors"],
        certify_queries=data["split"]["risk"],
        labelled_queries=data["queries"],
        alpha=0.05,
        delta=artifact.config["delta"],
        method=artifact.config["method"],
    )
    assert estimate.labelled_needed is not None
    assert err.count(f"alpha=0.05 is not certified on {data['queries']} labelled queries") == 1
    assert f"about {estimate.labelled_needed} labelled queries in all" in err
    assert stage_loads == []  # no retrieval, no matching: nothing was loaded
    assert out.read_text() == ""
    # An α the calibrator has no row for at all, and one question: the same.
    assert main(["ask", "Can my dog catch it?", "--alpha", "0.3"]) == 2
    assert "certifies no threshold at alpha=0.3" in capsys.readouterr().err
    assert stage_loads == []


def test_the_demo_stops_before_ingesting_at_an_uncertified_alpha(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stage_loads: list[tuple[str, ...]]
) -> None:
    data = SHARED / "data" / "covid-qa"
    assert main(["demo", "--alpha", "0.05", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "certifies no threshold at alpha=0.05" in err
    assert "alpha=0.05 is not certified on 240 labelled queries" in err
    settings = load_settings("tiny")
    assert not (settings.data_dir / "retrieval" / "covid-demo").exists()
    assert stage_loads == []


def test_the_demo_serves_the_strictest_certified_alpha_and_says_why_no_stricter() -> None:
    settings = load_settings("tiny")
    artifact = CalibratorArtifact.load(default_artifact_path(settings))
    alpha, notes = strictest_alpha(settings)
    certified = [t.alpha for t in artifact.thresholds if t.certified]
    assert alpha == min(certified)
    stricter = sorted(t.alpha for t in artifact.thresholds if t.alpha < min(certified))
    assert notes == [artifact_not_certified(artifact, a) for a in stricter]
    for note, a in zip(notes, stricter, strict=True):
        assert note.startswith(f"alpha={a:g} is not certified on 240 labelled queries")
        assert "labelled queries in all" in note
        assert "tribunal calibrate" in note


def test_a_calibrator_for_another_candidate_count_or_matcher_is_reported() -> None:
    settings = load_settings("tiny", gateway={"candidates": 1})
    found = check_calibration(settings, ["covid-faq"])
    assert found.refused == ("covid-faq",)
    assert found.problem is not None
    assert "for 2 candidate(s) per query; this gateway scores 1 (gateway.candidates)" in (
        found.problem
    )
    # A plain threshold guarantees nothing, so nothing is bound: no problem.
    plain = load_settings("tiny", gateway={"candidates": 1}, confidence={"plain_threshold": 0.5})
    assert check_calibration(plain, ["covid-faq"]).problem is None
    # The certified α, the calibrated candidate count, a collection not ingested yet
    # (the gateway refuses it by name): nothing known up front.
    assert check_calibration(load_settings("tiny"), ["not-here"]).problem is None


def test_a_collection_searched_with_another_model_than_calibrated_is_reported(
    tmp_path: Path,
) -> None:
    settings = load_settings("tiny", data_dir=str(tmp_path))
    binding = CalibratorArtifact.load(default_artifact_path(settings)).binding
    assert binding is not None
    # The calibrated entries, stored as if re-embedded with a tune (no model needed: only
    # the store's record of its model is read).
    folder = tmp_path / "retrieval" / binding.collection
    folder.mkdir(parents=True)
    store = EntryStore(folder / "entries.sqlite3", dimension=4, embedder="tuned:tm-000000000001")
    rows = []
    for entry in _faq_entries(settings, SHARED / "data" / "covid-qa"):
        units = entry.search_units()
        vectors = np.ones((len(units), 4), dtype=np.float32) / 2
        rows.append((entry, [u for u, _ in units], [t for _, t in units], vectors))
    store.write(rows)
    store.close()
    assert stored_content_version(settings, binding.collection) == binding.collection_version
    found = check_calibration(settings, [binding.collection])
    assert found.refused == (binding.collection,)
    assert found.problem is not None
    assert (
        f"'{binding.collection}' is searched with tuned:tm-000000000001, not {binding.embedder}"
        in found.problem
    )
    assert f"`tribunal calibrate --collection {binding.collection}" in found.problem


def test_a_tune_of_the_collection_is_the_matcher_the_calibrator_is_checked_against(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        "tiny",
        data_dir=str(tmp_path),
        gateway={"collection": "covid-faq"},
        ensemble={"matcher": "features"},
    )
    assert check_calibration(settings, ["not-here"]).problem is None
    staged = tuned_root(tmp_path, "covid-faq") / "staged"
    (staged / "model").mkdir(parents=True)
    (staged / "model" / "weights.bin").write_bytes(b"stand-in: only the version is read")
    tuned = TunedMatcher.seal(staged, {"binding": {"collection": "covid-faq"}, "split": {}})
    staged.rename(staged.parent / tuned.version)
    (staged.parent / "current").write_text(tuned.version)
    found = check_calibration(settings, ["not-here"])
    assert found.problem is not None
    assert f"this gateway matches with features:{tuned.version}" in found.problem


def test_the_gateway_logs_a_configured_refusal_once_not_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = AnswerPipeline(
        load_settings("tiny").gateway,
        transport=None,  # type: ignore[arg-type]  # not called: only the log is tested
        store=None,
        policy=None,  # type: ignore[arg-type]
        max_id_chars=128,
    )
    with caplog.at_level(logging.WARNING, logger="tribunal.gateway._answer"):
        for _ in range(450):
            pipeline._warn_once("calibrator bound elsewhere", "certified for collection 'a'")
        pipeline._warn_once("calibrator bound elsewhere", "certified for collection 'b'")
    assert [r.message for r in caplog.records] == ["calibrator bound elsewhere"] * 2
