"""``tribunal serve NAME``: run one service in a gRPC ServiceHost (no Ray).

``tribunal serve config`` / ``deploy`` run the whole stack on Ray Serve instead
(:mod:`._serve_ray`). The services, their host factories and default ports come
from the registry (:data:`tribunal.deploy.SERVICES`).
"""

from __future__ import annotations

import argparse
from collections.abc import Set as AbstractSet
from pathlib import Path

from ..core import Settings, load_settings
from ..core.server import CredentialStore, check_exposure, install_reload_signal, is_loopback
from ..deploy import SERVICES, ServiceSpec

__all__ = ["register", "server_overrides"]

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
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address without credentials (refused otherwise; logged as "
        "a warning at every start). deploy: the same for --grpc-host",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="gRPC port (default: server.port when set, else the service's own: "
        + ", ".join(f"{name} {spec.port}" for name, spec in SERVICES.items())
        + ")",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="Prometheus port (default: server.metrics_port when set, else the service's "
        "own: " + ", ".join(f"{name} {spec.metrics_port}" for name, spec in SERVICES.items()) + ")",
    )
    ray = parser.add_argument_group("Ray Serve (config, deploy)")
    ray.add_argument("-o", "--output", type=Path, help="config: YAML to write (default stdout)")
    ray.add_argument("--config", type=Path, help="deploy: the Serve config YAML to run")
    ray.add_argument("--grpc-port", type=int, default=9000, help="config: Serve's gRPC proxy port")
    ray.add_argument(
        "--grpc-host",
        default="127.0.0.1",
        help="deploy: address of Serve's gRPC proxy (default 127.0.0.1; 0.0.0.0 for every "
        "interface, which needs credentials or --insecure)",
    )
    ray.add_argument(
        "--gateway-only",
        action="store_true",
        help="config: route only the gateway through the proxies; the stages are reached "
        "through the gateway's handles alone",
    )
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
        default="token",
        help="deploy: Ray's own token auth (token, the default: a token file in the temp dir, "
        "never ~/.ray; disabled: anyone who reaches Ray's ports can run code on this node)",
    )
    ray.add_argument(
        "--ray-host",
        default="127.0.0.1",
        help="deploy: the Ray node's address (default 127.0.0.1: every Ray port listens on "
        "loopback only; any other address opens them on every interface)",
    )
    ray.add_argument(
        "--tls",
        choices=("mutual", "off"),
        default="mutual",
        help="deploy: Serve's gRPC proxy serves mutual TLS (the default: a CA, the proxy's "
        "certificate and a client certificate are made under the temp dir's tls/, and "
        "printed; clients pass --tls-ca, --tls-cert, --tls-key) or plaintext (off)",
    )
    ray.add_argument("--temp-dir", default=None, help="deploy: Ray's temp dir (.build/ray)")
    ray.add_argument("--timeout", type=float, default=900.0, help="deploy: seconds to come up")
    ray.add_argument("--ready-file", type=Path, help="deploy: JSON written once all run")
    parser.set_defaults(func=_serve)


def server_overrides(
    args: argparse.Namespace, spec: ServiceSpec, configured: AbstractSet[str]
) -> dict[str, object]:
    """The ``server`` settings ``tribunal serve NAME`` overrides.

    A flag wins; else a port the settings name (``configured``: the ``server`` fields the
    profile or ``TRIBUNAL_SERVER__*`` set) stays; else the service's own ports from the
    registry, so several services run side by side on one machine.
    """
    flags: dict[str, object] = {
        "host": args.host,
        "port": args.port,
        "metrics_port": args.metrics_port,
    }
    for key, default in (("port", spec.port), ("metrics_port", spec.metrics_port)):
        if flags[key] is None and key not in configured:
            flags[key] = default
    return {key: value for key, value in flags.items() if value is not None}


def _serve(args: argparse.Namespace) -> int:
    if args.service in RAY_COMMANDS:
        from . import _serve_ray

        command = _serve_ray.write_config if args.service == "config" else _serve_ray.deploy_command
        return command(args)
    spec = SERVICES[args.service]
    base = load_settings(args.profile)
    server = server_overrides(args, spec, base.server.model_fields_set)
    settings = (
        load_settings(args.profile, server={**base.server.model_dump(), **server})
        if server
        else base
    )
    if (
        settings.server.credentials_file is None
        and settings.server.auth_token is None
        and settings.server.local_admin_file is None
        and is_loopback(settings.server.host)
    ):
        settings = _with_local_admin(settings)
    credentials = CredentialStore.from_settings(settings.server)
    check_exposure(
        settings.server.host,
        has_credentials=credentials is not None,
        insecure=args.insecure,
        what=f"tribunal serve {args.service}",
    )
    install_reload_signal()  # SIGHUP re-reads server.credentials_file
    spec.build_host(settings).run()
    return 0


def _with_local_admin(settings: Settings) -> Settings:
    """Loopback development with no credentials: asking stays open, KB changes need the
    token of a local admin credential, made (0600) at the first start and reused."""
    import os
    import secrets
    import sys

    path = settings.data_dir / "credentials" / "local-admin.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(
                "# Made by `tribunal serve` for loopback development: KB changes (Upsert,\n"
                "# Delete, Sign) need this token (authorization: Bearer <token>).\n"
                f"credentials:\n  - name: local-admin\n    role: admin\n    token: {token}\n"
            )
        print(f"created a local admin credential: {path} (0600)", file=sys.stderr, flush=True)
    print(
        "no credentials configured: asking is open on this loopback address; KB changes "
        f"need the admin token in {path} (set server.credentials_file for real credentials)",
        file=sys.stderr,
        flush=True,
    )
    server = settings.server.model_copy(update={"local_admin_file": path})
    return settings.model_copy(update={"server": server})
