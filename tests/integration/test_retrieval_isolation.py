"""One bad write or one broken collection never takes the retrieval service down.

Through a real gRPC server (``_RetrievalHost``, the host ``tribunal serve retrieval``
runs) on the real MiniLM: entries with no keyword-search terms are refused naming the
field; a collection that holds such an entry anyway (written by an older version) loads;
a collection whose files are broken is reported (Stats, health, log) while the others
serve; all of it again after a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from tribunal.core import Settings, load_settings
from tribunal.kb import KbEntry, entry_to_proto
from tribunal.retrieval import KnowledgeBase
from tribunal.retrieval._collection import Collection
from tribunal.retrieval.servicer import RetrievalServicer, _RetrievalHost
from tribunal.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from tests.integration._retrieval import ENTRIES, minilm

pytestmark = pytest.mark.models

Stub = retrieval_pb2_grpc.RetrievalServiceStub
SERVICE = "tribunal.v1.RetrievalService"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        "tiny", data_dir=str(tmp_path / "data"), server={"port": 0, "metrics_port": None}
    )


@pytest.fixture
def serve(settings: Settings) -> Iterator[Callable[[], tuple[Stub, grpc.Channel]]]:
    """Start (again) a retrieval host on the same data dir; stops the previous one."""
    running: list[tuple[_RetrievalHost, grpc.Channel]] = []

    def start() -> tuple[Stub, grpc.Channel]:
        while running:
            host, channel = running.pop()
            channel.close()
            host.stop(0)
        servicer = RetrievalServicer(
            lambda: KnowledgeBase(settings.data_dir / "retrieval", minilm(), settings.retrieval)
        )
        host = _RetrievalHost(settings, servicer)
        port = host.start()
        assert host.wait_until_ready(120), host.load_error
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        running.append((host, channel))
        return Stub(channel), channel

    yield start
    for host, channel in running:
        channel.close()
        host.stop(0)


def _upsert(stub: Stub, collection: str, *entries: common_pb2.KbEntry) -> None:
    stub.Upsert(
        retrieval_pb2.UpsertRequest(
            collection=collection, entries=list(entries), create_collection=True
        ),
        timeout=60,
    )


def _search(stub: Stub, collection: str, query: str) -> list[str]:
    response = stub.Search(
        retrieval_pb2.SearchRequest(collection=collection, query=query, top_k=3), timeout=30
    )
    return [hit.entry.id for hit in response.hits]


def _health(channel: grpc.Channel, service: str) -> int:
    check = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=5
    )
    return check.status  # type: ignore[no-any-return]


UNSEARCHABLE = {
    "stopwords only": (common_pb2.KbEntry(id="x", question="the", answer="a"), "question"),
    "NUL characters only": (
        common_pb2.KbEntry(id="x", question="\x00\x00\x00", answer="\x00"),
        "question",
    ),
    "emoji only": (common_pb2.KbEntry(id="x", question="😀🎉", answer="👍"), "question"),
    "answer of stopwords": (common_pb2.KbEntry(id="x", answer="a the of"), "answer"),
    "a chunk of symbols": (
        common_pb2.KbEntry(
            id="x",
            question="How long is the incubation period?",
            chunks=[common_pb2.Chunk(id="c0", text="Days."), common_pb2.Chunk(id="c1", text="—")],
        ),
        "chunks[1].text",
    ),
}


def test_entries_without_search_terms_are_refused_and_nothing_breaks(
    serve: Callable[[], tuple[Stub, grpc.Channel]],
) -> None:
    stub, channel = serve()
    _upsert(stub, "default", *[entry_to_proto(e) for e in ENTRIES])
    for case, (entry, field) in UNSEARCHABLE.items():
        with pytest.raises(grpc.RpcError) as caught:
            _upsert(stub, "default", entry)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, case
        assert "no searchable words" in caught.value.details(), case
        status = rpc_status.from_call(caught.value)
        assert status is not None
        violations = error_details_pb2.BadRequest()
        status.details[0].Unpack(violations)
        assert violations.field_violations[0].field == f"entries[0].{field}", case
    # Stats and every search mode still answer, now and after a restart.
    for _ in range(2):
        stats = stub.Stats(retrieval_pb2.StatsRequest(collection="default"), timeout=30)
        assert stats.collections[0].entries == len(ENTRIES)
        assert stats.collections[0].load_error == ""
        assert _search(stub, "default", "how long should I wash my hands?")[0] == "handwashing"
        for mode in (retrieval_pb2.SEARCH_MODE_SPARSE, retrieval_pb2.SEARCH_MODE_DENSE):
            reply = stub.Search(
                retrieval_pb2.SearchRequest(collection="default", query="the", top_k=3, mode=mode),
                timeout=30,
            )
            assert len(reply.hits) <= 3
        assert _health(channel, SERVICE) == health_pb2.HealthCheckResponse.SERVING
        stub, channel = serve()


def test_a_broken_collection_is_reported_while_the_others_serve(
    settings: Settings, serve: Callable[[], tuple[Stub, grpc.Channel]]
) -> None:
    root = settings.data_dir / "retrieval"
    # Written before entries were checked: only terms-free texts, one entry of each kind.
    legacy = Collection("legacy", root / "legacy", minilm(), settings.retrieval)
    legacy.upsert([KbEntry("the", "the", "a"), KbEntry("nul", "\x00", "\x00")])
    legacy.close()
    good = Collection("default", root / "default", minilm(), settings.retrieval)
    good.upsert(list(ENTRIES))
    good.close()
    (root / "broken").mkdir()
    (root / "broken" / "entries.sqlite3").write_bytes(b"this is not a database" * 100)

    for _ in range(2):  # and again after a restart
        stub, channel = serve()
        stats = {
            s.name: s for s in stub.Stats(retrieval_pb2.StatsRequest(), timeout=30).collections
        }
        assert set(stats) == {"broken", "default", "legacy"}
        assert "DatabaseError" in stats["broken"].load_error
        assert (stats["default"].entries, stats["default"].load_error) == (len(ENTRIES), "")
        assert (stats["legacy"].entries, stats["legacy"].load_error) == (2, "")
        assert _search(stub, "default", "can my cat catch covid?")[0] == "pets"
        assert len(_search(stub, "legacy", "the")) <= 2  # dense finds them; BM25 cannot
        with pytest.raises(grpc.RpcError) as caught:
            _search(stub, "broken", "anything")
        assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "could not be loaded" in caught.value.details()
        assert _health(channel, SERVICE) == health_pb2.HealthCheckResponse.SERVING
        serving = health_pb2.HealthCheckResponse.SERVING
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        assert _health(channel, f"{SERVICE}/collection/default") == serving
        assert _health(channel, f"{SERVICE}/collection/broken") == not_serving
