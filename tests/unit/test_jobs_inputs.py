"""Readers of labelling inputs: JSONL, BEIR folder + run, TREC topics + run + qrels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.core import InvalidArgumentError, NotFoundError
from tribunal.jobs import InputSpec, LabelItem, detect_format, read_items
from tribunal.jobs._ir_inputs import read_qrels, read_run

from tests.conftest import SHARED


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_jsonl_items_keep_ids_answers_and_gold(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "items.jsonl",
        [
            {"item_id": "a", "query": "q1", "chunk": "c1", "answers": ["x", " "], "gold": 1},
            {"qid": "7", "pid": "42", "query": "q2", "passage": "c2", "relevance": "2"},
            {"query": "q3", "text": "c3", "answers": "only", "label": "irrelevant"},
        ],
    )
    items = read_items(InputSpec(path=path, format=detect_format(path)))
    assert items[:2] == [
        LabelItem(item_id="a", query="q1", chunk="c1", answers=("x",), gold=1),
        LabelItem(item_id="7:42", query="q2", chunk="c2", query_id="7", doc_id="42", gold=2),
    ]
    third = items[2]
    assert third.item_id.startswith("h:")
    assert len(third.item_id) == 18
    assert (third.query, third.chunk, third.answers, third.gold) == ("q3", "c3", ("only",), 0)
    # Stable: reading again gives the same ids.
    assert [i.item_id for i in read_items(InputSpec(path=path, format="jsonl"))] == [
        i.item_id for i in items
    ]


def test_jsonl_field_mapping_and_errors(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "m.jsonl", [{"key": "k1", "q": "question", "body": "text"}])
    spec = InputSpec(
        path=path, format="jsonl", fields={"item_id": "key", "query": "q", "chunk": "body"}
    )
    assert read_items(spec) == [LabelItem(item_id="k1", query="question", chunk="text")]
    with pytest.raises(InvalidArgumentError, match=r"m.jsonl:1: no non-empty query"):
        read_items(InputSpec(path=path, format="jsonl"))
    twice = _write_jsonl(
        tmp_path / "twice.jsonl",
        [{"id": "x", "query": "q", "chunk": "c"}, {"id": "x", "query": "q2", "chunk": "c2"}],
    )
    with pytest.raises(InvalidArgumentError, match="'x' occurs twice"):
        read_items(InputSpec(path=twice, format="jsonl"))
    with pytest.raises(NotFoundError):
        read_items(InputSpec(path=tmp_path / "missing.jsonl", format="jsonl"))


def test_dl19_judged_pairs_read_as_they_are() -> None:
    path = SHARED / "data" / "trec-dl-2019" / "dl19_judged_pairs.jsonl"
    items = read_items(InputSpec(path=path, format="jsonl"))
    assert len(items) == 3834
    first = items[0]
    assert first.item_id == "19335:3175481"
    assert (first.query_id, first.doc_id, first.gold) == ("19335", "3175481", 3)
    assert first.query == "anthropological definition of environment"
    assert first.chunk.startswith("Forensic anthropology is the application")
    assert len({i.query_id for i in items}) == 43


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    _write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "T1", "text": "one"},
            {"_id": "d2", "title": "", "text": "two"},
            {"_id": "d3", "text": "three"},
        ],
    )
    _write_jsonl(
        folder / "queries.jsonl", [{"_id": "q1", "text": "first?"}, {"_id": "q2", "text": "2nd?"}]
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t0\n")
    return folder


def test_beir_without_a_run_labels_the_judged_pairs(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "beir")
    assert detect_format(folder) == "beir"
    assert read_items(InputSpec(path=folder, format="beir")) == [
        LabelItem(
            item_id="q1:d1", query="first?", chunk="T1\none", query_id="q1", doc_id="d1", gold=1
        ),
        LabelItem(item_id="q2:d3", query="2nd?", chunk="three", query_id="q2", doc_id="d3", gold=0),
    ]


def test_beir_with_a_run_marks_holes_and_cuts_depth(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "beir")
    run = tmp_path / "run.trec"
    run.write_text(
        "q2 Q0 d3 1 9.0 bm25\nq1 Q0 d2 2 3.0 bm25\nq1 Q0 d1 1 5.0 bm25\nq1 Q0 d3 3 1.0 bm25\n"
    )
    assert read_run(run, depth=2) == {"q2": ["d3"], "q1": ["d1", "d2"]}
    items = read_items(InputSpec(path=folder, format="beir", run=run, depth=2))
    assert [(i.item_id, i.gold) for i in items] == [("q2:d3", 0), ("q1:d1", 1), ("q1:d2", None)]
    assert items[2].chunk == "two"


def test_trec_topics_run_qrels_and_corpus(tmp_path: Path) -> None:
    topics = tmp_path / "topics.txt"
    topics.write_text(
        "<top>\n<num> Number: 301\n<title> International Organized Crime\n"
        "<desc> Description:\nIdentify organizations.\n</top>\n"
        "<top>\n<num> Number: 302\n<title> Poliomyelitis and Post-Polio\n</top>\n"
    )
    corpus = tmp_path / "collection.tsv"
    corpus.write_text("D1\tmafia text\nD2\tpolio text\nD9\tunused\n")
    run = tmp_path / "run.txt"
    run.write_text("301 Q0 D1 1 2.5 r\n302 Q0 D2 1 2.0 r\n302 Q0 D1 2 1.0 r\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("301 0 D1 2\n302 0 D2 0\n")
    assert read_qrels(qrels) == {("301", "D1"): 2, ("302", "D2"): 0}
    spec = InputSpec(path=topics, format="trec", run=run, corpus=corpus, qrels=qrels)
    assert read_items(spec) == [
        LabelItem("301:D1", "International Organized Crime", "mafia text", (), "301", "D1", 2),
        LabelItem("302:D2", "Poliomyelitis and Post-Polio", "polio text", (), "302", "D2", 0),
        LabelItem("302:D1", "Poliomyelitis and Post-Polio", "mafia text", (), "302", "D1", None),
    ]
    # TSV topics (MS MARCO / TREC DL) read the same; a description round-trips.
    tsv = tmp_path / "queries.tsv"
    tsv.write_text("301\tcrime\n302\tpolio\n")
    spec = InputSpec(path=tsv, format="trec", run=run, corpus=corpus, depth=1)
    assert [(i.item_id, i.query) for i in read_items(spec)] == [
        ("301:D1", "crime"),
        ("302:D2", "polio"),
    ]
    assert InputSpec.from_description(spec.describe()) == spec


def test_trec_errors_say_what_to_fix(tmp_path: Path) -> None:
    topics = tmp_path / "q.tsv"
    topics.write_text("1\tquery\n")
    with pytest.raises(InvalidArgumentError, match="--run"):
        read_items(InputSpec(path=topics, format="trec"))
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 D7 1 1.0 r\n")
    corpus = tmp_path / "c.tsv"
    corpus.write_text("D1\ttext\n")
    with pytest.raises(InvalidArgumentError, match=r"missing from the corpus \['D7'\]"):
        read_items(InputSpec(path=topics, format="trec", run=run, corpus=corpus))
    run.write_text("1 Q0 D1 first 1.0 r\n")
    with pytest.raises(InvalidArgumentError, match="rank 'first' is not an integer"):
        read_items(InputSpec(path=topics, format="trec", run=run, corpus=corpus))


def test_the_scifact_beir_files_read_as_a_beir_folder() -> None:
    """The shared SciFact copy names its files beir_queries_test / beir_qrels_test."""
    items = read_items(InputSpec(path=SHARED / "data" / "scifact", format="beir"))
    assert len(items) == 339
    first = items[0]
    assert (first.item_id, first.gold) == ("1:31715818", 1)
    assert first.query == "0-dimensional biomaterials show inductive properties."
    assert all(item.gold == 1 for item in items)
