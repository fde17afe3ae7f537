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

from ._capacity import check_gpu_capacity, worker_groups
from ._kube import FIELD_MANAGER, KubeRayClient
from ._ops import ScaleResult, kube_scale, kube_status, serve_scale, serve_status
from ._scaling import ScaleRequest, apply_scale, chart_values_change, load_serve_config
from ._serve_rest import ServeRestClient
from ._status import format_status

__all__ = [
    "FIELD_MANAGER",
    "KubeRayClient",
    "ScaleRequest",
    "ScaleResult",
    "ServeRestClient",
    "apply_scale",
    "chart_values_change",
    "check_gpu_capacity",
    "format_status",
    "kube_scale",
    "kube_status",
    "load_serve_config",
    "serve_scale",
    "serve_status",
    "worker_groups",
]
