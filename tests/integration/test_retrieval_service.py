"""The retrieval service through a real gRPC server: the API, and each bad input's status."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from tribunal.core import Settings, load_settings
from tribunal.core.server import ServiceHost
from tribunal.kb import entry_to_proto
from tribunal.retrieval import KnowledgeBase
from tribunal.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from tests.integration._retrieval import ENTRIES, minilm

pytestmark = pytest.mark.models

Stub = retrieval_pb2_grpc.RetrievalServiceStub


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceHost, Stub]]:
    """One server for the module: build_host's host, serving KB collections in a temp dir."""
    from tribunal.retrieval.servicer import RetrievalServicer, _RetrievalHost

    data_dir = tmp_path_factory.mktemp("retrieval-service")
    settings = load_settings(
        "tiny",
        data_dir=str(data_dir),
        server={"port": 0, "metrics_port": None},
        retrieval={"max_top_k": 50, "max_query_chars": 200, "max_searches_per_request": 4},
    )
    # The host build_host makes, with the process's already-loaded MiniLM.
    servicer = RetrievalServicer(
        lambda: KnowledgeBase(settings.data_dir / "retrieval", minilm(), settings.retrieval)
    )
    host = _RetrievalHost(settings, servicer)
    port = host.start()
    assert host.wait_until_ready(120), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = Stub(channel)
        response = stub.Upsert(
            retrieval_pb2.UpsertRequest(
                collection="faq",
                entries=[entry_to_proto(e) for e in ENTRIES],
                create_collection=True,
            ),
            timeout=60,
        )
        assert (response.upserted, response.total_entries) == (5, 5)
        health = health_pb2_grpc.HealthStub(channel)
        check = health.Check(health_pb2.HealthCheckRequest(service="tribunal.v1.RetrievalService"))
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        yield host, stub
    host.stop(0)


def _search(stub: Stub, query: str, **fields: Any) -> retrieval_pb2.SearchResponse:
    request = retrieval_pb2.SearchRequest(collection="faq", query=query, top_k=3, **fields)
    return stub.Search(request, timeout=30)


def test_build_host_is_registered_for_tribunal_serve(tiny_settings: Settings) -> None:
    from tribunal.deploy import SERVICES

    assert SERVICES["retrieval"].host_factory == "tribunal.retrieval.servicer:build_host"
    host = SERVICES["retrieval"].build_host(tiny_settings)  # not started: loads in start()
    assert (host.name, host.ready) == ("retrieval", False)


def test_search_returns_entries_with_per_retriever_ranks_and_latencies(
    service: tuple[ServiceHost, Stub],
) -> None:
    _, stub = service
    response = _search(stub, "how long should I wash my hands with soap?")
    top = response.hits[0]
    assert top.entry.id == "handwashing"
    assert top.entry.answer == ENTRIES[4].answer
    assert (top.rank, top.dense_rank, top.sparse_rank) == (1, 1, 1)
    assert top.HasField("dense_score")
    assert top.HasField("sparse_score")
    assert not top.HasField("rerank_score")
    assert top.score == pytest.approx(2 / 61)  # RRF, k = 60, first in both lists
    assert {s.stage for s in response.latencies} >= {"embed", "dense", "sparse", "fuse"}
    dense_only = _search(stub, "pets", mode=retrieval_pb2.SEARCH_MODE_DENSE)
    assert all(not h.HasField("sparse_rank") for h in dense_only.hits)
    batch = stub.BatchSearch(
        retrieval_pb2.BatchSearchRequest(
            searches=[
                retrieval_pb2.SearchRequest(collection="faq", query=q, top_k=1)
                for q in ("incubation period", "dog or cat infected")
            ]
        ),
        timeout=30,
    )
    assert [r.hits[0].entry.id for r in batch.results] == ["incubation", "pets"]


def test_upsert_and_delete_through_grpc_are_visible_at_once(
    service: tuple[ServiceHost, Stub],
) -> None:
    _, stub = service
    entry = common_pb2.KbEntry(id="vaccine", question="Is there a vaccine?", answer="Yes.")
    stub.Upsert(retrieval_pb2.UpsertRequest(collection="faq", entries=[entry]), timeout=60)
    assert _search(stub, "is a vaccine available").hits[0].entry.id == "vaccine"
    deleted = stub.Delete(
        retrieval_pb2.DeleteRequest(collection="faq", ids=["vaccine", "nope"]), timeout=30
    )
    assert (deleted.deleted, list(deleted.missing_ids)) == (1, ["nope"])
    assert "vaccine" not in [h.entry.id for h in _search(stub, "is a vaccine available").hits]
    stats = stub.Stats(retrieval_pb2.StatsRequest(), timeout=30).collections
    assert [(s.name, s.entries, s.index_type, s.dimension) for s in stats] == [
        ("faq", 5, "IndexFlatIP", 384)
    ]


def _search_request(**fields: Any) -> Callable[[Stub], Any]:
    request = retrieval_pb2.SearchRequest(
        **{"collection": "faq", "query": "masks", "top_k": 3, **fields}
    )
    return lambda stub: stub.Search(request, timeout=30)


def _upsert_request(*entries: common_pb2.KbEntry, **fields: Any) -> Callable[[Stub], Any]:
    request = retrieval_pb2.UpsertRequest(
        **{"collection": "faq", "entries": list(entries), **fields}
    )
    return lambda stub: stub.Upsert(request, timeout=30)


def _delete_request(collection: str, *ids: str) -> Callable[[Stub], Any]:
    request = retrieval_pb2.DeleteRequest(collection=collection, ids=list(ids))
    return lambda stub: stub.Delete(request, timeout=30)


_Q = common_pb2.KbEntry
BAD_INPUTS = {
    "empty query": (_search_request(query="  "), "INVALID_ARGUMENT", "query", "query is empty"),
    "oversized query": (
        _search_request(query="x" * 201),
        "INVALID_ARGUMENT",
        "query",
        "the limit is 200",
    ),
    "top_k zero": (_search_request(top_k=0), "INVALID_ARGUMENT", "top_k", "between 1 and 50"),
    "top_k too big": (_search_request(top_k=51), "INVALID_ARGUMENT", "top_k", "between 1 and 50"),
    "unknown mode": (_search_request(mode=9), "INVALID_ARGUMENT", "mode", "HYBRID, DENSE"),
    "unknown collection": (
        _search_request(collection="nope"),
        "NOT_FOUND",
        None,
        "create it with an Upsert",
    ),
    "bad collection name": (
        _search_request(collection="../etc"),
        "INVALID_ARGUMENT",
        "collection",
        "letters, digits",
    ),
    "rerank without a reranker": (
        _search_request(rerank=True),
        "FAILED_PRECONDITION",
        None,
        "rerank=false",
    ),
    "batch too large": (
        lambda stub: stub.BatchSearch(
            retrieval_pb2.BatchSearchRequest(
                searches=[retrieval_pb2.SearchRequest(collection="faq", query="q", top_k=1)] * 5
            ),
            timeout=30,
        ),
        "RESOURCE_EXHAUSTED",
        None,
        "the limit is 4",
    ),
    "bad search inside a batch": (
        lambda stub: stub.BatchSearch(
            retrieval_pb2.BatchSearchRequest(
                searches=[retrieval_pb2.SearchRequest(collection="faq", query="q", top_k=99)]
            ),
            timeout=30,
        ),
        "INVALID_ARGUMENT",
        "searches[0].top_k",
        "between 1 and 50",
    ),
    "duplicate ids in an upsert": (
        _upsert_request(_Q(id="a", question="Alpha?"), _Q(id="a", question="Beta?")),
        "INVALID_ARGUMENT",
        "entries",
        "duplicate entry id(s) in the request: ['a']",
    ),
    "empty id in an upsert": (
        _upsert_request(_Q(id="", question="Alpha?")),
        "INVALID_ARGUMENT",
        "entries[0].id",
        "needs a non-empty id",
    ),
    "entry with nothing to search": (
        _upsert_request(_Q(id="x")),
        "INVALID_ARGUMENT",
        "entries[0]",
        "no question, answer or chunk text",
    ),
    "no entries": (_upsert_request(), "INVALID_ARGUMENT", "entries", "at least one entry"),
    "upsert into a missing collection": (
        _upsert_request(_Q(id="a", question="Alpha?"), collection="nope"),
        "NOT_FOUND",
        None,
        "create_collection",
    ),
    "no ids to delete": (_delete_request("faq"), "INVALID_ARGUMENT", "ids", "send the ids"),
    "empty id to delete": (_delete_request("faq", ""), "INVALID_ARGUMENT", "ids[0]", "non-empty"),
    "duplicate ids to delete": (
        _delete_request("faq", "a", "a"),
        "INVALID_ARGUMENT",
        "ids",
        "duplicate id(s)",
    ),
    "delete in a missing collection": (_delete_request("nope", "a"), "NOT_FOUND", None, "nope"),
    "stats of a missing collection": (
        lambda stub: stub.Stats(retrieval_pb2.StatsRequest(collection="nope"), timeout=30),
        "NOT_FOUND",
        None,
        "does not exist",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_gets_its_status_code_and_a_message_that_says_what_to_fix(
    service: tuple[ServiceHost, Stub], case: str
) -> None:
    _, stub = service
    call, code, field, fragment = BAD_INPUTS[case]
    with pytest.raises(grpc.RpcError) as caught:
        call(stub)
    error: Any = caught.value
    assert error.code().name == code
    assert fragment in error.details()
    if field is not None:  # INVALID_ARGUMENT carries the field in google.rpc.BadRequest
        status = rpc_status.from_call(error)
        assert status is not None
        violation = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(violation)
        assert violation.field_violations[0].field == field
