"""The Ray Serve deployment's class, driven directly (the Ray issue runs it under Ray)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from tribunal.confidence import FitConfig, fit_artifact
from tribunal.confidence.app import ConfidenceDeployment, build_app

from tests.unit._confidence_data import synthetic_data


def _post(instance: Any, body: object) -> tuple[int, Any]:
    payload = json.dumps(body).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": payload, "more_body": False}

    request = Request({"type": "http", "method": "POST", "path": "/", "headers": []}, receive)
    response = asyncio.run(instance(request))
    return response.status_code, json.loads(response.body)


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    artifact = fit_artifact(synthetic_data(600), FitConfig(alphas=(0.05, 0.1)))
    monkeypatch.setenv(
        "TRIBUNAL_CONFIDENCE__ARTIFACT_PATH", str(artifact.save(tmp_path / "c.json"))
    )
    return ConfidenceDeployment.func_or_class(profile="tiny")


def test_build_app_binds_the_deployment() -> None:
    app = build_app({"profile": "tiny"})
    assert type(app).__name__ == "Application"
    assert ConfidenceDeployment.name == "confidence"


def test_http_and_handle_methods_score(deployment: Any) -> None:
    status, body = _post(
        deployment, {"signals": {"ensemble_p_match": 0.95, "judge_p_yes": {"a": 0.9}}}
    )
    assert status == 200
    assert body["decision"] in {"accept", "fallback", "escalate"}
    assert body["alpha"] == 0.05
    assert body == deployment.score({"ensemble_p_match": 0.95, "judge_p_yes": {"a": 0.9}})
    status, batch = _post(
        deployment,
        {"items": [{"signals": {"ensemble_p_match": 0.1}}, {"signals": {}, "alpha": 0.1}]},
    )
    assert status == 200
    assert [r["alpha"] for r in batch["results"]] == [0.05, 0.1]


def test_http_errors_carry_status_and_field(deployment: Any) -> None:
    status, body = _post(deployment, {"signals": {"ensemble_p_match": 2.0}})
    assert (status, body["field"]) == (400, "signals.ensemble_p_match")
    status, body = _post(deployment, {"items": [{"signals": {}}, {"signals": {"bm25": 1.0}}]})
    assert (status, body["field"]) == (400, "items[1].signals.bm25")
