"""The ``tribunal-lab`` command: evaluations, paper reproductions and data set builders."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tribunal import __version__
from tribunal.cli import run

from .commands import crowdrag as crowdrag_commands
from .commands import dataset as dataset_commands
from .commands import evaluate as eval_commands
from .commands import live_audit as live_audit_commands

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tribunal-lab",
        description="Measure Tribunal's stages on the development data sets, reproduce the "
        "papers' figures and build the labelled sets the product trains on. Data sets: "
        "--data (default $TRIBUNAL_LAB_DATA or ../shared/data); per-item caches: --cache-dir "
        "(default $TRIBUNAL_LAB_CACHE or .build/lab-cache).",
    )
    parser.add_argument("--version", action="version", version=f"tribunal-lab {__version__}")
    parser.add_argument(
        "--log-format", choices=("json", "text"), default="text", help="log line format"
    )
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for area in (eval_commands, dataset_commands, crowdrag_commands, live_audit_commands):
        area.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv, "tribunal-lab")


if __name__ == "__main__":
    sys.exit(main())
