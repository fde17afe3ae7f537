"""`tribunal-lab eval sweep`: the split, fits on selection only, the band cap, exact figures."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from tribunal_lab.evaluation import sweep
from tribunal_lab.evaluation._sweep_stats import (
    Judge,
    auroc,
    balanced_accuracy,
    cascade_predict,
    fit_judge,
    logit,
    oof_ensemble,
    report_on_test,
    select_band,
    select_threshold,
    stratified_split,
)

from tests.conftest import SHARED

# A small table: distinct scores, one positive (0.4) below one negative (0.55).
Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
P = np.array([0.1, 0.2, 0.3, 0.55, 0.4, 0.7, 0.8, 0.9])


def _judge(name: str, p: np.ndarray) -> Judge:
    return Judge(name, "single", (name,), p, np.full(p.size, 0.5), np.full(p.size, 100.0))


def _table(seed: int = 0, n: int = 200) -> tuple[np.ndarray, dict[str, Judge]]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(np.int64)
    judges = {}
    for name, strength in (("m:a@1", 1.5), ("m:b@1", 0.8)):
        p = 1 / (1 + np.exp(-(strength * (2 * y - 1) + rng.normal(0, 1, n))))
        judges[name] = _judge(name, p)
    return y, judges


def test_split_is_stratified_disjoint_and_exact() -> None:
    y = np.array([1] * 11 + [0] * 30)
    selection, test = stratified_split(y, seed=13)
    assert np.intersect1d(selection, test).size == 0
    assert sorted(np.concatenate([selection, test]).tolist()) == list(range(41))
    # round(11 / 2) = 6 (banker's rounding of 5.5), round(30 / 2) = 15
    assert (int(y[selection].sum()), selection.size) == (6, 21)
    assert (int(y[test].sum()), test.size) == (5, 20)
    again, _ = stratified_split(y, seed=13)
    other, _ = stratified_split(y, seed=14)
    assert again.tolist() == selection.tolist()
    assert other.tolist() != selection.tolist()


def test_split_refuses_a_class_too_small_for_both_halves() -> None:
    from tribunal.core import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="--pairs"):
        stratified_split(np.array([1, 0, 0, 0]), seed=0)


def test_metrics_match_scikit_learn() -> None:
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    rng = np.random.default_rng(3)
    y = (rng.random(150) < 0.3).astype(np.int64)
    p = np.round(rng.random(150), 1)  # ties
    predicted = (p >= 0.5).astype(np.int64)
    assert auroc(y, p) == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert balanced_accuracy(y, predicted) == pytest.approx(
        balanced_accuracy_score(y, predicted), abs=1e-12
    )


def test_threshold_band_and_calibrators_on_a_small_table() -> None:
    # Cuts 0.35 and 0.625 both reach bAcc 0.875; 0.35 is nearer the median (0.475).
    assert select_threshold(Y, P) == pytest.approx(0.35)
    # Escalating the two crossed items (0.4, 0.55) separates the rest perfectly.
    band = select_band(Y, P, 0.25)
    assert band.low == pytest.approx(0.35)
    assert band.high == pytest.approx(0.625)
    # With room for one item, no band beats the plain threshold: the empty band at 0.35.
    assert select_band(Y, P, 0.2).as_dict() == {"low": 0.35, "high": 0.35}
    fitted = fit_judge(Y, P, max_escalation=0.25)
    assert fitted.selection_bacc == 0.875
    assert fitted.selection_cascade_bacc == 1.0
    assert fitted.selection_escalation == 0.25
    calibrated = fitted.calibrated(P)
    # Logistic regression with an intercept matches the base rate; isotonic pools 0.4, 0.55.
    assert calibrated["platt"].mean() == pytest.approx(0.5, abs=1e-4)
    order = np.argsort(P)
    assert calibrated["isotonic"][order].tolist() == [0, 0, 0, 0.5, 0.5, 1, 1, 1]
    decision, escalated = cascade_predict(np.array([0.2, 0.4, 0.6, 0.7]), fitted.band)  # type: ignore[arg-type]
    assert escalated.tolist() == [False, True, True, False]
    assert decision.tolist() == [0, 0, 0, 1]


def test_report_on_test_exact() -> None:
    fitted = fit_judge(Y, P, max_escalation=0.25)
    y = np.concatenate([Y, [1, 0, 1, 0]])
    judge = _judge("m:x@1", np.concatenate([P, [0.36, 0.34, 0.5, 0.95]]))
    report = report_on_test(judge, fitted, y, [8, 9, 10, 11], n_resamples=50, seed=0)
    # threshold 0.35: 0.36 → yes (right), 0.34 → no (right), 0.5 → yes (right), 0.95 → yes
    assert report["recall_positive"] == 1.0
    assert report["recall_negative"] == 0.5
    assert report["balanced_accuracy"]["value"] == 0.75
    assert report["auroc"]["value"] == 0.5  # 2 of the 4 (positive, negative) pairs in order
    # band 0.35–0.625 escalates 0.36 and 0.5; kept: 0.34 (no, right), 0.95 (yes, wrong)
    assert report["cascade"]["escalation"]["value"] == 0.5
    assert report["cascade"]["balanced_accuracy_kept"]["value"] == 0.5
    assert report["seconds_per_item"]["value"] == 0.5
    assert report["tokens_per_item"]["value"] == 100.0


@pytest.mark.parametrize("cap", [0.0, 0.05, 0.15, 0.3])
def test_band_respects_the_escalation_cap(cap: float) -> None:
    y, judges = _table(seed=5)
    p = judges["m:b@1"].p_yes
    band = select_band(y, p, cap)
    escalated = cascade_predict(p, band)[1]
    assert escalated.sum() <= cap * y.size
    if cap == 0.0:
        assert band.low == band.high


def test_ensemble_folds_shrink_to_the_smallest_class_of_selection() -> None:
    import warnings

    y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 0])
    features = np.stack([np.linspace(0.1, 0.9, 10), np.linspace(0.8, 0.2, 10)], axis=1)
    selection = np.arange(8)  # 3 positives
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn warns when a fold lacks a class
        p, weights = oof_ensemble(logit(features), y, selection, seed=0)
    assert weights["folds"] == 3
    full = LogisticRegression(max_iter=1000).fit(logit(features[:8]), y[:8])
    assert p[8:] == pytest.approx(full.predict_proba(logit(features[8:]))[:, 1])
    assert p[:8] != pytest.approx(full.predict_proba(logit(features[:8]))[:, 1])
    _, single = oof_ensemble(
        logit(features), np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 0]), selection, seed=0
    )
    assert single["folds"] == 1  # one positive: the in-sample fit


def _fits(report: dict[str, Any]) -> dict[str, Any]:
    return {row["judge"]: row["selection"] for row in report["judges"]}


def test_selection_never_sees_test_items() -> None:
    y, judges = _table()

    def analyse(table: dict[str, Judge]) -> dict[str, Any]:
        return sweep.analyse(
            table, y, task="relevance", seed=13, max_escalation=0.15, n_resamples=20
        )

    base = analyse(judges)
    selection, test = stratified_split(y, 13)
    assert base["split"]["selection"]["n"] + base["split"]["test"]["n"] == y.size

    def changed(where: np.ndarray) -> dict[str, Any]:
        moved = {}
        for name, judge in judges.items():
            p = judge.p_yes.copy()
            p[where] = np.clip(1 - p[where] + 0.01, 0, 1)  # flip the ranking there
            moved[name] = _judge(name, p)
        return analyse(moved)

    on_test = changed(test)
    on_selection = changed(selection)
    # Same thresholds, bands, calibrators, ensemble weights, winner when only test moves...
    assert _fits(on_test) == _fits(base)
    assert on_test["winner"] == base["winner"]
    weights = {r["judge"]: r["ensemble_weights"] for r in base["judges"]}
    assert {r["judge"]: r["ensemble_weights"] for r in on_test["judges"]} == weights
    # ...but the test figures do move, and selection changes move the fits.
    assert on_test["judges"][0]["test"] != base["judges"][0]["test"]
    for name in judges:
        assert _fits(on_selection)[name] != _fits(base)[name]
    assert [r["judge"] for r in base["judges"]] == ["m:a@1", "m:b@1", "m:self-ensemble"]
    assert base["winner"] in {"m:a@1", "m:b@1", "m:self-ensemble"}


def test_cross_model_ensembles_and_a_perfect_judge_wins() -> None:
    y, judges = _table(seed=2)
    perfect = np.where(y == 1, 0.9, 0.2)
    judges = {**judges, "n:a@1": _judge("n:a@1", perfect)}
    report = sweep.analyse(judges, y, task="entailment", seed=1, max_escalation=0.15)
    names = [r["judge"] for r in report["judges"]]
    assert names == [
        "m:a@1",
        "m:b@1",
        "n:a@1",
        "m:self-ensemble",
        "cross-model:best",
        "cross-model:all",
    ]
    row = next(r for r in report["judges"] if r["judge"] == "n:a@1")
    assert row["test"]["balanced_accuracy"]["value"] == 1.0
    assert row["test"]["auroc"]["value"] == 1.0
    assert "cascade" not in row["test"]  # no band for entailment
    best = next(r for r in report["judges"] if r["judge"] == "cross-model:best")
    assert best["members"] == ["m:a@1", "n:a@1"]
    assert best["test"]["seconds_per_item"]["value"] == 1.0  # two members' costs add up
    assert report["selected_on"] == "balanced accuracy"
    json.dumps(report, allow_nan=False)
    assert "| judge |" in sweep.markdown(
        {**report, "task": "entailment", "date": "d", "items": y.size, "engines": {"backend": "b"}}
    )


def test_cosine_features_name_embedder_models_of_the_profile() -> None:
    from tribunal.core import load_settings

    tiny = load_settings("tiny")
    # cosine is the embedder role's model; a repeat is scored once.
    assert sweep.cosine_features([], tiny) == []
    assert sweep.cosine_features(["cosine", "cosine:embedder_large", "cosine:embedder"], tiny) == [
        "embedder",
        "embedder_large",
    ]


@pytest.mark.parametrize(
    ("feature", "message"),
    [
        (
            "cosine:llm_weak",
            "--features cosine:llm_weak: 'llm_weak' is a model of kind llm in profile 'tiny'; "
            "cosine needs an embedder model: embedder, embedder_large",
        ),
        ("cosine:nope", "'nope' is not a model in profile 'tiny'"),
        ("cosine:", "--features 'cosine:': expected cosine or cosine:MODEL_KEY"),
        ("bm25", "--features 'bm25': expected cosine or cosine:MODEL_KEY"),
    ],
)
def test_cosine_features_refuse_what_is_not_an_embedder(feature: str, message: str) -> None:
    from tribunal.core import InvalidArgumentError, load_settings

    with pytest.raises(InvalidArgumentError, match=re.escape(message)) as caught:
        sweep.cosine_features(["cosine", feature], load_settings("tiny"))
    assert caught.value.field == "features"


def test_a_bad_feature_is_refused_before_any_llm_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    import tribunal.core.llm
    from tribunal.core import InvalidArgumentError

    def no_engine(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an LLM engine was loaded before --features was checked")

    monkeypatch.setattr(tribunal.core.llm, "shared_engine", no_engine)
    args = argparse.Namespace(
        profile="tiny",
        features=["cosine:llm_weak"],
        response_cache=None,
        backend=None,
        task="relevance",
        variants=None,
        models=["llm_weak"],
    )
    with pytest.raises(InvalidArgumentError, match="cosine needs an embedder model"):
        sweep._score(args, [])


@pytest.mark.models
def test_entailment_cosine_compares_claim_with_evidence() -> None:
    # Entailment items carry claim/evidence, not query/passage: the cosine judge reads
    # the task's two fields (a KeyError here before entailment took --features).
    from tribunal.core import load_settings
    from tribunal_lab.evaluation.judge import Item

    claim = "Vitamin D deficiency raises the risk of fractures."
    items = [
        Item("a", 1, {"claim": claim, "evidence": claim}, "g"),
        Item("b", 0, {"claim": claim, "evidence": "The stock market closed lower."}, "g"),
    ]
    judge = sweep._cosine_judge(
        load_settings("tiny"), "embedder", items, sweep._PAIR_FIELDS["entailment"]
    )
    assert judge.name == "embedder:cosine"
    assert judge.p_yes[0] == pytest.approx(1.0, abs=1e-4)  # (1 + cos) / 2 of identical texts
    assert judge.p_yes[1] < 0.6


def test_two_cosine_judges_are_two_models_and_export_under_their_own_keys() -> None:
    from tribunal.core import load_settings
    from tribunal.ensemble import RelevanceArtifact
    from tribunal_lab.evaluation._relevance_export import export_relevance

    y, judges = _table(seed=3)
    rng = np.random.default_rng(3)
    for key, spread in (("embedder", 0.3), ("embedder_large", 0.2)):
        cosine = np.clip(0.2 + 0.3 * y + rng.normal(0, spread, y.size), -1, 1)
        name = f"{key}:cosine"
        judges[name] = Judge(
            name,
            "single",
            (name,),
            (cosine + 1) / 2,
            np.full(y.size, 0.01),
            np.zeros(y.size),
            transform="cosine",
        )
    report = sweep.analyse(judges, y, task="relevance", seed=3, max_escalation=0.15)
    rows = {r["judge"]: r for r in report["judges"]}
    # The models are the prefixes before ':': each embedder is one, with no self-ensemble.
    assert "embedder:self-ensemble" not in rows
    assert "embedder_large:self-ensemble" not in rows
    assert rows["cross-model:best"]["members"] == [
        "embedder:cosine",
        "embedder_large:cosine",
        max(
            ("m:a@1", "m:b@1"),
            key=lambda n: rows[n]["selection"]["selection_cascade_balanced_accuracy"],
        ),
    ]
    report.update(command="tribunal-lab eval sweep", task="relevance")
    artifact = export_relevance(
        report, judges, "embedder_large:cosine", labels=y, backend="llamacpp"
    )
    assert artifact["features"] == [
        {"name": "embedder_large/cosine", "kind": "cosine", "model_key": "embedder_large"}
    ]
    # The exported artifact fits the tiny profile: embedder_large is an embedder there.
    RelevanceArtifact.from_dict(artifact).check_profile(load_settings("tiny"))


@pytest.mark.models
@pytest.mark.slow
def test_sweep_runs_end_to_end_on_a_real_model_and_reuses_answers(tmp_path: Path) -> None:
    # The 0.5B model on transformers: on these shared CPUs it judged ~1.3 s/item, where
    # SmolLM2-135M took 4.7 s/item on transformers and 19 s/item on this llama.cpp build.
    from tribunal_lab.commands.evaluate import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out, cache = tmp_path / "sweep.json", tmp_path / "answers.sqlite"
    argv = [
        "eval", "sweep", "--task", "relevance", "--models", "llm_weak",
        "--variants", "relevance/yesno@1", "relevance/plain@1", "--pairs", "16",
        "--backend", "transformers", "--data", str(SHARED / "data"),
        "--response-cache", str(cache), "--bootstrap", "50", "--out", str(out),
    ]  # fmt: skip
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    report = json.loads(out.read_text())
    assert report["items"] == 16
    split = report["split"]
    assert split["selection"]["n"] + split["test"]["n"] == 16
    names = [r["judge"] for r in report["judges"]]
    assert names == [
        "llm_weak:relevance/yesno@1",
        "llm_weak:relevance/plain@1",
        "llm_weak:self-ensemble",
    ]
    rows = [line for line in out.with_suffix(".md").read_text().splitlines() if "| " in line]
    assert sum("llm_weak:" in row for row in rows) == 3
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone() == (32,)
    # A rerun is answered from the cache: nothing new stored, the same P(yes) figures.
    assert args.func(parser.parse_args(argv)) == 0
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone() == (32,)
    again = json.loads(out.read_text())["judges"]
    for first, second in zip(report["judges"], again, strict=True):
        assert first["selection"] == second["selection"]
        assert first["test"]["auroc"] == second["test"]["auroc"]
        assert first["test"]["tokens_per_item"] == second["test"]["tokens_per_item"]
