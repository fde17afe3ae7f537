"""The offline Kubernetes checks (make k8s-check): what passes and what each one catches.

The full run (kubectl kustomize, checkov) is `make k8s-check` in CI; these tests run
the chart-level checks, which need only the dev extra.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("helm_python")

from tribunal_lab import k8s_check
from tribunal_lab.k8s_checks import (
    CHART,
    OVERLAYS,
    ValuesSet,
    generate_k8s,
    render_chart,
)

_CRD = k8s_check.CRD
needs_crd = pytest.mark.skipif(not _CRD.is_file(), reason=f"KubeRay CRD not at {_CRD}")


@pytest.fixture(scope="module")
def crd_schema() -> dict[str, Any]:
    return k8s_check.rayservice_schema()


def _rayservice(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return next(d for d in render_chart(values) if d["kind"] == "RayService")


@needs_crd
@pytest.mark.parametrize("values_set", OVERLAYS, ids=[v.name for v in OVERLAYS])
def test_every_values_set_passes(
    values_set: ValuesSet, crd_schema: dict[str, Any], tmp_path: Path
) -> None:
    notes = k8s_check.check_values_set(values_set, crd_schema, tmp_path)
    assert any("RayService valid against the KubeRay CRD" in n for n in notes)
    # The Ray pod templates are written out as Pods for checkov.
    assert list((tmp_path / values_set.name).glob("pod-tribunal-ray-head.yaml"))


def test_rayservice_has_what_the_issue_asks_for() -> None:
    service = _rayservice()
    cluster = service["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    gpu = groups["gpu"]["template"]["spec"]
    assert gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert gpu["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert gpu["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    for spec in [cluster["headGroupSpec"]["template"]["spec"], gpu]:
        assert spec["securityContext"]["runAsNonRoot"] is True
        container = spec["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert {"name": "serve-grpc", "containerPort": 9000, "protocol": "TCP"} in container[
            "ports"
        ]
        shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"
    ports = {p["name"]: p["port"] for p in service["spec"]["serveService"]["spec"]["ports"]}
    assert ports["serve-grpc"] == 9000
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    assert [a["name"] for a in config["applications"]] == [
        "retrieval",
        "entailment",
        "ensemble",
        "debate",
        "confidence",
        "gateway",
    ]
    entailment = config["applications"][1]
    assert entailment["deployments"][0]["ray_actor_options"]["num_gpus"] == 0.5
    assert entailment["args"]["settings"]["entailment"]["deployment"]["max_batch_size"] == 16


def test_cpu_dev_has_no_gpu_anywhere() -> None:
    values = yaml.safe_load((CHART / "values-cpu-dev.yaml").read_text())
    service = _rayservice(values)
    groups = [g["groupName"] for g in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]]
    assert groups == ["cpu"]
    assert "nvidia.com/gpu" not in yaml.safe_dump(service)
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    assert {a["args"]["profile"] for a in config["applications"]} == {"tiny"}
    assert all(
        a["deployments"][0]["ray_actor_options"]["num_gpus"] == 0 for a in config["applications"]
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"serve": {"applications": {"entailment": {"maxReplicas": "lots"}}}},
            "/serve/applications/entailment/maxReplicas': got string, want integer",
        ),
        ({"workerGroups": {"gpu": {"gpuz": 2}}}, "additional properties 'gpuz' not allowed"),
        (
            {"serve": {"applications": {"debate": {"maxBatchSize": 64}}}},
            "serve.applications.debate.maxOngoingRequests (32) must be >= maxBatchSize (64)",
        ),
        (
            {"workerGroups": {"gpu": {"enabled": False}}},
            'serve.applications.entailment.workerGroup: "gpu" is not an enabled worker group',
        ),
        (
            {"serve": {"applications": {"gateway": {"numGpus": 1}}}},
            "serve.applications.gateway.numGpus is 1 but workerGroups.cpu has no GPUs",
        ),
        (
            {"settings": {"TRIBUNAL_SERVER__AUTH_TOKEN": "secret"}},
            "/settings",
        ),
    ],
    ids=["type", "unknown-key", "batch-cannot-fill", "disabled-group", "gpu-on-cpu", "secret"],
)
def test_a_broken_values_file_fails_naming_the_field(
    values: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken-values.yaml"
    broken.write_text(yaml.safe_dump(values))
    code = k8s_check.main(["--only-values", "--values", str(broken)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out, out
    assert message in out, out


@needs_crd
def test_crd_check_is_strict_about_unknown_and_mistyped_fields(
    crd_schema: dict[str, Any],
) -> None:
    service = _rayservice()
    k8s_check.validate_rayservice(service, crd_schema)
    typo = copy.deepcopy(service)
    typo["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["minReplica"] = 1
    with pytest.raises(k8s_check.CheckFailedError, match=r"workerGroupSpecs\.0: Additional prop"):
        k8s_check.validate_rayservice(typo, crd_schema)
    wrong = copy.deepcopy(service)
    wrong["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = "yes"
    with pytest.raises(
        k8s_check.CheckFailedError, match="enableInTreeAutoscaling: 'yes' is not of"
    ):
        k8s_check.validate_rayservice(wrong, crd_schema)


def test_serve_config_check_uses_serves_schema_and_resolves_imports() -> None:
    text = _rayservice()["spec"]["serveConfigV2"]
    assert len(k8s_check.validate_serve_config(text, "default")["applications"]) == 6
    config = yaml.safe_load(text)
    config["applications"][0]["deployments"][0]["autoscaling_config"]["min_replicas"] = 9
    with pytest.raises(
        k8s_check.CheckFailedError,
        match=r"applications\.0\.deployments\.0\.autoscaling_config \(retrieval\)",
    ):
        k8s_check.validate_serve_config(yaml.safe_dump(config), "x")
    config = yaml.safe_load(text)
    config["applications"][2]["import_path"] = "tribunal.deploy.apps:ensembel"
    with pytest.raises(
        k8s_check.CheckFailedError, match=r"import_path tribunal\.deploy\.apps:ensembel"
    ):
        k8s_check.validate_serve_config(yaml.safe_dump(config), "x")


def test_k8s_folder_is_what_the_chart_generates() -> None:
    stale = [
        str(path)
        for path, text in generate_k8s().items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `make k8s-manifests`: {stale}"
