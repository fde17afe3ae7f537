"""`tribunal-lab eval matching-features`: the grouped split, thresholds fitted on selection
only, hallucination counting, and one real run with the profile's MiniLM."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tribunal.confidence import select_risk_threshold
from tribunal.core import InvalidArgumentError, Settings
from tribunal.ensemble import FeatureMatcher, MatchFeaturesArtifact, MatchItem, MatchRequestItem
from tribunal.kb import KbEntry
from tribunal_lab.evaluation import matching_features as mf

from tests.conftest import SHARED


def _table(seed: int = 0) -> mf.FeatureTable:
    """Three sources like the real set: COVID queries with a held-out (all-negative)
    twin sharing the group, and STS-B singletons; features noisy functions of the label."""
    rng = np.random.default_rng(seed)
    ids, sources, groups, labels = [], [], [], []
    for q in range(40):
        ids.append(f"c{q}")
        sources.append("covid-qa")
        groups.append(f"g{q}")
        labels.append(int(q % 3 != 0))
        if q % 2 == 0:
            ids.append(f"h{q}")
            sources.append("covid-qa-heldout")
            groups.append(f"g{q}")
            labels.append(0)
    for s in range(30):
        ids.append(f"s{s}")
        sources.append("stsb")
        groups.append(f"s{s}")
        labels.append(int(s % 2))
    y = np.array(labels, dtype=np.int64)
    n = y.size
    features = {
        name: 0.5 * y + rng.normal(0, 0.3, n)
        for name in (*mf.EMBEDDING_FEATURES, "dense_score", "bm25_score", "rrf_score")
    }
    for name in mf.RETRIEVAL_FEATURES:  # STS-B was never retrieved
        features[name][np.array(sources) == "stsb"] = math.nan
    return mf.FeatureTable(tuple(ids), tuple(sources), tuple(groups), y, features)


def test_split_keeps_groups_together_and_is_stratified_exactly() -> None:
    table = _table()
    selection, test = mf.grouped_stratified_split(table.sources, table.labels, table.groups, 13)
    assert np.intersect1d(selection, test).size == 0
    assert np.union1d(selection, test).tolist() == list(range(len(table.ids)))
    groups = np.array(table.groups)
    assert not set(groups[selection]) & set(groups[test])
    # Strata (by group make-up): covid label 1 with / without a held-out twin, covid
    # label 0 with / without, STS-B 0 / 1. Each sends round(n / 2) groups to selection.
    make_up: dict[str, tuple[tuple[str, int], ...]] = {}
    for i, g in enumerate(table.groups):
        make_up[g] = tuple(sorted((*make_up.get(g, ()), (table.sources[i], int(table.labels[i])))))
    chosen = set(groups[selection])
    for key in set(make_up.values()):
        members = [g for g, k in make_up.items() if k == key]
        assert sum(g in chosen for g in members) == round(len(members) / 2), key
    again = mf.grouped_stratified_split(table.sources, table.labels, table.groups, 13)
    assert all(np.array_equal(a, b) for a, b in zip(again, (selection, test), strict=True))
    other = mf.grouped_stratified_split(table.sources, table.labels, table.groups, 14)
    assert not np.array_equal(other[0], selection)


def test_max_accuracy_threshold_is_exact_and_takes_the_highest_tie() -> None:
    y = np.array([0, 0, 1, 0, 1, 1])
    s = np.array([0.1, 0.2, 0.3, 0.35, 0.4, 0.9])
    # Cuts 0.25 and 0.375 both get 5/6 right; the higher accepts fewer.
    assert mf.max_accuracy_threshold(y, s) == pytest.approx(0.375)


def test_empirical_risk_threshold_and_hallucination_counting() -> None:
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    y = np.array([1, 1, 0, 1, 1, 0])
    # Accepted-but-wrong / accepted at each λ: 0/1, 0/2, 1/3, 1/4, 1/5, 2/6.
    assert mf.empirical_risk_threshold(y, s, 0.25) == 0.5
    assert mf.empirical_risk_threshold(y, s, 0.05) == 0.8
    assert mf.empirical_risk_threshold(np.array([0, 1]), np.array([0.9, 0.1]), 0.05) is None
    out = mf.outcome(y, s >= 0.6)
    assert out == {
        "accuracy": pytest.approx(4 / 6),
        "hallucination": pytest.approx(1 / 4),
        "coverage": pytest.approx(4 / 6),
        "false_positive_rate": pytest.approx(1 / 2),
    }
    assert math.isnan(mf.outcome(y, np.zeros(6, bool))["hallucination"])


def test_everything_fitted_comes_from_selection_only() -> None:
    table = _table()
    selection, test = mf.grouped_stratified_split(table.sources, table.labels, table.groups, 13)
    base = mf.evaluate_table(table, resamples=50)
    # Scramble the test items' features and labels (same split): nothing fitted may move.
    rng = np.random.default_rng(99)
    labels = table.labels.copy()
    labels[test] = rng.integers(0, 2, test.size)
    features = {k: v.copy() for k, v in table.features.items()}
    for values in features.values():
        values[test] = rng.normal(5, 3, test.size)
    scrambled = mf.FeatureTable(table.ids, table.sources, table.groups, labels, features)
    moved = mf.evaluate_table(scrambled, resamples=50, split=(selection, test))
    for scope, rows in base["scopes"].items():
        for name, row in rows.items():
            assert row["fitted_on_selection"] == moved["scopes"][scope][name]["fitted_on_selection"]
    assert (
        base["scopes"]["all"]["cos_question"]["test"]
        != moved["scopes"]["all"]["cos_question"]["test"]
    )
    # The risk point is the confidence service's fixed-sequence Clopper–Pearson scan.
    sel_scores = table.features["cos_answer"][selection]
    expected = select_risk_threshold(
        sel_scores, table.labels[selection], alpha=0.05, delta=0.1
    ).threshold
    row = base["scopes"]["all"]["cos_answer"]
    assert row["fitted_on_selection"]["thresholds"]["risk"] == expected
    # Test figures at the max-accuracy cut, recounted by hand.
    cut = row["fitted_on_selection"]["thresholds"]["max-accuracy"]
    scores, truth = table.features["cos_answer"][test], table.labels[test]
    accepted = scores >= cut
    report = row["test"]["max-accuracy"]
    assert report["accepted"] == int(accepted.sum())
    assert report["wrong"] == int((accepted & (truth == 0)).sum())
    assert report["hallucination"]["value"] == pytest.approx(report["wrong"] / report["accepted"])
    assert report["coverage"]["value"] == pytest.approx(accepted.mean())
    lo, hi = report["accuracy"]["low"], report["accuracy"]["high"]
    assert lo <= report["accuracy"]["value"] <= hi
    # The retrieval ablation sees COVID items only, and the held-out source has no AUROC.
    ablation = base["scopes"]["covid (retrieval ablation)"]["logistic(embedding+retrieval)"]
    assert set(ablation["test_per_source"]) == {"covid-qa", "covid-qa-heldout"}
    assert math.isnan(ablation["test_per_source"]["covid-qa-heldout"]["auroc"]["value"])
    assert "# Matching with embedding features" in mf.markdown_report(base)


def test_a_selection_with_one_class_is_a_clear_error() -> None:
    n = 8
    table = mf.FeatureTable(
        tuple(f"s{i}" for i in range(n)),
        ("stsb",) * n,
        tuple(f"s{i}" for i in range(n)),
        np.zeros(n, dtype=np.int64),
        {name: np.linspace(0, 1, n) for name in (*mf.EMBEDDING_FEATURES, *mf.RETRIEVAL_FEATURES)},
    )
    with pytest.raises(InvalidArgumentError, match="one class only"):
        mf.evaluate_table(table, resamples=10)


def _real_items() -> list[MatchItem]:
    """COVID question pairs (a query, an FAQ entry) and STS-B pairs: 2+ groups per stratum."""
    items: list[MatchItem] = []
    seen: set[str] = set()
    path = SHARED / "data" / "covid-qa" / "question_similarity_en.jsonl"
    wanted = {0: 4, 1: 4}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        label = int(row["label"])
        if wanted[label] == 0 or row["question_2"] in seen:
            continue
        wanted[label] -= 1
        seen.add(row["question_2"])
        n = len(items)
        # A short answer keeps the embedding pass quick on a shared CPU.
        answer = row["q1_faq_answer"][:200]
        entry = KbEntry(id=f"faq-{n}", question=row["question_1"], answer=answer)
        items.append(MatchItem(f"c{n}", "covid-qa", f"g{n}", row["question_2"], entry, label))
    stsb = [json.loads(x) for x in (SHARED / "data" / "stsb" / "dev.jsonl").open()]
    matches = [r for r in stsb if float(r["score"]) >= 4][:4]
    others = [r for r in stsb if float(r["score"]) <= 2][:4]
    for n, row in enumerate(matches + others):
        entry = KbEntry(id=f"s{n}", question=row["sentence2"], answer=row["sentence2"])
        label = int(float(row["score"]) >= 4)
        items.append(MatchItem(f"s{n}", "stsb", f"s{n}", row["sentence1"], entry, label))
    return items


def test_real_run_with_the_profile_embedder(
    tiny_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tribunal.embedding
    from tribunal.embedding import load_profile_embedder

    embedder = load_profile_embedder(tiny_settings)
    monkeypatch.setattr(tribunal.embedding, "load_profile_embedder", lambda *_: embedder)
    tables: list[mf.FeatureTable] = []
    compute = mf.compute_features

    def keep(*args: Any, **kwargs: Any) -> mf.FeatureTable:
        tables.append(compute(*args, **kwargs))
        return tables[-1]

    monkeypatch.setattr(mf, "compute_features", keep)
    items = _real_items()
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "items.jsonl").write_text(
        "".join(json.dumps(i.to_record()) + "\n" for i in items), encoding="utf-8"
    )
    out = tmp_path / "mf.json"
    args = argparse.Namespace(
        dataset=dataset,
        data=SHARED / "data",
        profile="tiny",
        embedder=None,
        seed=13,
        fraction=0.5,
        alpha=0.05,
        delta=0.1,
        resamples=100,
        out=out,
        no_progress=True,
        artifact=None,
        export_artifact=tmp_path / "matcher.json",
        signals=tmp_path / "signals.jsonl",
        signals_sources=None,
    )
    assert mf.run(args) == 0
    result = json.loads(out.read_text(encoding="utf-8"))  # strict JSON: NaN written as null
    assert result["items"] == len(items) == 16
    assert result["split"]["selection"]["items"] + result["split"]["test"]["items"] == 16
    lr = result["scopes"]["all"]["logistic(embedding)"]
    assert lr["fitted_on_selection"]["model"]["features"] == list(mf.EMBEDDING_FEATURES)
    assert out.with_suffix(".md").read_text(encoding="utf-8").startswith("# Matching")

    (table,) = tables
    cos = table.features["cos_question"]
    assert np.all(np.abs(cos) <= 1 + 1e-6)
    # STS-B has no answer: its question and answer cosines are the same number.
    stsb = np.array(table.sources) == "stsb"
    assert np.allclose(cos[stsb], table.features["cos_answer"][stsb], atol=1e-6)
    # Paraphrases sit closer than other questions (a property of any sane embedder).
    assert cos[table.labels == 1].mean() > cos[table.labels == 0].mean()
    assert np.isnan(table.features["dense_score"]).all()  # never retrieved

    # The artifact is the evaluated LR, and the served matcher reproduces its P(match).
    artifact = MatchFeaturesArtifact.load(tmp_path / "matcher.json")
    assert artifact.version.startswith("mf-")
    assert list(artifact.coef) == lr["fitted_on_selection"]["model"]["coef"]
    assert artifact.threshold == lr["fitted_on_selection"]["thresholds"]["max-accuracy"]
    assert artifact.metrics["test"]["max-accuracy"] == lr["test"]["max-accuracy"]
    assert artifact.embedder.name == embedder.name == "all-minilm-l6-v2"
    rows = [json.loads(line) for line in (tmp_path / "signals.jsonl").read_text().splitlines()]
    assert [r["split"] for r in rows].count("test") == result["split"]["test"]["items"]
    assert [r["split"] for r in rows].count("selection") == result["split"]["selection"]["items"]
    by_id = {item.id: item for item in items}
    assert all(r["label"] == by_id[r["id"]].label for r in rows)
    # Selection rows carry the out-of-fold P(match), not the shipped model's in-sample one.
    selection = [r for r in rows if r["split"] == "selection"]
    in_sample = FeatureMatcher(artifact, embedder, tiny_settings.ensemble).match(
        [MatchRequestItem(by_id[r["id"]].query, by_id[r["id"]].candidate) for r in selection]
    )
    assert any(
        abs(v.p_match - r["signals"]["ensemble_p_match"]) > 1e-3
        for v, r in zip(in_sample, selection, strict=True)
    )
    test_rows = [r for r in rows if r["split"] == "test"]
    served = FeatureMatcher(artifact, embedder, tiny_settings.ensemble).match(
        [MatchRequestItem(by_id[r["id"]].query, by_id[r["id"]].candidate) for r in test_rows]
    )
    for row, verdict in zip(test_rows, served, strict=True):
        assert verdict.p_match == pytest.approx(row["signals"]["ensemble_p_match"], abs=1e-5)
        assert verdict.match == (verdict.p_match >= artifact.threshold)
        assert verdict.judges == ()
        assert verdict.aggregator == "features"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("llm_weak", "--embedder 'llm_weak' is not an embedder model of profile 'tiny'"),
        ("nope", "--embedder 'nope' is not an embedder model of profile 'tiny': embedder, "),
    ],
)
def test_an_embedder_that_is_not_one_is_refused_before_any_work(
    key: str, message: str, tmp_path: Path
) -> None:
    from tribunal.core import InvalidArgumentError

    args = argparse.Namespace(
        dataset=tmp_path / "absent",
        profile="tiny",
        embedder=key,
        fraction=0.5,
        signals_sources=None,
    )
    with pytest.raises(InvalidArgumentError, match=re.escape(message)) as caught:
        mf.run(args)
    assert caught.value.field == "embedder"
    assert not (tmp_path / "absent").exists()  # no items were built


def test_unknown_signal_sources_are_refused_before_any_work(tmp_path: Path) -> None:
    args = argparse.Namespace(
        dataset=tmp_path / "absent", fraction=0.5, signals_sources=["covid-qa", "faq"]
    )
    with pytest.raises(InvalidArgumentError, match=r"unknown \['faq'\]; the matching set has"):
        mf.run(args)
    assert not (tmp_path / "absent").exists()


def _judged_dataset(folder: Path, items: list[MatchItem], judged: int) -> None:
    """A dataset folder whose judge ``j/plain`` gave the first ``judged`` items a
    label-revealing P(yes) (0.9 for a match, 0.2 otherwise)."""
    folder.mkdir()
    records = "".join(json.dumps(i.to_record()) + "\n" for i in items)
    (folder / "items.jsonl").write_text(records, encoding="utf-8")
    np.save(folder / "embeddings.npy", np.zeros((len(items), 4), np.float32))
    (folder / "judgments").mkdir()
    rows = [
        {"id": i.id, "judge": "j/plain", "p_yes": 0.9 if i.label else 0.2} for i in items[:judged]
    ]
    (folder / "judgments" / "j__plain.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )


def test_judges_enter_as_logit_features_and_their_own_scorers(tmp_path: Path) -> None:
    from tribunal_lab.evaluation._matching_judges import add_judge_features

    items = _real_items()
    _judged_dataset(tmp_path / "d", items, judged=len(items))
    base = _table()
    # The real items' rows, with synthetic embedding features (no model needed).
    table = mf.FeatureTable(
        tuple(i.id for i in items),
        tuple(i.source for i in items),
        tuple(i.group for i in items),
        np.array([i.label for i in items], dtype=np.int64),
        {name: base.features[name][: len(items)] for name in mf.EMBEDDING_FEATURES},
    )
    judged = add_judge_features(table, tmp_path / "d", ["j/plain"])
    expected = [math.log(0.9 / 0.1) if i.label else math.log(0.2 / 0.8) for i in items]
    assert judged.features["judge:j/plain"] == pytest.approx(expected)

    scorers = [s.name for _, _, group in mf._scopes(("judge:j/plain",)) for s in group]
    assert "judge:j/plain" in scorers
    assert "logistic(embedding+judges)" in scorers
    assert "logistic(embedding+retrieval+judges)" in scorers
    assert "logistic(judges)" not in scorers  # one judge: it is the judge alone


def test_judges_must_have_judged_every_item(tmp_path: Path) -> None:
    from tribunal.core import FailedPreconditionError
    from tribunal_lab.evaluation._matching_judges import add_judge_features

    items = _real_items()
    _judged_dataset(tmp_path / "d", items, judged=10)
    table = mf.FeatureTable(
        tuple(i.id for i in items),
        tuple(i.source for i in items),
        tuple(i.group for i in items),
        np.array([i.label for i in items], dtype=np.int64),
        {},
    )
    with pytest.raises(FailedPreconditionError, match="6 of 16 items are not judged yet"):
        add_judge_features(table, tmp_path / "d", ["j/plain"])
    with pytest.raises(FailedPreconditionError, match="judge 'j/other' has no judgments"):
        add_judge_features(table, tmp_path / "d", ["j/other"])
