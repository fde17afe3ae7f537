"""``tribunal-lab eval entailment``: labelled files of any name, every row's decision point,
select-then-report only when asked. Scores are synthetic and the cascade's routing is the
real ``EntailmentCascade`` replayed on them, so no model runs here."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tribunal.core import InvalidArgumentError
from tribunal_lab.evaluation import entailment
from tribunal_lab.evaluation._entailment_report import entailment_markdown
from tribunal_lab.evaluation._labelled import detect_kind, read_entailment_pairs

CASCADE = SimpleNamespace(entail_threshold=0.69, uncertain_band=(0.29, 0.35), chunk_size_chars=2000)


def _pairs_and_rows(n: int = 60, seed: int = 1) -> tuple[list[Any], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    pairs, rows = [], {"fast": {}, "strong": {}}
    for i in range(n):
        label = i % 3 == 0
        pair = entailment.Pair(f"p{i}", f"premise number {i}", f"hypothesis {i}", int(label))
        pairs.append(pair)
        # The fast checker's P(yes) is compressed below 0.6 (as the 0.5B's is) yet ranks;
        # the strong checker's is spread over [0, 1].
        fast = float(np.clip(0.25 + 0.12 * label + rng.normal(0, 0.05), 0.13, 0.6))
        strong = float(np.clip(0.4 + 0.45 * label + rng.normal(0, 0.15), 0, 1))
        for stage, p in (("fast", fast), ("strong", strong)):
            rows[stage][pair.id] = {
                "id": pair.id,
                "label": pair.label,
                "chunk_p_entail": [p],
                "chunk_p_contradict": [None],
                "seconds": 0.1 if stage == "fast" else 0.5,
                "model": f"{stage}-model",
            }
    return pairs, rows


def test_by_default_every_pair_is_reported_and_each_row_names_its_decision_point() -> None:
    pairs, rows = _pairs_and_rows()
    report = entailment.evaluate_set(pairs, rows, CASCADE, 13, resamples=100)
    assert report["selection_pairs"] == 0
    assert report["test_pairs"] == 60
    table = report["rows"]
    stage1 = table["stage 1 alone"]
    # The fast checker is judged at its own configured edge, not at the strong one's 0.69
    # (which its compressed P(yes) never reaches: that row would read bAcc 0.5).
    assert stage1["threshold"]["applied"] == "P > 0.350"
    assert "uncertain_high" in stage1["threshold"]["source"]
    assert stage1["balanced_accuracy"]["value"] > 0.7
    oracle = table["stage 1 alone, oracle"]
    assert oracle["threshold"]["source"].startswith("oracle")
    assert oracle["balanced_accuracy"]["value"] >= stage1["balanced_accuracy"]["value"]
    strong = table["stage 2 alone"]
    assert strong["threshold"]["applied"] == "P ≥ 0.690"
    assert "entail_threshold" in strong["threshold"]["source"]
    assert strong["share_to_stage_2"] == 1.0
    (cascade,) = [name for name in table if name.startswith("cascade")]
    assert "configured" in table[cascade]["threshold"]["source"]
    for row in table.values():
        ci = row["balanced_accuracy"]
        assert ci["low"] <= ci["value"] <= ci["high"]
        assert row["n"] == 60


def test_select_split_selects_on_one_part_and_reports_on_the_other() -> None:
    pairs, rows = _pairs_and_rows()
    report = entailment.evaluate_set(pairs, rows, CASCADE, 13, select_split=0.5, resamples=100)
    assert (report["selection_pairs"], report["test_pairs"]) == (30, 30)
    table = report["rows"]
    assert "selected on the selection part" in table["stage 1 alone"]["threshold"]["source"]
    assert "stage 1 alone, oracle" not in table
    assert len(report["selected_band"]) == 2
    names = [name for name in table if name.startswith("cascade")]
    assert len(names) == 2  # the configured band and the selected one
    assert all(table[name]["n"] == 30 for name in table)
    markdown = entailment_markdown(
        {"date": "2026-12-01", "profile": "tiny", "command": "x", "sets": {"file": report}}
    )
    assert "selected on 30 pairs, reported on the other 30" in markdown
    assert "the fast checker's own, selected on the selection part" in markdown


def test_any_file_name_and_three_layouts_are_read(tmp_path: Path) -> None:
    generic = tmp_path / "my-claims.jsonl"
    generic.write_text(
        json.dumps({"premise": "Water boils at 100 C.", "hypothesis": "Water boils.", "label": 1})
        + "\n"
        + json.dumps({"premise": "Cats sleep.", "hypothesis": "Cats fly.", "label": "neutral"})
        + "\n"
    )
    scifact = tmp_path / "held-out.jsonl"
    scifact.write_text(
        json.dumps(
            {
                "claim_id": 3,
                "doc_id": 9,
                "claim": "c",
                "title": "T",
                "evidence_text": "e",
                "label": "SUPPORT",
            }
        )
        + "\n"
        + json.dumps(
            {
                "claim_id": 4,
                "doc_id": 9,
                "claim": "d",
                "title": "T",
                "evidence_text": "e",
                "label": "CONTRADICT",
            }
        )
        + "\n"
    )
    sick = tmp_path / "sick-like.jsonl"
    sick.write_text(
        json.dumps(
            {"pair_id": 1, "sentence_A": "a", "sentence_B": "b", "entailment_label": "ENTAILMENT"}
        )
        + "\n"
        + json.dumps(
            {
                "pair_id": 2,
                "sentence_A": "a",
                "sentence_B": "c",
                "entailment_label": "CONTRADICTION",
            }
        )
        + "\n"
    )
    assert {detect_kind(p) for p in (generic, scifact, sick)} == {"entailment"}
    assert [p.label for p in read_entailment_pairs(generic)] == [1, 0]
    first, second = read_entailment_pairs(scifact)
    assert (first.id, first.premise, first.hypothesis, first.label) == ("3:9", "T\ne", "c", 1)
    assert second.label == 0
    assert [p.id for p in read_entailment_pairs(sick)] == ["1", "2"]
    name, pairs = entailment.load_file(generic, sample=0, seed=13)
    assert name.startswith("my-claims-")
    assert len(pairs) == 2


def test_bad_files_say_what_to_fix(tmp_path: Path) -> None:
    one_class = tmp_path / "one.jsonl"
    one_class.write_text(json.dumps({"premise": "a", "hypothesis": "b", "label": 1}) + "\n")
    with pytest.raises(InvalidArgumentError, match="needs both classes"):
        read_entailment_pairs(one_class)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"premise": "a", "hypothesis": "b", "label": 7}) + "\n")
    with pytest.raises(InvalidArgumentError, match="line 1: label must be 0 or 1"):
        read_entailment_pairs(bad)
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(InvalidArgumentError, match="cannot tell the format"):
        detect_kind(unknown)
    with pytest.raises(InvalidArgumentError, match="no such file"):
        read_entailment_pairs(tmp_path / "absent.jsonl")
