"""The matching set on disk, splits, prompts, and the train → export-signals → confidence path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tribunal.cli import main
from tribunal.core import FailedPreconditionError
from tribunal.ensemble import EnsembleArtifact, MatchItem, load_matching_data, split_data
from tribunal.ensemble._judges import best_chunk, render_fields
from tribunal.kb import Chunk, KbEntry
from tribunal.prompts import get_prompt

JUDGES = ("llm_tiny/ral2m", "llm_tiny/ral2m-augmented", "llm_weak/ral2m")


def write_dataset(
    folder: Path, rows: int = 240, *, judged: int | None = None, seed: int = 0
) -> None:
    """A dataset folder as build-dataset writes it, with synthetic judges."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    items = []
    for i in range(rows):
        label = int(rng.integers(0, 2))
        source = "stsb" if i % 3 == 0 else "covid-qa"
        retrieval = {} if source == "stsb" else {"score": 0.03, "rank": 1.0, "dense_score": 0.7}
        items.append(
            MatchItem(
                id=f"item-{i}",
                source=source,
                group=f"g-{i // 2}",
                query=f"query {i}",
                candidate=KbEntry(id=f"e-{i}", question=f"q {i}", answer=f"a {i}"),
                label=label,
                retrieval=retrieval,
            )
        )
    (folder / "items.jsonl").write_text("".join(json.dumps(i.to_record()) + "\n" for i in items))
    np.save(folder / "embeddings.npy", rng.normal(0, 1, (rows, 8)).astype(np.float32))
    (folder / "manifest.json").write_text(json.dumps({"embedder": "synthetic", "dimension": 8}))
    (folder / "judgments").mkdir()
    for column, judge in enumerate(JUDGES):
        with (folder / "judgments" / (judge.replace("/", "__") + ".jsonl")).open("w") as handle:
            for item in items[: judged if judged and column == 2 else rows]:
                right = rng.random() < (0.9 if column == 0 else 0.6)
                p = 0.7 if (item.label == 1) == right else 0.3
                handle.write(json.dumps({"id": item.id, "judge": judge, "p_yes": p}) + "\n")


def test_loading_keeps_only_items_every_judge_judged(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", judged=100)
    data = load_matching_data(tmp_path / "d")
    assert data.judges == tuple(sorted(JUDGES))
    assert len(data) == 100
    assert data.skipped == 140
    assert data.p_yes.shape == (100, 3)
    assert data.embeddings.shape == (100, 8)
    assert load_matching_data(tmp_path / "d").sha256 == data.sha256
    with pytest.raises(FailedPreconditionError, match="no judgments"):
        load_matching_data(tmp_path / "d", ["llm_strong/ral2m"])


def test_splits_are_seeded_disjoint_and_keep_query_groups_together(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d")
    data = load_matching_data(tmp_path / "d")
    split = split_data(data, 3)
    parts = [set(split.train), set(split.validation), set(split.test)]
    assert sum(map(len, parts)) == len(data)
    assert not (parts[0] & parts[1])
    assert not (parts[1] & parts[2])
    assert abs(len(split.train) / len(data) - 0.6) < 0.05
    group_part = {}
    for number, part in enumerate(parts):
        for index in part:
            assert group_part.setdefault(data.items[index].group, number) == number
    again = split_data(data, 3)
    assert (again.test == split.test).all()
    assert split_data(data, 4).test.tolist() != split.test.tolist()


def test_the_augmented_prompt_extends_the_plain_one_and_picks_the_closest_chunk() -> None:
    entry = KbEntry(
        id="e",
        question="How does the virus spread?",
        answer="Mainly between people in close contact. " * 10,
        chunks=(
            Chunk("c0", "Cleaning surfaces with soap removes the virus."),
            Chunk("c1", "The virus spreads between people through respiratory droplets."),
        ),
    )
    assert best_chunk("how is the virus spread between people", entry) == entry.chunks[1].text
    assert best_chunk("anything", KbEntry(id="x", question="q", answer="a")) is None
    fields, chunk = render_fields("q?", entry, truncate_answer_chars=100, truncate_chunk_chars=30)
    assert len(fields["answer"]) <= 100
    assert fields["answer"].endswith(" […]")
    assert chunk is not None
    assert len(chunk) <= 30
    plain = get_prompt("matching/ral2m@1")
    augmented = get_prompt("matching/ral2m-augmented@1")
    a = plain.render(**fields).messages[-1].content
    b = augmented.render(**fields, chunk=chunk).messages[-1].content
    shared = a.removesuffix("\n\n" + plain.question)
    assert b.startswith(shared)
    assert "Supporting Document: " in b[len(shared) :]


def test_train_export_signals_and_confidence_fit_accept_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_dataset(tmp_path / "d")
    artifact = tmp_path / "artifact"
    args = ["ensemble", "train", "--dataset", str(tmp_path / "d"), "--out", str(artifact)]
    assert main([*args, "--seed", "1", "--max-epochs", "15"]) == 0
    loaded = EnsembleArtifact.load(artifact)
    assert loaded.data["split_seed"] == 1
    assert set(loaded.aggregators) == {
        "majority",
        "weighted",
        "neural",
        "latent",
    }
    out = tmp_path / "signals.jsonl"
    assert main(["ensemble", "export-signals", "--artifact", str(artifact), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    sizes = loaded.data["split_sizes"]
    assert len(rows) == sizes["validation"] + sizes["test"]
    assert {r["split"] for r in rows} == {"validation", "test"}
    stsb = next(r for r in rows if r["source"] == "stsb")
    assert "retrieval_score" not in stsb["signals"]  # missing, not zero
    covid = next(r for r in rows if r["source"] == "covid-qa")
    assert covid["signals"]["retrieval_rank"] == 1
    assert set(covid["signals"]["judge_p_yes"]) == set(JUDGES)
    assert 0.0 <= covid["signals"]["ensemble_p_match"] <= 1.0
    calibrator = tmp_path / "calibrator.json"
    assert main(["confidence", "fit", "--data", str(out), "-o", str(calibrator)]) == 0
    assert calibrator.is_file()
