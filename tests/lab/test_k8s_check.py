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


_PEM = (
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n"
    "-----END PUBLIC KEY-----\n"
)


def _kb_keys(**given: Any) -> dict[str, Any]:
    return {
        "kbTrustedKeys": {
            "existingConfigMap": "",
            "existingSecret": "",
            "publicKeys": {},
            **given,
        }
    }


def _kb_key_mounts(
    docs: list[dict[str, Any]], group: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    service = next(d for d in docs if d["kind"] == "RayService")
    spec = next(
        g["template"]["spec"]
        for g in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        if g["groupName"] == group
    )
    volumes = [v for v in spec["volumes"] if v["name"] == "kb-trusted-keys"]
    mounts = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "kb-trusted-keys"]
    return volumes, mounts


def _settings(docs: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = next(d for d in docs if d["metadata"]["name"] == "tribunal-settings")[
        "data"
    ]
    return data


@pytest.mark.parametrize(
    ("given", "source"),
    [
        ({"publicKeys": {"kb-19b2ea9bd1c8f0aa": _PEM}}, {"configMap": "tribunal-kb-trusted-keys"}),
        ({"existingConfigMap": "writer-keys"}, {"configMap": "writer-keys"}),
        ({"existingSecret": "writer-keys"}, {"secret": "writer-keys"}),
    ],
    ids=["public-keys", "existing-configmap", "existing-secret"],
)
def test_kb_public_keys_are_mounted_where_the_gateway_runs(
    given: dict[str, Any], source: dict[str, str]
) -> None:
    # The gateway runs on the gpu group here, so the mount must follow it there.
    values = _kb_keys(**given)
    values["serve"] = {"applications": {"gateway": {"workerGroup": "gpu"}}}
    docs = render_chart(values)
    assert _settings(docs)["TRIBUNAL_GATEWAY__KB_TRUSTED_KEYS"] == "/etc/tribunal/kb-trusted"
    config = yaml.safe_load(
        next(d for d in docs if d["kind"] == "RayService")["spec"]["serveConfigV2"]
    )
    gateway = next(a for a in config["applications"] if a["name"] == "gateway")
    assert gateway["deployments"][0]["ray_actor_options"]["resources"] == {
        "tribunal_group_gpu": 0.001
    }
    for group in ("gpu", "cpu"):
        volumes, mounts = _kb_key_mounts(docs, group)
        assert mounts == [
            {"name": "kb-trusted-keys", "mountPath": "/etc/tribunal/kb-trusted", "readOnly": True}
        ]
        [volume] = volumes
        kind, name = next(iter(source.items()))
        if kind == "secret":
            assert volume["secret"] == {"secretName": name, "defaultMode": 0o444}
        else:
            assert volume["configMap"] == {"name": name, "defaultMode": 0o444}
    made = [d for d in docs if d["metadata"]["name"] == "tribunal-kb-trusted-keys"]
    if "publicKeys" in given:
        assert made[0]["kind"] == "ConfigMap"
        assert made[0]["data"] == {"kb-19b2ea9bd1c8f0aa.pub": _PEM}
    else:
        assert made == []
    # The writer's private key is never part of what the chart deploys.
    text = yaml.safe_dump_all(docs)
    for private in ("kb-signing.key", "SIGNING_KEY_FILE", "signing_key_file", "PRIVATE KEY"):
        assert private not in text


def test_without_kb_public_keys_nothing_is_mounted() -> None:
    docs = render_chart(None)
    assert "TRIBUNAL_GATEWAY__KB_TRUSTED_KEYS" not in _settings(docs)
    assert _kb_key_mounts(docs, "cpu") == ([], [])
    text = yaml.safe_dump_all(docs)
    assert "kb-signing.key" not in text
    assert "SIGNING_KEY_FILE" not in text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            _kb_keys(publicKeys={"kb-1": "-----BEGIN PRIVATE KEY-----\nMC4=\n"}),
            "kbTrustedKeys.publicKeys.kb-1 is a private key",
        ),
        (_kb_keys(publicKeys={"kb-1": "ssh-ed25519 AAAA"}), "is not a PEM public key"),
        (
            _kb_keys(existingSecret="a", existingConfigMap="b"),
            "set one of kbTrustedKeys.existingConfigMap, kbTrustedKeys.existingSecret",
        ),
        (
            {"settings": {"TRIBUNAL_RETRIEVAL__SIGNING_KEY_FILE": "/data/k"}},
            "/settings",
        ),
        (_kb_keys(publicKeys={"../etc": _PEM}), "'../etc' does not match pattern"),
    ],
    ids=["private-key", "not-pem", "two-sources", "signing-key-setting", "bad-name"],
)
def test_kb_keys_refuse_private_keys_and_ambiguity(
    values: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken-values.yaml"
    broken.write_text(yaml.safe_dump(values))
    code = k8s_check.main(["--only-values", "--values", str(broken)])
    out = capsys.readouterr().out
    assert code == 1
    assert message in out, out


def _ray_containers(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = service["spec"]["rayClusterConfig"]
    specs = {"head": cluster["headGroupSpec"]["template"]["spec"]}
    specs.update({g["groupName"]: g["template"]["spec"] for g in cluster["workerGroupSpecs"]})
    return specs


def test_defaults_turn_mutual_tls_on_everywhere() -> None:
    docs = render_chart(None)
    service = next(d for d in docs if d["kind"] == "RayService")
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    # The release's CA (genCA) and a client certificate for callers of the proxy.
    assert secrets["tribunal-tls-ca"]["type"] == "kubernetes.io/tls"
    assert set(secrets["tribunal-tls-ca"]["data"]) == {"tls.crt", "tls.key"}
    assert set(secrets["tribunal-client-tls"]["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    tls_env = {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": "/etc/tribunal/tls/tls.crt",
        "RAY_TLS_SERVER_KEY": "/etc/tribunal/tls/tls.key",
        "RAY_TLS_CA_CERT": "/etc/tribunal/tls/ca.crt",
        "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR": (
            "tribunal.deploy._serve_grpc.configure_serve_grpc"
        ),
        "TRIBUNAL_GRPC_PROXY_TLS_CERT": "/etc/tribunal/tls/tls.crt",
        "TRIBUNAL_GRPC_PROXY_TLS_KEY": "/etc/tribunal/tls/tls.key",
        # Mutual: the proxy requires a client certificate from the CA.
        "TRIBUNAL_GRPC_PROXY_TLS_CLIENT_CA": "/etc/tribunal/tls/ca.crt",
    }
    pods = _ray_containers(service)
    assert set(pods) == {"head", "cpu", "gpu"}
    for group, spec in pods.items():
        [container] = spec["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert {k: env.get(k) for k in tls_env} == tls_env, group
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/tribunal/tls", "readOnly": True}
        # The CA's key reaches the init container that issues the pod's certificate only.
        assert "tls-ca" not in mounts, group
        [issue] = [c for c in spec["initContainers"] if c["name"] == "issue-tls"]
        assert {m["name"] for m in issue["volumeMounts"]} == {"tls-ca", "tls"}
        command = " ".join(issue["command"])
        assert "tribunal tls issue" in command
        assert '--ip "$POD_IP"' in command
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["tls-ca"]["secret"]["secretName"] == "tribunal-tls-ca"
        assert volumes["tls"]["emptyDir"]["medium"] == "Memory"
    # The autoscaler talks to the GCS: it needs Ray's TLS too.
    autoscaler = service["spec"]["rayClusterConfig"]["autoscalerOptions"]
    assert {e["name"]: e["value"] for e in autoscaler["env"]}["RAY_USE_TLS"] == "1"
    # The gRPC port does not claim cleartext HTTP/2.
    ports = {p["name"]: p for p in service["spec"]["serveService"]["spec"]["ports"]}
    assert "appProtocol" not in ports["serve-grpc"]


def test_tls_off_is_explicit_and_leaves_nothing_behind() -> None:
    docs = render_chart({"tls": {"mode": "off"}})
    service = next(d for d in docs if d["kind"] == "RayService")
    assert not [d for d in docs if d["metadata"]["name"].endswith("-tls")]
    assert not [d for d in docs if d["metadata"]["name"].endswith("-tls-ca")]
    for spec in _ray_containers(service).values():
        env = {e["name"] for e in spec["containers"][0].get("env", [])}
        assert not env & {"RAY_USE_TLS", "TRIBUNAL_GRPC_PROXY_TLS_CERT"}
        assert "initContainers" not in spec
    ports = {p["name"]: p for p in service["spec"]["serveService"]["spec"]["ports"]}
    assert ports["serve-grpc"]["appProtocol"] == "kubernetes.io/h2c"


def test_server_tls_asks_no_client_certificate_and_an_own_ca_is_used() -> None:
    docs = render_chart({"tls": {"mode": "server", "caSecret": "corp-ca"}})
    service = next(d for d in docs if d["kind"] == "RayService")
    assert not [d for d in docs if d["kind"] == "Secret" and "tls" in d["metadata"]["name"]]
    for spec in _ray_containers(service).values():
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env["RAY_USE_TLS"] == "1"
        assert env["TRIBUNAL_GRPC_PROXY_TLS_CERT"] == "/etc/tribunal/tls/tls.crt"
        assert "TRIBUNAL_GRPC_PROXY_TLS_CLIENT_CA" not in env
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["tls-ca"]["secret"]["secretName"] == "corp-ca"
