"""The services Tribunal runs, in one table.

Everything that starts, deploys or calls a service reads :data:`SERVICES`:
``tribunal serve NAME`` (the gRPC host factory and default ports), the Serve
config and its application builders (``tribunal serve config``,
``tribunal.deploy.apps:NAME``, the gRPC proxy's servicer functions), and the
gateway (which services are its stages, their stubs for ``grpc`` discovery, the
in-process stage host, Serve application names for ``ray`` discovery).

A service's name is also its settings section (``settings.<name>``, whose
``deployment`` holds its Serve options), its Serve application's name and, for
a stage, the name the gateway's settings use (``gateway.addresses``,
``gateway.stage_timeout_s``). Factories are named ``"module:function"`` and
imported only when used: this module imports no model code, grpc or Ray.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..core import ConfigError

if TYPE_CHECKING:
    from ray.serve import Application

    from ..core import DeploymentSettings, Settings
    from ..core.server import ServiceHost

__all__ = ["SERVICES", "STAGES", "ServiceSpec", "service"]

_PROTO_PACKAGE = "tribunal.v1"


@dataclass(frozen=True)
class ServiceSpec:
    """One service: how to host it, deploy it, call it and configure it."""

    name: str
    """Service name = settings section = Serve application name = gateway stage name."""
    proto: str
    """Proto file stem under ``tribunal/v1`` (``retrieval`` → ``retrieval_pb2_grpc``)."""
    proto_service: str
    """Service name in the proto (``RetrievalService``)."""
    host_factory: str
    """``"module:function"``: ``function(settings, **options) -> ServiceHost`` (not started)."""
    app_builder: str
    """``"module:function"``: ``function(settings) -> ray.serve.Application``."""
    port: int
    """gRPC port of ``tribunal serve NAME`` when neither ``--port`` nor ``server.port`` says."""
    metrics_port: int
    """Its ``/metrics`` port likewise (``--metrics-port``, ``server.metrics_port``)."""
    stage: bool
    """The gateway calls it (every service but the gateway itself)."""

    @property
    def full_proto_service(self) -> str:
        """``tribunal.v1.RetrievalService``: what gRPC routes on and health reports."""
        return f"{_PROTO_PACKAGE}.{self.proto_service}"

    @property
    def grpc_module(self) -> str:
        return f"{_PROTO_PACKAGE}.{self.proto}_pb2_grpc"

    @property
    def servicer_function(self) -> str:
        """Dotted path of the function Serve's gRPC proxy registers this service with:
        ``tribunal.deploy.proxy.<name>``, the proto's methods with tolerant request
        decoding (:mod:`tribunal.deploy._proxy`), not the generated
        ``add_<Service>Servicer_to_server``."""
        return f"tribunal.deploy.proxy.{self.name}"

    def stub(self, channel: Any) -> Any:
        """The generated client stub of this service on ``channel``."""
        module = importlib.import_module(self.grpc_module)
        return getattr(module, f"{self.proto_service}Stub")(channel)

    def build_host(self, settings: Settings, **options: Any) -> ServiceHost:
        """The service's gRPC ServiceHost (not started); ``options`` are the factory's own
        keyword arguments (the ensemble's ``serve_match=False`` for label jobs)."""
        host: ServiceHost = _resolve(self.host_factory)(settings, **options)
        return host

    def build_app(self, settings: Settings) -> Application:
        """The service's Ray Serve application, options from its ``deployment`` settings."""
        app: Application = _resolve(self.app_builder)(settings)
        return app

    def settings_section(self, settings: Settings) -> BaseModel:
        """``settings.<name>``."""
        section: BaseModel = getattr(settings, self.name)
        return section

    def deployment(self, settings: Settings) -> DeploymentSettings:
        """The Serve deployment options of this service (``settings.<name>.deployment``)."""
        section: Any = self.settings_section(settings)
        options: DeploymentSettings = section.deployment
        return options


def _resolve(path: str) -> Any:
    module, _, function = path.partition(":")
    return getattr(importlib.import_module(module), function)


def _spec(
    name: str, proto_service: str, port: int, metrics_port: int, *, stage: bool = True
) -> ServiceSpec:
    # Every service follows one layout: tribunal/<name>/servicer.py:build_host for the
    # gRPC host, tribunal/<name>/app.py:build_app for Serve, tribunal/v1/<name>.proto.
    return ServiceSpec(
        name=name,
        proto=name,
        proto_service=proto_service,
        host_factory=f"tribunal.{name}.servicer:build_host",
        app_builder=f"tribunal.{name}.app:build_app",
        port=port,
        metrics_port=metrics_port,
        stage=stage,
    )


# Deployment order: stages first, the gateway last (it resolves its stage handles on
# first use, but a Serve config that lists them first brings them up first).
SERVICES: Mapping[str, ServiceSpec] = {
    spec.name: spec
    for spec in (
        _spec("retrieval", "RetrievalService", 50052, 9465),
        _spec("entailment", "EntailmentService", 50053, 9466),
        _spec("ensemble", "EnsembleService", 50054, 9467),
        _spec("debate", "DebateService", 50056, 9469),
        _spec("confidence", "ConfidenceService", 50055, 9468),
        _spec("gateway", "GatewayService", 50051, 9464, stage=False),
    )
}
"""Every service by name, in deployment order."""

STAGES: tuple[str, ...] = tuple(name for name, spec in SERVICES.items() if spec.stage)
"""The services the gateway calls."""


def service(name: str, *, field: str = "service") -> ServiceSpec:
    """The registry entry of ``name``.

    Raises:
        ConfigError: ``name`` is not a Tribunal service (the message lists them).
    """
    spec = SERVICES.get(name)
    if spec is None:
        raise ConfigError(
            f"{name!r} is not a Tribunal service; known: {', '.join(SERVICES)}", field=field
        )
    return spec
