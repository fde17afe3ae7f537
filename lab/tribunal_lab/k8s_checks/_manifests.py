"""The chart rendered offline, and ``k8s/`` (kustomize) generated from it.

One source of truth: ``k8s/base`` is the chart rendered with its default values,
each overlay (``cpu-dev``, ``gpu-prod``) is the chart rendered with its values file
expressed as JSON patches on the base (RFC 6902: exact, and readable: a replaced
``serveConfigV2``, a replaced worker-group list, a changed ConfigMap key), plus
the resources only the overlay has and ``$patch: delete`` for those it drops.
``make k8s-manifests`` rewrites them; ``make k8s-check`` fails when they drift
(``kubectl kustomize`` of each overlay must equal the chart's render).

Needs the dev extra (``helm-python-sdk``); nothing at runtime imports this.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CHART",
    "K8S",
    "OVERLAYS",
    "RELEASE",
    "REPO",
    "ValuesSet",
    "generate_k8s",
    "load_values",
    "plain",
    "render_chart",
    "resource_key",
]

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "tribunal"
K8S = REPO / "k8s"
RELEASE = "tribunal"
# Plain manifests read their settings Secret by this name (docs/operations.md: how to create it),
# and their credentials from a Secret the operator makes (docs/security.md): a generated one
# would hold new random tokens at every render; the KB writer's public keys from a ConfigMap
# the operator makes (without them every answer falls back); the TLS CA from a Secret the
# operator makes (a generated one would be a new CA at every render).
_PLAIN_VALUES: dict[str, Any] = {
    "secrets": {"existingSecret": "tribunal-secrets"},
    "credentials": {"existingSecret": "tribunal-credentials", "generate": False},
    "kbTrustedKeys": {
        "existingConfigMap": "tribunal-kb-trusted-keys",
        "existingSecret": "",
        "publicKeys": {},
    },
    "tls": {"caSecret": "tribunal-tls-ca"},
}


@dataclass(frozen=True)
class ValuesSet:
    """A named values file of the chart and the kustomize overlay that mirrors it."""

    name: str
    values_file: Path | None
    overlay: str | None
    namespace: str


OVERLAYS: tuple[ValuesSet, ...] = (
    ValuesSet("default", None, None, "tribunal"),
    ValuesSet("prod", CHART / "values-prod.yaml", "gpu-prod", "tribunal"),
    ValuesSet("cpu-dev", CHART / "values-cpu-dev.yaml", "cpu-dev", "tribunal-dev"),
)


def load_values(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if loaded is not None and not isinstance(loaded, dict):
        raise ValueError(f"{path}: a values file must be a mapping")
    return loaded


def render_chart(
    values: dict[str, Any] | None, *, namespace: str = "tribunal", chart: Path = CHART
) -> list[dict[str, Any]]:
    """Validate ``values`` with values.schema.json, render every template, parse the YAML."""
    import helm_python as helm

    with helm.Chart.load(chart) as loaded:
        loaded.validate_schema(loaded.merge_values(values))
        rendered = loaded.render(values, name=RELEASE, namespace=namespace)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if not path.endswith((".yaml", ".yml")):
            continue  # NOTES.txt
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def _strip_helm_labels(node: Any) -> None:
    if isinstance(node, dict):
        labels = node.get("labels")
        if isinstance(labels, dict) and "helm.sh/chart" in labels:
            del labels["helm.sh/chart"]
            labels["app.kubernetes.io/managed-by"] = "kustomize"
        for value in node.values():
            _strip_helm_labels(value)
    elif isinstance(node, list):
        for value in node:
            _strip_helm_labels(value)


def plain(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's output as plain manifests: no Helm labels."""
    out = [yaml.safe_load(yaml.safe_dump(d)) for d in docs]
    for doc in out:
        _strip_helm_labels(doc)
    return out


def resource_key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return (str(doc["apiVersion"]), str(doc["kind"]), str(doc["metadata"]["name"]))


def _file_name(doc: dict[str, Any], suffix: str = ".yaml") -> str:
    return f"{doc['kind'].lower()}-{doc['metadata']['name']}{suffix}"


def _pointer(path: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def json_patch(before: Any, after: Any, path: list[str] | None = None) -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``before`` into ``after`` (lists replaced whole)."""
    path = path or []
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": _pointer([*path, key])})
        for key, value in after.items():
            if key not in before:
                ops.append({"op": "add", "path": _pointer([*path, key]), "value": value})
            elif before[key] != value:
                ops.extend(json_patch(before[key], value, [*path, key]))
        return ops
    return [{"op": "replace", "path": _pointer(path), "value": after}]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (serveConfigV2, the dashboard) as literal blocks."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100)


_HEADER = "# Generated from charts/tribunal by `make k8s-manifests`; do not edit by hand.\n"


def _target(doc: dict[str, Any]) -> dict[str, str]:
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    target = {"version": version, "kind": doc["kind"], "name": doc["metadata"]["name"]}
    if group:
        target = {"group": group, **target}
    return target


def generate_k8s(root: Path = K8S) -> dict[Path, str]:
    """Every file of ``k8s/`` (path -> text), generated from the chart."""
    files: dict[Path, str] = {}
    base_docs = plain(render_chart(_PLAIN_VALUES))
    base = {resource_key(d): d for d in base_docs}
    resources = []
    for doc in base_docs:
        name = _file_name(doc)
        resources.append(name)
        files[root / "base" / name] = _HEADER + _dump(doc)
    files[root / "base" / "kustomization.yaml"] = _HEADER + _dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        }
    )
    for values_set in OVERLAYS:
        if values_set.overlay is None:
            continue
        folder = root / "overlays" / values_set.overlay
        overlay_values = load_values(values_set.values_file) or {}
        merged = {**overlay_values, "secrets": {**overlay_values.get("secrets", {})}}
        merged["secrets"].setdefault("existingSecret", "tribunal-secrets")
        merged.setdefault("credentials", _PLAIN_VALUES["credentials"])
        merged.setdefault("kbTrustedKeys", _PLAIN_VALUES["kbTrustedKeys"])
        merged["tls"] = {**_PLAIN_VALUES["tls"], **overlay_values.get("tls", {})}
        docs = plain(render_chart(merged))
        wanted = {resource_key(d): d for d in docs}
        kustomization: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": values_set.namespace,
            "resources": ["../../base"],
        }
        patches: list[dict[str, Any]] = []
        for key, doc in wanted.items():
            if key not in base:
                name = _file_name(doc)
                kustomization["resources"].append(name)
                files[folder / name] = _HEADER + _dump(doc)
                continue
            ops = json_patch(base[key], doc)
            if ops:
                name = _file_name(doc, ".patch.yaml")
                files[folder / name] = _HEADER + _dump(ops)
                patches.append({"path": name, "target": _target(doc)})
        for key, doc in base.items():
            if key not in wanted:
                patches.append(
                    {
                        "patch": _dump(
                            {
                                "$patch": "delete",
                                "apiVersion": doc["apiVersion"],
                                "kind": doc["kind"],
                                "metadata": {"name": doc["metadata"]["name"]},
                            }
                        )
                    }
                )
        if patches:
            kustomization["patches"] = patches
        files[folder / "kustomization.yaml"] = _HEADER + _dump(kustomization)
    return files


def expected_overlay(values_set: ValuesSet) -> list[dict[str, Any]]:
    """What ``kubectl kustomize`` of an overlay must produce: the chart's render."""
    overlay_values = load_values(values_set.values_file) or {}
    merged = {**overlay_values, "secrets": {**overlay_values.get("secrets", {})}}
    merged["secrets"].setdefault("existingSecret", "tribunal-secrets")
    merged.setdefault("credentials", _PLAIN_VALUES["credentials"])
    merged.setdefault("kbTrustedKeys", _PLAIN_VALUES["kbTrustedKeys"])
    merged["tls"] = {**_PLAIN_VALUES["tls"], **overlay_values.get("tls", {})}
    docs = plain(render_chart(merged if values_set.overlay else _PLAIN_VALUES))
    if values_set.overlay:
        for doc in docs:
            doc["metadata"]["namespace"] = values_set.namespace
    return docs
