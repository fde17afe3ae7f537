"""`tribunal ops` against an in-process fake Kubernetes API server (kmock).

No real API server can run on these machines: kmock's KubernetesEmulator serves
the RayService (our chart's, rendered) over real HTTP, and the official
``kubernetes`` client talks to it exactly as it would to a cluster. The sync
client runs in a thread so the server's event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from tribunal.cli import main
from tribunal.core import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tribunal.ops import (
    FIELD_MANAGER,
    KubeRayClient,
    ScaleRequest,
    format_status,
    kube_scale,
    kube_status,
    load_serve_config,
)
from tribunal_lab.k8s_checks import render_chart

kmock = pytest.importorskip("kmock")

RES = "ray.io/v1/rayservices"
NAMESPACE = "tribunal"
NAME = "tribunal"
APPS = ("retrieval", "entailment", "ensemble", "debate", "confidence", "gateway")


def _chart_rayservice() -> dict[str, Any]:
    docs = render_chart(None)
    service = next(d for d in docs if d["kind"] == "RayService")
    service["metadata"].update({"namespace": NAMESPACE, "resourceVersion": "7"})
    # What the operator reports once every application runs.
    service["status"] = {
        "serviceStatus": "Running",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "NonZeroServeEndpoints",
                "message": "",
                "lastTransitionTime": "2026-11-30T03:00:00Z",
            }
        ],
        "activeServiceStatus": {
            "rayClusterName": "tribunal-raycluster-x7k2p",
            "rayClusterStatus": {"readyWorkerReplicas": 2, "desiredWorkerReplicas": 2},
            "applicationStatuses": {
                app: {
                    "status": "RUNNING" if app != "debate" else "DEPLOYING",
                    "serveDeploymentStatuses": {
                        app: {"status": "HEALTHY" if app != "debate" else "UPDATING"}
                    },
                }
                for app in APPS
            },
        },
    }
    return service


@pytest.fixture
def cluster(kmock: Any) -> Any:
    """The fake API server holding namespace `tribunal` and the chart's RayService."""
    kmock.resources[RES] = {"kind": "RayService", "namespaced": True}
    kmock.resources["v1/namespaces"] = {"kind": "Namespace", "namespaced": False}
    # kmock reads /api/v1/namespaces/NAME as a namespace prefix, so the Namespace is a
    # reaction; other namespaces fall through to the emulator's 404.
    kmock[f"get /api/v1/namespaces/{NAMESPACE}"] << {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE},
    }
    kmock.objects[RES, NAMESPACE, NAME] = _chart_rayservice()
    return kmock


def _client(server: Any) -> KubeRayClient:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = str(server.url).rstrip("/")
    return KubeRayClient(client.ApiClient(configuration))


def _stored(server: Any) -> dict[str, Any]:
    stored: dict[str, Any] = copy.deepcopy(dict(server.objects[RES, NAMESPACE, NAME]))
    return stored


@pytest.mark.asyncio
async def test_status_reads_the_rayservice_and_every_application(cluster: Any) -> None:
    status = await asyncio.to_thread(kube_status, _client(cluster), NAMESPACE, NAME)

    assert status.source == "rayservice tribunal/tribunal"
    assert status.status == "Running"
    assert status.details["ready"] == "True"
    assert status.details["workers_ready"] == 2
    by_name = {a.name: a for a in status.applications}
    assert sorted(by_name) == sorted(APPS)
    assert by_name["debate"].status == "DEPLOYING"
    assert by_name["debate"].deployments[0].status == "UPDATING"
    # Configured ranges come from the chart's default values.
    entailment = by_name["entailment"].deployments[0]
    assert (entailment.min_replicas, entailment.max_replicas) == (1, 4)
    table = format_status(status)
    assert "entailment" in table
    assert "1..4" in table
    assert "DEPLOYING" in table


@pytest.mark.asyncio
async def test_scale_patches_only_the_named_service(cluster: Any) -> None:
    before = _stored(cluster)
    request = ScaleRequest("retrieval", min_replicas=2, max_replicas=8)

    result = await asyncio.to_thread(kube_scale, _client(cluster), NAMESPACE, NAME, request)

    assert result.applied
    assert "-      max_replicas: 4" in result.diff
    assert "+      max_replicas: 8" in result.diff
    after = _stored(cluster)
    # The PATCH the server received: spec.serveConfigV2 alone, guarded by resourceVersion,
    # a JSON merge patch by the field manager tribunal-ops.
    patches = list(cluster["patch"])
    assert len(patches) == 1
    assert set(patches[0].data) == {"spec", "metadata"}
    assert set(patches[0].data["spec"]) == {"serveConfigV2"}
    assert patches[0].data["metadata"] == {"resourceVersion": "7"}
    assert patches[0].params.get("fieldManager") == FIELD_MANAGER == "tribunal-ops"
    assert patches[0].headers.get("Content-Type") == "application/merge-patch+json"
    # Everything but serveConfigV2 is as it was.
    old_config = load_serve_config(before["spec"].pop("serveConfigV2"))
    new_config = load_serve_config(after["spec"].pop("serveConfigV2"))
    assert after["spec"] == before["spec"]
    assert after["status"] == before["status"]
    # Inside it, only retrieval's autoscaling range changed.
    old_apps = {a["name"]: a for a in old_config.pop("applications")}
    new_apps = {a["name"]: a for a in new_config.pop("applications")}
    assert new_config == old_config
    for app in APPS:
        if app != "retrieval":
            assert new_apps[app] == old_apps[app], app
    old_entry = old_apps["retrieval"]["deployments"][0]
    new_entry = new_apps["retrieval"]["deployments"][0]
    assert new_entry["autoscaling_config"] == {
        **old_entry["autoscaling_config"],
        "min_replicas": 2,
        "max_replicas": 8,
    }
    assert {k: v for k, v in new_entry.items() if k != "autoscaling_config"} == {
        k: v for k, v in old_entry.items() if k != "autoscaling_config"
    }
    assert new_apps["retrieval"]["args"] == old_apps["retrieval"]["args"]


@pytest.mark.asyncio
async def test_fixed_replicas_replace_autoscaling(cluster: Any) -> None:
    request = ScaleRequest("debate", replicas=2)
    await asyncio.to_thread(kube_scale, _client(cluster), NAMESPACE, NAME, request)

    config = load_serve_config(_stored(cluster)["spec"]["serveConfigV2"])
    entry = next(a for a in config["applications"] if a["name"] == "debate")["deployments"][0]
    assert entry["num_replicas"] == 2
    # null, not absent: the application's code sets autoscaling, which would otherwise win
    assert entry["autoscaling_config"] is None


@pytest.mark.asyncio
async def test_dry_run_changes_nothing(cluster: Any) -> None:
    before = _stored(cluster)
    request = ScaleRequest("gateway", max_replicas=10)
    result = await asyncio.to_thread(
        kube_scale, _client(cluster), NAMESPACE, NAME, request, dry_run=True
    )
    assert not result.applied
    assert "+      max_replicas: 10" in result.diff
    assert not list(cluster["patch"])
    assert _stored(cluster) == before


@pytest.mark.asyncio
async def test_missing_rayservice_names_what_exists(cluster: Any) -> None:
    with pytest.raises(
        NotFoundError, match=r"no RayService 'tribunl'.*RayServices there: tribunal"
    ):
        await asyncio.to_thread(kube_status, _client(cluster), NAMESPACE, "tribunl")


@pytest.mark.asyncio
async def test_missing_namespace_is_named(cluster: Any) -> None:
    with pytest.raises(NotFoundError, match="namespace 'tribnal' does not exist"):
        await asyncio.to_thread(kube_status, _client(cluster), "tribnal", NAME)


@pytest.mark.asyncio
async def test_unknown_service_and_bad_ranges_are_refused_before_any_patch(cluster: Any) -> None:
    client = _client(cluster)
    with pytest.raises(NotFoundError, match=r"no application 'rerank'.*retrieval, entailment"):
        await asyncio.to_thread(
            kube_scale, client, NAMESPACE, NAME, ScaleRequest("rerank", max_replicas=2)
        )
    with pytest.raises(InvalidArgumentError, match=r"min_replicas \(9\) would exceed"):
        await asyncio.to_thread(
            kube_scale, client, NAMESPACE, NAME, ScaleRequest("gateway", min_replicas=9)
        )
    assert not list(cluster["patch"])


@pytest.mark.asyncio
async def test_forbidden_is_a_clear_precondition(cluster: Any) -> None:
    cluster["get", kmock.resource(RES)] << kmock.KubernetesError(
        status=403, reason="Forbidden", message="rayservices.ray.io is forbidden"
    )
    with pytest.raises(FailedPreconditionError, match=r"RBAC rights on rayservices\.ray\.io"):
        await asyncio.to_thread(kube_status, _client(cluster), NAMESPACE, NAME)


@pytest.mark.asyncio
async def test_cli_scale_and_status_through_a_kubeconfig(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": str(cluster.url)}}],
                "users": [{"name": "ops", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "ops"}}],
                "current-context": "fake",
            }
        )
    )
    target = ["-n", NAMESPACE, "--rayservice", NAME, "--kubeconfig", str(kubeconfig)]
    code = await asyncio.to_thread(main, ["ops", "scale", "retrieval", "--max", "6", *target])
    assert code == 0
    assert "only retrieval's replica settings changed" in capsys.readouterr().out

    code = await asyncio.to_thread(main, ["ops", "status", *target])
    out = capsys.readouterr().out
    assert code == 0
    assert "retrieval" in out
    assert "1..6" in out

    missing = ["ops", "status", "-n", NAMESPACE, "--rayservice", "nope"]
    code = await asyncio.to_thread(main, [*missing, "--kubeconfig", str(kubeconfig)])
    assert code == 2
    assert "no RayService 'nope'" in capsys.readouterr().err


def test_cli_without_a_cluster_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["ops", "status"]) == 2
    assert "no Kubernetes cluster configured" in capsys.readouterr().err
