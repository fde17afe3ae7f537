"""The Serve path is as strict as the gRPC path: one limit table, the same statuses.

The confidence deployment's class is driven directly with the context Serve's proxy
hands a method (a test double: it only records the status set on it), and the proxy's
servicer functions (``tribunal.deploy.proxy.<service>``) run on a real gRPC server:

- every field against ``REQUEST_LIMITS`` (ids over ``server.max_id_chars``, too many
  signals per item: INVALID_ARGUMENT; a batch too big: RESOURCE_EXHAUSTED), a message
  over ``server.max_message_bytes`` RESOURCE_EXHAUSTED, handle calls included;
- bytes that are no valid message reach the application as an ``UndecodableRequest``
  and are INVALID_ARGUMENT;
- a method the application does not serve is UNIMPLEMENTED, with no traceback;
- the ensemble's and the gateway's oversized batches are RESOURCE_EXHAUSTED, as every
  other service's.

``test_serve_proxy.py`` checks the same through Serve's real proxy on a local Ray.
"""

from __future__ import annotations

import asyncio
import random
from concurrent import futures
from typing import Any

import grpc
import pytest
from tribunal.confidence import FitConfig, fit_artifact
from tribunal.confidence.app import ConfidenceDeployment
from tribunal.core import (
    InvalidArgumentError,
    ResourceExhaustedError,
    TribunalError,
    load_settings,
)
from tribunal.core.server._status import UndecodableRequest
from tribunal.deploy import SERVICES
from tribunal.deploy._grpc import UnimplementedMethodError
from tribunal.v1 import confidence_pb2, gateway_pb2

from tests.unit._confidence_data import synthetic_data


class _Context:
    """What Serve's proxy hands a method: a context the method sets the status on."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = fit_artifact(synthetic_data(400), FitConfig(alphas=(0.1,))).save(
        tmp_path_factory.mktemp("strict") / "c.json"
    )
    settings = load_settings(
        "tiny",
        confidence={"artifact_path": str(path), "alpha": 0.1, "max_items_per_request": 4},
        server={"max_id_chars": 16, "max_message_bytes": 4096},
    )
    return ConfidenceDeployment.func_or_class(settings.model_dump(mode="json"))


def _refused(deployment: Any, method: str, request: Any) -> tuple[type[Exception], _Context]:
    context = _Context()
    with pytest.raises((TribunalError, UnimplementedMethodError)) as caught:
        asyncio.run(getattr(deployment, method)(request, grpc_context=context))
    return type(caught.value), context


def test_every_field_is_held_to_the_limit_table(deployment: Any) -> None:
    long_id = confidence_pb2.ScoreRequest(item_id="i" * 17)
    error, context = _refused(deployment, "Score", long_id)
    assert error is InvalidArgumentError
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert context.details == (
        "item_id has 17 characters; the limit is 16 (server.max_id_chars): shorten it"
    )
    # A nested map key and the number of entries of one item: INVALID_ARGUMENT.
    many = confidence_pb2.Signals(judge_p_yes={f"j{i}": 0.5 for i in range(65)})
    error, context = _refused(deployment, "Score", confidence_pb2.ScoreRequest(signals=many))
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "confidence.max_signals_per_item" in context.details
    key = confidence_pb2.Signals(extra={"k" * 17: 0.5})
    error, context = _refused(deployment, "Score", confidence_pb2.ScoreRequest(signals=key))
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "signals.extra key" in context.details
    # A batch too big is the caller's to split: RESOURCE_EXHAUSTED, field and setting named.
    batch = confidence_pb2.BatchScoreRequest(items=[confidence_pb2.ScoreRequest()] * 5)
    error, context = _refused(deployment, "BatchScore", batch)
    assert error is ResourceExhaustedError
    assert context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "confidence.max_items_per_request" in context.details
    # A message over server.max_message_bytes, before any field is looked at.
    big = confidence_pb2.ScoreRequest(kb_content_version="v" * 5000)
    error, context = _refused(deployment, "Score", big)
    assert context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "server.max_message_bytes" in context.details
    # Handle callers (the gateway) are held to the same table: the typed error travels.
    with pytest.raises(InvalidArgumentError, match=r"server\.max_id_chars"):
        asyncio.run(deployment.Score(long_id))


def test_undecodable_bytes_and_unknown_methods_get_their_own_status(deployment: Any) -> None:
    undecodable = UndecodableRequest("tribunal.v1.ScoreRequest", 7, "DecodeError")
    error, context = _refused(deployment, "Score", undecodable)
    assert error is InvalidArgumentError
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "are not a valid tribunal.v1.ScoreRequest message" in context.details
    # Another service's method, routed here by its `application` metadata.
    error, context = _refused(deployment, "Answer", gateway_pb2.AnswerRequest(query="hi"))
    assert error is UnimplementedMethodError
    assert context.code == grpc.StatusCode.UNIMPLEMENTED
    assert context.details == (
        "this application serves tribunal.v1.ConfidenceService, which has no method Answer"
    )
    # A method of the same name but another request type is not this one either.
    error, context = _refused(deployment, "Score", gateway_pb2.AnswerRequest(query="hi"))
    assert context.code == grpc.StatusCode.UNIMPLEMENTED
    # Everything that is not a proto method name stays a plain missing attribute.
    assert not hasattr(deployment, "no_such_thing")
    assert not hasattr(deployment, "__no_such_dunder__")


class _Recorder:
    """A servicer that records what the proxy's deserializer produced."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def Score(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.seen.append(request)
        return confidence_pb2.ScoreResponse(item_id="seen")

    def BatchScore(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.seen.append(request)
        return confidence_pb2.BatchScoreResponse()


def test_the_proxy_servicer_functions_decode_tolerantly() -> None:
    import importlib

    for spec in SERVICES.values():  # what the Serve config and the chart list
        module, _, name = spec.servicer_function.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name))
    module, _, name = SERVICES["confidence"].servicer_function.rpartition(".")
    add = getattr(importlib.import_module(module), name)
    recorder = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            score = channel.unary_unary(
                "/tribunal.v1.ConfidenceService/Score",
                request_serializer=lambda data: data,
                response_deserializer=confidence_pb2.ScoreResponse.FromString,
            )
            valid = confidence_pb2.ScoreRequest(item_id="a1").SerializeToString()
            assert score(valid, timeout=10).item_id == "seen"
            rng = random.Random(20261202)
            undecodable = 0
            for _ in range(200):
                assert score(rng.randbytes(rng.randint(1, 64)), timeout=10).item_id == "seen"
            for request in recorder.seen[1:]:
                if isinstance(request, UndecodableRequest):
                    undecodable += 1
                    assert request.message_type == "tribunal.v1.ScoreRequest"
                else:
                    assert isinstance(request, confidence_pb2.ScoreRequest)
    finally:
        server.stop(0)
    assert recorder.seen[0] == confidence_pb2.ScoreRequest(item_id="a1")
    assert undecodable > 100  # most random bytes are no ScoreRequest; none crashed the decoder


def test_oversized_batches_are_resource_exhausted_in_the_ensemble_and_gateway() -> None:
    from tribunal.core import load_settings as settings_for
    from tribunal.ensemble import MatchRequestItem
    from tribunal.ensemble._matcher import validate_items
    from tribunal.kb import KbEntry

    settings = settings_for("tiny", ensemble={"max_items_per_request": 2})
    entry = KbEntry(id="e", question="q?", answer="a.")
    items = [MatchRequestItem(query="q", candidate=entry)] * 3
    with pytest.raises(ResourceExhaustedError, match=r"ensemble\.max_items_per_request"):
        validate_items(items, settings.ensemble)
