"""`tribunal ops scale` beside `helm upgrade`, GPU capacity, time limits and namespaces.

Against kmock's in-process fake Kubernetes API server (no real API server can run
here): it stores the chart's RayService and answers the official ``kubernetes``
client over real HTTP. `helm upgrade` is replayed as Helm 3 sends it for a custom
resource: a JSON merge patch from the previous release's manifest to the new one
(Helm 3 never reads the live object for a custom resource), so what the patch leaves
alone keeps its live value and what it names is overwritten.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tribunal.cli import main
from tribunal.core import ResourceExhaustedError, UnavailableError
from tribunal.ops import (
    KubeRayClient,
    ScaleRequest,
    check_gpu_capacity,
    kube_scale,
    load_serve_config,
    worker_groups,
)

kmock = pytest.importorskip("kmock")
pytest.importorskip("tribunal_lab")
from tribunal_lab.k8s_checks import render_chart  # noqa: E402

RES = "ray.io/v1/rayservices"
NAMESPACE = "tribunal"
NAME = "tribunal"


def _rendered(values: dict[str, Any] | None) -> dict[str, Any]:
    return next(d for d in render_chart(values) if d["kind"] == "RayService")


def _merge_patch(old: Any, new: Any) -> Any:
    """RFC 7386 patch from ``old`` to ``new`` (what Helm 3 sends for a custom resource)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = _merge_patch(old[key], value)
    return patch


def _with_sets(values: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """``values`` with ``--set a.b.c=V`` applied (``null`` removes the key, as Helm does)."""
    out = copy.deepcopy(values)
    for assignment in sets:
        path, _, raw = assignment.partition("=")
        *parents, leaf = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        value = yaml.safe_load(raw)
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


def _deployment(stored: dict[str, Any], app: str) -> dict[str, Any]:
    config = load_serve_config(stored["spec"]["serveConfigV2"])
    entry: dict[str, Any] = next(a for a in config["applications"] if a["name"] == app)[
        "deployments"
    ][0]
    return entry


@pytest.fixture
def cluster(kmock: Any) -> Any:
    """The fake API server with the chart's RayService as `helm install` left it."""
    kmock.resources[RES] = {"kind": "RayService", "namespaced": True}
    kmock[f"get /api/v1/namespaces/{NAMESPACE}"] << {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE},
    }
    service = _rendered(None)
    service["metadata"].update({"namespace": NAMESPACE, "resourceVersion": "1"})
    kmock.objects[RES, NAMESPACE, NAME] = service
    return kmock


def _client(server: Any) -> KubeRayClient:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = str(server.url).rstrip("/")
    return KubeRayClient(client.ApiClient(configuration))


def _kubeconfig(tmp_path: Path, server: str, namespace: str | None = None) -> str:
    context: dict[str, Any] = {"cluster": "fake", "user": "ops"}
    if namespace:
        context["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "ops", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": context}],
                "current-context": "fake",
            }
        )
    )
    return str(path)


def _helm3_upgrade(server: Any, old_values: Any, new_values: Any) -> None:
    """Send what Helm 3 sends on `helm upgrade` for the RayService (fake API server)."""
    from kubernetes import client

    patch = _merge_patch(_rendered(old_values), _rendered(new_values))
    api = client.CustomObjectsApi(_client(server)._api_client)
    api.patch_namespaced_custom_object(
        "ray.io", "v1", NAMESPACE, "rayservices", NAME, patch, field_manager="helm"
    )


@pytest.mark.asyncio
async def test_printed_values_keep_a_scale_through_helm_upgrade(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path, str(cluster.url), namespace=NAMESPACE)
    scale = ["ops", "scale", "retrieval", "--min", "2", "--max", "6", "--kubeconfig", kubeconfig]
    assert await asyncio.to_thread(main, scale) == 0
    out = capsys.readouterr().out
    assert "helm upgrade tribunal charts/tribunal -n tribunal --reuse-values" in out
    sets = [part for part in out.split() if part.startswith("serve.applications.")]
    assert sets == [
        "serve.applications.retrieval.replicas=null",
        "serve.applications.retrieval.minReplicas=2",
        "serve.applications.retrieval.maxReplicas=6",
    ]
    scaled = _deployment(dict(cluster.objects[RES, NAMESPACE, NAME]), "retrieval")
    assert scaled["autoscaling_config"]["max_replicas"] == 6

    # An unrelated values change in the next release (the gateway's batch size).
    installed: dict[str, Any] = {}
    next_release = {"serve": {"applications": {"gateway": {"maxBatchSize": 32}}}}

    # Without the printed values, the upgrade puts retrieval back to the chart's 1..4.
    await asyncio.to_thread(_helm3_upgrade, cluster, installed, next_release)
    reset = _deployment(dict(cluster.objects[RES, NAMESPACE, NAME]), "retrieval")
    assert reset["autoscaling_config"]["max_replicas"] == 4

    # Scaled again, and this time the values carry the printed change: it survives.
    assert await asyncio.to_thread(main, scale) == 0
    capsys.readouterr()
    upgraded = _with_sets(next_release, sets)
    await asyncio.to_thread(_helm3_upgrade, cluster, installed, upgraded)
    stored = dict(cluster.objects[RES, NAMESPACE, NAME])
    kept = _deployment(stored, "retrieval")
    assert (
        kept["autoscaling_config"]["min_replicas"],
        kept["autoscaling_config"]["max_replicas"],
    ) == (2, 6)
    assert _deployment(stored, "gateway")["max_ongoing_requests"] == 128
    gateway_args = next(
        a
        for a in load_serve_config(stored["spec"]["serveConfigV2"])["applications"]
        if a["name"] == "gateway"
    )["args"]
    assert gateway_args["settings"]["gateway"]["deployment"]["max_batch_size"] == 32
    # The chart rendered with the printed values is exactly what `ops scale` wrote.
    assert kept == _deployment(_rendered(_with_sets({}, sets)), "retrieval")


@pytest.mark.asyncio
async def test_fixed_replicas_map_to_the_replicas_value(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path, str(cluster.url), namespace=NAMESPACE)
    code = await asyncio.to_thread(
        main, ["ops", "scale", "debate", "--replicas", "2", "--kubeconfig", kubeconfig]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "--set serve.applications.debate.replicas=2" in out
    live = _deployment(dict(cluster.objects[RES, NAMESPACE, NAME]), "debate")
    rendered = _deployment(
        _rendered({"serve": {"applications": {"debate": {"replicas": 2}}}}), "debate"
    )
    assert live == rendered
    assert live["num_replicas"] == 2
    assert live["autoscaling_config"] is None  # overrides the code's autoscaling


@pytest.mark.asyncio
async def test_scale_beyond_the_gpu_group_is_refused_naming_it(cluster: Any) -> None:
    # The defaults: gpu group maxReplicas 8 x 1 GPU; entailment 4 x 0.5, ensemble 4 x 1,
    # debate 2 x 1 = 8. Entailment at 5 would need 8.5.
    request = ScaleRequest("entailment", max_replicas=5)
    with pytest.raises(
        ResourceExhaustedError,
        match=r"worker group 'gpu' holds at most 8 GPUs \(maxReplicas 8 x 1 GPUs per pod\).*"
        r"entailment can have at most 4 replicas",
    ):
        await asyncio.to_thread(kube_scale, _client(cluster), NAMESPACE, NAME, request)
    assert not list(cluster["patch"])
    # Within the group it passes; a CPU service is not limited by GPUs.
    for fitting in (
        ScaleRequest("entailment", max_replicas=4),
        ScaleRequest("gateway", max_replicas=40),
    ):
        await asyncio.to_thread(kube_scale, _client(cluster), NAMESPACE, NAME, fitting)


def test_capacity_rules_on_the_rendered_chart() -> None:
    service = _rendered(None)
    groups = worker_groups(service)
    assert (groups["gpu"].gpus_per_pod, groups["gpu"].max_replicas) == (1.0, 8)
    assert groups["cpu"].gpus_per_pod == 0
    config = load_serve_config(service["spec"]["serveConfigV2"])
    # A replica larger than a pod of its group never starts.
    too_big = copy.deepcopy(config)
    ensemble = next(a for a in too_big["applications"] if a["name"] == "ensemble")
    ensemble["deployments"][0]["ray_actor_options"]["num_gpus"] = 2
    with pytest.raises(ResourceExhaustedError, match="ensemble asks 2 GPUs per replica"):
        check_gpu_capacity(config, too_big, groups, "ensemble")
    # Scaling down is allowed even on a cluster already over its limit.
    over = copy.deepcopy(config)
    next(a for a in over["applications"] if a["name"] == "debate")["deployments"][0][
        "autoscaling_config"
    ]["max_replicas"] = 9
    lower = copy.deepcopy(over)
    next(a for a in lower["applications"] if a["name"] == "debate")["deployments"][0][
        "autoscaling_config"
    ]["max_replicas"] = 8
    check_gpu_capacity(over, lower, groups, "debate")


@pytest.fixture
def silent_api_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (a hung API server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in accepted:
            connection.close()


def test_a_silent_api_server_fails_within_the_request_timeout(
    silent_api_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path, silent_api_server)
    client = KubeRayClient.connect(kubeconfig=kubeconfig, request_timeout_s=1)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="did not answer within 1 s"):
        client.get_rayservice(NAMESPACE, NAME)
    # One attempt: a read that timed out is not retried.
    assert time.monotonic() - started < 5
    args = ["ops", "status", "-n", NAMESPACE, "--kubeconfig", kubeconfig, "--request-timeout", "1"]
    assert main(args) == 2
    assert "did not answer within 1 s" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_the_kubeconfig_contexts_namespace_is_used(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path, str(cluster.url), namespace=NAMESPACE)
    assert await asyncio.to_thread(main, ["ops", "status", "--kubeconfig", kubeconfig]) == 0
    assert "rayservice tribunal/tribunal" in capsys.readouterr().out
    elsewhere = _kubeconfig(tmp_path, str(cluster.url), namespace="team-b")
    assert await asyncio.to_thread(main, ["ops", "status", "--kubeconfig", elsewhere]) == 2
    assert "namespace 'team-b'" in capsys.readouterr().err
    # -n wins over the context.
    code = await asyncio.to_thread(
        main, ["ops", "status", "-n", NAMESPACE, "--kubeconfig", elsewhere]
    )
    assert code == 0
