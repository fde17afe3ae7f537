"""``tribunal serve NAME``: run one service in a gRPC ServiceHost (no Ray).

``tribunal serve config`` / ``deploy`` run the whole stack on Ray Serve instead
(:mod:`._serve_ray`).

Each service registers a factory here: ``"module:function"``, imported only
when that service is started; the function takes :class:`Settings` and
returns a :class:`~tribunal.core.server.ServiceHost` (not started).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
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
    "ensemble": "tribunal.ensemble.servicer:build_host",
    "gateway": "tribunal.gateway.servicer:build_host",
    "debate": "tribunal.debate.servicer:build_host",
}
# Not services: the whole stack on Ray Serve (commands/_serve_ray.py).
RAY_COMMANDS = ("config", "deploy")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "serve", help="run one service as a gRPC server (health, reflection, /metrics)"
    )
    parser.add_argument(
        "service",
        choices=[*sorted(SERVICES), *RAY_COMMANDS],
        help="which service; or `config` (write the Ray Serve config of the whole stack) "
        "or `deploy` (run a Serve config on a local Ray until SIGTERM)",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--host", default=None, help="bind address (default from settings)")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (default from settings)")
    parser.add_argument("--metrics-port", type=int, default=None, help="Prometheus port")
    ray = parser.add_argument_group("Ray Serve (config, deploy)")
    ray.add_argument("-o", "--output", type=Path, help="config: YAML to write (default stdout)")
    ray.add_argument("--config", type=Path, help="deploy: the Serve config YAML to run")
    ray.add_argument("--grpc-port", type=int, default=9000, help="config: Serve's gRPC proxy port")
    ray.add_argument("--http-port", type=int, default=8000, help="config: Serve's HTTP port")
    ray.add_argument("--apps", default="", help="config: only these applications (a,b,...)")
    ray.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config: a setting every application loads, e.g. llm.n_threads=1 (repeatable)",
    )
    ray.add_argument("--num-cpus", type=float, default=None, help="deploy: CPUs Ray schedules")
    ray.add_argument(
        "--ray-auth",
        choices=("disabled", "token"),
        default="disabled",
        help="deploy: Ray's token auth (disabled: loopback-only node; token: a token file "
        "in the temp dir, never ~/.ray)",
    )
    ray.add_argument("--temp-dir", default=None, help="deploy: Ray's temp dir (.build/ray)")
    ray.add_argument("--timeout", type=float, default=900.0, help="deploy: seconds to come up")
    ray.add_argument("--ready-file", type=Path, help="deploy: JSON written once all run")
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    if args.service in RAY_COMMANDS:
        from . import _serve_ray

        command = _serve_ray.write_config if args.service == "config" else _serve_ray.deploy_command
        return command(args)
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
