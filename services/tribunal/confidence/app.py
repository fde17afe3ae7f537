"""Ray Serve application of the confidence service (HTTP JSON ingress + deployment handle).

``serve run tribunal.confidence.app:build_app profile=tiny`` serves
``POST /`` with ``{"signals": {...}, "alpha": 0.05}`` or ``{"items": [...]}``;
other deployments call :meth:`ConfidenceDeployment.score` through a handle.
Scoring is cheap arithmetic on a loaded artifact, so one replica needs a
fraction of a CPU; replicas and resources are the Ray deployment issue's to tune.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ray import serve
from ray.serve import Application
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..core import (
    ErrorCode,
    InvalidArgumentError,
    ResourceExhaustedError,
    TribunalError,
    load_settings,
)
from ._artifact import json_ready
from ._scorer import ConfidenceScorer, ScoreResult
from ._signals import Signals

__all__ = ["ConfidenceDeployment", "build_app"]

_HTTP_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.FAILED_PRECONDITION: 412,
    ErrorCode.RESOURCE_EXHAUSTED: 413,
    ErrorCode.UNAVAILABLE: 503,
}


def _result(result: ScoreResult) -> dict[str, Any]:
    # An infinite threshold (none qualified) becomes null: JSON has no infinity.
    document: dict[str, Any] = json_ready({**asdict(result), "decision": result.decision.value})
    return document


@serve.deployment(name="confidence", ray_actor_options={"num_cpus": 0.25})
class ConfidenceDeployment:
    """Loads the calibrator artifact named by the profile's settings, then scores."""

    def __init__(self, profile: str | None = None) -> None:
        settings = load_settings(profile)
        self.batch_max_items = settings.confidence.batch_max_items
        self.scorer = ConfidenceScorer.from_settings(settings)

    def score(self, signals: Mapping[str, Any], alpha: float | None = None) -> dict[str, Any]:
        """Score one candidate given as a JSON object of proto field names."""
        return _result(self.scorer.score(Signals.from_mapping(signals), alpha))

    def batch_score(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Score ``[{"signals": {...}, "alpha": ...}, ...]`` in order."""
        if len(items) > self.batch_max_items:
            raise ResourceExhaustedError(
                f"batch of {len(items)} items; at most {self.batch_max_items} per call"
            )
        parsed = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidArgumentError("each item must be a JSON object", field=f"items[{i}]")
            try:
                parsed.append((Signals.from_mapping(item.get("signals", {})), item.get("alpha")))
            except TribunalError as exc:
                raise InvalidArgumentError(exc.message, field=f"items[{i}].{exc.field}") from None
        results = self.scorer.score_many([s for s, _ in parsed], [a for _, a in parsed])
        return [_result(r) for r in results]

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise InvalidArgumentError("the body must be a JSON object", field="body")
            if "items" in body:
                return JSONResponse({"results": self.batch_score(body["items"])})
            return JSONResponse(self.score(body.get("signals", {}), body.get("alpha")))
        except TribunalError as exc:
            status = _HTTP_STATUS.get(exc.code, 500)
            message = exc.message if status != 500 else "internal error"
            return JSONResponse({"error": message, "field": exc.field}, status_code=status)
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)


def build_app(args: Mapping[str, str] | None = None) -> Application:
    """``serve run`` entry point; ``profile=NAME`` picks the settings profile."""
    # serve.deployment turned the class into a Deployment; its stubs keep the class type.
    deployment: Any = ConfidenceDeployment
    application: Application = deployment.bind((args or {}).get("profile"))
    return application
