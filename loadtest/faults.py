"""Fault run: stages killed and paused while the load generator drives ``Answer``.

``python -m loadtest.faults --requests 1200`` builds a verified COVID FAQ KB
(:mod:`.verified_kb`: most entries verified, some failing verification, some
without evidence, some verified by a checker version the gateway does not
trust), starts the retrieval, ensemble and confidence services as separate
processes (``tribunal serve``) and a gateway dialling them, then drives
``Answer`` with an open loop (Poisson arrivals at ``--rate``, so an outage gets
its share of the requests, not all of them) of real user paraphrases and
off-topic questions while a chaos thread SIGSTOPs a random stage for 1-15 s
(past the 10 s stage timeouts of retrieval and confidence), or SIGKILLs it and
starts it again. Afterwards every ACCEPT in the audit store is checked
against the KB store: the entry it served must have a passing verification by
the checker version the gateway is configured with, and the served answer's
sha256 must be the stored one. The JSON summary (decisions, chaos events,
violations) and the latency plot go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tribunal.core import Settings, load_settings
from tribunal.core.storage import Database
from tribunal.entailment import checker_version
from tribunal.kb import answer_sha256
from tribunal.retrieval import KnowledgeBase, VerificationVerdict

from ._grpc import GatewayClient
from ._report import plot, summarize
from ._runner import run_open
from .verified_kb import LEXICAL_CHECKER, verified_faq_entries

__all__ = ["main"]

STAGES = ("retrieval", "ensemble", "confidence")
COLLECTION = "covid-faults"
OFF_TOPIC = (
    "Who won the 1998 football world cup?",
    "What is the capital of Australia?",
    "How do I reset my router password?",
    "Can I bring my cat on a domestic flight?",
)
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env(data_dir: Path) -> dict[str, str]:
    """The stage processes' settings: the same overrides as this process's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_")}
    if "TRIBUNAL_MODEL_DIR" in os.environ:
        env["TRIBUNAL_MODEL_DIR"] = os.environ["TRIBUNAL_MODEL_DIR"]
    env.update(
        TRIBUNAL_DATA_DIR=str(data_dir),
        TRIBUNAL_ENTAILMENT__FAST_BACKEND=LEXICAL_CHECKER["fast_backend"],
        TRIBUNAL_ENTAILMENT__TWO_STAGE="false",
        TRIBUNAL_CONFIDENCE__PLAIN_THRESHOLD="0.5",
        TRIBUNAL_LOG_LEVEL="WARNING",
    )
    return env


def _settings(data_dir: Path, **overrides: Any) -> Settings:
    return load_settings(
        "tiny",
        data_dir=data_dir,
        entailment=LEXICAL_CHECKER,
        confidence={"plain_threshold": 0.5},
        **overrides,
    )


def build_kb(data_dir: Path, faq: Path, *, stale_share: float, seed: int) -> dict[str, int]:
    """The KB: every entry first verified by another checker version (a stricter
    threshold), then all but ``stale_share`` of them again by the configured one."""
    stale_settings = load_settings(
        "tiny", data_dir=data_dir, entailment={**LEXICAL_CHECKER, "entail_threshold": 0.99}
    )
    current = _settings(data_dir)
    entries = verified_faq_entries(
        faq, chunk_chars=current.retrieval.chunk_size_chars, mismatched=0.15, seed=seed
    )
    rng = random.Random(seed)
    kb = KnowledgeBase.from_settings(stale_settings)
    try:
        kb.upsert(COLLECTION, entries, create=True)
    finally:
        kb.close()
    kept = [e for e in entries if rng.random() >= stale_share]
    kb = KnowledgeBase.from_settings(current)
    try:
        kb.upsert(COLLECTION, kept)
        _, found = kb.collection(COLLECTION).verified_entries([e.id for e in entries])
    finally:
        kb.close()
    version = checker_version(current)
    counts: Counter[str] = Counter()
    for _, verification in found.values():
        assert verification is not None
        label = verification.verdict.value
        if (
            verification.verdict is VerificationVerdict.VERIFIED
            and verification.checker_version != version
        ):
            label = "verified_by_another_checker"
        counts[label] += 1
    return dict(counts)


def queries(pairs: Path, faq_ids: set[str], count: int, seed: int) -> list[str]:
    """Real user paraphrases of FAQ questions (a seeded sample) and off-topic questions."""
    from tribunal.kb import entry_from_record

    rows = [json.loads(line) for line in pairs.read_text().splitlines() if line.strip()]
    asked = []
    for row in rows:
        if int(row["label"]) != 1:
            continue
        entry = entry_from_record(
            {"question": row["question_1"], "answer": row["q1_faq_answer"]},
            record_format="faq",
            max_chars=10_000,
        )
        if entry.id in faq_ids:
            asked.append(row["question_2"])
    picked = random.Random(seed).sample(asked, min(count, len(asked)))
    return picked + list(OFF_TOPIC)


class StageProcesses:
    """``tribunal serve STAGE`` per stage, each killable, pausable and restartable."""

    def __init__(self, data_dir: Path, log_dir: Path) -> None:
        self.env = _env(data_dir)
        self.ports = {stage: _free_port() for stage in STAGES}
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()

    def start(self, stage: str) -> None:
        tribunal = Path(sys.executable).with_name("tribunal")
        log = (self.log_dir / f"{stage}.log").open("ab")
        command = [str(tribunal), "serve", stage, "--port", str(self.ports[stage])]
        command += ["--metrics-port", str(_free_port())]
        with self.lock:
            self.procs[stage] = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_ready(self, timeout_s: float) -> None:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        deadline = time.monotonic() + timeout_s
        for stage, port in self.ports.items():
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while True:
                    try:
                        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                        if reply.status == health_pb2.HealthCheckResponse.SERVING:
                            break
                    except grpc.RpcError:
                        pass
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{stage} did not become ready in {timeout_s} s")
                    time.sleep(1)

    def signal(self, stage: str, signum: int) -> None:
        with self.lock:
            self.procs[stage].send_signal(signum)

    def kill_and_restart(self, stage: str) -> None:
        self.signal(stage, signal.SIGKILL)
        self.procs[stage].wait()
        self.start(stage)

    def stop(self) -> None:
        with self.lock:
            procs = list(self.procs.values())
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def chaos(
    stages: StageProcesses, stop: threading.Event, seed: int, every_s: float
) -> list[dict[str, Any]]:
    """Until ``stop``: every ``every_s`` seconds pause a random stage 1-15 s, or kill it
    and start it again (a quarter of the events). The events, timed from the start."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    started = time.perf_counter()
    while not stop.wait(every_s):
        stage = rng.choice(STAGES)
        at = round(time.perf_counter() - started, 2)
        if rng.random() < 1 / 4:
            stages.kill_and_restart(stage)
            events.append({"t": at, "stage": stage, "event": "SIGKILL, restarted"})
        else:
            seconds = rng.uniform(1.0, 15.0)
            stages.signal(stage, signal.SIGSTOP)
            stop.wait(seconds)
            stages.signal(stage, signal.SIGCONT)
            events.append({"t": at, "stage": stage, "event": f"SIGSTOP {seconds:.1f} s"})
    return events


def audit_check(db: Database, data_dir: Path, settings: Settings) -> dict[str, Any]:
    """Every ACCEPT against the KB store: a current passing verification, the stored sha256."""
    accepts = db.decisions(kind="answer", decision="ACCEPT", limit=1_000_000)
    version = checker_version(settings)
    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        _, found = kb.collection(COLLECTION).verified_entries(
            sorted({r.kb_entry_id for r in accepts})
        )
    finally:
        kb.close()
    violations = []
    for record in accepts:
        entry, verification = found.get(record.kb_entry_id, (None, None))
        served = record.detail.get("served", {})
        problem = ""
        if entry is None or verification is None:
            problem = "no stored verification"
        elif not verification.servable:
            problem = f"verdict {verification.verdict.value}"
        elif (
            verification.verdict is VerificationVerdict.VERIFIED
            and verification.checker_version != version
        ):
            problem = f"checker {verification.checker_version} is not the configured {version}"
        elif served.get("answer_sha256") != answer_sha256(entry.answer):
            problem = "the served answer's sha256 is not the stored answer's"
        if problem:
            violations.append({"audit_id": record.id, "entry": record.kb_entry_id, "why": problem})
    return {"accepts": len(accepts), "violations": violations}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m loadtest.faults", description=__doc__)
    parser.add_argument("--requests", type=int, default=1200)
    parser.add_argument("--duration", type=float, default=3000.0, help="cap, seconds")
    parser.add_argument("--rate", type=float, default=2.5, help="requests/s (Poisson)")
    parser.add_argument("--chaos-every", type=float, default=12.0, help="seconds between events")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=_SHARED, help="the covid-qa folder")
    parser.add_argument("--database-url", default="", help="audit store (default SQLite)")
    parser.add_argument("--out", type=Path, default=Path(".build/faults/run.json"))
    return parser


def _drive(
    args: argparse.Namespace, settings: Settings, stages: StageProcesses, data_dir: Path
) -> tuple[list[Any], float, list[dict[str, Any]]]:
    """The gateway (this process) over the stage processes, loaded while chaos runs."""
    from tribunal.gateway.servicer import build_host

    addresses = {stage: f"127.0.0.1:{port}" for stage, port in stages.ports.items()}
    addresses["entailment"] = addresses["debate"] = addresses["ensemble"]
    settings = settings.model_copy(
        update={"gateway": settings.gateway.model_copy(update={"addresses": addresses})}
    )
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(120), host.load_error
    _, ids = _entry_ids(data_dir, settings)
    asked = queries(args.data / "question_similarity_en.jsonl", ids, 400, args.seed)
    client = GatewayClient(f"127.0.0.1:{port}", timeout_s=60.0)
    stop = threading.Event()
    events: list[dict[str, Any]] = []
    chaos_thread = threading.Thread(
        target=lambda: events.extend(chaos(stages, stop, args.seed, args.chaos_every)),
        daemon=True,
    )
    chaos_thread.start()
    try:
        samples, wall = run_open(
            client.answer_call(asked),
            rate=args.rate,
            requests=args.requests,
            duration_s=args.duration,
            seed=args.seed,
            drain_s=90.0,
        )
    finally:
        stop.set()
        chaos_thread.join()
        client.close()
        host.stop(0)
    return samples, wall, events


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work = args.out.parent / "work"
    data_dir = work / "data"
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    kb_counts = build_kb(data_dir, args.data / "faq_kb_en.jsonl", stale_share=0.1, seed=args.seed)
    print(f"KB {COLLECTION}: {kb_counts} ({time.perf_counter() - started:.0f} s)", flush=True)
    database_url = args.database_url or f"sqlite:///{work}/audit-{args.seed}.db"
    settings = _settings(
        data_dir,
        database_url=database_url,
        # Room to queue the arrivals of a 15 s pause (2.5/s): beyond it calls are refused
        # at once (RESOURCE_EXHAUSTED), which is no decision at all.
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5, "max_queued_requests": 64},
        gateway={"discovery": "grpc", "collection": COLLECTION, "retry_backoff_s": 0.05},
    )
    stages = StageProcesses(data_dir, work)
    for stage in STAGES:
        stages.start(stage)
    try:
        stages.wait_ready(900)
        samples, wall, events = _drive(args, settings, stages, data_dir)
    finally:
        stages.stop()
    db = Database(database_url)
    try:
        check = audit_check(db, data_dir, settings)
        rows = len(db.decisions(kind="answer", limit=1_000_000))
    finally:
        db.close()
    summary = summarize(samples, wall, {"scenario": "faults", "mode": "open", "rate": args.rate})
    summary.update(
        kb=kb_counts,
        chaos_events=events,
        audit_rows=rows,
        accepts_checked=check["accepts"],
        violations=check["violations"],
        command="python -m loadtest.faults " + " ".join(argv or sys.argv[1:]),
    )
    args.out.write_text(json.dumps(summary, indent=2))
    plot(summary, args.out.with_suffix(".png"))
    print(
        f"{summary['requests']} Answer calls, {summary['ok']} OK, errors "
        f"{summary['errors_by_code'] or 'none'}; {len(events)} chaos events; "
        f"{rows} audit rows; decisions {summary['decisions']}; {check['accepts']} ACCEPTs "
        f"checked, {len(check['violations'])} without a current stored verification "
        f"-> {args.out}"
    )
    return 1 if check["violations"] else 0


def _entry_ids(data_dir: Path, settings: Settings) -> tuple[int, set[str]]:
    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        ids = {entry.id for entry in kb.collection(COLLECTION).store.iter_entries()}
    finally:
        kb.close()
    return len(ids), ids


if __name__ == "__main__":
    raise SystemExit(main())
