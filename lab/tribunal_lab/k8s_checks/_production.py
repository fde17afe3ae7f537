"""What a real cluster would break that a schema cannot see: one check each.

- :func:`check_kuberay_requirement`: KubeRay >= 1.6 stated (Chart.yaml, values, docs)
  and enforced by the render (a lower ``kuberay.version``, or a live cluster whose CRDs
  predate 1.6);
- :func:`check_metrics_export`: the dashboard reads only series Ray exports: Serve's
  own and Tribunal's as ``ray.serve.metrics`` makes them inside replicas;
- :func:`check_scale_survives_upgrade`: ``tribunal ops scale`` writes as field manager
  ``tribunal-ops`` and prints chart values that render exactly what it wrote;
- :func:`check_gpu_capacity_guards`: the render and ``ops scale`` refuse GPU demand a
  worker group cannot meet, naming the group;
- :func:`check_rollouts`: settings checksums on every Ray pod template, the upgrade
  strategy exposed, its GPU cost documented;
- :func:`check_operations_details`: ops request time limits and the context's
  namespace, h2c on the gRPC port, DCGM frame-buffer use, the model volume and the
  hub token.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from ._common import CheckFailedError, render_against
from ._dashboard import dashboard_queries, queried_series
from ._manifests import CHART, REPO, render_chart

__all__ = [
    "KUBERAY_MINIMUM",
    "check_gpu_capacity_guards",
    "check_kuberay_requirement",
    "check_metrics_export",
    "check_operations_details",
    "check_rollouts",
    "check_scale_survives_upgrade",
]

KUBERAY_MINIMUM = "1.6.0"
OPERATIONS_DOC = REPO / "docs" / "operations.md"
_APPS = ("retrieval", "entailment", "ensemble", "debate", "confidence", "gateway")


def _rayservice(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "RayService")


def _render_fails(values: dict[str, Any], expected: str, **kwargs: Any) -> None:
    import helm_python as helm

    try:
        if kwargs:
            render_against(values, **kwargs)
        else:
            render_chart(values)
    except helm.HelmError as exc:
        if expected not in str(exc):
            raise CheckFailedError(f"render failed, but not with {expected!r}: {exc}") from exc
        return
    raise CheckFailedError(f"rendered although it must fail with {expected!r} ({values})")


def _doc_text() -> str:
    if not OPERATIONS_DOC.is_file():
        raise CheckFailedError(f"{OPERATIONS_DOC.relative_to(REPO)} is missing")
    return OPERATIONS_DOC.read_text(encoding="utf-8")


def check_kuberay_requirement() -> list[str]:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    stated = (chart.get("annotations") or {}).get("tribunal.dev/kuberay-version", "")
    if stated != f">={KUBERAY_MINIMUM}":
        raise CheckFailedError(
            f"Chart.yaml: annotations.tribunal.dev/kuberay-version is {stated!r}, "
            f"expected '>={KUBERAY_MINIMUM}'"
        )
    if "KubeRay ≥ 1.6" not in _doc_text() and "KubeRay >= 1.6" not in _doc_text():
        raise CheckFailedError("docs/operations.md does not state the KubeRay minimum (1.6)")
    _render_fails({"kuberay": {"version": "1.5.2"}}, "needs the KubeRay operator >= 1.6.0")
    _render_fails({}, "older than 1.6.0", api_versions=["ray.io/v1/RayService", "ray.io/v1/RayJob"])
    served = ["ray.io/v1/RayService", "ray.io/v1/RayCronJob"]
    _rayservice(render_against(None, api_versions=served))
    return [
        f"Chart.yaml and docs/operations.md state KubeRay >={KUBERAY_MINIMUM}; the render "
        "fails for kuberay.version 1.5.2 and for a cluster serving RayService without "
        "RayCronJob (CRDs older than 1.6), passes with both"
    ]


def check_metrics_export() -> list[str]:
    import importlib.util

    from tribunal.core.server import METRICS, Metric
    from tribunal.gateway import _metrics as gateway_metrics

    series, problems = queried_series(dashboard_queries())
    ray_names = {n for m in METRICS.values() for n in m.exported_ray_names}
    spec = importlib.util.find_spec("ray.serve")
    serve_source = ""
    if spec and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations)))
        serve_source = "\n".join(
            p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*.py")
        )
    for name, use in sorted(series.items()):
        where = ", ".join(sorted(use.where))
        if name.startswith("ray_tribunal_"):
            if name not in ray_names:
                problems.append(
                    f"{where}: {name} is not what Ray exports for any Tribunal metric "
                    f"(known: {', '.join(sorted(ray_names))})"
                )
        elif name.startswith("ray_serve_"):
            base = re.sub(r"_(total|bucket|sum|count)$", "", name.removeprefix("ray_"))
            if f'"{base}"' not in serve_source:
                problems.append(f"{where}: {name}: Ray Serve records no metric {base!r}")
        elif not name.startswith("DCGM_FI_"):
            problems.append(
                f"{where}: {name} is neither a Ray export (ray_*) nor a DCGM field; "
                "a prometheus_client metric inside a Serve replica is never exported"
            )
    for metric in (gateway_metrics.DECISIONS, gateway_metrics.STAGE_LATENCY):
        if not isinstance(metric, Metric):
            problems.append(
                f"tribunal.gateway._metrics: {type(metric).__name__} is not "
                "tribunal.core.server.Metric: its series would stay inside the replica"
            )
    direct = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "services" / "tribunal").rglob("*.py")
        if "prometheus_client" in path.read_text(encoding="utf-8") and path.name != "_metrics.py"
    )
    if direct:
        problems.append(
            "prometheus_client used outside tribunal.core.server._metrics (not exported "
            f"from Serve replicas): {', '.join(direct)}"
        )
    if problems:
        raise CheckFailedError("\n".join(problems))
    tribunal = sorted(n for n in series if n.startswith("ray_tribunal_"))
    return [
        f"dashboard: {len(series)} series, each named as exported "
        f"({len(tribunal)} Tribunal series via ray.serve.metrics: {', '.join(tribunal)}; "
        "the live export is tests/integration/test_metrics_ray.py)"
    ]


def check_scale_survives_upgrade() -> list[str]:
    import helm_python as helm
    from tribunal.ops import (
        FIELD_MANAGER,
        KubeRayClient,
        ScaleRequest,
        apply_scale,
        chart_values_change,
        load_serve_config,
    )

    config = load_serve_config(_rayservice(render_chart(None))["spec"]["serveConfigV2"])
    checked = 0
    for app in _APPS:
        for request in (
            # Within the default GPU group, so the render's capacity check passes.
            ScaleRequest(app, min_replicas=2, max_replicas=2),
            ScaleRequest(app, replicas=1),
        ):
            scaled = apply_scale(config, request)
            sets = chart_values_change(scaled, request)
            values: dict[str, Any] = {}
            for assignment in sets:
                path, _, raw = assignment.partition("=")
                *parents, leaf = path.split(".")
                node = values
                for part in parents:
                    node = node.setdefault(part, {})
                if yaml.safe_load(raw) is not None:
                    node[leaf] = yaml.safe_load(raw)
            try:
                service = _rayservice(render_chart(values))
            except helm.HelmError as exc:
                raise CheckFailedError(
                    f"ops scale {app}: the printed values {list(sets)} do not render: {exc}"
                ) from exc
            rendered = load_serve_config(service["spec"]["serveConfigV2"])
            if rendered != scaled:
                raise CheckFailedError(
                    f"ops scale {app} ({request}): the printed values {list(sets)} render a "
                    "different serveConfigV2 than the scale wrote; the next helm upgrade "
                    "would undo it"
                )
            checked += 1

    class _RecordingCustomObjects:
        """A stand-in for the kubernetes client's CustomObjectsApi (records the call)."""

        def __init__(self) -> None:
            self.kwargs: dict[str, Any] = {}

        def patch_namespaced_custom_object(self, **kwargs: Any) -> dict[str, Any]:
            self.kwargs = kwargs
            return {}

    from kubernetes import client

    kube = KubeRayClient(client.ApiClient(client.Configuration()))
    recorder = _RecordingCustomObjects()
    kube._custom = recorder  # type: ignore[assignment]
    kube.patch_serve_config("ns", "name", "applications: []\n", "1")
    if recorder.kwargs.get("field_manager") != FIELD_MANAGER:
        raise CheckFailedError(
            "KubeRayClient.patch_serve_config sends no field manager: the change is "
            "anonymous in managedFields and a server-side-apply upgrade overwrites it unseen"
        )
    return [
        f"{checked} scales (autoscaling range and fixed count, each service): the printed "
        "--set values render the serveConfigV2 the scale wrote; patches carry field "
        f"manager {FIELD_MANAGER!r} (replayed against a fake API server in "
        "tests/unit/test_ops_kube_upgrade.py)"
    ]


def check_gpu_capacity_guards() -> list[str]:
    from tribunal.core import ResourceExhaustedError
    from tribunal.ops import (
        ScaleRequest,
        apply_scale,
        check_gpu_capacity,
        load_serve_config,
        worker_groups,
    )

    _render_fails(
        {"serve": {"applications": {"ensemble": {"numGpus": 2}}}},
        "serve.applications.ensemble.numGpus (2) exceeds workerGroups.gpu.gpus (1)",
    )
    _render_fails(
        {"workerGroups": {"gpu": {"maxReplicas": 4}}},
        "workerGroups.gpu holds 4 GPUs at most (maxReplicas 4 x gpus 1) but its "
        "applications can ask for 8",
    )
    service = _rayservice(render_chart(None))
    groups = worker_groups(service)
    config = load_serve_config(service["spec"]["serveConfigV2"])
    scaled = apply_scale(config, ScaleRequest("ensemble", max_replicas=100))
    try:
        check_gpu_capacity(config, scaled, groups, "ensemble")
    except ResourceExhaustedError as exc:
        if "worker group 'gpu' holds at most" not in str(exc):
            raise CheckFailedError(f"ops scale refused without naming the group: {exc}") from exc
    else:
        raise CheckFailedError("ops scale accepted ensemble at 100 replicas on an 8-GPU group")
    return [
        "render fails for numGpus above a pod's GPUs and for applications' maxima above the "
        "group's maxReplicas x gpus; ops scale refuses beyond the group's maximum, naming it"
    ]


def _pod_templates(service: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    cluster = service["spec"]["rayClusterConfig"]
    return [("head", cluster["headGroupSpec"]["template"])] + [
        (g["groupName"], g["template"]) for g in cluster.get("workerGroupSpecs", [])
    ]


def check_rollouts() -> list[str]:
    base = _rayservice(render_chart({"secrets": {"authToken": "a"}}))
    changed = _rayservice(
        render_chart({"secrets": {"authToken": "b"}, "settings": {"TRIBUNAL_LOG_LEVEL": "DEBUG"}})
    )
    for (group, template), (_, other) in zip(
        _pod_templates(base), _pod_templates(changed), strict=True
    ):
        annotations = template.get("metadata", {}).get("annotations") or {}
        new = other.get("metadata", {}).get("annotations") or {}
        for key in ("checksum/settings", "checksum/secret"):
            if key not in annotations:
                raise CheckFailedError(
                    f"RayService pod template {group}: no {key} annotation: a changed "
                    "ConfigMap/Secret would never reach the pods"
                )
            if annotations[key] == new[key]:
                raise CheckFailedError(f"pod template {group}: {key} ignores a changed value")
    strategy = base["spec"].get("upgradeStrategy", {}).get("type")
    if strategy != "NewCluster":
        raise CheckFailedError(f"spec.upgradeStrategy.type is {strategy!r}, expected the value")
    none = _rayservice(render_chart({"upgradeStrategy": {"type": "None"}}))
    if none["spec"]["upgradeStrategy"]["type"] != "None":
        raise CheckFailedError("values upgradeStrategy.type does not reach the RayService")
    doc = _doc_text()
    if not re.search(r"NewCluster.{0,400}GPU", doc, re.DOTALL):
        raise CheckFailedError("docs/operations.md does not give the GPU cost of NewCluster")
    return [
        "checksum/settings and checksum/secret on the head and every worker group (they "
        "change with the data); upgradeStrategy from values; GPU cost in docs/operations.md"
    ]


def _ops_client_problems() -> list[str]:
    """Time limits and the context's namespace, on the client `tribunal ops` builds."""
    import tempfile

    from tribunal.ops import KubeRayClient

    class _Recording:
        """Stands in for the kubernetes client's CustomObjectsApi (records the call)."""

        def __init__(self) -> None:
            self.kwargs: dict[str, Any] = {}

        def get_namespaced_custom_object(self, **kwargs: Any) -> dict[str, Any]:
            self.kwargs = kwargs
            return {}

    problems = []
    with tempfile.TemporaryDirectory() as folder:
        kubeconfig = Path(folder) / "kubeconfig"
        context = {"cluster": "c", "user": "u", "namespace": "team-a"}
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": context}],
                    "current-context": "c",
                }
            )
        )
        client = KubeRayClient.connect(kubeconfig=str(kubeconfig), request_timeout_s=7)
    if client.namespace != "team-a":
        problems.append("tribunal ops ignores the kubeconfig context's namespace")
    retries = client._api_client.configuration.retries
    if getattr(retries, "read", None) != 0:
        problems.append("tribunal ops retries a read that timed out (the wait multiplies)")
    recorder = _Recording()
    client._custom = recorder  # type: ignore[assignment]
    client.get_rayservice("ns", "name")
    if recorder.kwargs.get("_request_timeout") != (7, 7):
        problems.append("tribunal ops calls the API without its --request-timeout")
    client.close()
    return problems


def check_operations_details() -> list[str]:
    problems = []
    # Plaintext gRPC (tls.mode off) is h2c for L7 proxies; over TLS (the default) the
    # port must not claim cleartext.
    for values, wanted in ((None, None), ({"tls": {"mode": "off"}}, "kubernetes.io/h2c")):
        service = _rayservice(render_chart(values))
        ports = {p["name"]: p for p in service["spec"]["serveService"]["spec"]["ports"]}
        protocol = ports.get("serve-grpc", {}).get("appProtocol")
        if protocol != wanted:
            problems.append(
                f"serveService port serve-grpc: appProtocol is not {wanted or 'absent'} "
                f"with tls {'off' if values else 'on'} ({protocol})"
            )
    if "client-side" not in _doc_text() or "round_robin" not in _doc_text():
        problems.append("docs/operations.md has no note on client-side gRPC balancing")
    series, _ = queried_series(dashboard_queries())
    if "DCGM_FI_DEV_FB_USED" not in series:
        problems.append("the GPU panel does not show frame-buffer use (DCGM_FI_DEV_FB_USED)")
    model_values: dict[str, Any] = {
        "models": {
            "persistence": {"enabled": True},
            "offline": True,
            "hubToken": {"existingSecret": "hf", "key": "HF_TOKEN"},
        }
    }
    docs = render_chart(copy.deepcopy(model_values))
    claims = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    stored = _rayservice(docs)
    for group, template in _pod_templates(stored):
        volume = next(v for v in template["spec"]["volumes"] if v["name"] == "models")
        if "persistentVolumeClaim" not in volume:
            problems.append(f"pod template {group}: models.persistence does not mount a claim")
        env = template["spec"]["containers"][0].get("env") or []
        if not any(e["name"] == "HF_TOKEN" and "secretKeyRef" in e["valueFrom"] for e in env):
            problems.append(f"pod template {group}: no HF_TOKEN from models.hubToken's Secret")
    if len(claims) != 1:
        problems.append("models.persistence.enabled renders no PersistentVolumeClaim")
    else:
        import kubernetes_validate
        from kubernetes_validate.utils import ValidationError

        try:
            kubernetes_validate.validate(claims[0], "1.33", strict=True)
        except ValidationError as exc:
            problems.append(f"the model PersistentVolumeClaim is invalid: {exc.message}")
    settings = next(
        d for d in docs if d["kind"] == "ConfigMap" and "settings" in d["metadata"]["name"]
    )
    if settings["data"].get("HF_HUB_OFFLINE") != "1":
        problems.append("models.offline does not set HF_HUB_OFFLINE=1")
    problems += _ops_client_problems()
    if problems:
        raise CheckFailedError("\n".join(problems))
    return [
        "serve-grpc over TLS by default, appProtocol kubernetes.io/h2c with tls off (+ balancing "
        "note); GPU panel reads "
        "DCGM_FI_DEV_FB_USED; models.persistence mounts a claim, models.hubToken gives "
        "HF_TOKEN, models.offline sets HF_HUB_OFFLINE; ops calls time-limited, context "
        "namespace honoured (tests/unit/test_ops_kube_upgrade.py runs both)"
    ]
