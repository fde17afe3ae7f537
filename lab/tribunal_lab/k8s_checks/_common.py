"""What every check shares: its failure, and the chart rendered as a cluster would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ._manifests import CHART, RELEASE

__all__ = ["CheckFailedError", "render_against"]


class CheckFailedError(Exception):
    """One check's failure; the message names the resource and the field."""


def render_against(
    values: dict[str, Any] | None,
    *,
    api_versions: list[str],
    namespace: str = "tribunal",
    chart: Path = CHART,
) -> list[dict[str, Any]]:
    """Render as ``helm install`` against a cluster serving ``api_versions`` would.

    helm-python-sdk's ``render`` offers no capabilities; its native call takes them
    (``helm template --api-versions``), which is what the KubeRay guard reads.
    """
    import helm_python as helm
    from helm_python import _native

    with helm.Chart.load(chart) as loaded:
        options = {"name": RELEASE, "namespace": namespace, "api_versions": api_versions}
        raw = _native.call_string(
            "helm_render",
            loaded._raw(),
            json.dumps(values) if values is not None else None,
            json.dumps(options),
        )
    docs: list[dict[str, Any]] = []
    for path, text in sorted(json.loads(raw).items()):
        if path.endswith((".yaml", ".yml")):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs
