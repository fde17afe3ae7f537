"""Operations: status and scaling of a running Tribunal, on Kubernetes or locally.

- On Kubernetes (KubeRay): :class:`KubeRayClient` reads the ``RayService`` and
  patches its ``spec.serveConfigV2``; :func:`kube_scale` changes the replica
  settings of one application only (``tribunal ops scale``), with a diff and a
  dry run; :func:`kube_status` reports each application's health and replicas.
- Locally: the same verbs through Serve's REST API (:class:`ServeRestClient`).
- :mod:`tribunal.ops.k8s_check` validates the Helm chart and the ``k8s/``
  manifests offline (``make k8s-check``); it needs the dev extra.
"""

from ._kube import KubeRayClient
from ._ops import ScaleResult, kube_scale, kube_status, serve_scale, serve_status
from ._scaling import (
    ScaleRequest,
    apply_scale,
    config_diff,
    dump_serve_config,
    load_serve_config,
    validate_with_serve_schema,
)
from ._serve_rest import ServeRestClient, config_from_details
from ._status import (
    ApplicationStatus,
    ClusterStatus,
    DeploymentStatus,
    format_status,
    status_from_rayservice,
    status_from_serve_details,
)

__all__ = [
    "ApplicationStatus",
    "ClusterStatus",
    "DeploymentStatus",
    "KubeRayClient",
    "ScaleRequest",
    "ScaleResult",
    "ServeRestClient",
    "apply_scale",
    "config_diff",
    "config_from_details",
    "dump_serve_config",
    "format_status",
    "kube_scale",
    "kube_status",
    "load_serve_config",
    "serve_scale",
    "serve_status",
    "status_from_rayservice",
    "status_from_serve_details",
    "validate_with_serve_schema",
]
