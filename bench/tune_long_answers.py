"""``tribunal tune`` and ``tribunal calibrate``'s signals on a KB whose answers are as
long as an FAQ's: where the time goes, part by part.

The KB: BANKING77's intents (the coverage evaluation's seeded draw: 67 entries, five
phrasings each), each given an answer of the COVID FAQ (seeded, 566 characters on
average) instead of BANKING77's stub; the traffic: 2,000 other BANKING77 train queries
labelled by intent. The parts, each timed:

1. **ingest**: the KB written to a fresh data directory and its matcher vectors stored,
   as ``tribunal kb ingest`` does (``--no-precompute``: as an ``Upsert`` from elsewhere
   leaves it, nothing stored);
2. **tune**: ``tribunal tune`` at its defaults (teaching, no encoder fine-tune);
3. **calibrate's signals**: the tune's held-out queries through retrieval and the tuned
   matcher, in a new process's matcher (what ``tribunal calibrate`` runs).

Every text a model embeds for an entry is a forward pass over up to 384 tokens; with
answers this long, those passes are most of the time. Compare two checkouts by running
this file with each one's code first on ``PYTHONPATH``.

    .venv/bin/python bench/tune_long_answers.py [--traffic 2000] [--no-precompute]
        [--work .build/bench/tune-long] [--out .build/bench/tune_long_answers.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
COLLECTION = "bank-long"


def _settings(data: Path) -> Any:
    from tribunal.core import load_settings

    base = load_settings("tiny")
    # Time is what is measured: no stage may time out into a fallback.
    return load_settings(
        "tiny",
        data_dir=str(data),
        gateway={
            **base.gateway.model_dump(),
            "collection": COLLECTION,
            "discovery": "in-process",
            "deadline_s": 1800.0,
            "stage_timeout_s": dict.fromkeys(base.gateway.stage_timeout_s, 900.0),
        },
    )


def _kb_and_traffic(traffic_size: int, seed: int) -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
    sys.path.insert(0, str(REPO / "lab"))
    from tribunal_lab.evaluation._coverage_domains import banking77_domain

    domain = banking77_domain(
        SHARED / "banking77",
        seed=seed,
        traffic_size=traffic_size,
        heldout_intents=10,
        phrasings=5,
        test_size=10,
    )
    faq = [json.loads(line) for line in (SHARED / "covid-qa" / "faq_kb_en.jsonl").open()]
    answers = random.Random(seed).sample([row["answer"] for row in faq], len(domain.phrased))
    entries = tuple(replace(e, answer=a) for e, a in zip(domain.phrased, answers, strict=True))
    return entries, list(domain.traffic)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traffic", type=int, default=2000, help="labelled queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-precompute",
        action="store_true",
        help="store no matcher vectors at ingestion (an Upsert from elsewhere)",
    )
    parser.add_argument("--work", type=Path, default=Path(".build/bench/tune-long"))
    parser.add_argument("--out", type=Path, default=Path(".build/bench/tune_long_answers.json"))
    args = parser.parse_args()

    from tribunal.commands._calibration_signals import observe_traffic
    from tribunal.commands.calibrate import tuned_part
    from tribunal.commands.tune import tune_collection
    from tribunal.confidence import read_traffic
    from tribunal.ensemble import precompute_entry_vectors
    from tribunal.retrieval import KnowledgeBase, writer_signer
    from tribunal.tuning import TuneConfig

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    entries, rows = _kb_and_traffic(args.traffic, args.seed)
    print(
        f"{len(entries)} entries (answers {sum(len(e.answer) for e in entries) / len(entries):.0f}"
        f" characters on average), {len(rows)} labelled queries",
        flush=True,
    )
    settings = _settings(args.work / "data")
    seconds: dict[str, float] = {}

    started = time.perf_counter()
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    try:
        kb.upsert(COLLECTION, list(entries), create=True, self_evidenced=True)
    finally:
        kb.close()
    # The settings' gateway.collection is this collection: its matcher's vectors.
    stored = 0 if args.no_precompute else precompute_entry_vectors(settings, entries, progress=True)
    seconds["ingest"] = time.perf_counter() - started
    print(f"ingest: {seconds['ingest']:.0f} s ({stored} matcher vectors stored)", flush=True)

    path = args.work / "traffic.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    traffic = read_traffic(path)
    started = time.perf_counter()
    _, _, outcome = tune_collection(settings, COLLECTION, traffic, TuneConfig(seed=args.seed))
    seconds["tune"] = time.perf_counter() - started
    print(f"tune: {seconds['tune']:.0f} s", flush=True)

    tuned_settings, held_out = tuned_part(settings, COLLECTION, traffic)
    started = time.perf_counter()
    observe_traffic(tuned_settings, COLLECTION, held_out)
    seconds["calibrate_signals"] = time.perf_counter() - started
    print(
        f"calibrate's signals: {seconds['calibrate_signals']:.0f} s ({len(held_out)} queries)",
        flush=True,
    )
    seconds["total"] = sum(seconds.values())
    print(
        "| part | seconds |\n|---|---|\n"
        + "\n".join(f"| {part} | {value:.0f} |" for part, value in seconds.items())
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "options": {k: str(v) for k, v in vars(args).items()},
        "entries": len(entries),
        "queries": len(rows),
        "taught": outcome.metrics.get("teaching", {}).get("phrasings_added"),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
