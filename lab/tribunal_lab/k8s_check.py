"""Offline checks of the Kubernetes artefacts (``make k8s-check``; no cluster needed).

For the chart's default, prod and cpu-dev values (and any ``--values FILE``):

1. ``helm lint --strict`` and values.schema.json (helm-python-sdk: Helm as a library);
2. render; built-in kinds with ``kubernetes-validate --strict`` (unknown fields fail);
3. the RayService against KubeRay's CRD schema (``../shared/schemas/kuberay``) with
   ``jsonschema``, made strict the same way: unknown fields fail, as a typo would be
   pruned silently by the API server;
4. ``serveConfigV2`` with Serve's ``ServeDeploySchema``, import paths and gRPC
   servicer functions resolved, and compared with ``tribunal serve config`` when the
   Ray deployment module is present;
5. ``kubectl kustomize`` of ``k8s/base`` and both overlays, which must equal the
   chart's render (no drift: ``make k8s-manifests`` regenerates them);
6. ``checkov`` on the rendered manifests and the Dockerfiles (every finding fixed or
   skipped with a reason in ``charts/tribunal/.checkov.yaml``);
7. one check per way a real cluster would fail where every schema passes
   (``k8s_checks.PRODUCTION_CHECKS``): KubeRay's probe programs in the images, KubeRay
   >= 1.6 stated and enforced, the dashboard's series exported from Serve replicas, one
   FAISS and torch's CUDA in the GPU image, ``ops scale`` outliving ``helm upgrade``,
   GPU capacity, config checksums and the upgrade strategy, and the smaller ones (time
   limits, namespace, h2c, DCGM, model volume, hub token).

Exit status 1 with every failure listed (the field named) when anything fails.

    python -m tribunal_lab.k8s_check [--values FILE] [--checkov PATH] [--write-manifests]
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .k8s_checks import (
    CHART,
    K8S,
    OVERLAYS,
    PRODUCTION_CHECKS,
    REPO,
    CheckFailedError,
    ValuesSet,
    expected_overlay,
    generate_k8s,
    load_values,
    render_chart,
    resource_key,
)

__all__ = ["main", "rayservice_schema", "validate_rayservice", "validate_serve_config"]

KUBE_VERSION = "1.33"
_CRD_NAME = "schemas/kuberay/ray.io_rayservices.yaml"
# The shared folder sits beside the repository; a clone elsewhere (CI) finds it through
# TRIBUNAL_SHARED_DIR or the workplace's fixed location, as the tests do.
CRD = next(
    (
        folder / _CRD_NAME
        for folder in (
            Path(os.environ.get("TRIBUNAL_SHARED_DIR", REPO.parent / "shared")),
            REPO.parent / "shared",
            Path("/work/shared"),
        )
        if (folder / _CRD_NAME).is_file()
    ),
    REPO.parent / "shared" / _CRD_NAME,
)
_BUILTIN_GROUPS = ("v1", "apps/v1", "policy/v1", "networking.k8s.io/v1", "batch/v1", "rbac")


def _strict(schema: Any) -> Any:
    """Refuse unknown fields wherever the CRD lists the known ones (as --strict does)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.lru_cache(maxsize=2)
def rayservice_schema(crd_path: Path = CRD, version: str = "v1") -> dict[str, Any]:
    if not crd_path.is_file():
        raise CheckFailedError(f"KubeRay CRD schema not found at {crd_path} (TRIBUNAL_SHARED_DIR)")
    # 1 MB of YAML: the C loader takes a fraction of the pure-Python one's time.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(crd_path.read_text(encoding="utf-8"), Loader=loader)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema: dict[str, Any] = _strict(entry["schema"]["openAPIV3Schema"])
            # metadata is validated by the API server's ObjectMeta, not the CRD.
            schema["properties"]["metadata"] = {"type": "object"}
            return schema
    raise CheckFailedError(f"{crd_path} has no version {version}")


def validate_rayservice(doc: dict[str, Any], schema: dict[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"RayService {doc['metadata']['name']}: "
            f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
            for e in errors[:10]
        ]
        raise CheckFailedError("\n".join(lines))


def _module_defines(module: str, names: set[str]) -> set[str]:
    """Which of ``names`` a module defines at top level (parsed, not imported)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return set()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    if "__getattr__" in defined:
        # Names resolved on access (tribunal.deploy.apps: one builder per registry entry).
        loaded = importlib.import_module(module)
        return {name for name in names if hasattr(loaded, name)}
    return names & defined


def validate_serve_config(text: str, where: str) -> dict[str, Any]:
    from pydantic import ValidationError
    from ray.serve.config import AutoscalingConfig
    from ray.serve.schema import ServeDeploySchema

    config = yaml.safe_load(text)
    try:
        ServeDeploySchema.model_validate(config)
    except ValidationError as exc:
        lines = [
            f"{where}: serveConfigV2.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()[:10]
        ]
        raise CheckFailedError("\n".join(lines)) from exc
    problems = []
    # ServeDeploySchema keeps autoscaling_config a plain dict; Serve checks it on deploy.
    for i, app in enumerate(config["applications"]):
        for j, dep in enumerate(app.get("deployments") or []):
            if dep.get("autoscaling_config"):
                try:
                    AutoscalingConfig.model_validate(dep["autoscaling_config"])
                except ValidationError as exc:
                    problems.append(
                        f"{where}: serveConfigV2.applications.{i}.deployments.{j}"
                        f".autoscaling_config ({app['name']}): {exc.errors()[0]['msg']}"
                    )
    for app in config["applications"]:
        module, _, attr = app["import_path"].partition(":")
        if not _module_defines(module, {attr}):
            problems.append(f"{where}: {app['name']}: import_path {app['import_path']} not found")
        settings = (app.get("args") or {}).get("settings") or {}
        batch = ((settings.get(app["name"]) or {}).get("deployment") or {}).get("max_batch_size")
        for dep in app.get("deployments") or []:
            if batch is not None and dep.get("max_ongoing_requests", 0) < batch:
                problems.append(
                    f"{where}: {app['name']}: max_ongoing_requests < max_batch_size {batch}"
                )
    for function in config["grpc_options"]["grpc_servicer_functions"]:
        module, _, attr = function.rpartition(".")
        if not _module_defines(module, {attr}):
            problems.append(f"{where}: grpc servicer function {function} not found")
    if problems:
        raise CheckFailedError("\n".join(problems))
    return dict(config)


def _compare_with_serve_command(config: dict[str, Any], where: str) -> str:
    """Same applications, import paths and deployments as `tribunal serve config` writes."""
    try:
        from tribunal.core import load_settings
        from tribunal.deploy._config import serve_config
    except ImportError as exc:
        return f"skipped: `tribunal serve config` is not available ({exc})"
    expected = serve_config(load_settings("tiny"))

    def shape(cfg: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
        return [
            (
                a["name"],
                a["import_path"],
                tuple(sorted(d["name"] for d in a.get("deployments") or [])),
            )
            for a in cfg["applications"]
        ]

    if shape(config) != shape(expected):
        raise CheckFailedError(
            f"{where}: applications differ from `tribunal serve config`:\n"
            f"  chart: {shape(config)}\n  serve: {shape(expected)}"
        )
    ours = set(config["grpc_options"]["grpc_servicer_functions"])
    theirs = set(expected["grpc_options"]["grpc_servicer_functions"])
    if ours != theirs:
        raise CheckFailedError(f"{where}: gRPC servicers differ from `tribunal serve config`")
    return "same applications, import paths, deployments and servicers"


def _check_builtin(doc: dict[str, Any], where: str) -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

    try:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    except ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise CheckFailedError(
            f"{where}: {doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}"
        ) from exc
    except SchemaNotFoundError as exc:
        raise CheckFailedError(f"{where}: {exc.message}") from exc


def _is_builtin(doc: dict[str, Any]) -> bool:
    return str(doc["apiVersion"]).startswith(_BUILTIN_GROUPS)


def check_values_set(
    values_set: ValuesSet, schema: dict[str, Any], rendered_dir: Path
) -> list[str]:
    import helm_python as helm

    notes = []
    values = load_values(values_set.values_file)
    where = values_set.name if values_set.values_file is None else str(values_set.values_file)
    report = helm.lint(CHART, values, strict=True, kube_version=f"v{KUBE_VERSION}.0")
    problems = [str(m["error"]) for m in report["messages"] if m["severity"] >= 2]
    problems += [str(e) for e in report.get("errors") or []]
    # Helm repeats a schema failure per file it looked at: each distinct line once.
    all_lines = [line.strip() for p in problems for line in p.splitlines() if line.strip()]
    schema_lines = [line for line in all_lines if line.startswith("- at ")]
    lines = dict.fromkeys(schema_lines or all_lines)
    if lines:
        raise CheckFailedError("\n".join(f"{where}: helm lint: {line}" for line in lines if line))
    try:
        docs = render_chart(values, namespace=values_set.namespace)
    except helm.HelmError as exc:
        raise CheckFailedError(f"{where}: {exc}") from exc
    kinds = sorted({d["kind"] for d in docs})
    notes.append(f"lint + schema + render: {len(docs)} resources ({', '.join(kinds)})")
    builtin = 0
    for doc in docs:
        if _is_builtin(doc):
            _check_builtin(doc, where)
            builtin += 1
        elif doc["kind"] == "RayService":
            validate_rayservice(doc, schema)
            config = validate_serve_config(doc["spec"]["serveConfigV2"], where)
            notes.append(
                "RayService valid against the KubeRay CRD (strict); serveConfigV2 valid "
                f"(ServeDeploySchema, {len(config['applications'])} applications)"
            )
            notes.append(
                "vs `tribunal serve config`: " + _compare_with_serve_command(config, where)
            )
    notes.append(f"kubernetes-validate --strict ({KUBE_VERSION}): {builtin} built-in resources")
    out = rendered_dir / values_set.name
    out.mkdir(parents=True, exist_ok=True)
    for doc in [*docs, *ray_pods(docs)]:
        # `helm install -n NS` puts every object in the release namespace.
        doc["metadata"].setdefault("namespace", values_set.namespace)
        (out / f"{doc['kind'].lower()}-{doc['metadata']['name']}.yaml").write_text(
            yaml.safe_dump(doc, sort_keys=False)
        )
    return notes


def ray_pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RayService's pod templates as Pods, so checkov's pod policies apply to them.

    checkov knows no RayService; KubeRay creates exactly these pods (head, one per
    worker group), adding its own probes and the autoscaler sidecar.
    """
    pods = []
    for doc in docs:
        if doc["kind"] != "RayService":
            continue
        cluster = doc["spec"]["rayClusterConfig"]
        groups = [("head", cluster["headGroupSpec"])] + [
            (g["groupName"], g) for g in cluster.get("workerGroupSpecs", [])
        ]
        for group, spec in groups:
            template = spec["template"]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{doc['metadata']['name']}-ray-{group}",
                        "labels": template.get("metadata", {}).get("labels", {}),
                    },
                    "spec": template["spec"],
                }
            )
    return pods


def _normalised(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    return {resource_key(d): json.loads(json.dumps(d, sort_keys=True)) for d in docs}


def check_kustomize(kubectl: str) -> list[str]:
    notes = []
    generated = generate_k8s()
    stale = [
        str(path.relative_to(REPO))
        for path, text in generated.items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    extra = [
        str(p.relative_to(REPO))
        for p in K8S.rglob("*.yaml")
        if p not in generated and p.parent != K8S
    ]
    if stale or extra:
        raise CheckFailedError(
            "k8s/ is out of date with the chart (run `make k8s-manifests`): "
            + ", ".join(stale + extra)
        )
    for values_set in OVERLAYS:
        folder = K8S / ("base" if values_set.overlay is None else f"overlays/{values_set.overlay}")
        built = subprocess.run(
            [kubectl, "kustomize", str(folder)], capture_output=True, text=True, check=False
        )
        if built.returncode != 0:
            raise CheckFailedError(f"kubectl kustomize {folder}: {built.stderr.strip()}")
        got = _normalised([d for d in yaml.safe_load_all(built.stdout) if d])
        want = _normalised(expected_overlay(values_set))
        if got != want:
            differing = sorted(
                f"{k[1]}/{k[2]}" for k in set(got) | set(want) if got.get(k) != want.get(k)
            )
            raise CheckFailedError(
                f"kubectl kustomize {folder.relative_to(REPO)} differs from the chart "
                f"rendered with {values_set.name} values: {', '.join(differing)}"
            )
        notes.append(
            f"kubectl kustomize {folder.relative_to(REPO)}: {len(got)} resources, "
            "equal to the chart's render"
        )
    return notes


def check_checkov(checkov: str, rendered_dir: Path) -> list[str]:
    config = CHART / ".checkov.yaml"
    # One run over one folder (checkov ignores -f next to -d): the Dockerfiles join it.
    docker = rendered_dir / "docker"
    docker.mkdir(parents=True, exist_ok=True)
    for name in ("Dockerfile", "Dockerfile.gpu"):
        shutil.copyfile(REPO / name, docker / name)
    command = [
        checkov,
        "--config-file",
        str(config),
        "--skip-download",
        "--framework",
        "kubernetes",
        "dockerfile",
        "-d",
        ".",
        "--output",
        "json",
    ]
    # From inside the folder: checkov skips paths with a hidden part (the ".build" of an
    # absolute path), which would leave the kubernetes framework with no files.
    run = subprocess.run(command, capture_output=True, text=True, check=False, cwd=rendered_dir)
    try:
        reports = json.loads(run.stdout)
    except json.JSONDecodeError as exc:
        raise CheckFailedError(f"checkov failed: {run.stderr.strip()[-2000:]}") from exc
    reports = reports if isinstance(reports, list) else [reports]
    failed, passed, skipped = [], 0, 0
    frameworks = sorted(str(r.get("check_type")) for r in reports)
    if frameworks != ["dockerfile", "kubernetes"]:
        raise CheckFailedError(f"checkov ran {frameworks}, expected dockerfile and kubernetes")
    for report in reports:
        summary = report.get("summary", {})
        passed += summary.get("passed", 0)
        skipped += summary.get("skipped", 0)
        for check in report.get("results", {}).get("failed_checks", []):
            failed.append(
                f"checkov {check['check_id']} {check['check_name']}: "
                f"{Path(check['file_path']).name} {check.get('resource', '')}"
            )
    if failed:
        raise CheckFailedError("\n".join(sorted(set(failed))))
    return [
        f"checkov (kubernetes, dockerfile): {passed} passed, 0 failed; "
        f"skipped checks and their reasons: charts/tribunal/{config.name}"
    ]


def _timed(name: str, fn: Callable[[], list[str]], failures: list[str]) -> None:
    started = time.perf_counter()
    try:
        notes = fn()
        status = "ok"
    except CheckFailedError as exc:
        notes = [str(exc)]
        failures.append(name)
        status = "FAILED"
    print(f"== {name}: {status} ({time.perf_counter() - started:.1f} s)")
    for note in notes:
        print("   " + note.replace("\n", "\n   "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tribunal_lab.k8s_check")
    parser.add_argument(
        "--values", type=Path, action="append", default=[], help="also check this values file"
    )
    parser.add_argument("--only-values", action="store_true", help="check only --values files")
    parser.add_argument("--kubectl", default=shutil.which("kubectl") or "kubectl")
    parser.add_argument("--checkov", default=None, help="checkov executable (skipped if unset)")
    parser.add_argument(
        "--write-manifests", action="store_true", help="regenerate k8s/ from the chart and exit"
    )
    args = parser.parse_args(argv)
    import helm_python

    helm_python.disable_logging()  # its Go log lines repeat what the checks report
    if args.write_manifests:
        for path, text in generate_k8s().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    started = time.perf_counter()
    failures: list[str] = []
    rendered = REPO / ".build" / "k8s" / "rendered"
    shutil.rmtree(rendered, ignore_errors=True)
    schema: dict[str, Any] = {}
    try:
        schema = copy.deepcopy(rayservice_schema())
    except CheckFailedError as exc:
        print(f"== KubeRay CRD schema: FAILED\n   {exc}")
        return 1
    sets = [] if args.only_values else list(OVERLAYS)
    sets += [ValuesSet(str(p), p, None, "tribunal") for p in args.values]
    for values_set in sets:
        _timed(
            f"chart with {values_set.name} values",
            lambda vs=values_set: check_values_set(vs, schema, rendered),  # type: ignore[misc]
            failures,
        )
    if not args.only_values:
        for name, check in PRODUCTION_CHECKS:
            _timed(name, check, failures)
        _timed("k8s/ kustomize", lambda: check_kustomize(args.kubectl), failures)
        if args.checkov:
            _timed("checkov", lambda: check_checkov(args.checkov, rendered), failures)
        else:
            print("== checkov: skipped (no --checkov)")
    total = time.perf_counter() - started
    if failures:
        print(f"k8s-check FAILED ({', '.join(failures)}) in {total:.1f} s")
        return 1
    print(f"k8s-check passed in {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
