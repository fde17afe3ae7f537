"""Calibrating on labelled traffic: the monotone calibrator, the grouped split, the
certified artifact, its binding (refused on another KB, matcher or retrieval model), and
the not-certified state."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tribunal.confidence import (
    CalibrationBinding,
    CalibrationConfig,
    CalibratorArtifact,
    ConfidenceScorer,
    ObservedCandidate,
    RequestVersions,
    Signals,
    ThresholdStatus,
    Traffic,
    calibrate,
    read_traffic,
    write_calibration_report,
)
from tribunal.confidence._monotone import MonotoneCalibrator
from tribunal.confidence._threshold import Decision
from tribunal.confidence._traffic import split_traffic
from tribunal.core import FailedPreconditionError, InvalidArgumentError

from tests.unit._confidence_data import BINDING


def _traffic(n_groups: int = 120, per_group: int = 3, seed: int = 0) -> tuple[Traffic, list]:
    """Queries in groups (paraphrases of one FAQ question); two candidates each: the right
    entry or a wrong one first, with a P(match) that rises with being right."""
    rng = np.random.default_rng(seed)
    queries, observed = [], []
    from tribunal.confidence._traffic import LabelledQuery

    for g in range(n_groups):
        right = f"e{g}"
        answerable = g % 10 != 0  # a tenth of the questions has no answer in the KB
        for p in range(per_group):
            answers = frozenset({right}) if answerable else frozenset()
            queries.append(LabelledQuery(f"q{g}-{p}", answers, f"answers:{right}"))
            quality = rng.beta(5, 2) if answerable and rng.random() < 0.75 else rng.beta(2, 4)
            first = right if quality > 0.5 and answerable else f"x{g}-{p}"
            candidates = [
                ObservedCandidate(
                    first,
                    Signals(
                        ensemble_p_match=float(np.clip(quality + rng.normal(0, 0.05), 0, 1)),
                        retrieval_rank=1,
                        dense_score=float(np.clip(quality * 0.8 + rng.normal(0, 0.1), -1, 1)),
                        sparse_score=float(rng.uniform(0, 30)),
                    ),
                ),
                ObservedCandidate(
                    f"y{g}-{p}",
                    Signals(
                        ensemble_p_match=float(rng.beta(1, 6)),
                        retrieval_rank=2,
                        dense_score=float(rng.uniform(0, 0.5)),
                    ),
                ),
            ]
            observed.append(candidates)
    return Traffic(tuple(queries), "sha-of-traffic", "traffic.jsonl"), observed


def test_monotone_weights_are_never_negative_and_inputs_are_clamped() -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 300)
    # dense_score is anti-correlated with the label here: its weight is held at 0.
    signals = [
        Signals(
            ensemble_p_match=float(np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15), 0, 1)),
            dense_score=float(0.8 - 0.3 * y + rng.normal(0, 0.05)),
            retrieval_rank=int(rng.integers(1, 4)),
        )
        for y in labels
    ]
    calibrator = MonotoneCalibrator().fit(signals, labels)
    weights = calibrator.weights()
    assert set(weights) == {"ensemble_p_match", "retrieval_reciprocal_rank", "dense_score"}
    assert min(weights.values()) >= 0.0
    assert weights["dense_score"] == pytest.approx(0.0, abs=1e-6)
    assert weights["ensemble_p_match"] > 0.5
    high = Signals(ensemble_p_match=0.9, dense_score=calibrator.high_[2], retrieval_rank=1)
    far = Signals(ensemble_p_match=0.9, dense_score=1e6, retrieval_rank=1)
    assert calibrator.predict([far])[0] == calibrator.predict([high])[0]
    # A higher P(match) never lowers the confidence.
    grid = [
        Signals(ensemble_p_match=p, dense_score=0.5, retrieval_rank=2)
        for p in np.linspace(0, 1, 21)
    ]
    assert np.all(np.diff(calibrator.predict(grid)) >= 0)


def test_split_keeps_groups_whole_and_is_seeded() -> None:
    traffic, _ = _traffic()
    split = split_traffic(traffic.queries, holdout_fraction=0.3, fit_fraction=0.4, seed=3)
    parts = {
        name: {traffic.queries[i].group for i in getattr(split, name)}
        for name in ("fit", "risk", "holdout")
    }
    assert not parts["fit"] & parts["risk"]
    assert not parts["fit"] & parts["holdout"]
    assert not parts["risk"] & parts["holdout"]
    assert sum(split.sizes().values()) == len(traffic)
    assert 0.25 < split.sizes()["holdout"] / len(traffic) < 0.35
    again = split_traffic(traffic.queries, holdout_fraction=0.3, fit_fraction=0.4, seed=3)
    assert np.array_equal(split.holdout, again.holdout)


def test_reading_traffic_refuses_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "t.jsonl"
    good.write_text('{"query": "a?", "answers": ["e1", "e2"]}\n{"query": "b?", "answers": []}\n')
    traffic = read_traffic(good)
    assert traffic.queries[0].answers == frozenset({"e1", "e2"})
    assert traffic.queries[1].group.startswith("query:")
    assert traffic.answerable == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "a?", "answers": "e1"}\n')
    with pytest.raises(
        InvalidArgumentError, match=r"bad.jsonl:1: 'answers' must be a list"
    ) as info:
        read_traffic(bad)
    assert info.value.field == "answers"


@pytest.fixture(scope="module")
def calibrated() -> object:
    traffic, observed = _traffic()
    config = CalibrationConfig(alphas=(0.05, 0.1, 0.2), delta=0.1, method="ltt")
    return calibrate(traffic, observed, config, BINDING, created="2026-12-01T00:00:00+00:00")


def test_calibration_certifies_on_the_risk_split_and_reports_the_heldout(
    calibrated: object,
) -> None:
    result = calibrated
    artifact = result.artifact  # type: ignore[attr-defined]
    report = result.report  # type: ignore[attr-defined]
    assert artifact.binding == BINDING
    assert artifact.calibrator.kind == "monotone"
    assert [t.method for t in artifact.thresholds] == ["ltt"] * 3
    certified = [t for t in artifact.thresholds if t.certified]
    assert certified, "a clean synthetic set certifies at least one alpha"
    for item in report["per_alpha"]:
        if item["threshold"] is None:
            continue
        assert item["upper_bound"] <= item["alpha"]
        held = item["heldout"]
        assert held["n"] == report["traffic"]["split"]["holdout"]
    # The curve is what the report's plot draws: coverage grows as the threshold falls.
    curve = report["curves"]["heldout"]
    assert curve["coverage"] == sorted(curve["coverage"])


def test_artifact_round_trips_with_its_binding(calibrated: object, tmp_path: Path) -> None:
    artifact = calibrated.artifact  # type: ignore[attr-defined]
    path = artifact.save(tmp_path / "calibrator.json")
    loaded = CalibratorArtifact.load(path)
    assert loaded.version == artifact.version
    assert loaded.binding == BINDING
    probe = [c.signals for c in _traffic(5, 1, seed=9)[1][0]]
    assert np.array_equal(loaded.predict(probe), artifact.predict(probe))
    # Same inputs and creation time: the same bytes.
    config = CalibrationConfig(alphas=(0.05, 0.1, 0.2), delta=0.1, method="ltt")
    again = calibrate(*_traffic(), config, BINDING, created="2026-12-01T00:00:00+00:00")
    assert again.artifact.save(tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_artifact_is_refused_when_the_kb_or_matcher_changes(calibrated: object) -> None:
    artifact = calibrated.artifact  # type: ignore[attr-defined]
    scorer = ConfidenceScorer(artifact, alpha=0.2, embedder=BINDING.embedder)
    probe = Signals(ensemble_p_match=0.9, retrieval_rank=1, dense_score=0.7)
    same = RequestVersions(BINDING.collection_version, BINDING.matcher)
    assert scorer.score(probe, versions=same).calibrator_version == artifact.version
    with pytest.raises(
        FailedPreconditionError, match="tribunal calibrate --collection faq"
    ) as info:
        scorer.score(probe, versions=RequestVersions("kb-ffffffffffffffff", BINDING.matcher))
    assert info.value.field == "collection_version"
    with pytest.raises(FailedPreconditionError, match="matcher") as info:
        scorer.score_many(
            [probe], versions=[RequestVersions(BINDING.collection_version, "features:mf-b")]
        )
    assert info.value.field == "items[0].matcher_version"
    with pytest.raises(FailedPreconditionError, match="scoring 2 candidate"):
        scorer.score(probe, versions=replace(same, candidates=1))
    with pytest.raises(FailedPreconditionError, match="retrieval embedder"):
        ConfidenceScorer(artifact, alpha=0.2, embedder="all-mpnet-base-v2@78c0197b6159")


def test_artifact_is_refused_when_the_retrieval_model_changes(calibrated: object) -> None:
    artifact = calibrated.artifact  # type: ignore[attr-defined]
    scorer = ConfidenceScorer(artifact, alpha=0.2, embedder=BINDING.embedder)
    probe = Signals(ensemble_p_match=0.9, retrieval_rank=1, dense_score=0.7)
    same = RequestVersions(BINDING.collection_version, BINDING.matcher)
    calibrated_model = replace(same, retrieval_model=BINDING.embedder)
    assert scorer.score(probe, versions=calibrated_model).calibrator_version == artifact.version
    # Not reported (an older caller): accepted by the service, refused by the gateway.
    assert scorer.score(probe, versions=same).calibrator_version == artifact.version
    with pytest.raises(FailedPreconditionError, match="did not report the model") as info:
        scorer.check_versions(same, strict=True)
    assert info.value.field == "retrieval_model"
    scorer.check_versions(calibrated_model, strict=True)
    # The collection re-embedded with its tuned matcher's model: another model's vectors.
    tuned = replace(same, retrieval_model="tuned:tm-0123456789ab")
    with pytest.raises(FailedPreconditionError) as info:
        scorer.score_many([probe], versions=[tuned])
    assert info.value.field == "items[0].retrieval_model"
    assert f"certified for retrieval model {BINDING.embedder}" in info.value.message
    assert "retrieved with tuned:tm-0123456789ab" in info.value.message
    assert "`tribunal calibrate --collection faq --traffic LABELLED.jsonl`" in info.value.message


def test_a_binding_to_a_tuned_model_is_checked_per_request_not_against_the_profile(
    calibrated: object,
) -> None:
    tuned = replace(BINDING, embedder="tuned:tm-0123456789ab")
    artifact = replace(calibrated.artifact, binding=tuned)  # type: ignore[attr-defined]
    # No profile embedder is a tuned model: the load-time check has nothing to compare.
    scorer = ConfidenceScorer(artifact, alpha=0.2, embedder=BINDING.embedder)
    versions = RequestVersions(BINDING.collection_version, BINDING.matcher)
    scorer.check_versions(replace(versions, retrieval_model=tuned.embedder), strict=True)
    with pytest.raises(FailedPreconditionError, match="retrieved with all-minilm") as info:
        scorer.check_versions(replace(versions, retrieval_model=BINDING.embedder))
    assert info.value.field == "retrieval_model"
    # A binding to a profile embedder is still checked against the profile at load.
    with pytest.raises(FailedPreconditionError, match="retrieval embedder") as info:
        BINDING.check_serving(embedder="all-mpnet-base-v2@78c0197b6159", artifact_version="v")
    assert info.value.field == "confidence.artifact_path"
    tuned.check_serving(embedder="all-mpnet-base-v2@78c0197b6159", artifact_version="v")


def test_retrieval_reports_the_model_its_dense_search_compared() -> None:
    from tribunal.retrieval._types import SearchResult
    from tribunal.retrieval.servicer import batch_search_response, result_to_proto

    result = SearchResult(
        hits=(), kb_content_version=BINDING.collection_version, retrieval_model="tuned:tm-1"
    )
    assert result_to_proto(result, "r1").retrieval_model == "tuned:tm-1"
    assert batch_search_response([result]).results[0].retrieval_model == "tuned:tm-1"


def test_the_confidence_service_checks_the_reported_retrieval_model(calibrated: object) -> None:
    from tribunal.confidence.servicer import ConfidenceServicer
    from tribunal.v1 import confidence_pb2

    servicer = ConfidenceServicer(10)
    servicer.scorer = ConfidenceScorer(
        calibrated.artifact,  # type: ignore[attr-defined]
        alpha=0.2,
        embedder=BINDING.embedder,
    )
    item = confidence_pb2.ScoreRequest(
        signals=confidence_pb2.Signals(ensemble_p_match=0.9, retrieval_rank=1, dense_score=0.7),
        kb_content_version=BINDING.collection_version,
        matcher_version=BINDING.matcher,
        retrieval_model=BINDING.embedder,
    )
    servicer.BatchScore(confidence_pb2.BatchScoreRequest(items=[item]), None)  # type: ignore[arg-type]
    item.retrieval_model = "tuned:tm-0123456789ab"
    with pytest.raises(FailedPreconditionError) as info:
        servicer.BatchScore(confidence_pb2.BatchScoreRequest(items=[item]), None)  # type: ignore[arg-type]
    assert info.value.field == "items[0].retrieval_model"


def _observe(
    monkeypatch: pytest.MonkeyPatch, reported: list[str]
) -> tuple[list[list[ObservedCandidate]], CalibrationBinding]:
    """``observe_traffic`` over one query per ``reported`` retrieval model, with the stages
    replaced by replies that report it (and one candidate each)."""
    from tribunal import gateway
    from tribunal.commands._calibration_signals import observe_traffic
    from tribunal.confidence._traffic import LabelledQuery
    from tribunal.core import load_settings
    from tribunal.gateway._candidates import CandidateSignals
    from tribunal.v1 import confidence_pb2, retrieval_pb2

    class Stages:
        def call(self, stage: str, method: str, request: object, timeout_s: float) -> object:
            assert (stage, method) == ("retrieval", "Stats")
            return retrieval_pb2.StatsResponse(
                collections=[retrieval_pb2.CollectionStats(name="faq", entries=40)]
            )

        def close(self) -> None:
            pass

    models = dict(zip((f"q{i}" for i in range(len(reported))), reported, strict=True))

    def candidate_signals(self: object, request: object, **_: object) -> CandidateSignals:
        versions = RequestVersions(
            BINDING.collection_version,
            BINDING.matcher,
            retrieval_model=models[request.query],  # type: ignore[attr-defined]
        )
        signals = confidence_pb2.Signals(ensemble_p_match=0.5, retrieval_rank=1)
        return CandidateSignals(("e1",), (signals,), versions)

    monkeypatch.setattr(gateway, "serve_stages", lambda *a, **k: (Stages(), None))
    monkeypatch.setattr(gateway.AnswerPipeline, "candidate_signals", candidate_signals)
    queries = tuple(LabelledQuery(q, frozenset({"e1"}), q) for q in models)
    traffic = Traffic(queries, sha256="0" * 64, source="traffic.jsonl")
    return observe_traffic(load_settings("tiny"), "faq", traffic)


def test_calibrate_binds_the_retrieval_model_retrieval_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tribunal.confidence import embedder_version
    from tribunal.core import load_settings

    tuned = "tuned:tm-0123456789ab"
    observed, binding = _observe(monkeypatch, [tuned, tuned])
    assert [[c.entry_id for c in found] for found in observed] == [["e1"], ["e1"]]
    assert binding.embedder == tuned
    assert binding.matcher == BINDING.matcher
    # A retrieval that reports no model searched with the profile's embedder.
    _, binding = _observe(monkeypatch, ["", ""])
    assert binding.embedder == embedder_version(load_settings("tiny"))
    # Re-embedded while calibrating: two models' scores in one calibration.
    with pytest.raises(InvalidArgumentError, match="retrieval model changed while calibrating"):
        _observe(monkeypatch, [tuned, BINDING.embedder])


def test_no_certified_threshold_is_a_state_not_an_error(calibrated: object) -> None:
    artifact = calibrated.artifact  # type: ignore[attr-defined]
    uncertified = replace(
        artifact,
        thresholds=tuple(
            replace(t, threshold=None, upper_bound=None, accepted=0, errors=0)
            for t in artifact.thresholds
        ),
    )
    scorer = ConfidenceScorer(uncertified, alpha=0.1)
    result = scorer.score(Signals(ensemble_p_match=0.99, retrieval_rank=1, dense_score=0.9))
    assert result.status is ThresholdStatus.NOT_CERTIFIED
    assert result.decision is Decision.FALLBACK
    assert math.isinf(result.threshold)
    assert 0.0 < result.confidence <= 1.0  # still measured (and audited by the gateway)
    plain = ConfidenceScorer(uncertified, alpha=0.1, plain_threshold=0.5)
    assert (
        plain.score(Signals(ensemble_p_match=0.99, retrieval_rank=1, dense_score=0.9)).status
        is ThresholdStatus.PLAIN
    )


def test_report_files_are_written(calibrated: object, tmp_path: Path) -> None:
    written = write_calibration_report(calibrated, tmp_path)  # type: ignore[arg-type]
    names = {p.name for p in written}
    assert {"calibration-report.json", "calibration-report.md"} <= names
    table = (tmp_path / "calibration-report.md").read_text()
    assert "| 0.1 |" in table
    assert "Bound to collection `faq` kb-0123456789abcdef" in table
    if "hallucination-coverage.png" in names:
        assert (tmp_path / "hallucination-coverage.png").read_bytes()[:4] == b"\x89PNG"


def test_calibration_refuses_misaligned_observations() -> None:
    traffic, observed = _traffic(10, 2)
    with pytest.raises(InvalidArgumentError, match="observed candidate lists"):
        calibrate(traffic, observed[:-1], CalibrationConfig(), BINDING)


def test_the_shipped_calibrator_certifies_the_tiny_profiles_alpha() -> None:
    """The tiny profile serves at an α its shipped calibrator certifies, bound to the COVID
    FAQ collection, the shipped feature matcher and the profile's retrieval embedder."""
    from tribunal.confidence import default_artifact_path, embedder_version
    from tribunal.core import load_settings
    from tribunal.ensemble._feature_artifact import MatchFeaturesArtifact, features_path

    settings = load_settings("tiny")
    artifact = CalibratorArtifact.load(default_artifact_path(settings))
    threshold = artifact.threshold_for(settings.confidence.alpha)
    assert threshold.certified
    assert threshold.upper_bound is not None
    assert threshold.upper_bound <= settings.confidence.alpha
    binding = artifact.binding
    assert binding is not None
    assert binding.embedder == embedder_version(settings)
    matcher = MatchFeaturesArtifact.load(features_path(settings))
    assert binding.matcher == f"features:{matcher.version}"
    assert binding.candidates == settings.gateway.candidates
    # It loads where the services load it (no refusal under the tiny profile).
    assert ConfidenceScorer.from_settings(settings).version == artifact.version


def test_confidence_fit_takes_the_method_and_the_monotone_calibrator(tmp_path: Path) -> None:
    from tribunal.cli import main
    from tribunal.confidence import write_labelled_signals

    from tests.unit._confidence_data import synthetic_signals

    signals, labels = synthetic_signals(600)
    data = tmp_path / "signals.jsonl"
    write_labelled_signals(data, signals, [int(y) for y in labels])
    out = tmp_path / "calibrator.json"
    args = ["confidence", "fit", "--data", str(data), "--calibrator", "monotone"]
    assert main([*args, "--method", "ltt", "--alpha", "0.1", "-o", str(out)]) == 0
    artifact = CalibratorArtifact.load(out)
    assert artifact.calibrator.kind == "monotone"
    assert [t.method for t in artifact.thresholds] == ["ltt"]
    assert artifact.binding is None  # a signals file is bound to no KB


def test_weighted_traffic_is_certified_by_the_weighted_test(tmp_path: Path) -> None:
    traffic, observed = _traffic(n_groups=200)
    # Every fifth query drawn at a tenth of the others' inclusion probability: weight 1, the
    # rest 0.1 (pi_floor / pi); each query its own group, as --from-audit writes them.
    from tribunal.confidence._traffic import LabelledQuery

    queries = tuple(
        LabelledQuery(q.query, q.answers, f"group:{i}", 1.0 if i % 5 == 0 else 0.1)
        for i, q in enumerate(traffic.queries)
    )
    weighted = Traffic(queries, "sha", "audit-traffic.jsonl", weighted=True)
    config = CalibrationConfig(alphas=(0.2, 0.3), delta=0.1)
    result = calibrate(weighted, observed, config, BINDING)
    assert [t.method for t in result.artifact.thresholds] == ["ipw-betting"] * 2
    assert result.report["traffic"]["weighted"] is True
    certified = [t for t in result.artifact.thresholds if t.certified]
    assert [t.alpha for t in certified] == [0.2, 0.3]
    assert all(t.upper_bound is not None and t.upper_bound <= t.alpha for t in certified)
    # The same queries unweighted: the configured method.
    plain = calibrate(Traffic(queries, "sha", "t.jsonl"), observed, config, BINDING)
    assert {t.method for t in plain.artifact.thresholds} == {config.method}


def test_traffic_weights_are_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        '{"query": "a?", "answers": ["e1"], "weight": 0.2}\n{"query": "b?", "answers": [], '
        '"weight": 1}\n'
    )
    traffic = read_traffic(path)
    assert traffic.weighted
    assert [q.weight for q in traffic.queries] == [0.2, 1.0]
    path.write_text('{"query": "a?", "answers": [], "weight": 2}\n')
    with pytest.raises(InvalidArgumentError, match=r"w.jsonl:1: 'weight' must be a number"):
        read_traffic(path)
    path.write_text(
        '{"query": "a?", "answers": [], "weight": 0.5}\n{"query": "b?", "answers": []}\n'
    )
    with pytest.raises(InvalidArgumentError, match="weight every row or none"):
        read_traffic(path)


def test_each_query_is_its_own_unit_unless_its_text_repeats_or_a_group_is_given(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        {"query": "Where is my card?", "answers": ["e1"]},
        {"query": "where is  my CARD?", "answers": ["e1"]},  # the same text: one unit
        {"query": "Has my card been sent?", "answers": ["e1"]},  # same answer, own unit
        {"query": "a", "answers": ["e2"], "group": "session-7"},
        {"query": "b", "answers": ["e3"], "group": "session-7"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    groups = [q.group for q in read_traffic(path).queries]
    assert groups[0] == groups[1] != groups[2]
    assert groups[3] == groups[4] == "group:session-7"


def test_fit_only_queries_fit_and_the_rest_certify_or_are_held_out() -> None:
    traffic, _ = _traffic(n_groups=100, per_group=1)
    marked = tuple(replace(q, fit_only=i < 30) for i, q in enumerate(traffic.queries))
    split = split_traffic(marked, holdout_fraction=0.1, fit_fraction=0.4, seed=3)
    assert set(split.fit.tolist()) == set(range(30))
    assert split.sizes() == {"fit": 30, "risk": 63, "holdout": 7}
    assert not set(split.risk.tolist()) & set(range(30))
    mixed = (*marked, replace(marked[40], query="another row of q40's group", fit_only=True))
    with pytest.raises(InvalidArgumentError, match="both fit-only and other queries"):
        split_traffic(mixed, holdout_fraction=0.1, fit_fraction=0.4, seed=3)


def test_reading_traffic_refuses_a_fit_only_that_is_not_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"query": "a?", "answers": ["e1"], "fit_only": "yes"}\n')
    with pytest.raises(InvalidArgumentError, match=r"t\.jsonl:1: 'fit_only' must be true"):
        read_traffic(path)
    path.write_text('{"query": "a?", "answers": ["e1"], "fit_only": true}\n')
    assert read_traffic(path).queries[0].fit_only
