"""``tribunal tune`` on a small fixed-seed fixture with the real MiniLM: a few training
steps, an artifact that records its split and what it taught the KB and verifies, a
feature matcher that serves it under its version, and ``tribunal calibrate`` refusing
the tune's fit queries.

Extended (minutes on 2 cores): ``pytest -m extended tests/integration/test_tune.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core import load_settings
from tribunal.ensemble import FeatureEmbedder, MatchFeaturesArtifact, features_path
from tribunal.ensemble._feature_matcher import FeatureMatcher
from tribunal.kb import deduplicate, read_entries
from tribunal.retrieval import KnowledgeBase
from tribunal.tuning import TunedMatcher, current_tuned_dir, query_key
from tribunal_lab.datasets.covid_traffic import build_covid_traffic

from tests.conftest import SHARED

COVID = SHARED / "data" / "covid-qa"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, int]:
    """A COVID FAQ collection, its 240 labelled queries, a MiniLM feature matcher (the
    "before"), and a tune of MiniLM with 3 optimiser steps."""
    root = tmp_path_factory.mktemp("tune")
    data = root / "data"
    traffic = root / "traffic.jsonl"
    build_covid_traffic(COVID, traffic)
    served = load_settings("tiny", data_dir=str(data))
    # The served matcher of this test: the shipped regression's weights on MiniLM.
    shipped = MatchFeaturesArtifact.load(features_path(served))
    head = shipped.model_copy(
        update={"embedder": FeatureEmbedder(model_key="embedder", name="all-minilm-l6-v2")}
    ).save(root / "minilm-features.json")
    assert head.version.startswith("mf-")
    entries, _ = deduplicate(
        read_entries(COVID / "faq_kb_en.jsonl", record_format="faq", max_chars=1000)
    )
    kb = KnowledgeBase.from_settings(served, checker=None)
    kb.upsert("covid", entries, create=True, self_evidenced=True)
    kb.close()
    return root, data, traffic, len(entries)


def _env(monkeypatch: pytest.MonkeyPatch, root: Path, data: Path) -> None:
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(data))
    monkeypatch.setenv("TRIBUNAL_ENSEMBLE__MATCHER", "features")
    monkeypatch.setenv("TRIBUNAL_ENSEMBLE__FEATURES_ARTIFACT", str(root / "minilm-features.json"))


@pytest.mark.models
@pytest.mark.extended
@pytest.mark.timeout(1800)
def test_tune_writes_a_bound_versioned_artifact_with_its_split(
    tuned: tuple[Path, Path, Path, int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, data, traffic, size = tuned
    _env(monkeypatch, root, data)
    args = ["tune", "--collection", "covid", "--traffic", str(traffic), "--base", "embedder"]
    args += [
        "--encoder-epochs",
        "1",
        "--max-steps",
        "3",
        "--batch-size",
        "16",
        "--seed",
        "7",
        "--created",
        "2026-12-02T00:00:00+00:00",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "AUROC" in printed
    assert "current for collection 'covid'" in printed
    directory = current_tuned_dir(data, "covid")
    assert directory is not None
    artifact = TunedMatcher.load(directory)
    manifest = artifact.manifest
    assert artifact.version == directory.name
    assert manifest["binding"]["collection"] == "covid"
    assert manifest["binding"]["entries"] == size
    assert manifest["base"] == {"model_key": "embedder", "name": "all-minilm-l6-v2"}
    split = manifest["split"]
    assert split["seed"] == 7
    assert split["sizes"] == {"train": 126, "head": 42, "heldout": 72}
    assert not set(split["fit_keys"]) & set(split["heldout_keys"])
    lines = [json.loads(line) for line in traffic.read_text().splitlines()]
    assert {query_key(r["query"]) for r in lines} == set(split["fit_keys"]) | set(
        split["heldout_keys"]
    )
    metrics = manifest["metrics"]
    assert metrics["heldout_queries"] == 72
    assert (
        metrics["before"]["matcher"]
        == json.loads((root / "minilm-features.json").read_text())["version"]
    )
    assert 0.5 < metrics["before"]["auroc"] <= 1.0
    assert 0.5 < metrics["after"]["auroc"] <= 1.0
    # The default 10-minute budget leaves room for the 3 steps asked for.
    assert metrics["encoder"]["steps"] == metrics["encoder"]["planned_steps"] == 3
    assert metrics["encoder"]["stopped_by_time_budget"] is False
    assert metrics["encoder"]["seconds_after_training_priced"] > 0
    assert metrics["encoder"]["seconds_after_training"] > 0
    assert "encoder fine-tune: 3 of 3 optimiser steps\n" in printed
    assert manifest["examples"]["query_triples"] >= 126
    # The train part taught the KB: each taught query is a train query, none held out or
    # from the head part, and the binding is the taught KB's.
    teaching = manifest["teaching"]
    taught_keys = {row["query_key"] for row in teaching["added"]}
    assert teaching["phrasings_added"] == len(teaching["added"]) > 0
    assert taught_keys <= set(split["fit_keys"])
    assert not taught_keys & set(split["heldout_keys"])
    kb = KnowledgeBase.from_settings(load_settings("tiny", data_dir=str(data)), checker=None)
    try:
        collection = kb.collection("covid")
        assert manifest["binding"]["collection_version"] == collection.content_version()
        stored = collection.store.iter_entries()
        assert sum(len(e.questions) for e in stored) == teaching["phrasings_added"]
    finally:
        kb.close()

    # The feature matcher serves it for the collection, under the tune's version.
    settings = load_settings("tiny", data_dir=str(data), gateway={"collection": "covid"})
    matcher = FeatureMatcher.from_settings(settings)
    assert matcher.version == artifact.version
    assert matcher.artifact.embedder.name == "all-minilm-l6-v2+tuned:covid"


@pytest.mark.models
@pytest.mark.extended
@pytest.mark.timeout(1800)
def test_calibrate_refuses_traffic_holding_the_tunes_fit_queries(
    tuned: tuple[Path, Path, Path, int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, data, traffic, _ = tuned
    _env(monkeypatch, root, data)
    if current_tuned_dir(data, "covid") is None:
        pytest.skip("needs the tune of the test above")  # pragma: no cover
    rows = traffic.read_text().splitlines()
    copy = root / "copy.jsonl"
    copy.write_text("\n".join(rows[:50]) + "\n")  # another file with fit queries in it
    code = main(["calibrate", "--collection", "covid", "--traffic", str(copy)])
    assert code == 2
    err = capsys.readouterr().err
    assert "were used to fit the tuned matcher" in err
