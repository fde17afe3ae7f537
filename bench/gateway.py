"""``Answer`` with per-query entailment (the old path) and without it (verified at write).

Both paths run in one process, each against its own stage servers (the stages on
one loopback gRPC server, as the demo's in-process gateway has them; separate
servers, so neither path finds the other's query and entry embeddings in the
feature matcher's cache), on the demo's KB and questions (the COVID FAQ, a
seeded sample of real user paraphrases plus questions the FAQ cannot answer):

- **new**: the gateway's :class:`AnswerPipeline` — retrieval, the ensemble, the
  confidence service, every reply checked; no entailment call (each entry's
  evidence was verified when it was written; the FAQ is self-evidenced).
- **old**: what the gateway did before, step for step — retrieval, then the
  ensemble and an entailment ``Check`` of each candidate's chunks against its
  answer run concurrently, then confidence; the decision is the confidence
  service's.

For each path: paraphrases answered with the right entry, wrong answers, and the
time per query; then the ratio; then where the new path spends its time, per stage
(the time it waited on each, model work plus one loopback hop) and outside them
(validation, reply checks, the trusted calibrator's own verdict). Queries alternate
between the paths (old, new, old, new, ...) after one warm-up of each, so load on the
shared machine hits both.

    .venv/bin/python bench/gateway.py [--queries 8] [--seed 7] [--out .build/bench/gateway.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tribunal.commands.demo import _in_process_settings, _ingest, _questions
from tribunal.core import Settings
from tribunal.gateway import AnswerPipeline, StageTransport, call_stage
from tribunal.gateway._checks import AnswerPolicy
from tribunal.gateway._wiring import serve_stages
from tribunal.v1 import (
    common_pb2,
    confidence_pb2,
    ensemble_pb2,
    entailment_pb2,
    gateway_pb2,
    retrieval_pb2,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa"
COLLECTION = "covid-bench"


class PerQueryEntailment:
    """The previous Answer path: entailment checked per query, concurrently with the
    ensemble; the confidence service's decision taken as is."""

    def __init__(self, settings: Settings, transport: StageTransport) -> None:
        self.settings = settings
        self.transport = transport
        self.pool = ThreadPoolExecutor(max_workers=2)

    def _call(self, stage: str, method: str, request: Any) -> Any:
        return call_stage(
            self.transport, stage, method, request, timeout_s=1800.0, retries=0, backoff_s=0.1
        )

    def answer(self, query: str) -> tuple[str, str]:
        """(decision, entry id) for one query."""
        found = self._call(
            "retrieval",
            "Search",
            retrieval_pb2.SearchRequest(
                collection=COLLECTION, query=query, top_k=self.settings.gateway.top_k
            ),
        )
        hits = list(found.hits)[: self.settings.gateway.candidates]
        if not hits:
            return "FALLBACK", ""
        limit = self.settings.entailment.max_hypothesis_chars
        pairs = [
            (i, chunk)
            for i, hit in enumerate(hits)
            if len(hit.entry.answer) <= limit
            for chunk in hit.entry.chunks
        ]
        matches = self.pool.submit(
            self._call,
            "ensemble",
            "BatchMatch",
            ensemble_pb2.BatchMatchRequest(
                items=[ensemble_pb2.MatchRequest(query=query, candidate=h.entry) for h in hits]
            ),
        )
        checks = self.pool.submit(
            self._call,
            "entailment",
            "Check",
            entailment_pb2.CheckRequest(
                pairs=[
                    entailment_pb2.EntailmentPair(premise=c.text, hypothesis=hits[i].entry.answer)
                    for i, c in pairs
                ]
            ),
        )
        matched, checked = matches.result(), checks.result() if pairs else None
        signals = []
        for i, (hit, match) in enumerate(zip(hits, matched.results, strict=True)):
            item = confidence_pb2.Signals(
                retrieval_score=hit.score, retrieval_rank=hit.rank, ensemble_p_match=match.p_match
            )
            if hit.HasField("dense_score"):
                item.dense_score = hit.dense_score
            if hit.HasField("sparse_score"):
                item.sparse_score = hit.sparse_score
            for judge in match.judges:
                item.judge_p_yes[judge.judge] = judge.p_yes
            results = (
                [r for (j, _), r in zip(pairs, checked.results, strict=True) if j == i]
                if checked
                else []
            )
            if results:
                item.entailment_p_entail = max(r.p_entail for r in results)
                item.supporting_passages = sum(
                    r.label == entailment_pb2.ENTAILMENT_LABEL_ENTAILED for r in results
                )
            signals.append(item)
        scores = self._call(
            "confidence",
            "BatchScore",
            confidence_pb2.BatchScoreRequest(
                items=[confidence_pb2.ScoreRequest(signals=s) for s in signals]
            ),
        ).results
        best = max(range(len(hits)), key=lambda k: scores[k].confidence)
        decision = common_pb2.Decision.Name(scores[best].decision).removeprefix("DECISION_")
        return decision, hits[best].entry.id if decision == "ACCEPT" else ""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _split(stages: list[dict[str, float]], totals: list[float]) -> dict[str, dict[str, float]]:
    """p50 / p95 of each stage's wait, the total, and what is outside the stages."""
    parts: dict[str, list[float]] = {}
    for row in stages:
        for stage, ms in row.items():
            parts.setdefault(stage, []).append(ms)
    parts["total"] = totals
    parts["outside the stages"] = [
        max(0.0, total - sum(row.values())) for row, total in zip(stages, totals, strict=True)
    ]
    return {
        part: {"p50": _percentile(values, 0.5), "p95": _percentile(values, 0.95)}
        for part, values in parts.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="paraphrases (+4 out of scope)")
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--seed", type=int, default=7, help="the demo's default")
    parser.add_argument("--out", type=Path, default=Path(".build/bench/gateway.json"))
    args = parser.parse_args()

    settings = _in_process_settings(None, 0.5)
    # Time is what is measured: no stage may time out into a fallback.
    gateway = settings.gateway.model_copy(
        update={
            "collection": COLLECTION,
            "deadline_s": 3600.0,
            "stage_timeout_s": dict.fromkeys(settings.gateway.stage_timeout_s, 1800.0),
        }
    )
    settings = settings.model_copy(update={"gateway": gateway})
    _ingest(settings, args.data, COLLECTION)
    questions = _questions(args.data, args.queries, args.seed)
    transport, host = serve_stages(settings)
    new_transport, new_host = serve_stages(settings, ("retrieval", "ensemble", "confidence"))
    new = AnswerPipeline(
        settings.gateway, new_transport, store=None, policy=AnswerPolicy.from_settings(settings)
    )
    old = PerQueryEntailment(settings, transport)

    stage_ms: list[dict[str, float]] = []

    def ask_new(query: str) -> tuple[str, str]:
        reply = new.answer(gateway_pb2.AnswerRequest(query=query))
        stage_ms.append({s.stage: s.milliseconds for s in reply.latencies})
        return common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_"), reply.kb_entry_id

    rows: list[dict[str, Any]] = []
    try:
        for ask in (old.answer, ask_new):  # warm-up: first-call allocations, caches
            ask("What is a novel coronavirus?")
        for number, (query, expected) in enumerate(questions, start=1):
            row: dict[str, Any] = {"query": query, "expected": expected}
            for name, ask in (("old", old.answer), ("new", ask_new)):
                started = time.perf_counter()
                decision, entry = ask(query)
                row[name] = {
                    "decision": decision,
                    "entry": entry,
                    "seconds": time.perf_counter() - started,
                }
            rows.append(row)
            print(
                f"  {number}/{len(questions)} old {row['old']['seconds']:6.2f} s "
                f"{row['old']['decision']:8s} new {row['new']['seconds']:6.2f} s "
                f"{row['new']['decision']:8s} {query[:50]}",
                flush=True,
            )
    finally:
        for closer in (transport.close, new_transport.close):
            closer()
        host.stop(0)
        new_host.stop(0)

    table = {}
    for name in ("old", "new"):
        seconds = [r[name]["seconds"] for r in rows]
        accepted = [r for r in rows if r[name]["decision"] == "ACCEPT"]
        table[name] = {
            "right": sum(r[name]["entry"] == r["expected"] for r in accepted),
            "wrong": sum(r[name]["entry"] != r["expected"] for r in accepted),
            "paraphrases": sum(r["expected"] is not None for r in rows),
            "out_of_scope_refused": sum(
                r["expected"] is None and r[name]["decision"] != "ACCEPT" for r in rows
            ),
            "mean_s": statistics.mean(seconds),
            "p50_s": _percentile(seconds, 0.5),
            "p95_s": _percentile(seconds, 0.95),
        }
    ratio = table["old"]["mean_s"] / table["new"]["mean_s"]
    labels = {
        "old": "old: entailment per query",
        "new": "new: verified at write, no entailment per query",
    }
    print("\n| path | right entry | wrong | out of scope refused | mean s/query | p50 s | p95 s |")
    print("|---|---|---|---|---|---|---|")
    for name, t in table.items():
        print(
            f"| {labels[name]} | {t['right']} of {t['paraphrases']} | {t['wrong']} | "
            f"{t['out_of_scope_refused']} of {len(rows) - t['paraphrases']} | "
            f"{t['mean_s']:.2f} | {t['p50_s']:.2f} | {t['p95_s']:.2f} |"
        )
    print(f"\ntime per query, old / new: {ratio:.1f}x" if math.isfinite(ratio) else "")
    split = _split(stage_ms[1:], [r["new"]["seconds"] * 1000.0 for r in rows])  # no warm-up
    print("\n| new path, part of Answer | p50 ms | p95 ms |\n|---|---|---|")
    for part, values in split.items():
        print(f"| {part} | {values['p50']:.0f} | {values['p95']:.0f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"paths": table, "ratio": ratio, "new_split_ms": split, "rows": rows}, indent=2)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
