"""COVID FAQ traffic labelled by answer equivalence, for ``tribunal calibrate``.

COVID-QA's ``question_similarity_en.jsonl`` pairs user questions (``question_2``)
with FAQ questions (``question_1``), label 1 when they ask the same thing. Each
user question with a label-1 pair is one labelled query: its answers are the FAQ
entry of that pair (found by its answer text, as ingestion names entries) and
every entry of the same answer-equivalence class (the committed classes file),
because another agency's entry answering the same question is a right answer
too; and an entry whose question *is* the user question (lower-cased, punctuation
dropped), which was written to answer exactly it. User questions without a
label-1 pair are left out: which entry answers them is not known.

    tribunal-lab dataset covid-traffic --out .build/calibrate/covid-traffic.jsonl
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tribunal.confidence import AnswerClasses
from tribunal.core import NotFoundError, jsonl_rows
from tribunal.kb import KbEntry, deduplicate, read_entries

__all__ = ["CLASSES_PATH", "build_covid_traffic"]

CLASSES_PATH = (
    Path(__file__).resolve().parents[3]
    / "services/tribunal/artifacts/answer-classes/covid-qa-faq-en.json"
)
"""The committed, reviewed classes of the COVID FAQ (``tribunal answer-classes check``)."""


def _normalise(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    return [row.value for row in jsonl_rows(path)]


def build_covid_traffic(
    folder: Path,
    out: Path,
    *,
    classes_path: Path | None = CLASSES_PATH,
    chunk_chars: int = 1000,
) -> dict[str, Any]:
    """Write the labelled queries to ``out`` (sorted by query); returns a summary.

    ``classes_path=None``: the pairs file's links only (no classes, no verbatim
    question), the labelling the classes correct, kept for comparison.
    """
    entries, _ = deduplicate(
        read_entries(folder / "faq_kb_en.jsonl", record_format="faq", max_chars=chunk_chars)
    )
    by_answer: dict[str, list[KbEntry]] = {}
    by_question: dict[str, list[str]] = {}
    for entry in entries:
        by_answer.setdefault(_normalise(entry.answer)[:300], []).append(entry)
        by_question.setdefault(_normalise(entry.question), []).append(entry.id)
    classes = AnswerClasses.load(classes_path) if classes_path is not None else None
    linked: dict[str, set[str]] = {}
    unresolved = 0
    rows = _read_jsonl(folder / "question_similarity_en.jsonl")
    for row in rows:
        if int(row["label"]) != 1:
            continue
        found = by_answer.get(_normalise(row["q1_faq_answer"])[:300], [])
        if len(found) > 1:  # one answer text under several questions: match the question too
            found = [e for e in found if _normalise(e.question) == _normalise(row["question_1"])]
        if len(found) != 1:
            unresolved += 1
            continue
        linked.setdefault(row["question_2"], set()).add(found[0].id)
    verbatim = 0
    if classes is not None:
        for query, linked_ids in linked.items():
            same = set(by_question.get(_normalise(query), [])) - linked_ids
            verbatim += bool(same)
            linked_ids.update(same)
    queries = sorted(linked)

    def answers(query: str) -> list[str]:
        ids = linked[query]
        return sorted(ids if classes is None else classes.expand(ids))

    lines = [json.dumps({"query": q, "answers": answers(q)}, ensure_ascii=False) for q in queries]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    widened = sum(1 for q in queries if len(answers(q)) > 1)
    return {
        "queries": len(queries),
        "left_out_without_a_match": len({r["question_2"] for r in rows} - set(linked)),
        "pairs_not_found_in_kb": unresolved,
        "queries_with_several_answers": widened,
        "queries_with_an_entry_asking_them_verbatim": verbatim,
        "out": str(out),
    }
