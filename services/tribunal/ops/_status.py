"""What `tribunal ops status` reports, read from a RayService or from Serve's REST API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ._scaling import load_serve_config

__all__ = [
    "ApplicationStatus",
    "ClusterStatus",
    "DeploymentStatus",
    "format_status",
    "status_from_rayservice",
    "status_from_serve_details",
]


@dataclass(frozen=True)
class DeploymentStatus:
    """One deployment: its configured replicas and, where known, what runs."""

    name: str
    status: str = "UNKNOWN"
    message: str = ""
    min_replicas: int | None = None
    max_replicas: int | None = None
    num_replicas: int | None = None
    """A fixed count (no autoscaling)."""
    target_replicas: int | None = None
    """What Serve aims for now (REST API only)."""
    running_replicas: int | None = None
    """Replicas in state RUNNING (REST API only; the RayService status does not carry them)."""

    @property
    def configured(self) -> str:
        if self.num_replicas is not None:
            return str(self.num_replicas)
        if self.min_replicas is not None or self.max_replicas is not None:
            # Serve's defaults for a missing bound are 1.
            low = 1 if self.min_replicas is None else self.min_replicas
            high = 1 if self.max_replicas is None else self.max_replicas
            return f"{low}..{high}"
        return "-"


@dataclass(frozen=True)
class ApplicationStatus:
    name: str
    status: str = "UNKNOWN"
    message: str = ""
    deployments: list[DeploymentStatus] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterStatus:
    """The whole deployment: a RayService (Kubernetes) or a local Serve instance."""

    source: str
    """``rayservice NAMESPACE/NAME`` or ``serve http://…``."""
    status: str = "UNKNOWN"
    details: dict[str, Any] = field(default_factory=dict)
    applications: list[ApplicationStatus] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _replica_fields(entry: Mapping[str, Any]) -> dict[str, int | None]:
    autoscaling = entry.get("autoscaling_config") or {}
    fixed = entry.get("num_replicas")
    return {
        "min_replicas": autoscaling.get("min_replicas") if autoscaling else None,
        "max_replicas": autoscaling.get("max_replicas") if autoscaling else None,
        "num_replicas": fixed if isinstance(fixed, int) else None,
    }


def status_from_rayservice(obj: Mapping[str, Any]) -> ClusterStatus:
    """Configured replicas from ``spec.serveConfigV2``, health from ``status``."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    active = status.get("activeServiceStatus") or {}
    pending = status.get("pendingServiceStatus") or {}
    app_statuses: Mapping[str, Any] = active.get("applicationStatuses") or {}
    config = load_serve_config(spec.get("serveConfigV2") or "", source="spec.serveConfigV2")
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = conditions.get("Ready", {})
    cluster = active.get("rayClusterStatus") or {}
    details: dict[str, Any] = {
        "ready": ready.get("status", "Unknown"),
        "reason": ready.get("reason", ""),
        "ray_cluster": active.get("rayClusterName", ""),
        "upgrading_to": pending.get("rayClusterName", ""),
        "workers_ready": cluster.get("readyWorkerReplicas"),
        "workers_desired": cluster.get("desiredWorkerReplicas"),
        "workers_max": cluster.get("maxWorkerReplicas"),
        "desired_gpus": cluster.get("desiredGPU"),
    }
    apps = []
    for app in config["applications"]:
        name = str(app.get("name"))
        observed = app_statuses.get(name) or {}
        observed_deployments = observed.get("serveDeploymentStatuses") or {}
        deployments = [
            DeploymentStatus(
                name=str(entry.get("name")),
                status=(observed_deployments.get(entry.get("name")) or {}).get("status", "UNKNOWN"),
                message=(observed_deployments.get(entry.get("name")) or {}).get("message", ""),
                **_replica_fields(entry),
            )
            for entry in app.get("deployments") or []
        ]
        apps.append(
            ApplicationStatus(
                name=name,
                status=observed.get("status", "UNKNOWN"),
                message=observed.get("message", ""),
                deployments=deployments,
            )
        )
    overall = status.get("serviceStatus") or ("Ready" if ready.get("status") == "True" else "")
    return ClusterStatus(
        source=f"rayservice {meta.get('namespace', '')}/{meta.get('name', '')}",
        status=overall or "UNKNOWN",
        details=details,
        applications=apps,
    )


def status_from_serve_details(details: Mapping[str, Any], *, address: str) -> ClusterStatus:
    """From ``GET /api/serve/applications/`` (ServeInstanceDetails)."""
    apps = []
    for name, app in sorted((details.get("applications") or {}).items()):
        deployments = []
        for dname, dep in sorted((app.get("deployments") or {}).items()):
            config = dep.get("deployment_config") or {}
            running = sum(1 for r in dep.get("replicas") or [] if r.get("state") == "RUNNING")
            deployments.append(
                DeploymentStatus(
                    name=dname,
                    status=str(dep.get("status", "UNKNOWN")),
                    message=str(dep.get("message", "")),
                    target_replicas=dep.get("target_num_replicas"),
                    running_replicas=running,
                    **_replica_fields(config),
                )
            )
        apps.append(
            ApplicationStatus(
                name=name,
                status=str(app.get("status", "UNKNOWN")),
                message=str(app.get("message", "")),
                deployments=deployments,
            )
        )
    statuses = {a.status for a in apps}
    overall = "RUNNING" if apps and statuses == {"RUNNING"} else ",".join(sorted(statuses))
    return ClusterStatus(
        source=f"serve {address}",
        status=overall or "NO_APPLICATIONS",
        details={
            "deploy_mode": details.get("deploy_mode", ""),
            "proxies": len(details.get("proxies") or {}),
        },
        applications=apps,
    )


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_status(status: ClusterStatus) -> str:
    """A table a person reads: one line per deployment."""
    lines = [f"{status.source}: {status.status}"]
    extra = ", ".join(f"{k}={v}" for k, v in status.details.items() if v not in (None, ""))
    if extra:
        lines.append(f"  {extra}")
    header = (
        "APPLICATION",
        "STATUS",
        "DEPLOYMENT",
        "DEPL. STATUS",
        "REPLICAS",
        "TARGET",
        "RUNNING",
    )
    rows = [header]
    for app in status.applications:
        for dep in app.deployments or [DeploymentStatus(name="-")]:
            rows.append(
                (
                    app.name,
                    app.status,
                    dep.name,
                    dep.status,
                    dep.configured,
                    _cell(dep.target_replicas),
                    _cell(dep.running_replicas),
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    problems = [f"  {app.name}: {app.message}" for app in status.applications if app.message] + [
        f"  {app.name}/{dep.name}: {dep.message}"
        for app in status.applications
        for dep in app.deployments
        if dep.message
    ]
    if problems:
        lines += ["messages:", *problems]
    return "\n".join(lines)
