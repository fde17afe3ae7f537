"""A small real servicer for runtime tests, and a script that serves it.

It implements ``tribunal.v1.ConfidenceService`` with behaviour steered by the
request, so tests can provoke each error path through a real gRPC server.
``python -m tests.integration._test_service`` serves it and prints the port.
"""

from __future__ import annotations

import sys
import time

import grpc
from tribunal.core import InvalidArgumentError, ServerSettings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc


class SteeredConfidence(confidence_pb2_grpc.ConfidenceServiceServicer):
    """``extra`` keys steer it: ``invalid`` → InvalidArgumentError, ``crash`` → a bug,
    ``sleep`` → wait that many seconds; otherwise confidence = ensemble_p_match."""

    def Score(
        self, request: confidence_pb2.ScoreRequest, context: grpc.ServicerContext
    ) -> confidence_pb2.ScoreResponse:
        extra = request.signals.extra
        if "invalid" in extra:
            raise InvalidArgumentError("signal 'invalid' is not known", field="signals.extra")
        if "crash" in extra:
            raise RuntimeError("secret internal detail")
        if "sleep" in extra:
            time.sleep(extra["sleep"])
        return confidence_pb2.ScoreResponse(
            confidence=request.signals.ensemble_p_match, calibrator_version="test"
        )


def binding(servicer: SteeredConfidence | None = None) -> ServiceBinding:
    servicer = servicer or SteeredConfidence()
    return ServiceBinding(
        "tribunal.v1.ConfidenceService",
        lambda server: confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server(
            servicer, server
        ),
    )


if __name__ == "__main__":
    host = ServiceHost(
        ServerSettings(port=0, metrics_port=None, grace_seconds=5.0),
        name="steered",
        bindings=[binding()],
    )
    original_start = host.start

    def start_and_announce() -> int:
        port = original_start()
        print(port, flush=True)
        return port

    host.start = start_and_announce  # type: ignore[method-assign]
    host.run()
    sys.exit(0)
