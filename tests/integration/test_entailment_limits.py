"""Long quotes no longer freeze the entailment service.

The real service (``build_host``) with the model-free lexical checker: the quote that
used to take minutes is refused at once, naming the field; a heavy but valid
``CheckQuotes`` is cut off at its deadline, with health and ``/metrics`` answering
meanwhile, and its work stops instead of running on.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.request
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tribunal.core import load_settings
from tribunal.core.server import ServiceHost
from tribunal.entailment.servicer import build_host
from tribunal.v1 import entailment_pb2, entailment_pb2_grpc

WORDS = ["the", "virus", "spreads", "between", "people", "in", "close", "contact", "droplets"]


def _text(rng: random.Random, chars: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(chars // 4))[:chars]


@pytest.fixture
def served() -> Iterator[tuple[ServiceHost, grpc.Channel]]:
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": 0, "max_ongoing_requests": 1, "max_queued_requests": 0},
        entailment={"fast_backend": "lexical", "two_stage": False},
    )
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(60), host.load_error
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield host, channel
    finally:
        channel.close()
        host.stop(0)


def test_the_quote_that_froze_the_service_is_refused_at_once(
    served: tuple[ServiceHost, grpc.Channel],
) -> None:
    _, channel = served
    rng = random.Random(0)
    stub = entailment_pb2_grpc.EntailmentServiceStub(channel)
    quote = entailment_pb2.QuoteQuery(premise=_text(rng, 20_000), quote=_text(rng, 10_000))
    started = time.perf_counter()
    with pytest.raises(grpc.RpcError) as caught:
        stub.CheckQuotes(entailment_pb2.CheckQuotesRequest(quotes=[quote]), timeout=30)
    assert time.perf_counter() - started < 2.0
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "quotes[0].quote has 10000 characters" in caught.value.details()
    # Through Check too: the pair's quote field.
    pair = entailment_pb2.EntailmentPair(premise="p", hypothesis="h", quote="q" * 1_001)
    with pytest.raises(grpc.RpcError) as check:
        stub.Check(entailment_pb2.CheckRequest(pairs=[pair]), timeout=30)
    assert check.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "pairs[0].quote" in check.value.details()


def test_heavy_work_stops_at_its_deadline_and_health_answers_meanwhile(
    served: tuple[ServiceHost, grpc.Channel],
) -> None:
    host, channel = served
    rng = random.Random(1)
    premise = _text(rng, 20_000)
    quotes = [
        entailment_pb2.QuoteQuery(premise=premise, quote=_text(rng, 1_000)) for _ in range(64)
    ]
    stub = entailment_pb2_grpc.EntailmentServiceStub(channel)
    outcome: dict[str, object] = {}

    def heavy() -> None:
        started = time.perf_counter()
        try:
            stub.CheckQuotes(entailment_pb2.CheckQuotesRequest(quotes=quotes), timeout=1.0)
            outcome["code"] = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            outcome["code"] = exc.code()
        outcome["seconds"] = time.perf_counter() - started

    worker = threading.Thread(target=heavy)
    worker.start()
    while host.admission.ongoing == 0 and worker.is_alive():
        time.sleep(0.01)
    # The only slot is busy: health and /metrics still answer, and another call is refused.
    started = time.perf_counter()
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with urllib.request.urlopen(f"http://127.0.0.1:{host.metrics_port}/metrics", timeout=2) as r:
        assert b"tribunal_grpc_requests_total" in r.read()
    assert time.perf_counter() - started < 2.0
    with pytest.raises(grpc.RpcError) as refused:
        stub.CheckQuotes(entailment_pb2.CheckQuotesRequest(quotes=quotes[:1]), timeout=5)
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    worker.join(30)
    assert outcome["code"] is grpc.StatusCode.DEADLINE_EXCEEDED
    assert float(outcome["seconds"]) < 2.0  # type: ignore[arg-type]
    # The abandoned work stops at its next quote: the slot is free again soon.
    deadline = time.monotonic() + 5
    while host.admission.ongoing:
        assert time.monotonic() < deadline, "the work went on after its deadline"
        time.sleep(0.05)
