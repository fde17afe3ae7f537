"""How long a ``tribunal`` command takes to start: its own module only vs every command's.

A command imports only the module that registers it (``tribunal/cli.py``), and
scikit-learn and bm25s load when first used, so a command that fails on bad input, or
one that never fits a calibrator or searches, does not pay for the others' libraries.
Each configuration runs in a fresh process, alternating, ``--rounds`` times; reported:
the median CPU seconds (user + system: wall time on a shared machine mostly measures
the neighbours) of each, and the ratio to the old start-up (every command module
imported, scikit-learn and bm25s with them).

    .venv/bin/python bench/cli_start.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The old start-up, reproduced: every command module and the two libraries they used to
# import at the top.
_EVERYTHING = (
    "import sklearn.isotonic, sklearn.linear_model, bm25s\n"
    "from tribunal.cli import build_parser\n"
    "build_parser()\n"
)
_MISSING_RUN = (
    "-m tribunal.cli label evaluate --runs /nonexistent.trec --topics /nonexistent.tsv "
    "--corpus /nonexistent.tsv --job j --budget 2"
)
CONFIGS = {
    "every command's module (the old start-up)": ["-c", _EVERYTHING],
    "`tribunal label evaluate` on a missing run file": shlex.split(_MISSING_RUN),
    "`tribunal kb --help`": ["-m", "tribunal.cli", "kb", "--help"],
    "`tribunal config profiles`": ["-m", "tribunal.cli", "config", "profiles"],
}


def _cpu_seconds(args: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        check=False,
        timeout=600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / ".build" / "bench" / "cli_start.json")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {name: [] for name in CONFIGS}
    load = [os.getloadavg()[0]]
    for command in CONFIGS.values():  # once untimed: bytecode compiled, files cached
        _cpu_seconds(command)
    for round_ in range(args.rounds):
        for name, command in CONFIGS.items():
            seconds[name].append(_cpu_seconds(command))
        load.append(os.getloadavg()[0])
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    base = statistics.median(seconds[next(iter(CONFIGS))])
    rows = []
    print("| start-up | CPU s (median) | share of the old start-up |")
    print("|---|---|---|")
    for name, values in seconds.items():
        median = statistics.median(values)
        rows.append(
            {"config": name, "cpu_seconds": values, "median": median, "share": median / base}
        )
        print(f"| {name} | {median:.2f} | {median / base:.2f} |")
    print(f"load average over the run: {min(load):.1f}-{max(load):.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "load": load}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
