"""The Serve config of the whole stack, written from a profile and checked by Serve's schema.

One application per service, named after it (the gateway's ``ray`` discovery
finds the stages by these names, ``gateway.ray_apps`` renames them). Each
application is built in the cluster by :mod:`tribunal.deploy.apps` from the
``args`` written here (profile and setting overrides), and its deployment's
options (replicas / autoscaling, ``max_ongoing_requests``, CPUs and GPUs) are
also written out under ``deployments`` so an operator edits them in the YAML
(Serve applies the file's options over the code's). Clients use the gRPC proxy
with metadata ``application: gateway`` (or any other application's name). Each
application has a route prefix ``/<name>`` only because Serve's proxies, gRPC
included, route to an application only when it has one; the deployments answer
no HTTP, and the HTTP proxy listens on 127.0.0.1.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..core import ConfigError, DeploymentSettings, Settings
from ._registry import SERVICES

__all__ = ["APPLICATIONS", "GRPC_SERVICER_FUNCTIONS", "serve_config", "validate_serve_config"]

APPLICATIONS: tuple[str, ...] = tuple(SERVICES)
"""Application names: every service, stages first (the registry's order)."""

GRPC_SERVICER_FUNCTIONS: tuple[str, ...] = tuple(
    spec.servicer_function for spec in SERVICES.values()
)
"""What Serve's gRPC proxy registers: every ``tribunal.v1`` service."""


def _deployment_entry(name: str, options: DeploymentSettings) -> dict[str, Any]:
    ray = options.ray_options()
    return {
        "name": name,
        "max_ongoing_requests": ray["max_ongoing_requests"],
        "max_queued_requests": ray["max_queued_requests"],
        "max_surge_percent": ray["max_surge_percent"],
        "autoscaling_config": ray["autoscaling_config"],
        "ray_actor_options": ray["ray_actor_options"],
    }


def serve_config(
    settings: Settings,
    *,
    grpc_port: int = 9000,
    http_port: int = 8000,
    overrides: Mapping[str, Any] | None = None,
    apps: tuple[str, ...] = APPLICATIONS,
    expose_stages: bool = True,
) -> dict[str, Any]:
    """The multi-application Serve config (``ServeDeploySchema``) of ``settings``.

    Args:
        settings: The profile's settings; each application's deployment options come
            from its ``deployment`` section.
        grpc_port: Port of Serve's gRPC proxy (the clients' entry point).
        http_port: Port of Serve's HTTP proxy (bound to 127.0.0.1; no routes).
        overrides: Setting overrides every application loads on top of the profile
            (``{"llm": {"n_threads": 1}}``); the model and data directories are always
            written so the replicas find what this machine installed.
        apps: Which applications to include (all by default).
        expose_stages: Route every application through the proxies (each checks its
            callers' credentials). False: only the gateway; the stages get no route and
            are reached only through the gateway's handles, inside the cluster.
    """
    unknown = sorted(set(apps) - set(APPLICATIONS))
    if unknown:
        raise ConfigError(
            f"unknown applications {unknown}; known: {', '.join(APPLICATIONS)}", field="apps"
        )
    args_settings: dict[str, Any] = {
        "model_dir": str(settings.model_dir),
        "data_dir": str(settings.data_dir),
        **(overrides or {}),
    }
    applications = []
    for app in (a for a in APPLICATIONS if a in apps):
        applications.append(
            {
                "name": app,
                "route_prefix": f"/{app}" if expose_stages or not SERVICES[app].stage else None,
                "import_path": f"tribunal.deploy.apps:{app}",
                "args": {"profile": settings.profile, "settings": copy.deepcopy(args_settings)},
                "deployments": [_deployment_entry(app, SERVICES[app].deployment(settings))],
            }
        )
    return {
        # One proxy on the head node: a single-node cluster here; KubeRay sets its own.
        "proxy_location": "HeadOnly",
        "http_options": {"host": "127.0.0.1", "port": http_port},
        "grpc_options": {
            "port": grpc_port,
            "grpc_servicer_functions": list(GRPC_SERVICER_FUNCTIONS),
        },
        "logging_config": {"encoding": "JSON", "log_level": "INFO"},
        "applications": applications,
    }


def validate_serve_config(config: Mapping[str, Any]) -> None:
    """Check ``config`` with Serve's own schema (offline: no cluster needed).

    Raises:
        ConfigError: what Serve's schema refused.
    """
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.model_validate(dict(config))
    except ValidationError as exc:
        raise ConfigError(f"the Serve config is invalid: {exc}", field="serve_config") from exc
