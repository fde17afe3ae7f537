"""``tribunal serve NAME``: run one service in a gRPC ServiceHost (no Ray).

Each service registers a factory here: ``"module:function"``, imported only
when that service is started; the function takes :class:`Settings` and
returns a :class:`~tribunal.core.server.ServiceHost` (not started).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core import load_settings

if TYPE_CHECKING:
    from ..core import Settings
    from ..core.server import ServiceHost

__all__ = ["SERVICES", "register"]

# name -> "module:factory"; each service's issue adds its line.
SERVICES: dict[str, str] = {
    "retrieval": "tribunal.retrieval.servicer:build_host",
    "confidence": "tribunal.confidence.servicer:build_host",
    "entailment": "tribunal.entailment.servicer:build_host",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "serve", help="run one service as a gRPC server (health, reflection, /metrics)"
    )
    parser.add_argument("service", choices=sorted(SERVICES), help="which service")
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--host", default=None, help="bind address (default from settings)")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (default from settings)")
    parser.add_argument("--metrics-port", type=int, default=None, help="Prometheus port")
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    server: dict[str, object] = {
        key: value
        for key, value in (
            ("host", args.host),
            ("port", args.port),
            ("metrics_port", args.metrics_port),
        )
        if value is not None
    }
    base = load_settings(args.profile)
    settings = (
        load_settings(args.profile, server={**base.server.model_dump(), **server})
        if server
        else base
    )
    module_name, _, function = SERVICES[args.service].partition(":")
    factory: Callable[[Settings], ServiceHost] = getattr(
        importlib.import_module(module_name), function
    )
    factory(settings).run()
    return 0
