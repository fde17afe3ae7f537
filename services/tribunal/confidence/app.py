"""The confidence service as a Ray Serve application.

One deployment wraps a :class:`ConfidenceScorer` on the calibrator artifact the
settings name (configured path → ``data_dir`` → the artifact shipped for the
profile). Its proto-named methods ``Score`` / ``BatchScore`` take and return the
``tribunal.v1`` messages, as Serve's gRPC proxy and the gateway's
``DeploymentHandle`` calls require, and translate with the plain gRPC
servicer's own code, so both answer alike (errors keep their status code through
the proxy). Scoring is arithmetic on a loaded artifact: no model call to batch,
so no ``@serve.batch``; a replica needs a fraction of a CPU
(``confidence.deployment``).

    serve.run(build_app(load_settings()), name="confidence", route_prefix=None)
"""

from __future__ import annotations

from typing import Any, cast

from ray import serve
from ray.serve import Application

from ..core import Settings
from ..deploy import ServeApp
from ..v1 import confidence_pb2
from ._scorer import ConfidenceScorer
from .servicer import ConfidenceServicer

__all__ = ["ConfidenceDeployment", "build_app"]


@serve.deployment(name="confidence")
class ConfidenceDeployment(ServeApp, service="confidence"):
    """A replica: the calibrator artifact loaded once, then ``Score`` / ``BatchScore``.

    Args:
        settings_data: ``Settings.model_dump(mode="json")`` of the driver.
    """

    def __init__(self, settings_data: dict[str, Any]) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        self.servicer = ConfidenceServicer(settings.confidence.max_items_per_request)
        self.servicer.scorer = ConfidenceScorer.from_settings(settings)
        self.calibrator_version = self.servicer.scorer.artifact.version

    async def Score(
        self, request: confidence_pb2.ScoreRequest, grpc_context: Any = None
    ) -> confidence_pb2.ScoreResponse:
        return self.servicer.Score(request, grpc_context)

    async def BatchScore(
        self, request: confidence_pb2.BatchScoreRequest, grpc_context: Any = None
    ) -> confidence_pb2.BatchScoreResponse:
        return self.servicer.BatchScore(request, grpc_context)


def build_app(settings: Settings) -> Application:
    """The confidence application, configured from ``settings.confidence.deployment``."""
    deployment = cast(Any, ConfidenceDeployment).options(
        **settings.confidence.deployment.ray_options()
    )
    app: Application = deployment.bind(settings.model_dump(mode="json"))
    return app
