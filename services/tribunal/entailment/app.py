"""The entailment service as a Ray Serve application.

One deployment wraps the domain :class:`EntailmentCascade`. Single pairs that
arrive concurrently (the gateway checks each candidate's chunks as its own
call) are gathered by ``@serve.batch`` into one cascade call, so the checkers
see full batches. Serve's gRPC proxy calls the proto-named methods, which
translate with the plain servicer's functions.

    serve.run(build_app(load_settings()), name="entailment")
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ray import serve
from ray.serve import Application

from ..core import Settings
from ..deploy import ServeApp, gathered, size_gathered
from ..v1 import entailment_pb2
from ._cascade import EntailmentCascade, EntailmentVerdict, PairToCheck
from ._factory import build_cascade
from ._version import checker_version
from .servicer import check_quotes, check_response, pairs_from_proto

__all__ = ["EntailmentDeployment", "build_app"]


@serve.deployment(name="entailment")
class EntailmentDeployment(ServeApp, service="entailment"):
    """A replica: the profile's cascade, with concurrent single pairs batched."""

    def __init__(self, settings_data: dict[str, Any]) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        self.cascade: EntailmentCascade = build_cascade(settings)
        self.checker_version = checker_version(settings)
        size_gathered(self, settings.entailment.deployment)

    @gathered
    def check_one(self, pairs: list[PairToCheck]) -> list[EntailmentVerdict]:
        """One pair in, one verdict out; Serve gathers concurrent calls into one batch."""
        return self.cascade.check(pairs)

    async def check(
        self, pairs: list[PairToCheck], fast_only: bool = False
    ) -> list[EntailmentVerdict]:
        """A caller's own batch runs as it is (already a batch)."""
        if len(pairs) == 1 and not fast_only:
            self.cascade.validate(pairs)
            return [await self.check_one(pairs[0])]
        return await asyncio.to_thread(self.cascade.check, pairs, fast_only=fast_only)

    async def Check(
        self, request: entailment_pb2.CheckRequest, grpc_context: Any = None
    ) -> entailment_pb2.CheckResponse:
        verdicts = await self.check(pairs_from_proto(request), request.fast_only)
        return check_response(verdicts, self.checker_version)

    async def CheckQuotes(
        self, request: entailment_pb2.CheckQuotesRequest, grpc_context: Any = None
    ) -> entailment_pb2.CheckQuotesResponse:
        return check_quotes(self.cascade.quote_checker, request)


def build_app(settings: Settings) -> Application:
    """The entailment application, scaled like the other model services."""
    deployment = cast(Any, EntailmentDeployment).options(
        **settings.entailment.deployment.ray_options()
    )
    app: Application = deployment.bind(settings.model_dump(mode="json"))
    return app
