"""The data of the live-audit experiment: a BANKING77 FAQ and traffic that shifts.

- **KB**: 65 of the 77 intents (12 held out, seeded), five training phrasings each as
  entries (325 entries; an intent's five entries all answer its queries).
- **Calibration traffic**: 450 other training queries of the KB's intents and 50
  out-of-scope SQuAD questions (10%).
- **Live traffic before the shift**: 270 more training queries and 30 more SQuAD
  questions (10% out of scope) — like the calibration traffic.
- **After the shift**: 975 held-out paraphrases (the test split) of the KB's intents
  and 525 out-of-scope questions (35%): half from the 12 held-out banking intents
  (they look in scope), half COVID-QA questions.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LiveAuditData", "build_data"]


@dataclass(frozen=True)
class LiveAuditData:
    kb: list[dict[str, Any]]
    calibration: list[dict[str, Any]]
    """``{"query", "answers", "kind"}`` rows (kind: in_scope, squad, banking_oos, covid)."""
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _humanise(intent: str) -> str:
    return intent.replace("_", " ").capitalize()


def build_data(root: Path, *, seed: int = 0) -> LiveAuditData:
    rng = np.random.default_rng(seed)
    train = _jsonl(root / "banking77" / "train.jsonl")
    test = _jsonl(root / "banking77" / "test.jsonl")
    by_intent: dict[str, list[str]] = defaultdict(list)
    for row in train:
        by_intent[row["intent"]].append(row["query"])
    intents = sorted(by_intent)
    held = {intents[i] for i in rng.choice(len(intents), size=12, replace=False)}
    kb: list[dict[str, Any]] = []
    answers: dict[str, list[str]] = {}
    pool: list[dict[str, Any]] = []
    for intent in intents:
        phrasings = [by_intent[intent][i] for i in rng.permutation(len(by_intent[intent]))]
        if intent in held:
            continue
        ids = [f"b77-{intent}-{k}" for k in range(5)]
        answers[intent] = ids
        for entry_id, question in zip(ids, phrasings[:5], strict=True):
            kb.append(
                {
                    "id": entry_id,
                    "question": question,
                    "answer": f"{_humanise(intent)}: see the help page for this topic.",
                    "metadata": {"intent": intent},
                    "chunks": [],
                }
            )
        pool.extend({"query": q, "answers": ids, "kind": "in_scope"} for q in phrasings[5:])
    pool = [pool[i] for i in rng.permutation(len(pool))]
    squad = _jsonl(root / "squad-v1.1-dev" / "dev_flat.jsonl")
    squad_questions = list(dict.fromkeys(row["question"] for row in squad))
    squad_pick = [squad_questions[i] for i in rng.permutation(len(squad_questions))[:80]]
    oos_squad = [{"query": q, "answers": [], "kind": "squad"} for q in squad_pick]
    calibration = pool[:450] + oos_squad[:50]
    before = pool[450:720] + oos_squad[50:80]
    in_test = [
        {"query": row["query"], "answers": answers[row["intent"]], "kind": "in_scope"}
        for row in test
        if row["intent"] in answers
    ]
    held_queries = [
        {"query": row["query"], "answers": [], "kind": "banking_oos"}
        for row in train + test
        if row["intent"] in held
    ]
    covid = _jsonl(root / "covid-qa" / "covidqa_200423_flat.jsonl")
    covid_questions = list(dict.fromkeys(row["question"] for row in covid))
    after = (
        [in_test[i] for i in rng.permutation(len(in_test))[:975]]
        + [held_queries[i] for i in rng.permutation(len(held_queries))[:263]]
        + [
            {"query": q, "answers": [], "kind": "covid"}
            for q in (covid_questions[i] for i in rng.permutation(len(covid_questions))[:262])
        ]
    )

    def shuffled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [rows[i] for i in rng.permutation(len(rows))]

    return LiveAuditData(kb, shuffled(calibration), shuffled(before), shuffled(after))
