"""``tribunal demo``: the end-to-end main job on the embedded defaults (``tribunal ask`` —
:mod:`.ask` — shares its in-process settings).

Ingests the COVID-QA FAQ into a collection, starts the gateway with every stage
in this process (SQLite audit store, the profile's models), asks it a seeded
sample of real user paraphrases plus questions the FAQ cannot answer, and
prints what it decided: each answer is the FAQ entry verbatim or the fallback.

The FAQ's answers are their own source (its chunks are cut from the answers), so
the collection is ingested under the explicit ``self_evidenced`` policy, which
every decision records; no entailment model runs, at ingestion or per query.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from ..core import NotFoundError, Settings, jsonl_rows, load_settings
from ..core.server import ServiceHost

__all__ = ["register"]

# Questions the COVID FAQ cannot answer: the gateway must fall back on them.
OUT_OF_SCOPE = (
    "What is the capital of Australia?",
    "How do I reset my router password?",
    "Which team won the 2010 football world cup?",
    "Can I bring my cat on a domestic flight?",
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "demo",
        help="end-to-end: ingest the COVID FAQ, start the gateway in-process, answer questions",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("../shared/data/covid-qa"),
        help="the COVID-QA folder (faq_kb_en.jsonl, question_similarity_en.jsonl); default "
        "../shared/data/covid-qa",
    )
    parser.add_argument("--collection", default="covid-demo")
    parser.add_argument("--queries", type=int, default=8, help="FAQ paraphrases to ask")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-o", "--out", type=Path, default=Path(".build/demo/answers.json"))
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="target hallucination rate: accept at the calibrator's threshold certified for "
        "it (default: the strictest alpha the calibrator certifies, else the profile's "
        "confidence.alpha; with none certified the demo says so and stops)",
    )
    parser.add_argument(
        "--plain-threshold",
        type=_plain_threshold,
        default=None,
        help="accept at this fixed confidence instead, with no hallucination-rate guarantee",
    )
    parser.set_defaults(func=_demo)


def _certification(settings: Settings) -> str:
    """What the served threshold promises, from the artifact the gateway trusts."""
    from ..confidence import CalibratorArtifact, default_artifact_path

    artifact = CalibratorArtifact.load(default_artifact_path(settings))
    alpha = settings.confidence.alpha
    threshold = artifact.threshold_for(alpha)
    where = ""
    if artifact.binding is not None:
        binding = artifact.binding
        where = (
            f" on {threshold.n} labelled queries of collection {binding.collection!r} "
            f"({binding.collection_version}, matcher {binding.matcher})"
        )
    from ..ensemble import served_feature_matcher

    served = served_feature_matcher(settings)
    if artifact.binding is not None and served is not None and served != artifact.binding.matcher:
        return (
            f"calibrator {artifact.version} was certified with matcher "
            f"{artifact.binding.matcher}; the matcher served now is {served}: every answer "
            "falls back (NO_CERTIFIED_THRESHOLD). Recalibrate: `tribunal calibrate "
            f"--collection {artifact.binding.collection} --traffic LABELLED.jsonl`"
        )
    if threshold.threshold is None:
        return (
            f"calibrator {artifact.version}: no threshold is certified for alpha={alpha:g}"
            f"{where}; every answer falls back (NO_CERTIFIED_THRESHOLD)"
        )
    held = next(
        (
            item
            for item in artifact.metrics.get("heldout", {}).get("per_alpha", [])
            if abs(item.get("alpha", -1) - alpha) < 1e-9
        ),
        None,
    )
    heldout = (
        f"; on {held['n']} held-out queries: {held['errors']} wrong of {held['accepted']} "
        f"answered, coverage {held['coverage']:.1%}"
        if held
        else ""
    )
    return (
        f"answering with calibrator {artifact.version}: threshold {threshold.threshold:.4f} "
        f"certified by {threshold.method} at alpha={alpha:g}, delta={threshold.delta:g}{where}: "
        f"upper bound on the hallucination rate {threshold.upper_bound:.3f}, "
        f"coverage {threshold.coverage:.1%} ({threshold.accepted}/{threshold.n}){heldout}"
    )


def strictest_alpha(settings: Settings) -> tuple[float | None, list[str]]:
    """The strictest α the trusted calibrator certifies (None: none), and for each
    stricter α it was asked to certify, why it does not (with the labelled queries that
    would certify it)."""
    from ..confidence import CalibratorArtifact, artifact_not_certified, default_artifact_path

    artifact = CalibratorArtifact.load(default_artifact_path(settings))
    certified = [t.alpha for t in artifact.thresholds if t.threshold is not None]
    if not certified:
        return None, []
    best = min(certified)
    stricter = sorted(t.alpha for t in artifact.thresholds if t.alpha < best)
    return best, [artifact_not_certified(artifact, alpha) for alpha in stricter]


def _answer_classes() -> Any:
    """The COVID FAQ's reviewed answer-equivalence classes (shipped with the package)."""
    from ..confidence import AnswerClasses

    return AnswerClasses.load(
        Path(__file__).resolve().parents[1] / "artifacts/answer-classes/covid-qa-faq-en.json"
    )


def _questions(folder: Path, count: int, seed: int) -> list[tuple[str, str | None]]:
    """(query, id of the FAQ entry it paraphrases) for a seeded sample, then out-of-scope ones."""
    from ..kb import entry_from_record

    source = folder / "question_similarity_en.jsonl"
    if not source.is_file():
        raise NotFoundError(
            f"{source} does not exist: the demo reads the COVID-QA data (faq_kb_en.jsonl, "
            "question_similarity_en.jsonl), by default from ../shared/data/covid-qa beside "
            "the clone; pass --data DIR (make demo DATA=DIR)"
        )
    rows = [row.value for row in jsonl_rows(source, field="data")]
    paraphrases = [r for r in rows if int(r["label"]) == 1]
    picked = random.Random(seed).sample(paraphrases, min(count, len(paraphrases)))
    asked: list[tuple[str, str | None]] = []
    for row in picked:
        entry = entry_from_record(
            {"question": row["question_1"], "answer": row["q1_faq_answer"]},
            record_format="faq",
            max_chars=10_000,
        )
        asked.append((row["question_2"], entry.id))
    asked.extend((question, None) for question in OUT_OF_SCOPE)
    return asked


def _faq_entries(settings: Settings, folder: Path) -> list[Any]:
    """The FAQ's entries (``faq_kb_en.jsonl``), duplicates dropped."""
    from ..kb import deduplicate, read_entries

    entries, _ = deduplicate(
        read_entries(
            folder / "faq_kb_en.jsonl",
            record_format="faq",
            max_chars=settings.retrieval.chunk_size_chars,
        )
    )
    return entries


def _ingest(
    settings: Settings,
    folder: Path,
    collection: str,
    *,
    match_vectors: bool = True,
    progress: bool = False,
) -> int:
    """The FAQ into ``collection`` under the ``self_evidenced`` policy, and (``match_vectors``)
    the feature matcher's vectors of its entries; its size (``progress``: a bar, rate and
    ETA, while the entries are embedded). No entailment checker loads: the entries'
    chunks are cut from their answers."""
    from ..ensemble import precompute_entry_vectors
    from ..retrieval import KnowledgeBase, key_paths, writer_signer

    entries = _faq_entries(settings, folder)
    # The demo is the KB's writer: it signs what it ingests (the key is made at first use).
    signer, created = writer_signer(settings)
    if created:
        print(f"created the KB signing key {signer.key_id} at {key_paths(settings)[0]} (0600)")
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    try:
        total = kb.upsert(
            collection, entries, create=True, self_evidenced=True, progress=progress
        ).total_entries
    finally:
        kb.close()
    if match_vectors:  # the feature matcher's vectors of every entry: no question waits
        precompute_entry_vectors(settings, entries, collection=collection, progress=True)
    return total


def _in_process_settings(
    profile: str | None, plain_threshold: float | None, alpha: float | None = None
) -> Settings:
    base = load_settings(profile)
    confidence = base.confidence.model_dump()
    if alpha is not None:
        confidence["alpha"] = alpha
    if plain_threshold is not None:
        confidence["plain_threshold"] = plain_threshold
        print(
            f"NOTE: accepting at a plain confidence >= {plain_threshold} "
            "(--plain-threshold): no hallucination-rate guarantee."
        )
    # One process on a CPU: the entailment cascade (and, with ensemble.matcher: judges, six
    # LLM judges) can take longer than the production stage caps allow, so the demo waits.
    # The gateway scores as many candidates as the calibrator was certified with.
    gateway = {
        **base.gateway.model_dump(),
        "discovery": "in-process",
        "deadline_s": 1800.0,
        "stage_timeout_s": dict.fromkeys(base.gateway.stage_timeout_s, 900.0),
    }
    return load_settings(
        profile,
        server={**base.server.model_dump(), "port": 0, "metrics_port": None, "auth_token": None},
        gateway=gateway,
        confidence=confidence,
    )


def _plain_threshold(value: str) -> float | None:
    number = float(value)
    return None if number < 0 else number


def _start_gateway(settings: Settings) -> tuple[ServiceHost, int]:
    from ..gateway.servicer import build_host

    host = build_host(settings)
    port = host.start()
    if not host.wait_until_ready():
        host.stop(0)
        raise host.load_error or RuntimeError("the gateway did not become ready")
    return host, port


def _demo(args: argparse.Namespace) -> int:
    from ._calibration_check import require_calibration
    from ._steps import Steps

    alpha: float | None = args.alpha
    stricter: list[str] = []
    if alpha is None and args.plain_threshold is None:
        # The strictest α the calibrator certifies, and why no stricter one is: said once, now.
        alpha, stricter = strictest_alpha(_in_process_settings(args.profile, None))
    settings = _in_process_settings(args.profile, args.plain_threshold, alpha)
    # A calibrator that can accept nothing is said now, before anything loads.
    require_calibration(settings, [args.collection])
    if alpha is not None and args.alpha is None:
        print(f"serving at alpha={alpha:g}, the strictest alpha the calibrator certifies")
    for line in stricter:
        print(f"NOTE: {line}")
    classes = _answer_classes()
    questions = _questions(args.data, args.queries, args.seed)
    steps = Steps(3)
    with steps.step(
        f"ingest the COVID FAQ ({args.data / 'faq_kb_en.jsonl'}) into collection "
        f"{args.collection!r}: the retrieval embedder embeds each entry once"
    ):
        total = _ingest(settings, args.data, args.collection, match_vectors=False, progress=True)
    print(
        f"    {total} FAQ entries, served under the collection's self_evidenced policy (the "
        "FAQ's answers are their own source: no entailment model runs)"
    )
    # The matcher's vectors of an entry (question, answer, both) are embedded the first time
    # a question finds the entry, then kept on disk: a first run pays for the dozen
    # questions' candidates, not for the whole FAQ's long answers (minutes on 2 cores).
    print(
        "    the feature matcher embeds an entry when a question first finds it, then keeps "
        "its vectors (`tribunal kb ingest` embeds them all up front)"
    )
    problem = require_calibration(settings, [args.collection])  # the collection exists now
    if settings.confidence.plain_threshold is None:
        print(_certification(settings))
    if problem is not None:
        print(f"NOTE: {problem}")
    with steps.step(
        "load the gateway with the stages Answer calls (retrieval, ensemble, confidence) in "
        "this process; entailment and debate load only if called"
    ):
        host, port = _start_gateway(settings)
    print(f"    gateway on 127.0.0.1:{port}; audit store {settings.database_url}")
    with steps.step(f"answer {len(questions)} questions"):
        try:
            rows = _answer_all(settings, port, args.collection, questions, classes)
        finally:
            host.stop(0)
    _report(rows, args.out)
    print(f"first answer after {steps.elapsed_s:.0f} s in all")
    return 0


def _answer_all(
    settings: Settings,
    port: int,
    collection: str,
    questions: list[tuple[str, str | None]],
    classes: Any,
) -> list[dict[str, Any]]:
    from tqdm import tqdm

    from ..core.server import open_channel
    from ..v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

    rows: list[dict[str, Any]] = []
    with open_channel(f"127.0.0.1:{port}") as channel:
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)  # type: ignore[no-untyped-call]
        for query, expected in tqdm(questions, desc="answering", unit="query"):
            asked = time.perf_counter()
            reply = stub.Answer(
                gateway_pb2.AnswerRequest(query=query, collection=collection),
                timeout=settings.gateway.deadline_s + 5,
            )
            decision = common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_")
            rows.append(
                {
                    "query": query,
                    "expected_entry": expected,
                    "decision": decision,
                    "kb_entry_id": reply.kb_entry_id,
                    # Right when the entry answers the query: the expected one or an
                    # equivalent entry of another agency (the FAQ's answer classes).
                    "correct": (
                        reply.kb_entry_id in classes.class_of(expected)
                        if expected is not None
                        else not reply.kb_entry_id
                    ),
                    "confidence": reply.confidence if reply.HasField("confidence") else None,
                    "threshold": reply.threshold,
                    "reason": gateway_pb2.FallbackReason.Name(reply.fallback_reason),
                    "seconds": round(time.perf_counter() - asked, 3),
                    "answer": reply.answer,
                    "evidence_policy": reply.evidence_policy,
                    "answer_sha256": reply.answer_sha256,
                    "audit_id": reply.audit_id,
                }
            )
    return rows


def _report(rows: list[dict[str, Any]], out: Path) -> None:
    print()
    print("| query | decision | confidence | right entry (or rightly refused) | s |")
    print("|---|---|---|---|---|")
    for row in rows:
        confidence = "-" if row["confidence"] is None else f"{row['confidence']:.2f}"
        verdict = "yes" if row["correct"] else "NO"
        cells = [row["query"][:60], row["decision"], confidence, verdict, str(row["seconds"])]
        print("| " + " | ".join(cells) + " |")
    accepted = [r for r in rows if r["decision"] == "ACCEPT"]
    wrong = [r for r in accepted if not r["correct"] and r["expected_entry"] is not None]
    out_of_scope = [r for r in accepted if r["expected_entry"] is None]
    seconds = sorted(r["seconds"] for r in rows)
    print(
        f"\n{len(rows)} questions: {len(accepted)} answered from the FAQ "
        f"({len(wrong)} with a wrong entry, {len(out_of_scope)} out of scope), "
        f"{len(rows) - len(accepted)} fell back; median answer {seconds[len(seconds) // 2]:.3f} s; "
        "every decision is in the audit store (`tribunal audit list`)."
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    print(f"details: {out}")
