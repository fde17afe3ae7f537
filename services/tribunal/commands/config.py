"""``tribunal config``: show the effective settings, the shipped profiles, and the
settings reference (``tribunal config docs > docs/settings.md``)."""

from __future__ import annotations

import argparse
import json

import yaml

from ..core import available_profiles, load_settings
from ..core.settings import settings_reference

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("config", help="show settings and profiles")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show", help="print the effective settings (profile + TRIBUNAL_* overrides) as YAML"
    )
    show.add_argument("--profile", default=None, help="profile name or YAML path")
    show.set_defaults(func=_show)
    profiles = actions.add_parser("profiles", help="list the shipped profiles")
    profiles.set_defaults(func=_profiles)
    docs = actions.add_parser(
        "docs",
        help="print the reference of every setting as Markdown (docs/settings.md)",
    )
    docs.set_defaults(func=_docs)


def _show(args: argparse.Namespace) -> int:
    settings = load_settings(args.profile)
    print(yaml.safe_dump(json.loads(settings.model_dump_json()), sort_keys=False), end="")
    return 0


def _profiles(_args: argparse.Namespace) -> int:
    for name in available_profiles():
        settings = load_settings(name)
        print(f"{name:10} {settings.description}")
    return 0


def _docs(_args: argparse.Namespace) -> int:
    print(settings_reference(), end="")
    return 0
