"""Operations: status and scaling of a running Tribunal, on Kubernetes or locally.

- On Kubernetes (KubeRay): :class:`KubeRayClient` reads the ``RayService`` and
  patches its ``spec.serveConfigV2``; :func:`kube_scale` changes the replica
  settings of one application only (``tribunal ops scale``), with a diff and a
  dry run, refusing more GPUs than the worker groups hold, and says which chart values
  make the change outlive ``helm upgrade``; :func:`kube_status` reports each
  application's health and replicas.
- Locally: the same verbs through Serve's REST API (:class:`ServeRestClient`).

The offline checks of the Helm chart and the ``k8s/`` manifests (``make k8s-check``)
live in the lab package (``python -m tribunal_lab.k8s_check``).
"""

from ._capacity import GroupCapacity, check_gpu_capacity, worker_groups
from ._kube import DEFAULT_REQUEST_TIMEOUT_S, FIELD_MANAGER, KubeRayClient
from ._ops import ScaleResult, kube_scale, kube_status, serve_scale, serve_status
from ._scaling import (
    ScaleRequest,
    apply_scale,
    chart_values_change,
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
    "DEFAULT_REQUEST_TIMEOUT_S",
    "FIELD_MANAGER",
    "ApplicationStatus",
    "ClusterStatus",
    "DeploymentStatus",
    "GroupCapacity",
    "KubeRayClient",
    "ScaleRequest",
    "ScaleResult",
    "ServeRestClient",
    "apply_scale",
    "chart_values_change",
    "check_gpu_capacity",
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
    "worker_groups",
]
