"""OpenMP threads that spin vs sleep while they wait: MPNet passes on a shared machine.

torch's OpenMP threads wait for each other at every operation. Spinning (libgomp's
default: ``GOMP_SPINCOUNT=300000``) holds a core while waiting; where other processes
use the cores too, the thread waited for cannot run, and every operation stalls. Tribunal
sets ``OMP_WAIT_POLICY=PASSIVE`` (sleep) unless the user chose a policy
(``tribunal/__init__.py``). Each configuration runs in its own process (OpenMP reads the
policy once), alternating, over the FAQ's answers (long) and questions (short, like
queries); reported:
texts/s per configuration and the ratios to the default spin. Ratios, not absolute
times: the machine is shared, and the ratio grows with the load.

    .venv/bin/python bench/omp_wait.py [--texts 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CONFIGS = {
    "spin (libgomp default), 2 threads": ({"GOMP_SPINCOUNT": "300000"}, 2),
    "sleep (PASSIVE), 2 threads": ({"OMP_WAIT_POLICY": "PASSIVE"}, 2),
    "sleep (PASSIVE), 1 thread": ({"OMP_WAIT_POLICY": "PASSIVE"}, 1),
}

_CHILD = """
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
from pathlib import Path
from tribunal.core import load_settings
from tribunal.embedding import load_profile_embedder
from tribunal.kb import read_entries
entries = read_entries(Path(sys.argv[2]), record_format="faq", max_chars=10_000,
                       limit=int(sys.argv[3]))
# answers: long texts, few large matrix products; questions: short texts, where the
# threads wait at many small operations (what queries and most tests run).
texts = [e.answer if sys.argv[4] == "answers" else e.question for e in entries]
embedder = load_profile_embedder(load_settings("tiny"), "embedder_large")
embedder.embed(texts[:1])
started = time.perf_counter()
embedder.embed(texts)
print(json.dumps({"texts_per_s": len(texts) / (time.perf_counter() - started)}))
"""


def _run(env: dict[str, str], threads: int, faq: Path, texts: int, kind: str) -> float:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    }
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(threads), str(faq), str(texts), kind],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    rate: float = json.loads(done.stdout.strip().splitlines()[-1])["texts_per_s"]
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=8, help="FAQ answers embedded per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per configuration")
    parser.add_argument("--faq", type=Path, default=Path("../shared/data/covid-qa/faq_kb_en.jsonl"))
    parser.add_argument("--out", type=Path, default=Path(".build/bench/omp_wait.json"))
    args = parser.parse_args()

    kinds = ("answers", "questions")
    rates: dict[str, list[float]] = {f"{n} | {k}": [] for k in kinds for n in CONFIGS}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for kind in kinds:
            for name, (env, threads) in CONFIGS.items():
                rates[f"{name} | {kind}"].append(_run(env, threads, args.faq, args.texts, kind))
                loads.append(os.getloadavg()[0])
    spread = f"{min(loads):.1f}-{max(loads):.1f}"
    print(f"{args.texts} FAQ texts per run through MPNet; load average {spread}")
    print("| configuration | texts | texts/s (mean of runs) | ratio to spin |")
    print("|---|---|---|---|")
    for kind in kinds:
        base = sum(rates[f"{next(iter(CONFIGS))} | {kind}"]) / args.rounds
        for name in CONFIGS:
            mean = sum(rates[f"{name} | {kind}"]) / args.rounds
            print(f"| {name} | {kind} | {mean:.2f} | {mean / base:.2f}x |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"rates": rates, "load": loads, "when": time.strftime("%FT%TZ")}, indent=2)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
