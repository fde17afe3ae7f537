"""The ``tribunal`` command: one entry point, a subcommand per area."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__
from .commands import ask as ask_commands
from .commands import audit as audit_commands
from .commands import calibrate as calibrate_commands
from .commands import confidence as confidence_commands
from .commands import config as config_commands
from .commands import credentials as credentials_commands
from .commands import demo as demo_commands
from .commands import ensemble as ensemble_commands
from .commands import kb as kb_commands
from .commands import label as label_commands
from .commands import models as models_commands
from .commands import ops as ops_commands
from .commands import review as review_commands
from .commands import serve as serve_commands
from .commands import tls as tls_commands
from .commands import tune as tune_commands
from .core import TribunalError, configure_logging, quiet_third_party

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tribunal",
        description="Decide, with evidence, whether a text answers a question.",
    )
    parser.add_argument("--version", action="version", version=f"tribunal {__version__}")
    parser.add_argument(
        "--log-format", choices=("json", "text"), default="text", help="log line format"
    )
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show the model libraries' warnings and progress bars (hidden by default)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for area in (models_commands, config_commands, serve_commands, kb_commands):
        area.register(sub)
    confidence_commands.register(sub)
    calibrate_commands.register(sub)
    tune_commands.register(sub)
    audit_commands.register(sub)
    demo_commands.register(sub)
    ask_commands.register(sub)
    ensemble_commands.register(sub)
    ops_commands.register(sub)
    label_commands.register(sub)
    review_commands.register(sub)
    credentials_commands.register(sub)
    tls_commands.register(sub)
    return parser


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None, prog: str) -> int:
    """Parse, configure logging, run the chosen command; known errors without a traceback."""
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    if not (getattr(args, "verbose", False) or str(args.log_level).upper() == "DEBUG"):
        quiet_third_party()
    try:
        return int(args.func(args))
    except TribunalError as exc:
        # Known errors already say what to fix; no traceback.
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv, "tribunal")


if __name__ == "__main__":
    sys.exit(main())
