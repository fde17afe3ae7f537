"""The parts of the offline Kubernetes checks (``python -m tribunal_lab.k8s_check``)."""

from ._common import CheckFailedError, render_against
from ._dashboard import (
    DASHBOARD,
    PROMETHEUS_TARGET_LABELS,
    Query,
    dashboard_queries,
    queried_series,
)
from ._images import (
    KUBERAY_SOURCE,
    TORCH_CUDA,
    WORKER_READINESS_PROBE,
    DockerImage,
    check_gpu_stack,
    check_probe_tools,
    parse_dockerfile,
    probe_programs,
)
from ._manifests import (
    CHART,
    K8S,
    OVERLAYS,
    RELEASE,
    REPO,
    ValuesSet,
    expected_overlay,
    generate_k8s,
    load_values,
    plain,
    render_chart,
    resource_key,
)
from ._production import (
    KUBERAY_MINIMUM,
    check_gpu_capacity_guards,
    check_kuberay_requirement,
    check_metrics_export,
    check_operations_details,
    check_rollouts,
    check_scale_survives_upgrade,
)

PRODUCTION_CHECKS = (
    ("worker readiness: the probe's programs in the images", check_probe_tools),
    ("KubeRay >= 1.6 stated and enforced", check_kuberay_requirement),
    ("dashboard series exported from Serve replicas", check_metrics_export),
    ("one FAISS per image, GPU image on torch's CUDA", check_gpu_stack),
    ("ops scale outlives helm upgrade", check_scale_survives_upgrade),
    ("GPU capacity of the worker groups", check_gpu_capacity_guards),
    ("config checksums and the upgrade strategy", check_rollouts),
    ("time limits, namespace, h2c, DCGM, model volume, hub token", check_operations_details),
)
"""One check per production defect the schemas cannot see, in `make k8s-check`."""

__all__ = [
    "CHART",
    "DASHBOARD",
    "K8S",
    "KUBERAY_MINIMUM",
    "KUBERAY_SOURCE",
    "OVERLAYS",
    "PRODUCTION_CHECKS",
    "PROMETHEUS_TARGET_LABELS",
    "RELEASE",
    "REPO",
    "TORCH_CUDA",
    "WORKER_READINESS_PROBE",
    "CheckFailedError",
    "DockerImage",
    "Query",
    "ValuesSet",
    "check_gpu_capacity_guards",
    "check_gpu_stack",
    "check_kuberay_requirement",
    "check_metrics_export",
    "check_operations_details",
    "check_probe_tools",
    "check_rollouts",
    "check_scale_survives_upgrade",
    "dashboard_queries",
    "expected_overlay",
    "generate_k8s",
    "load_values",
    "parse_dockerfile",
    "plain",
    "probe_programs",
    "queried_series",
    "render_against",
    "render_chart",
    "resource_key",
]
