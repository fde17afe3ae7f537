"""Application builders named by the Serve config's ``import_path`` (``tribunal.deploy.apps:NAME``).

Serve calls a builder with the application's ``args`` from the config:
``{"profile": "tiny", "settings": {...overrides...}}``. Each builder loads the
settings there (in the cluster, so ``TRIBUNAL_*`` variables of the Ray workers
apply too) and returns the service's application from its ``app.py``; the
gateway's is always wired with ``ray`` discovery, since inside Serve its stages
are the other applications.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ray.serve import Application

from ..core import InvalidArgumentError, Settings, load_settings

__all__ = [
    "build",
    "confidence",
    "debate",
    "ensemble",
    "entailment",
    "gateway",
    "retrieval",
    "settings_from_args",
]


def settings_from_args(args: Mapping[str, Any] | None) -> Settings:
    """The settings an application's ``args`` describe."""
    args = dict(args or {})
    overrides = args.get("settings") or {}
    if not isinstance(overrides, Mapping):
        raise InvalidArgumentError("args.settings must be a mapping", field="args.settings")
    return load_settings(args.get("profile"), **dict(overrides))


def build(app: str, settings: Settings) -> Application:
    """The application of service ``app`` (``tribunal.<app>.app:build_app``)."""
    if app == "gateway":
        settings = settings.model_copy(
            update={"gateway": settings.gateway.model_copy(update={"discovery": "ray"})}
        )
    module = importlib.import_module(f"tribunal.{app}.app")
    application: Application = module.build_app(settings)
    return application


def retrieval(args: Mapping[str, Any] | None = None) -> Application:
    return build("retrieval", settings_from_args(args))


def entailment(args: Mapping[str, Any] | None = None) -> Application:
    return build("entailment", settings_from_args(args))


def ensemble(args: Mapping[str, Any] | None = None) -> Application:
    return build("ensemble", settings_from_args(args))


def debate(args: Mapping[str, Any] | None = None) -> Application:
    return build("debate", settings_from_args(args))


def confidence(args: Mapping[str, Any] | None = None) -> Application:
    return build("confidence", settings_from_args(args))


def gateway(args: Mapping[str, Any] | None = None) -> Application:
    return build("gateway", settings_from_args(args))
