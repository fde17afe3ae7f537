"""Ray Serve deployment of the whole stack: one application per service plus the gateway.

- :func:`serve_config` writes the Serve config (``tribunal serve config``): one
  application per service, built by :mod:`tribunal.deploy.apps` from the
  profile, with each deployment's replicas, resources and batching from its
  ``DeploymentSettings``, and ``grpc_options`` listing every servicer so the
  Serve gRPC proxy can route ``tribunal.v1.*`` calls (metadata
  ``application: <name>``). :func:`validate_serve_config` checks it with
  Serve's own ``ServeDeploySchema``.
- :func:`start_local` / :func:`deploy` run it on a local single-node Ray
  (``tribunal serve deploy``, ``make serve``); :func:`replica_counts` and
  :func:`ray_memory` observe it.
- :func:`grpc_status` maps Tribunal errors to gRPC status codes inside a Serve
  deployment's proto-named methods (the proxy has no interceptors).

Importing this package does not import Ray; the functions do, when called.
"""

from ._config import (
    APPLICATIONS,
    GRPC_SERVICER_FUNCTIONS,
    serve_config,
    validate_serve_config,
)
from ._grpc import grpc_status
from ._local import (
    LocalServe,
    deploy,
    ray_memory,
    replica_counts,
    start_local,
    wait_running,
)

__all__ = [
    "APPLICATIONS",
    "GRPC_SERVICER_FUNCTIONS",
    "LocalServe",
    "deploy",
    "grpc_status",
    "ray_memory",
    "replica_counts",
    "serve_config",
    "start_local",
    "validate_serve_config",
    "wait_running",
]
