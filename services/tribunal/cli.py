"""The ``tribunal`` command: one entry point, a subcommand per area."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from . import __version__
from .core import TribunalError, configure_logging, quiet_third_party

__all__ = ["build_parser", "main"]

# Command name → the module under ``tribunal.commands`` that registers it, in the order
# ``--help`` lists them. A command's module imports its models' libraries (scikit-learn,
# faiss, bm25s, SQLAlchemy: seconds of CPU each), so a run imports only the module of
# the command it runs; ``--help`` and an unknown command import them all.
COMMANDS: dict[str, str] = {
    "models": "models",
    "config": "config",
    "serve": "serve",
    "kb": "kb",
    "confidence": "confidence",
    "calibrate": "calibrate",
    "answer-classes": "calibrate",
    "tune": "tune",
    "audit": "audit",
    "demo": "demo",
    "ask": "ask",
    "ensemble": "ensemble",
    "ops": "ops",
    "label": "label",
    "review": "review",
    "credentials": "credentials",
    "tls": "tls",
}
_VALUED_OPTIONS = frozenset({"--log-format", "--log-level"})


def _command_modules(argv: Sequence[str] | None) -> list[ModuleType]:
    """The command modules to register: the one ``argv`` names, else every one."""
    words = list(sys.argv[1:] if argv is None else argv)
    chosen: str | None = None
    for index, word in enumerate(words):
        if word.startswith("-"):
            continue
        if index and words[index - 1] in _VALUED_OPTIONS:
            continue
        chosen = word
        break
    names = [COMMANDS[chosen]] if chosen in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(f".commands.{name}", __package__) for name in names]


def build_parser(argv: Sequence[str] | None = ()) -> argparse.ArgumentParser:
    """The parser; with ``argv`` naming a command, only that command is registered
    (``()``, the default, registers every command)."""
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
    for module in _command_modules(argv):
        module.register(sub)
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
    return run(build_parser(sys.argv[1:] if argv is None else argv), argv, "tribunal")


if __name__ == "__main__":
    sys.exit(main())
