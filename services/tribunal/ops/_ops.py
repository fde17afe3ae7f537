"""`tribunal ops status|scale` on either backend: a RayService or a local Serve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import FailedPreconditionError, NotFoundError
from ._capacity import check_gpu_capacity, worker_groups
from ._kube import KubeRayClient
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
from ._status import ClusterStatus, status_from_rayservice, status_from_serve_details

__all__ = ["ScaleResult", "kube_scale", "kube_status", "serve_scale", "serve_status"]


@dataclass(frozen=True)
class ScaleResult:
    target: str
    """What was (or would be) changed: ``rayservice NS/NAME`` or ``serve ADDRESS``."""
    diff: str
    """Unified diff of the Serve config; empty when nothing changes."""
    applied: bool
    """False on a dry run or when the config already says so."""
    config: dict[str, Any]
    """The Serve config after the change."""
    values_change: tuple[str, ...] = ()
    """The chart values (``--set`` arguments) that render the same replica settings, so
    the change outlives the next ``helm upgrade``; empty off Kubernetes."""
    helm_release: str | None = None
    """The Helm release owning the RayService (its ``app.kubernetes.io/instance``), or
    None when something else (kubectl, kustomize) manages it."""


def kube_status(client: KubeRayClient, namespace: str, name: str) -> ClusterStatus:
    return status_from_rayservice(client.get_rayservice(namespace, name))


def kube_scale(
    client: KubeRayClient,
    namespace: str,
    name: str,
    request: ScaleRequest,
    *,
    dry_run: bool = False,
) -> ScaleResult:
    """Patch ``spec.serveConfigV2`` of one RayService for one application only."""
    request.validate()
    obj = client.get_rayservice(namespace, name)
    text = (obj.get("spec") or {}).get("serveConfigV2")
    if not text:
        raise FailedPreconditionError(
            f"RayService {namespace}/{name} has no spec.serveConfigV2 to scale"
        )
    before = load_serve_config(text, source="spec.serveConfigV2")
    after = apply_scale(before, request)
    validate_with_serve_schema(after)
    check_gpu_capacity(before, after, worker_groups(obj), request.application)
    target = f"rayservice {namespace}/{name}"
    diff = config_diff(before, after, label=f"{target} spec.serveConfigV2")
    applied = bool(diff) and not dry_run
    if applied:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        client.patch_serve_config(namespace, name, dump_serve_config(after), version)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    release = (
        labels.get("app.kubernetes.io/instance")
        if labels.get("app.kubernetes.io/managed-by") == "Helm"
        else None
    )
    return ScaleResult(
        target=target,
        diff=diff,
        applied=applied,
        config=after,
        values_change=chart_values_change(after, request),
        helm_release=release,
    )


def serve_status(client: ServeRestClient) -> ClusterStatus:
    return status_from_serve_details(client.details(), address=client.address)


def serve_scale(
    client: ServeRestClient, request: ScaleRequest, *, dry_run: bool = False
) -> ScaleResult:
    """Re-apply the running config through Serve's REST API with one application scaled."""
    request.validate()
    details = client.details()
    apps = details.get("applications") or {}
    if request.application not in apps:
        known = ", ".join(sorted(apps)) or "none"
        raise NotFoundError(
            f"no application {request.application!r} in Ray Serve at {client.address} "
            f"(applications: {known})"
        )
    if not apps[request.application].get("deployed_app_config"):
        raise FailedPreconditionError(
            f"application {request.application!r} was started with serve.run (imperatively); "
            "only applications deployed from a config (serve deploy, the REST API, "
            "tribunal serve deploy) can be scaled through the REST API"
        )
    before = config_from_details(details)
    after = apply_scale(
        before, request, deployment_names=sorted(apps[request.application].get("deployments") or {})
    )
    validate_with_serve_schema(after)
    target = f"serve {client.address}"
    diff = config_diff(before, after, label=f"{target} config")
    applied = bool(diff) and not dry_run
    if applied:
        client.apply(after)
    return ScaleResult(target=target, diff=diff, applied=applied, config=after)
