"""A given artifact scored on a team's own labelled files, nothing refitted: the feature
matcher on matching pairs and on labelled traffic of a real KB collection, the relevance
judge on relevance pairs. Real embedders of the tiny profile; the files are the
walkthrough's (docs/walkthrough/)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from tribunal.core import InvalidArgumentError, load_settings
from tribunal.ensemble import MatchFeaturesArtifact, RelevanceArtifact, features_path
from tribunal_lab.commands.evaluate import register

from tests.conftest import REPO

WALKTHROUGH = REPO / "docs" / "walkthrough"
pytestmark = pytest.mark.models


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(argv)


def _matching_pairs(path: Path) -> Path:
    """Matching pairs from the KB: each of 12 questions with its entry (1) and another (0)."""
    kb = [json.loads(line) for line in (WALKTHROUGH / "kb.jsonl").read_text().splitlines()]
    by_id = {entry["id"]: entry for entry in kb}
    rows = []
    for line in (WALKTHROUGH / "questions.jsonl").read_text().splitlines()[:30]:
        asked = json.loads(line)
        if not asked["answers"]:
            continue
        right = by_id[asked["answers"][0]]
        wrong = kb[(kb.index(right) + 7) % len(kb)]
        for entry, label in ((right, 1), (wrong, 0)):
            rows.append(
                {
                    "query": asked["query"],
                    "question": entry["question"],
                    "answer": entry["answer"],
                    "label": label,
                    "group": asked["id"],
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_shipped_matcher_on_matching_pairs_all_then_select_split(tmp_path: Path) -> None:
    data = _matching_pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / "mf.json"
    argv = ["eval", "matching-features", "--data", str(data), "--profile", "tiny",
            "--resamples", "50", "--no-progress", "--out", str(out)]  # fmt: skip
    args = _parse(argv)
    assert args.func(args) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    shipped = MatchFeaturesArtifact.load(features_path(load_settings("tiny")))
    assert result["artifact"]["version"] == shipped.version  # scored as shipped
    assert result["reported_items"] == result["items"] == sum(1 for _ in data.open())
    assert result["thresholds"]["artifact"]["value"] == shipped.threshold
    assert "the artifact's" in result["thresholds"]["artifact"]["source"]
    assert result["thresholds"]["oracle"]["source"].startswith("oracle")
    pairs = result["pairs"]
    assert 0.5 < pairs["auroc"]["value"] <= 1.0
    assert pairs["artifact"]["accepted"] + 0 <= pairs["n"]
    markdown = out.with_suffix(".md").read_text()
    assert "nothing fitted on the file" in markdown

    args = _parse([*argv, "--select-split", "0.5"])
    assert args.func(args) == 0
    split = json.loads(out.read_text())
    assert split["reported_items"] < split["items"]
    assert set(split["thresholds"]) == {"artifact", "max-accuracy", "risk", "empirical"}
    assert "selected on the selection part" in split["thresholds"]["max-accuracy"]["source"]


def test_labelled_traffic_against_a_collection(tmp_path: Path) -> None:
    from tribunal.kb import deduplicate, read_entries
    from tribunal.retrieval import KnowledgeBase

    settings = load_settings("tiny")
    kb = KnowledgeBase.from_settings(settings)
    try:
        entries, _ = deduplicate(
            read_entries(WALKTHROUGH / "kb.jsonl", record_format="faq", max_chars=2000)
        )
        kb.upsert("library", entries, create=True, self_evidenced=True)
    finally:
        kb.close()
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("".join((WALKTHROUGH / "questions.jsonl").read_text().splitlines(True)[:24]))
    out = tmp_path / "traffic.json"
    base = ["eval", "matching-features", "--data", str(traffic), "--profile", "tiny",
            "--resamples", "50", "--no-progress", "--out", str(out)]  # fmt: skip
    args = _parse(base)
    with pytest.raises(InvalidArgumentError, match="--collection"):
        args.func(args)
    args = _parse([*base, "--collection", "library"])
    assert args.func(args) == 0
    result = json.loads(out.read_text())
    assert result["kind"] == "traffic"
    candidates = settings.gateway.candidates
    assert result["items"] == 24 * candidates
    queries = result["queries"]
    assert queries["n"] == 24
    # Top candidates that answer the query: every answerable query whose entry ranked first.
    assert 0 < queries["positives"] <= 24


def test_the_shipped_relevance_judge_on_relevance_pairs(tmp_path: Path) -> None:
    data = tmp_path / "relevance.jsonl"
    rows = []
    kb = [json.loads(line) for line in (WALKTHROUGH / "kb.jsonl").read_text().splitlines()]
    for i, entry in enumerate(kb[:12]):
        other = kb[(i + 5) % len(kb)]
        rows.append({"query": entry["question"], "passage": entry["answer"], "relevance": 3})
        rows.append({"query": entry["question"], "passage": other["answer"], "relevance": 0})
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rel.json"
    args = _parse(["eval", "relevance", "--data", str(data), "--profile", "tiny",
                   "--resamples", "50", "--out", str(out)])  # fmt: skip
    assert args.func(args) == 0
    report = json.loads(out.read_text())
    shipped = RelevanceArtifact.load(
        REPO / "services/tribunal/artifacts/tiny/relevance/artifact.json"
    )
    assert report["artifact"]["version"] == shipped.version
    judge = report["rows"]["judge mode"]
    assert judge["threshold"]["applied"] == f"P ≥ {shipped.threshold:.3f}"
    assert judge["n"] == 24
    assert judge["auroc"]["value"] > 0.8  # an entry's own answer against another's
    cascade = report["rows"]["cascade, the artifact's band"]
    assert cascade["threshold"]["applied"].startswith(f"band {shipped.band_low:.3f}")
    assert 0 <= cascade["escalated"]["value"] <= 1
    assert "judge, oracle threshold" in report["rows"]
    bad = _parse(
        ["eval", "relevance", "--data", str(WALKTHROUGH / "questions.jsonl"), "--out", str(out)]
    )
    with pytest.raises(InvalidArgumentError, match="relevance pairs"):
        bad.func(bad)
