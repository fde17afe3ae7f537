"""The service registry, and Ray Serve deployment of the whole stack.

- :data:`SERVICES` is the one table of Tribunal's services (:class:`ServiceSpec`:
  gRPC host factory, Serve application builder, client stub, proto service,
  default port, settings section); :data:`STAGES` names those the gateway calls.
  The CLI, the Serve config, the application builders and the gateway read it.
- :func:`serve_config` writes the Serve config (``tribunal serve config``): one
  application per service, built by :mod:`tribunal.deploy.apps` from the
  profile, with each deployment's replicas, resources and batching from its
  ``DeploymentSettings``, and ``grpc_options`` listing every servicer so the
  Serve gRPC proxy can route ``tribunal.v1.*`` calls (metadata
  ``application: <name>``). :func:`validate_serve_config` checks it with
  Serve's own ``ServeDeploySchema``.
- :func:`start_local` / :func:`deploy` run it on a local single-node Ray, started by
  :func:`start_ray_node` (patient with a busy machine)
  (``tribunal serve deploy``, ``make serve``); :func:`replica_counts` and
  :func:`ray_memory` observe it.
- :class:`ServeApp` is the base of every Serve deployment: it wraps each proto-named
  method in the credential check and the one error mapping (the proxy has no
  interceptors); :func:`serve_caller` names the caller of the call being served.
- :func:`start_local` binds Ray and Serve's gRPC proxy to 127.0.0.1 unless told
  otherwise; :func:`local_tls` makes the certificates of the proxy's mutual TLS, and
  :func:`issue_ca` / :func:`issue_certificate` those of a cluster (``tribunal tls``).

Importing this package does not import Ray; the functions do, when called.
"""

from ._config import APPLICATIONS, serve_config, validate_serve_config
from ._gathered import gathered, size_gathered
from ._grpc import ServeApp, serve_caller
from ._local import (
    deploy,
    ray_memory,
    replica_counts,
    set_ray_auth,
    start_local,
    start_ray_node,
    wait_running,
)
from ._registry import SERVICES, STAGES, ServiceSpec
from ._tls import CertificateFiles, LocalTls, issue_ca, issue_certificate, local_tls, ray_tls_env

__all__ = [
    "APPLICATIONS",
    "SERVICES",
    "STAGES",
    "CertificateFiles",
    "LocalTls",
    "ServeApp",
    "ServiceSpec",
    "deploy",
    "gathered",
    "issue_ca",
    "issue_certificate",
    "local_tls",
    "ray_memory",
    "ray_tls_env",
    "replica_counts",
    "serve_caller",
    "serve_config",
    "set_ray_auth",
    "size_gathered",
    "start_local",
    "start_ray_node",
    "validate_serve_config",
    "wait_running",
]
