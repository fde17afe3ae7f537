"""``tribunal ask --file``'s input queries, output rows and summary table.

A query file is JSONL: ``query`` (or ``question``), optional ``id``, ``collection`` and
``answers`` (the ids of every entry that answers it; empty when none does). Each reply
becomes one row; labelled rows are marked right or wrong, and the summary counts an
accepted wrong entry apart from an accepted out-of-scope query.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, parse_jsonl

__all__ = [
    "AskedQuery",
    "error_row",
    "input_lines",
    "read_queries",
    "reply_row",
    "summary_markdown",
    "with_answer_classes",
]


# -- queries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AskedQuery:
    """One query of the input, with what the file says about it."""

    query: str
    id: str
    collection: str = ""
    answers: tuple[str, ...] | None = None
    """The ids of every entry that answers it (empty: none does); None: not labelled."""


def read_queries(lines: Iterable[bytes | str], source: str) -> list[AskedQuery]:
    """Parse a JSONL input; every problem is an :class:`InvalidArgumentError` naming the line.

    A line is an object with ``query`` (or ``question``) and optional ``id``,
    ``collection`` and ``answers``; a bare JSON string is a query alone.
    """
    queries: list[AskedQuery] = []
    for where, _, row in parse_jsonl(lines, source, field="file", bare_key="query"):
        text = row.get("query", row.get("question"))
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgumentError(f"{where}: no query (a non-empty string)", field="file")
        answers = row.get("answers")
        if answers is not None and (
            not isinstance(answers, list) or not all(isinstance(a, str) for a in answers)
        ):
            raise InvalidArgumentError(
                f"{where}: answers must be a list of entry ids (empty when none answers)",
                field="file",
            )
        collection = row.get("collection", "")
        if not isinstance(collection, str):
            raise InvalidArgumentError(f"{where}: collection must be a string", field="file")
        queries.append(
            AskedQuery(
                query=text,
                id=str(row.get("id", len(queries) + 1)),
                collection=collection,
                answers=tuple(answers) if answers is not None else None,
            )
        )
    if not queries:
        raise InvalidArgumentError(f"{source} holds no queries", field="file")
    return queries


def with_answer_classes(queries: Sequence[AskedQuery], path: Path) -> list[AskedQuery]:
    """Each labelled query's answers widened to their whole answer classes (any entry
    that answers the same question alike is right too)."""
    from dataclasses import replace

    from ..confidence import AnswerClasses

    classes = AnswerClasses.load(path)
    return [
        q if q.answers is None else replace(q, answers=tuple(sorted(classes.expand(q.answers))))
        for q in queries
    ]


def input_lines(path: Path) -> tuple[Sequence[bytes | str], str]:
    if str(path) == "-":
        return sys.stdin.read().splitlines(), "standard input"
    if not path.is_file():
        raise InvalidArgumentError(f"--file {path}: no such file", field="file")
    return path.read_bytes().splitlines(), str(path)


# -- rows ---------------------------------------------------------------------------------


def reply_row(asked: AskedQuery, reply: Any, seconds: float) -> dict[str, Any]:
    from ..v1 import common_pb2, gateway_pb2

    decision = common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_")
    row: dict[str, Any] = {
        "id": asked.id,
        "query": asked.query,
        "decision": decision,
        "kb_entry_id": reply.kb_entry_id or None,
        "confidence": round(reply.confidence, 6) if reply.HasField("confidence") else None,
        "threshold": round(reply.threshold, 6),
        "reason": (
            None
            if reply.decision == common_pb2.DECISION_ACCEPT
            else gateway_pb2.FallbackReason.Name(reply.fallback_reason).removeprefix(
                "FALLBACK_REASON_"
            )
        ),
        "failed_stage": reply.failed_stage or None,
        "answer": reply.answer,
        "evidence_policy": reply.evidence_policy or None,
        "evidence": [
            {"chunk_id": e.chunk_id, "p_entail": round(e.p_entail, 6), "text": e.text}
            for e in reply.evidence
        ],
        "latency_ms": round(seconds * 1000.0, 1),
        "stage_ms": {s.stage: round(s.milliseconds, 1) for s in reply.latencies},
        "audit_id": reply.audit_id or None,
    }
    if asked.collection:
        row["collection"] = asked.collection
    if asked.answers is not None:
        row["expected"] = list(asked.answers)
        accepted = reply.decision == common_pb2.DECISION_ACCEPT
        # Right: an accepted entry that answers it, or a refusal when no entry does.
        row["correct"] = reply.kb_entry_id in asked.answers if accepted else not asked.answers
    return row


def error_row(asked: AskedQuery, error: str, seconds: float) -> dict[str, Any]:
    return {
        "id": asked.id,
        "query": asked.query,
        "decision": "ERROR",
        "error": error,
        "latency_ms": round(seconds * 1000.0, 1),
    }


# -- the summary --------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[position]


def summary_markdown(rows: Sequence[dict[str, Any]], wall_s: float) -> str:
    """Decisions, fallback reasons, latency and (labelled rows) how many were right."""
    total = len(rows)
    decisions = Counter(str(r["decision"]) for r in rows)
    lines = [
        f"{total} {'query' if total == 1 else 'queries'} in {wall_s:.1f} s "
        f"({total / wall_s if wall_s > 0 else 0:.2f} queries/s)",
        "",
        "| decision | queries | share |",
        "|---|---|---|",
    ]
    for decision, count in sorted(decisions.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {decision} | {count} | {count / total:.1%} |")
    reasons = Counter(str(r["reason"]) for r in rows if r.get("reason"))
    if reasons:
        lines += ["", "| fallback reason | queries |", "|---|---|"]
        lines += [f"| {reason} | {count} |" for reason, count in sorted(reasons.items())]
    latencies = [float(r["latency_ms"]) for r in rows if r["decision"] != "ERROR"]
    if latencies:
        lines += [
            "",
            f"latency ms: median {_percentile(latencies, 0.5):.0f}, p95 "
            f"{_percentile(latencies, 0.95):.0f}, max {max(latencies):.0f}",
        ]
    labelled = [r for r in rows if "correct" in r]
    if labelled:
        accepted = [r for r in labelled if r["decision"] == "ACCEPT"]
        # An accepted answer is wrong in two ways: another entry than one that answers an
        # answerable query, or any entry for a query no entry answers.
        wrong_entry = sum(not r["correct"] for r in accepted if r["expected"])
        out_of_scope = sum(not r["expected"] for r in accepted)
        wrong = wrong_entry + out_of_scope
        answerable = [r for r in labelled if r["expected"]]
        unanswerable = [r for r in labelled if not r["expected"]]
        right_answers = sum(r["correct"] for r in accepted)
        lines += [
            "",
            f"labelled: {len(labelled)} queries ({len(answerable)} answerable by the KB, "
            f"{len(unanswerable)} not)",
            "",
            "| measure | value |",
            "|---|---|",
            f"| accepted with a right entry | {right_answers} |",
            f"| accepted with a wrong entry (answerable query) | {wrong_entry} |",
            f"| accepted though no entry answers it (out of scope) | {out_of_scope} |",
            "| hallucination rate (both kinds of wrong / accepted) | "
            + (f"{wrong / len(accepted):.3f} |" if accepted else "– (none accepted) |"),
            f"| coverage (accepted / all) | {len(accepted) / len(labelled):.3f} |",
            "| answerable ones answered right | "
            + (f"{right_answers / len(answerable):.3f} |" if answerable else "– |"),
            "| unanswerable ones refused | "
            + (
                f"{sum(r['decision'] != 'ACCEPT' for r in unanswerable) / len(unanswerable):.3f} |"
                if unanswerable
                else "– |"
            ),
        ]
    return "\n".join(lines) + "\n"
