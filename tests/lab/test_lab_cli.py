"""The ``tribunal-lab`` CLI: help everywhere, clean errors; the product's CLI holds none of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.cli import build_parser as product_parser
from tribunal_lab.cli import build_parser, main


def _paths(parser: object) -> list[list[str]]:
    paths = []
    for action in parser._subparsers._group_actions:  # type: ignore[attr-defined]
        for name, sub in action.choices.items():
            paths.append([name])
            for inner in sub._subparsers._group_actions if sub._subparsers else []:
                paths.extend([name, leaf] for leaf in inner.choices)
    return paths


@pytest.mark.parametrize("path", _paths(build_parser()), ids=" ".join)
def test_every_subcommand_has_help(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    assert "usage: tribunal-lab" in capsys.readouterr().out


def test_the_lab_commands_left_the_product_cli() -> None:
    lab = {" ".join(p) for p in _paths(build_parser())}
    assert {"eval sweep", "eval judge", "dataset matching", "crowdrag"} <= lab
    product = {" ".join(p) for p in _paths(product_parser())}
    assert not {"eval", "ensemble build-dataset", "confidence build-demo-signals"} & product


def test_a_missing_data_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "ratings.jsonl.gz"
    assert main(["crowdrag", "--ratings", str(missing), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tribunal-lab: error:")
    assert str(missing) in error
    assert "Traceback" not in error


def test_data_and_cache_defaults_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_LAB_DATA", "/data/sets")
    monkeypatch.setenv("TRIBUNAL_LAB_CACHE", "/tmp/lab")
    args = build_parser().parse_args(["eval", "judge"])
    assert (args.data, args.cache_dir) == (Path("/data/sets"), Path("/tmp/lab/judge"))
    args = build_parser().parse_args(["eval", "retrieval"])
    assert args.data == Path("/data/sets/scifact")
    monkeypatch.delenv("TRIBUNAL_LAB_DATA")
    monkeypatch.delenv("TRIBUNAL_LAB_CACHE")
    args = build_parser().parse_args(["eval", "entailment"])
    assert (args.data, args.cache_dir) == (
        Path("../shared/data"),
        Path(".build/lab-cache/entailment"),
    )


def test_covid_traffic_labels_each_question_with_every_entry_that_answers_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tests.conftest import SHARED

    out = tmp_path / "traffic.jsonl"
    data = ["--data", str(SHARED / "data" / "covid-qa")]
    assert main(["dataset", "covid-traffic", *data, "-o", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["queries"] == len(rows) == 240
    assert summary["queries_with_several_answers"] == 52
    assert all(row["answers"] for row in rows)
    assert main(["dataset", "covid-traffic", *data, "-o", str(out), "--pairs-only"]) == 0
    linked = {
        json.loads(line)["query"]: set(json.loads(line)["answers"])
        for line in out.read_text().splitlines()
    }
    # The pairs file's links are kept; the classes only add the equivalent entries.
    assert all(linked[row["query"]] <= set(row["answers"]) for row in rows)
    assert sum(map(len, linked.values())) < sum(len(row["answers"]) for row in rows)
