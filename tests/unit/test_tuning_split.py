"""The tune's split: seeded, recorded, disjoint; calibrate may use only what the tune never
saw; traffic too small to help is refused with its numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.confidence import Traffic, read_traffic
from tribunal.confidence._traffic import split_traffic
from tribunal.core import FailedPreconditionError, InvalidArgumentError
from tribunal.tuning import (
    EntryTexts,
    TooLittleDataError,
    TuneConfig,
    TunedMatcher,
    certifiable_traffic,
    check_enough,
    query_key,
    split_for_tuning,
)


def _traffic(tmp_path: Path, rows: list[dict[str, object]], name: str = "traffic.jsonl") -> Traffic:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_traffic(path)


def _rows(n: int) -> list[dict[str, object]]:
    # Every fifth query is out of scope; the others ask one of 10 entries.
    return [
        {"query": f"question number {i}", "answers": [] if i % 5 == 0 else [f"e{i % 10}"]}
        for i in range(n)
    ]


def test_the_split_is_seeded_disjoint_and_by_query(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    again = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    other = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=1)
    assert split == again
    assert split.heldout != other.heldout
    assert (len(split.train), len(split.head), len(split.heldout)) == (105, 35, 60)
    parts = [set(split.train), set(split.head), set(split.heldout)]
    assert set().union(*parts) == set(range(200))
    assert sum(len(p) for p in parts) == 200
    # By query, not by answer: one entry's queries land on both sides.
    answers_held = {next(iter(traffic.queries[i].answers), "") for i in split.heldout}
    answers_fit = {next(iter(traffic.queries[i].answers), "") for i in split.fit}
    assert answers_held & answers_fit >= {"e1", "e2"}
    record = split.record(traffic.queries)
    assert record["sizes"] == {"train": 105, "head": 35, "heldout": 60}
    assert len(record["fit_keys"]) == 140
    assert len(record["heldout_keys"]) == 60


def test_the_same_text_and_explicit_groups_stay_in_one_part(tmp_path: Path) -> None:
    rows = _rows(100)
    rows += [{"query": "  QUESTION   number 7 ", "answers": ["e7"]}]  # a respelling of row 7
    rows += [{"query": f"grouped {i}", "answers": ["e3"], "group": "g"} for i in range(6)]
    traffic = _traffic(tmp_path, rows)
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=3)
    part = {i: name for name in ("train", "head", "heldout") for i in getattr(split, name)}
    assert part[7] == part[100]
    assert len({part[i] for i in range(101, 107)}) == 1
    assert query_key("  QUESTION   number 7 ") == query_key("question number 7")


def test_too_little_traffic_is_refused_with_its_numbers(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(60))
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    entries = EntryTexts(tuple(f"e{i}" for i in range(10)), ("q",) * 10, ("a",) * 10)
    with pytest.raises(TooLittleDataError) as info:
        check_enough(traffic, split, entries, TuneConfig())
    message = str(info.value)
    assert "60 labelled queries (48 answerable)" in message
    assert "25 answerable queries to train on (need >= 40)" in message
    assert "18 held-out queries (need >= 30" in message
    assert info.value.field == "traffic"
    check_enough(traffic, split, entries, TuneConfig(min_train_answerable=25, min_heldout=18))


def _tuned(tmp_path: Path, traffic: Traffic) -> TunedMatcher:
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    directory = tmp_path / "tuned"
    (directory / "model").mkdir(parents=True)
    (directory / "model" / "weights.bin").write_bytes(b"not a real model")
    manifest = {
        "binding": {"collection": "faq", "collection_version": "kb-1", "entries": 10},
        "traffic": {"sha256": traffic.sha256},
        "split": split.record(traffic.queries),
    }
    return TunedMatcher.seal(directory, manifest)


def test_calibrate_certifies_only_on_the_tunes_heldout_part_of_its_own_file(
    tmp_path: Path,
) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _tuned(tmp_path, traffic)
    kept, note = certifiable_traffic(traffic, tuned, "faq")
    # The train part (taught, encoder-trained) is dropped; the head part may fit only.
    assert (len(kept), note["queries_dropped_as_fit"], note["fit_only"]) == (95, 105, 35)
    certifiable = {query_key(q.query) for q in kept.queries if not q.fit_only}
    assert certifiable == set(tuned.split["heldout_keys"])
    assert {query_key(q.query) for q in kept.queries if q.fit_only} == set(tuned.split["head_keys"])
    split = split_traffic(kept.queries, holdout_fraction=0.1, fit_fraction=0.3, seed=0)
    assert {query_key(kept.queries[i].query) for i in split.fit} == set(tuned.split["head_keys"])
    assert split.sizes() == {"fit": 35, "risk": 54, "holdout": 6}


def test_a_tune_recorded_without_head_keys_leaves_the_heldout_part_only(
    tmp_path: Path,
) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _tuned(tmp_path, traffic)
    manifest = dict(tuned.manifest)
    manifest["split"] = {k: v for k, v in tuned.split.items() if k != "head_keys"}
    (tmp_path / "older" / "model").mkdir(parents=True)
    (tmp_path / "older" / "model" / "weights.bin").write_bytes(b"not a real model")
    older = TunedMatcher.seal(tmp_path / "older", manifest)
    kept, note = certifiable_traffic(traffic, older, "faq")
    assert (len(kept), note["fit_only"]) == (60, 0)
    assert not any(q.fit_only for q in kept.queries)


def test_calibrate_refuses_other_traffic_holding_a_fit_query(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _tuned(tmp_path, traffic)
    fit_query = next(q for q in traffic.queries if query_key(q.query) in tuned.split["fit_keys"])
    fresh: list[dict[str, object]] = [
        {"query": f"a new question {i}", "answers": ["e1"]} for i in range(30)
    ]
    mixed = _traffic(
        tmp_path, [*fresh, {"query": fit_query.query.upper(), "answers": []}], "b.jsonl"
    )
    with pytest.raises(
        FailedPreconditionError, match=r"1 of the 31 queries in b\.jsonl were used to fit"
    ):
        certifiable_traffic(mixed, tuned, "faq")
    clean = _traffic(tmp_path, fresh, "c.jsonl")
    assert len(certifiable_traffic(clean, tuned, "faq")[0]) == 30
    with pytest.raises(FailedPreconditionError, match="tuned for collection 'faq'"):
        certifiable_traffic(clean, tuned, "other")


def test_a_modified_tuned_directory_is_refused(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _tuned(tmp_path, traffic)
    assert TunedMatcher.load(tuned.directory).version == tuned.version
    (tuned.directory / "model" / "weights.bin").write_bytes(b"changed")
    with pytest.raises(FailedPreconditionError, match="modified or damaged"):
        TunedMatcher.load(tuned.directory)


def test_ask_says_up_front_when_the_calibrator_was_certified_with_another_matcher(
    tmp_path: Path,
) -> None:
    from tribunal.commands.demo import _certification
    from tribunal.core import load_settings

    tuned = _tuned(tmp_path, _traffic(tmp_path, _rows(200)))
    plain = load_settings("tiny", ensemble={"matcher": "features"})
    assert "every answer falls back" not in _certification(plain)
    settings = load_settings(
        "tiny", ensemble={"matcher": "features", "tuned_matcher": str(tuned.directory)}
    )
    line = _certification(settings)
    assert f"the matcher served now is features:{tuned.version}" in line
    assert "every answer falls back (NO_CERTIFIED_THRESHOLD)" in line
    assert "tribunal calibrate --collection covid-faq" in line


def test_without_a_head_part_the_split_has_train_and_heldout_only(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.0, seed=0)
    assert (len(split.train), len(split.head), len(split.heldout)) == (140, 0, 60)
    # The held-out part is the same draw as with a head part: only the fit part differs.
    with_head = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=0.25, seed=0)
    assert split.heldout == with_head.heldout
    assert split.fit == with_head.fit
    for bad in (-0.1, 1.0):
        with pytest.raises(InvalidArgumentError, match=r"head_fraction must be in \[0, 1\)"):
            split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=bad, seed=0)


def test_the_head_part_is_kept_apart_only_for_an_encoder_fine_tune() -> None:
    assert (TuneConfig().head_share, TuneConfig().heldout_share) == (0.0, 0.5)
    assert TuneConfig(epochs=1).heldout_share == 0.3
    assert TuneConfig(heldout_fraction=0.4).heldout_share == 0.4
    assert TuneConfig(epochs=1).head_share == 0.25
    assert TuneConfig(epochs=1, head_fraction=0.4).head_share == 0.4
    assert TuneConfig(head_fraction=0.25).head_share == 0.25
    with pytest.raises(InvalidArgumentError, match="an encoder fine-tune needs a head part"):
        TuneConfig(epochs=1, head_fraction=0.0)
    with pytest.raises(InvalidArgumentError, match=r"head_fraction must be in \[0, 1\)"):
        TuneConfig(head_fraction=1.5)


def _taught_tune(tmp_path: Path, traffic: Traffic, *, epochs: float, head: float) -> TunedMatcher:
    split = split_for_tuning(traffic.queries, heldout_fraction=0.3, head_fraction=head, seed=0)
    directory = tmp_path / f"tuned-{epochs}-{head}"
    (directory / "model").mkdir(parents=True)
    (directory / "model" / "weights.bin").write_bytes(b"not a real model")
    manifest = {
        "binding": {"collection": "faq", "collection_version": "kb-1", "entries": 10},
        "base": {"model_key": "matcher", "name": "all-mpnet-base-v2"},
        "traffic": {"sha256": traffic.sha256},
        "split": split.record(traffic.queries),
        "config": {"epochs": epochs, "head_fraction": head},
        "teaching": {"phrasings_added": 90},
    }
    return TunedMatcher.seal(directory, manifest)


def test_calibrate_fits_on_the_taught_queries_with_their_phrasing_left_out(
    tmp_path: Path,
) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _taught_tune(tmp_path, traffic, epochs=0.0, head=0.0)
    kept, note = certifiable_traffic(traffic, tuned, "faq")
    assert (len(kept), note["queries_dropped_as_fit"], note["fit_only"], note["taught"]) == (
        200,
        0,
        140,
        140,
    )
    by_part = {
        name: {query_key(q.query) for q in kept.queries if test(q)}
        for name, test in (
            ("certify", lambda q: not q.fit_only),
            ("taught", lambda q: q.taught),
        )
    }
    assert by_part["certify"] == set(tuned.split["heldout_keys"])
    assert by_part["taught"] == set(tuned.split["fit_keys"])
    assert all(q.fit_only for q in kept.queries if q.taught)
    # Every taught query fits the calibrator; every held-out one may certify or report.
    split = split_traffic(kept.queries, holdout_fraction=0.1, fit_fraction=0.3, seed=0)
    assert split.sizes() == {"fit": 140, "risk": 54, "holdout": 6}

    # With a head part, the head's queries fit too, observed as they are (never taught).
    with_head = _taught_tune(tmp_path, traffic, epochs=0.0, head=0.25)
    kept, note = certifiable_traffic(traffic, with_head, "faq")
    assert (len(kept), note["fit_only"], note["taught"]) == (200, 140, 105)
    head = set(with_head.split["head_keys"])
    assert not any(q.taught for q in kept.queries if query_key(q.query) in head)


def test_an_encoder_fine_tunes_train_queries_never_fit_the_calibrator(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path, _rows(200))
    tuned = _taught_tune(tmp_path, traffic, epochs=1.0, head=0.25)
    kept, note = certifiable_traffic(traffic, tuned, "faq")
    assert (len(kept), note["queries_dropped_as_fit"], note["fit_only"], note["taught"]) == (
        95,
        105,
        35,
        0,
    )
