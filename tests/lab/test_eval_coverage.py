"""``tribunal-lab eval coverage``'s domains and arithmetic on tiny fixtures: the KB, the
traffic and the test split never share a query; out-of-scope rows are labelled so; the
queries a certificate would take follow the Clopper–Pearson bound."""

from __future__ import annotations

import json
from pathlib import Path

from tribunal.confidence import queries_to_certify
from tribunal.kb import KbEntry, phrasing_key
from tribunal_lab.evaluation._coverage_domains import (
    banking77_domain,
    intent_answer,
    with_phrasings,
)
from tribunal_lab.evaluation._coverage_report import coverage_markdown, queries_needed
from tribunal_lab.evaluation.coverage import CONDITIONS


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _banking(tmp_path: Path) -> Path:
    intents = [f"intent_{k}" for k in range(6)]
    _write(
        tmp_path / "train.jsonl",
        [{"query": f"train {k} {i}", "intent": t} for k, t in enumerate(intents) for i in range(8)],
    )
    _write(
        tmp_path / "test.jsonl",
        [{"query": f"test {k} {i}", "intent": t} for k, t in enumerate(intents) for i in range(3)],
    )
    return tmp_path


def test_banking77_domain_keeps_kb_traffic_and_test_apart(tmp_path: Path) -> None:
    folder = _banking(tmp_path)
    domain = banking77_domain(folder, seed=0, traffic_size=20, heldout_intents=2, phrasings=3)
    again = banking77_domain(folder, seed=0, traffic_size=20, heldout_intents=2, phrasings=3)
    assert domain == again
    outside = set(domain.described["heldout_intents"])
    assert len(outside) == 2
    assert {e.id for e in domain.one} == {f"intent_{k}" for k in range(6)} - outside
    assert all(len(e.phrasings()) == 3 for e in domain.phrased or ())
    assert [e.question for e in domain.one] == [e.question for e in domain.phrased or ()]
    assert domain.one[0].answer == intent_answer(domain.one[0].id)
    phrasings = {p for e in domain.phrased or () for p in e.phrasings()}
    traffic = {r["query"] for r in domain.traffic}
    assert len(domain.traffic) == 20
    assert not phrasings & traffic
    assert len(domain.test) == 18
    for row in (*domain.traffic, *domain.test):
        intent = f"intent_{row['query'].split()[1]}"
        assert row["answers"] == ([] if intent in outside else [intent])
    sampled = banking77_domain(
        folder, seed=0, traffic_size=20, heldout_intents=2, phrasings=3, test_size=5
    )
    assert len(sampled.test) == 5


def test_with_phrasings_adds_each_query_to_every_entry_answering_it() -> None:
    entries = (KbEntry("a", "qa", "A."), KbEntry("b", "qb", "B."), KbEntry("c", "qc", "C."))
    rows = [
        {"query": "x", "answers": ["a", "b"]},
        {"query": "y", "answers": ["a"]},
        {"query": "y", "answers": ["a"]},
        {"query": "qc", "answers": ["c"]},
        {"query": "z", "answers": []},
    ]
    out, added = with_phrasings(entries, rows)
    assert [e.phrasings() for e in out] == [("qa", "x", "y"), ("qb", "x"), ("qc",)]
    assert added == 3


def test_queries_needed_is_the_products_estimate_on_the_risk_curve() -> None:
    row = {
        "method": "ltt",
        "alpha": 0.1,
        "delta": 0.1,
        "certified": False,
        "calibration_split": {"fit": 20, "risk": 40, "holdout": 20},
        "risk_curve": {"coverage": [0.25, 0.5, 1.0], "hallucination": [0.0, 0.05, 0.2]},
    }
    report = {"traffic_queries": 160, "conditions": [{"condition": "taught", "rows": [row]}]}
    estimate = queries_to_certify(
        [10, 20, 40],
        [0, 1, 8],
        certify_queries=40,
        labelled_queries=160,
        alpha=0.1,
        delta=0.1,
        method="ltt",
    )
    assert estimate.labelled_needed is not None
    assert queries_needed(report) == {
        "taught, ltt, alpha=0.1": f"~{estimate.certify_needed} certification queries (now 40), "
        f"i.e. ~{estimate.labelled_needed} labelled queries in all (now 160; "
        f"~{estimate.more} more)"
    }
    row["risk_curve"] = {"coverage": [0.5, 1.0], "hallucination": [0.15, 0.2]}
    assert queries_needed(report) == {
        "taught, ltt, alpha=0.1": "no point of the risk curve is below alpha"
    }
    # Enough queries at the best point's rate, yet not certified: the planned scan stopped.
    row["calibration_split"] = {"fit": 20, "risk": 100, "holdout": 20}
    row["risk_curve"] = {"coverage": [0.5, 1.0], "hallucination": [0.0, 0.2]}
    estimate = queries_to_certify(
        [50, 100],
        [0, 20],
        certify_queries=100,
        labelled_queries=160,
        alpha=0.1,
        delta=0.1,
        method="ltt",
    )
    assert estimate.more == 0
    assert queries_needed(report) == {
        "taught, ltt, alpha=0.1": f"~{estimate.certify_needed} certification queries (now "
        "100) would do at the best threshold's rate, but the planned test sequence stopped "
        "before it (0 wrong of 50 accepted there); more labelled queries make that less likely"
    }


def test_the_report_says_what_the_tune_taught() -> None:
    assert CONDITIONS == ("one", "phrased", "taught", "tuned")
    row = {
        "method": "ltt",
        "alpha": 0.1,
        "certified": True,
        "upper_bound": 0.09,
        "threshold": 0.9,
        "coverage": 0.5,
        "accepted": 10,
        "n": 20,
        "test": {
            "hallucination": 0.05,
            "wrong": 1,
            "answered": 20,
            "answered_share": 0.4,
            "coverage": 0.38,
        },
    }
    metrics = {
        "before": {"auroc": 0.9},
        "after": {"auroc": 0.92},
        "teaching": {"phrasings_added": 546},
    }
    report = {
        "domain": "d",
        "traffic_queries": 50,
        "test_queries": 50,
        "test_answerable": 50,
        "conditions": [
            {
                "condition": "taught",
                "tune": {"metrics": metrics, "seconds": 12.0},
                "calibration_queries": 20,
                "rows": [row],
            }
        ],
    }
    table = coverage_markdown(report)
    assert "| taught (+546 phrasings taught, AUROC 0.900→0.920, tune 12 s) | 20 | ltt | 0.1 |" in (
        table
    )
    assert "0.090 (λ=0.900) | 0.500 (10/20) | 0.400 | 0.050 (1/20) | 0.380 |" in table
    # Retrieval with the tune is said beside the condition.
    report["conditions"][0]["retrieval_model"] = "tuned:tm-000000000001"
    assert "tune 12 s), retrieval with the tune | 20 | ltt |" in coverage_markdown(report)


def test_by_answer_set_regroups_answerable_rows_and_leaves_the_rest(tmp_path: Path) -> None:
    from tribunal.confidence import read_traffic
    from tribunal_lab.evaluation._split_units import by_answer_set

    path = tmp_path / "traffic.jsonl"
    _write(
        path,
        [
            {"query": "a", "answers": ["e1"]},
            {"query": "b", "answers": ["e1"]},
            {"query": "c", "answers": []},
            {"query": "d", "answers": ["e1"], "fit_only": True},
        ],
    )
    traffic = read_traffic(path)
    assert len({q.group for q in traffic.queries}) == 4  # by query
    regrouped = [q.group for q in by_answer_set(traffic).queries]
    assert regrouped[0] == regrouped[1] == "answers:e1"
    assert regrouped[2:] == [q.group for q in traffic.queries[2:]]


def test_a_query_repeated_up_to_case_and_spacing_is_one_phrasing(tmp_path: Path) -> None:
    rows = [{"query": f"train {i}", "intent": "intent_0"} for i in range(3)]
    rows += [
        {"query": "Where can I withdraw money?", "intent": "intent_0"},
        {"query": "\nwhere can I  withdraw money?", "intent": "intent_0"},
        {"query": "other", "intent": "intent_1"},
    ]
    _write(tmp_path / "train.jsonl", rows)
    _write(tmp_path / "test.jsonl", [{"query": "test", "intent": "intent_0"}])
    domain = banking77_domain(tmp_path, seed=0, traffic_size=1, heldout_intents=1, phrasings=5)
    for entry in domain.phrased or ():
        keys = [phrasing_key(text) for text in entry.phrasings()]
        assert len(keys) == len(set(keys))
    assert any(len(e.phrasings()) == 4 for e in domain.phrased or ())
