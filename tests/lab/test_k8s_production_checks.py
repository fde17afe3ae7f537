"""Each production check of `make k8s-check` passes on the repository and fails with its
defect put back (a copy of the Dockerfile, chart or docs with the old content)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("helm_python")
pytest.importorskip("tribunal_lab")

from tribunal_lab.k8s_checks import (
    CHART,
    PRODUCTION_CHECKS,
    REPO,
    CheckFailedError,
    _production,
    check_gpu_stack,
    check_probe_tools,
    parse_dockerfile,
    probe_programs,
    render_chart,
)


@pytest.mark.parametrize(
    "check", [c for _, c in PRODUCTION_CHECKS], ids=[n for n, _ in PRODUCTION_CHECKS]
)
def test_every_production_check_passes_on_the_repository(check: Callable[[], list[str]]) -> None:
    assert check()


def _edited(source: Path, folder: Path, old: str, new: str) -> Path:
    text = source.read_text(encoding="utf-8")
    assert old in text, f"{source.name} no longer has {old!r}"
    copy = folder / source.name
    copy.write_text(text.replace(old, new), encoding="utf-8")
    return copy


def test_the_probe_is_kuberays_and_needs_wget() -> None:
    assert probe_programs() == {"bash", "wget", "grep"}


def test_probe_tools_fail_without_wget_or_libgomp(tmp_path: Path) -> None:
    cpu = _edited(
        REPO / "Dockerfile",
        tmp_path,
        "install -y --no-install-recommends wget libgomp1",
        "install -y --no-install-recommends libgomp1",
    )
    with pytest.raises(CheckFailedError, match=r"Dockerfile: the runtime stage .* lacks wget"):
        check_probe_tools([cpu])
    gomp = _edited(REPO / "Dockerfile", tmp_path, "wget libgomp1", "wget")
    with pytest.raises(CheckFailedError, match="llamacpp extra but not libgomp1"):
        check_probe_tools([gomp])
    gpu = _edited(
        REPO / "Dockerfile.gpu",
        tmp_path,
        "install -y --no-install-recommends wget ca-certificates",
        "install -y --no-install-recommends ca-certificates",
    )
    with pytest.raises(CheckFailedError, match=r"Dockerfile.gpu: .* lacks wget"):
        check_probe_tools([gpu])


def test_gpu_stack_fails_on_two_faiss_and_a_cuda_mismatch(tmp_path: Path) -> None:
    # The old pyproject: faiss-cpu in the base dependencies behind a marker.
    pyproject = _edited(
        REPO / "pyproject.toml",
        tmp_path,
        '    "bm25s==',
        '    "faiss-cpu==1.15.1; extra != \'gpu\'",\n    "bm25s==',
    )
    with pytest.raises(CheckFailedError, match="FAISS in the base dependencies"):
        check_gpu_stack(pyproject=pyproject)
    # The old GPU image: CUDA 12 on a slim Python base, the gpu extra.
    gpu = tmp_path / "Dockerfile.gpu"
    text = (REPO / "Dockerfile.gpu").read_text()
    gpu.write_text(
        text.replace("nvidia/cuda:13.0.2-base-ubuntu24.04", "nvidia/cuda:12.6.3-base-ubuntu24.04")
    )
    with pytest.raises(
        CheckFailedError, match=r"is CUDA 12.6, but PyPI's torch 2.13.0 is a CUDA 13.0 build"
    ):
        check_gpu_stack(gpu_image=gpu)
    gpu.write_text(text.replace("'.[cpu]'", "'.[gpu]'"))
    with pytest.raises(
        CheckFailedError,
        match=r"faiss-gpu-cu12==1.14.1.post1 is built for CUDA 12, the image for CUDA 13.0",
    ):
        check_gpu_stack(gpu_image=gpu)
    gpu.write_text(text.replace("'.[cpu]'", "'.[cpu,gpu]'"))
    with pytest.raises(CheckFailedError, match="exactly one of `cpu` and `gpu`"):
        check_gpu_stack(gpu_image=gpu)
    gpu.write_text(text.replace("3.11.11", "3.12.8"))
    with pytest.raises(
        CheckFailedError, match="Ray refuses a cluster whose nodes run different Python"
    ):
        check_gpu_stack(gpu_image=gpu)
    assert parse_dockerfile(REPO / "Dockerfile.gpu").cuda == "13.0"


@pytest.fixture
def chart_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, str], None]:
    """A copy of the chart the production checks render instead; edit(file, old, new)."""
    copy = tmp_path / "tribunal"
    shutil.copytree(CHART, copy)
    monkeypatch.setattr(_production, "render_chart", functools.partial(render_chart, chart=copy))
    original = _production.render_against

    def against(values: Any, **kwargs: Any) -> Any:
        return original(values, chart=copy, **kwargs)

    monkeypatch.setattr(_production, "render_against", against)
    monkeypatch.setattr(_production, "CHART", copy)

    def edit(relative: str, old: str, new: str) -> None:
        path = copy / relative
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{relative} no longer has {old!r}"
        path.write_text(text.replace(old, new), encoding="utf-8")

    return edit


def test_kuberay_check_fails_without_the_guard(chart_copy: Callable[[str, str, str], None]) -> None:
    chart_copy("templates/rayservice.yaml", '{{- include "tribunal.requireKubeRay" . -}}\n', "")
    with pytest.raises(CheckFailedError, match="rendered although it must fail"):
        _production.check_kuberay_requirement()


def test_kuberay_check_fails_without_the_statement(
    chart_copy: Callable[[str, str, str], None],
) -> None:
    chart_copy("Chart.yaml", '  tribunal.dev/kuberay-version: ">=1.6.0"\n', "")
    with pytest.raises(CheckFailedError, match="kuberay-version is ''"):
        _production.check_kuberay_requirement()


def test_capacity_check_fails_without_the_template_guard(
    chart_copy: Callable[[str, str, str], None],
) -> None:
    chart_copy("templates/_helpers.tpl", '{{- include "tribunal.checkCapacity" $root -}}\n', "")
    with pytest.raises(CheckFailedError, match="rendered although it must fail"):
        _production.check_gpu_capacity_guards()


def test_rollout_check_fails_without_checksums_or_strategy(
    chart_copy: Callable[[str, str, str], None],
) -> None:
    chart_copy(
        "templates/_helpers.tpl",
        'checksum/secret: {{ (include (print .Template.BasePath "/secret.yaml") . | fromYaml)'
        ".stringData | toJson | sha256sum }}\n",
        "",
    )
    with pytest.raises(CheckFailedError, match="no checksum/secret annotation"):
        _production.check_rollouts()


def test_rollout_check_fails_without_the_upgrade_strategy(
    chart_copy: Callable[[str, str, str], None],
) -> None:
    chart_copy(
        "templates/rayservice.yaml",
        "  upgradeStrategy:\n    type: {{ .Values.upgradeStrategy.type }}\n",
        "",
    )
    with pytest.raises(CheckFailedError, match=r"spec\.upgradeStrategy\.type is None"):
        _production.check_rollouts()


def test_details_check_fails_on_grpc_app_protocol_dcgm_and_models(
    chart_copy: Callable[[str, str, str], None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    chart_copy("templates/rayservice.yaml", "appProtocol: kubernetes.io/h2c", "appProtocol: grpc")
    chart_copy("templates/_helpers.tpl", "  - name: HF_TOKEN\n", "  - name: HUGGING_FACE_TOKEN\n")
    chart_copy("dashboards/tribunal.json", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_MEM_COPY_UTIL")
    monkeypatch.setattr(
        _production,
        "dashboard_queries",
        functools.partial(
            _production.dashboard_queries, tmp_path / "tribunal" / "dashboards" / "tribunal.json"
        ),
    )
    with pytest.raises(CheckFailedError) as failed:
        _production.check_operations_details()
    message = str(failed.value)
    assert "appProtocol is not kubernetes.io/h2c with tls off" in message
    assert "DCGM_FI_DEV_FB_USED" in message
    assert "no HF_TOKEN" in message


def test_metrics_check_fails_on_a_prometheus_name_in_the_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = _edited(
        CHART / "dashboards" / "tribunal.json",
        tmp_path,
        "ray_tribunal_gateway_decisions_total{",
        '{__name__=~\\"(ray_)?tribunal_gateway_decisions_total\\",',
    )
    monkeypatch.setattr(
        _production, "dashboard_queries", functools.partial(_production.dashboard_queries, board)
    )
    with pytest.raises(CheckFailedError, match="a selector without a metric name"):
        _production.check_metrics_export()


def test_metrics_check_fails_when_the_gateway_uses_prometheus_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prometheus_client import CollectorRegistry, Counter
    from tribunal.gateway import _metrics

    plain = Counter("tribunal_gateway_decisions_total", "d", ["kind"], registry=CollectorRegistry())
    monkeypatch.setattr(_metrics, "DECISIONS", plain)
    with pytest.raises(CheckFailedError, match=r"is not tribunal\.core\.server\.Metric"):
        _production.check_metrics_export()


def test_scale_check_fails_without_the_field_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    from tribunal.ops import _kube

    monkeypatch.setattr(_kube, "FIELD_MANAGER", None)
    with pytest.raises(CheckFailedError, match="sends no field manager"):
        _production.check_scale_survives_upgrade()


def test_scale_check_fails_when_the_printed_values_are_wrong(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tribunal import ops

    def old_names(config: Any, request: Any) -> tuple[str, ...]:
        return (f"services.{request.application}.replicas=3",)

    monkeypatch.setattr(ops, "chart_values_change", old_names)
    with pytest.raises(CheckFailedError, match=r"printed values .* do not render"):
        _production.check_scale_survives_upgrade()
