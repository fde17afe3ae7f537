"""GPU capacity of a RayService's worker groups, checked before a scale is applied.

A replica asking more GPUs than its group can ever start stays pending and leaves its
application DEPLOYING; nothing in Serve or KubeRay refuses it. So before ``tribunal ops
scale`` patches anything, the Serve config after the change is set against
``spec.rayClusterConfig.workerGroupSpecs``: each GPU application, pinned to a group by
the group's Ray custom resource (``tribunal_group_<group>``, as the chart renders it),
must fit one replica on one pod of the group, and the group's GPUs at its
``maxReplicas`` must hold every application placed on it at its largest (a fixed
``num_replicas``, or ``autoscaling_config.max_replicas``) × ``num_gpus``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import ResourceExhaustedError

__all__ = ["GroupCapacity", "check_gpu_capacity", "worker_groups"]

GROUP_RESOURCE_PREFIX = "tribunal_group_"
_GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class GroupCapacity:
    """One worker group: GPUs per pod and the most pods the autoscaler may start."""

    name: str
    gpus_per_pod: float
    max_replicas: int

    @property
    def max_gpus(self) -> float:
        return self.gpus_per_pod * self.max_replicas


def _pod_gpus(group: Mapping[str, Any]) -> float:
    params = group.get("rayStartParams") or {}
    if "num-gpus" in params:
        return float(params["num-gpus"])
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    resources = containers[0].get("resources") or {}
    limit = (resources.get("limits") or {}).get(_GPU) or (resources.get("requests") or {}).get(_GPU)
    return float(limit or 0)


def worker_groups(rayservice: Mapping[str, Any]) -> dict[str, GroupCapacity]:
    """The RayService's worker groups by name (``maxReplicas`` as KubeRay defaults it)."""
    cluster = (rayservice.get("spec") or {}).get("rayClusterConfig") or {}
    groups = {}
    for group in cluster.get("workerGroupSpecs") or []:
        name = str(group.get("groupName"))
        # KubeRay's default maxReplicas is 2**31 - 1: no ceiling.
        maximum = int(group.get("maxReplicas", 2**31 - 1))
        groups[name] = GroupCapacity(name, _pod_gpus(group), maximum)
    return groups


def _largest_count(entry: Mapping[str, Any]) -> int:
    if isinstance(entry.get("num_replicas"), int):
        return int(entry["num_replicas"])
    autoscaling = entry.get("autoscaling_config") or {}
    return int(autoscaling.get("max_replicas", 1))


def _group_of(entry: Mapping[str, Any], groups: Mapping[str, GroupCapacity]) -> str | None:
    resources = (entry.get("ray_actor_options") or {}).get("resources") or {}
    for key in resources:
        if key.startswith(GROUP_RESOURCE_PREFIX):
            wanted = key.removeprefix(GROUP_RESOURCE_PREFIX)
            for name in groups:
                if name.replace("-", "_") == wanted:
                    return name
    return None


def _demand(
    config: Mapping[str, Any], groups: Mapping[str, GroupCapacity]
) -> dict[str | None, list[tuple[str, int, float]]]:
    """Per group: (application, largest replica count, GPUs per replica) of GPU users."""
    demand: dict[str | None, list[tuple[str, int, float]]] = {}
    for app in config.get("applications") or []:
        for entry in app.get("deployments") or []:
            gpus = float((entry.get("ray_actor_options") or {}).get("num_gpus") or 0)
            if gpus > 0:
                group = _group_of(entry, groups)
                demand.setdefault(group, []).append(
                    (str(app.get("name")), _largest_count(entry), gpus)
                )
    return demand


def _pool(group_name: str | None, groups: Mapping[str, GroupCapacity]) -> GroupCapacity:
    if group_name is not None:
        return groups[group_name]
    # Not pinned to a group: any GPU group may run it.
    gpu_groups = [g for g in groups.values() if g.gpus_per_pod > 0]
    return GroupCapacity(
        "+".join(sorted(g.name for g in gpu_groups)) or "(no GPU group)",
        max((g.gpus_per_pod for g in gpu_groups), default=0.0),
        sum(g.max_replicas for g in gpu_groups),
    )


def check_gpu_capacity(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    groups: Mapping[str, GroupCapacity],
    application: str,
) -> None:
    """Refuse a scale of ``application`` that asks more GPUs than its worker group has.

    Only a change that raises a group's demand is refused (scaling down stays possible
    on a cluster already over its limit).

    Raises:
        ResourceExhaustedError: naming the group, its maximum and the largest
            replica count ``application`` can have there.
    """
    old = _demand(before, groups)
    for group_name, uses in _demand(after, groups).items():
        if not any(name == application for name, _count, _gpus in uses):
            continue
        pool = _pool(group_name, groups)
        capacity = (
            pool.max_gpus if group_name is not None else sum(g.max_gpus for g in groups.values())
        )
        for name, _count, gpus in uses:
            if name == application and gpus > pool.gpus_per_pod:
                raise ResourceExhaustedError(
                    f"{name} asks {gpus:g} GPUs per replica but a pod of worker group "
                    f"{pool.name!r} has {pool.gpus_per_pod:g}: no replica could start"
                )
        asked = sum(count * gpus for _name, count, gpus in uses)
        asked_before = sum(count * gpus for _name, count, gpus in old.get(group_name, []))
        if asked <= capacity + 1e-9 or asked <= asked_before:
            continue
        others = sum(count * gpus for name, count, gpus in uses if name != application)
        own = next(gpus for name, _count, gpus in uses if name == application)
        most = math.floor(max(capacity - others, 0.0) / own + 1e-9)
        listing = ", ".join(f"{n} {c} x {g:g}" for n, c, g in uses)
        raise ResourceExhaustedError(
            f"worker group {pool.name!r} holds at most {capacity:g} GPUs (maxReplicas "
            f"{pool.max_replicas} x {pool.gpus_per_pod:g} GPUs per pod), but its "
            f"applications could then ask for {asked:g} (replicas x GPUs: {listing}); "
            f"{application} can have at most {most} replicas there while the others keep "
            f"their maxima. Raise the group's maxReplicas first "
            f"(helm: workerGroups.{pool.name}.maxReplicas)"
        )
