"""``tribunal serve config`` and ``tribunal serve deploy``: the stack on Ray Serve.

``config`` writes the Serve config of a profile (validated by Serve's schema);
``deploy`` starts a local single-node Ray with Serve's gRPC proxy, applies a
config, waits until every application runs, prints the endpoint and the
deployment's memory, then serves until SIGTERM/SIGINT, when it shuts Serve and
Ray down (``make serve`` / ``make serve-stop`` run it in the background).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from ..core import InvalidArgumentError, load_settings

__all__ = ["deploy_command", "parse_overrides", "write_config"]


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["llm.n_threads=1", "gateway.top_k=3"]`` -> nested overrides (values read as YAML)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(
                f"--set {pair!r}: write KEY=VALUE with a dotted key, e.g. llm.n_threads=1",
                field="set",
            )
        node = overrides
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidArgumentError(f"--set {pair!r} conflicts with another --set")
        node[leaf] = yaml.safe_load(raw)
    return overrides


def write_config(args: argparse.Namespace) -> int:
    from ..deploy import APPLICATIONS, serve_config, validate_serve_config

    overrides = parse_overrides(args.set)
    settings = load_settings(args.profile, **overrides)
    apps = tuple(args.apps.split(",")) if args.apps else APPLICATIONS
    config = serve_config(
        settings,
        grpc_port=args.grpc_port,
        http_port=args.http_port,
        overrides=overrides,
        apps=apps,
        expose_stages=not args.gateway_only,
    )
    validate_serve_config(config)
    text = (
        f"# Ray Serve config of profile {settings.profile!r} (tribunal serve config); "
        "validated with ray.serve.schema.ServeDeploySchema.\n"
        "# Clients: Serve's gRPC proxy on grpc_options.port, metadata application: gateway.\n"
        + yaml.safe_dump(config, sort_keys=False)
    )
    if args.output is None or str(args.output) == "-":
        sys.stdout.write(text)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(config['applications'])} applications)")
    return 0


def _check_proxy_exposure(config: dict[str, Any], args: argparse.Namespace) -> None:
    """A proxy reachable from other machines needs every routed application to check
    credentials (or ``--insecure``)."""
    from ..core.server import CredentialStore, check_exposure
    from ..deploy.apps import settings_from_args

    for app in config.get("applications", []):
        if app.get("route_prefix") is None:
            continue  # no route: reached only through handles
        settings = settings_from_args(app.get("args"))
        check_exposure(
            args.grpc_host,
            has_credentials=CredentialStore.from_settings(settings.server) is not None,
            insecure=args.insecure,
            what=f"Serve's gRPC proxy (application {app.get('name')!r})",
        )


def _tls_summary(tls: Any) -> dict[str, str] | str:
    """Where a client finds what the proxy's mutual TLS asks of it (``off`` without)."""
    if tls is None:
        return "off"
    return {
        "mode": "mutual",
        "ca": str(tls.ca),
        "client_cert": str(tls.client.cert),
        "client_key": str(tls.client.key),
    }


def deploy_command(args: argparse.Namespace) -> int:
    from ..deploy import set_ray_auth

    if args.config is None:
        raise InvalidArgumentError(
            "tribunal serve deploy needs --config serve.yaml (write one with tribunal serve "
            "config -o serve.yaml)",
            field="config",
        )
    temp_dir = Path(args.temp_dir or os.environ.get("RAY_TMPDIR") or ".build/ray").resolve()
    temp_dir.mkdir(parents=True, exist_ok=True)
    # Before anything imports Ray: its core library reads the auth mode when it loads.
    set_ray_auth(args.ray_auth, temp_dir)
    from ray import serve

    from ..deploy import (
        deploy,
        local_tls,
        ray_memory,
        start_local,
        validate_serve_config,
        wait_running,
    )

    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    validate_serve_config(config)
    _check_proxy_exposure(config, args)
    env = {k: v for k, v in os.environ.items() if k.startswith("TRIBUNAL_")}
    tls = local_tls(temp_dir / "tls") if args.tls == "mutual" else None
    if tls is None:
        print(
            "--tls off: Serve's gRPC proxy serves plaintext to any client that reaches it",
            file=sys.stderr,
            flush=True,
        )
    started = start_local(
        config,
        temp_dir=temp_dir,
        num_cpus=args.num_cpus,
        auth=args.ray_auth,
        env_vars=env,
        grpc_host=args.grpc_host,
        ray_host=args.ray_host,
        tls=tls,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        deploy(config)
        apps = [app["name"] for app in config["applications"]]
        wait_running(apps, timeout_s=args.timeout)
        memory = ray_memory()
        summary = {
            "grpc": f"{started.grpc_host}:{started.grpc_port}",
            "applications": apps,
            "ray_auth": started.auth,
            "ray_host": started.ray_host,
            "tls": _tls_summary(started.tls),
            "temp_dir": str(started.temp_dir),
            "memory_pss_mib": round(memory["total_pss_mib"]),
            "memory_rss_mib": round(memory["total_rss_mib"]),
        }
        print(json.dumps(summary), flush=True)
        if args.ready_file is not None:
            args.ready_file.parent.mkdir(parents=True, exist_ok=True)
            args.ready_file.write_text(json.dumps({**summary, "memory": memory}, indent=2))
        stop.wait()
    finally:
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
        serve.shutdown()  # type: ignore[no-untyped-call]
        import ray

        ray.shutdown()
    return 0
