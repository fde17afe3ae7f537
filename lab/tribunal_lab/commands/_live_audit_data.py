"""The data of the live-audit experiment: a BANKING77 FAQ and traffic that shifts.

- **KB**: 65 of the 77 intents (12 held out, seeded), five training phrasings each as
  entries (325 entries; an intent's five entries all answer its queries).
- **Calibration traffic**: 450 other training queries of the KB's intents and 50
  out-of-scope SQuAD questions (10%).
- **Live traffic before the shift**: 270 more training queries and 30 more SQuAD
  questions (10% out of scope) — like the calibration traffic.
- **After the shift**: held-out paraphrases (the test split) of the KB's intents and 35%
  out-of-scope questions: half from the 12 held-out banking intents (they look in scope),
  half COVID-QA questions. First 1,500 queries (975 + 525), then ``extended`` more drawn
  from what is left in the same proportions (the rest of the test split, 1,625
  paraphrases, and 875 out-of-scope questions, shuffled): a violation this close to α
  needs hundreds of audited answers after the shift to be shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.core import jsonl_rows

from ..datasets.banking77 import read_banking77

__all__ = ["LiveAuditData", "build_data"]


@dataclass(frozen=True)
class LiveAuditData:
    kb: list[dict[str, Any]]
    calibration: list[dict[str, Any]]
    """``{"query", "answers", "kind"}`` rows (kind: in_scope, squad, banking_oos, covid)."""
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [row.value for row in jsonl_rows(path)]


def _humanise(intent: str) -> str:
    return intent.replace("_", " ").capitalize()


def build_data(root: Path, *, seed: int = 0, extended: int = 2500) -> LiveAuditData:
    rng = np.random.default_rng(seed)
    train, test, by_intent = read_banking77(root / "banking77")
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
    covid_rows = [
        {"query": q, "answers": [], "kind": "covid"}
        for q in dict.fromkeys(row["question"] for row in covid)
    ]
    # The same draws in the same order as the first 1,500 shifted queries always had, so
    # their cached signals stay valid; the extension takes what the permutations left.
    in_order = [in_test[i] for i in rng.permutation(len(in_test))]
    held_order = [held_queries[i] for i in rng.permutation(len(held_queries))]
    covid_order = [covid_rows[i] for i in rng.permutation(len(covid_rows))]
    after = in_order[:975] + held_order[:263] + covid_order[:262]
    # All that is left in the same proportions, shuffled once: a shorter extension is a
    # prefix of a longer one (its cached signals stay valid too).
    paraphrases = len(in_order) - 975
    out_of_scope = round(paraphrases * 35 / 65)
    extension = (
        in_order[975:]
        + held_order[263 : 263 + out_of_scope // 2]
        + covid_order[262 : 262 + out_of_scope - out_of_scope // 2]
    )

    def shuffled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [rows[i] for i in rng.permutation(len(rows))]

    calibration, before, after = shuffled(calibration), shuffled(before), shuffled(after)
    extension_rng = np.random.default_rng([seed, 1])
    order = extension_rng.permutation(len(extension))[: max(0, extended)]
    after += [extension[i] for i in order]
    return LiveAuditData(kb, calibration, before, after)
