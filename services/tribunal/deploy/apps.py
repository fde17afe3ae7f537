"""Application builders named by the Serve config's ``import_path`` (``tribunal.deploy.apps:NAME``).

``NAME`` is any service of the registry (:data:`tribunal.deploy.SERVICES`): this
module resolves it on attribute access, so a service added to the registry is
deployable without an entry here. Serve calls the builder with the application's
``args`` from the config: ``{"profile": "tiny", "settings": {...overrides...}}``.
The builder loads the settings there (in the cluster, so ``TRIBUNAL_*`` variables
of the Ray workers apply too) and returns the service's application from its
``app.py`` (the gateway's always uses ``ray`` discovery: inside Serve its stages
are the other applications).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ray.serve import Application

from ..core import InvalidArgumentError, Settings, load_settings
from ._registry import SERVICES, service

__all__ = ["build", "builder", "settings_from_args"]

ApplicationBuilder = Callable[[Mapping[str, Any] | None], Application]


def settings_from_args(args: Mapping[str, Any] | None) -> Settings:
    """The settings an application's ``args`` describe."""
    args = dict(args or {})
    overrides = args.get("settings") or {}
    if not isinstance(overrides, Mapping):
        raise InvalidArgumentError("args.settings must be a mapping", field="args.settings")
    return load_settings(args.get("profile"), **dict(overrides))


def build(app: str, settings: Settings) -> Application:
    """The application of service ``app`` (its registry entry's ``app_builder``)."""
    return service(app, field="app").build_app(settings)


def builder(app: str) -> ApplicationBuilder:
    """The Serve application builder of service ``app``: ``args`` in, application out."""
    service(app, field="app")  # unknown names fail here, not when Serve calls the builder

    def build_from_args(args: Mapping[str, Any] | None = None) -> Application:
        return build(app, settings_from_args(args))

    build_from_args.__name__ = build_from_args.__qualname__ = app
    return build_from_args


def __getattr__(name: str) -> ApplicationBuilder:
    # Serve resolves ``tribunal.deploy.apps:retrieval`` with getattr: every registry
    # name is a builder; anything else is the usual AttributeError.
    if name in SERVICES:
        return builder(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
