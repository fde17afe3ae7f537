"""``tribunal-lab live-audit``: the live audit on a traffic shift built from BANKING77.

Certify a BANKING77 FAQ on traffic with 10% out-of-scope questions, serve traffic like
it, then traffic that shifts (held-out paraphrases, 35% out of scope), with a share of
the decisions audited by a simulated reviewer who answers from the ground-truth intents.
It reports the live hallucination rate before and after the shift, when the shift warning
fires (and a fresh bound is started beside the cumulative one), how many audited answers
the live bounds need to trip the fail-safe, the rate in safe mode and after re-certifying
on the audited sample (served: what ``--recertify`` picks, as ``tribunal calibrate
--from-audit --recertify`` does — the weighted refit, or the served calibrator
re-thresholded on its audited ACCEPTs as ``tribunal audit rethreshold`` writes it; the
live monitor keeps running on it; the other candidates are counted beside), and the
reviewer labels per 1,000 queries.

The real parts: the KB is ingested and every query goes once through the gateway's own
retrieval and matching (the profile's models), cached; the calibrator and thresholds are
fitted and certified by ``tribunal calibrate``'s code; each live decision is the
gateway's rule (best candidate, certified threshold, the collection's serving mode read
from the live state) with the gateway's audit coin (``LiveAudit``), written to a real
audit store; reviews go through the review queue, whose vote hook runs the live monitor;
re-certification reads the audited sample as ``tribunal calibrate --from-audit`` does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from .._loopback_stages import loopback_stages
from .._paths import cache_dir, data_root
from ._live_audit_data import build_data
from ._live_audit_recertify import RECERTIFY
from ._live_audit_replay import Replay
from ._live_audit_report import write_report

__all__ = ["register"]

COLLECTION = "banking77"
_CHUNK = 100


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "live-audit",
        help="live audit, bound and fail-safe on a traffic shift built from BANKING77",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=data_root(), help="data sets folder")
    parser.add_argument("--out", type=Path, default=Path(".build/live-audit"), help="report")
    parser.add_argument("--seed", type=int, default=0, help="data, split and audit-coin seed")
    parser.add_argument("--alpha", type=float, default=0.2, help="the served target rate")
    parser.add_argument("--delta", type=float, default=0.05, help="the live bound's delta")
    parser.add_argument("--accept-share", type=float, default=0.2, help="ACCEPTs audited")
    parser.add_argument("--fallback-share", type=float, default=0.1, help="FALLBACKs audited")
    parser.add_argument(
        "--safe-queries",
        type=int,
        default=200,
        help="queries served in safe mode before re-certifying on the items audited since "
        "the shift warning (or the trip)",
    )
    parser.add_argument(
        "--recertify",
        choices=RECERTIFY,
        default="refit",
        help="what is served after re-certifying, as `tribunal calibrate --from-audit "
        "--recertify` (default refit, the command's): the weighted refit; the served "
        "calibrator re-thresholded on its audited ACCEPTs; or best (each certified at "
        "delta/2: the refit if it certifies alpha, else the re-threshold)",
    )
    parser.add_argument(
        "--extended",
        type=int,
        default=2500,
        help="shifted queries beyond the first 1,500 (same proportions; at most the rest of "
        "the test split)",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.set_defaults(func=_run)


def _digest(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def _observe_all(settings: Any, work: Path, queries: list[dict[str, Any]]) -> Any:
    """Every query through retrieval + matching once, in chunks cached by their digest
    (a killed run resumes at its first missing chunk)."""
    from tribunal.commands._calibration_signals import observe_traffic, read_signals, write_signals
    from tribunal.confidence import read_traffic

    observed: list[Any] = []
    bindings = set()
    started = time.perf_counter()
    host = None
    for first in range(0, len(queries), _CHUNK):
        chunk = queries[first : first + _CHUNK]
        path = work / "traffic" / f"{_digest(chunk)}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in chunk))
        traffic = read_traffic(path)
        signals = path.with_suffix(".signals.jsonl")
        if signals.is_file():
            part, binding = read_signals(signals, traffic)
        else:
            if host is None:
                # The stages load once; each chunk reaches them over loopback gRPC.
                host, served = loopback_stages(settings)
            part, binding = observe_traffic(served, COLLECTION, traffic)
            write_signals(signals, traffic, part, binding)
        observed.extend(part)
        bindings.add(json.dumps(binding.to_dict(), sort_keys=True))
        done = first + len(chunk)
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"observed {done}/{len(queries)} queries ({rate:.1f}/s incl. cached)", flush=True)
    if host is not None:
        host.stop(0)
    if len(bindings) != 1:
        raise SystemExit("the KB or matcher changed between chunks: clear the cache and rerun")
    path = work / "all-traffic.jsonl"
    path.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in queries))
    return read_traffic(path), observed, binding


def _ingest(work: Path, kb: list[dict[str, Any]]) -> None:
    from tribunal.cli import main as tribunal

    marker = work / f"ingested-{_digest(kb)}"
    if marker.exists():
        return
    path = work / "kb.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in kb))
    code = tribunal(
        [
            "kb",
            "ingest",
            str(path),
            "--collection",
            COLLECTION,
            "--format",
            "entries",
            "--self-evidenced",
        ]
    )
    if code:
        raise SystemExit(f"kb ingest failed ({code})")
    marker.touch()


def _run(args: argparse.Namespace) -> int:
    from tribunal.confidence import CalibrationConfig, calibrate, read_traffic
    from tribunal.core import load_settings

    data = build_data(args.data, seed=args.seed, extended=args.extended)
    work = cache_dir("live-audit")
    work.mkdir(parents=True, exist_ok=True)
    os.environ["TRIBUNAL_DATA_DIR"] = str((work / "data").resolve())
    settings = load_settings(args.profile)
    _ingest(work, data.kb)
    everything = data.calibration + data.before + data.after
    traffic, observed, binding = _observe_all(settings, work, everything)
    n_cal, n_before = len(data.calibration), len(data.before)

    calibration_path = work / "calibration-traffic.jsonl"
    calibration_path.write_text(
        "".join(json.dumps(q, sort_keys=True) + "\n" for q in data.calibration)
    )
    result = calibrate(
        read_traffic(calibration_path),
        observed[:n_cal],
        CalibrationConfig(alphas=(0.1, 0.2), delta=0.1, seed=args.seed),
        binding,
        created="2026-12-02T00:00:00+00:00",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    replay = Replay(
        args=args,
        collection=COLLECTION,
        artifact=result.artifact,
        binding=binding,
        observed=observed,
        traffic=traffic,
        database_url=f"sqlite:///{(args.out / 'live-audit.db').resolve()}",
    )
    live = [("before", i) for i in range(n_cal, n_cal + n_before)] + [
        ("after", i) for i in range(n_cal + n_before, len(everything))
    ]
    report = replay.run(live, kinds=[q["kind"] for q in everything])
    report["command"] = (
        f"nice -n 10 tribunal-lab live-audit --alpha {args.alpha} --delta {args.delta} "
        f"--accept-share {args.accept_share} --fallback-share {args.fallback_share} "
        f"--safe-queries {args.safe_queries} --recertify {args.recertify} "
        f"--extended {args.extended} --seed {args.seed}"
    )
    report["date"] = dt.date.today().isoformat()
    report["calibration"] = {
        "version": result.artifact.version,
        "per_alpha": [
            {k: item[k] for k in ("alpha", "threshold", "upper_bound", "coverage", "certified")}
            for item in result.report["per_alpha"]
        ],
        "queries": n_cal,
    }
    written = write_report(report, args.out)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
