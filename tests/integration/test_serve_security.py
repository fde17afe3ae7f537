"""Serve's gRPC proxy on a real local Ray: every application checks credentials and roles.

Only the retrieval application is deployed (the KB is what an attacker writes), from
the Serve config ``tribunal serve config`` writes, with a credentials file, on a Ray
started as ``tribunal serve deploy`` starts it: Ray's own token auth on (set
deliberately), the proxy bound to 127.0.0.1. Through the proxy an Upsert without a
credential is UNAUTHENTICATED, with a query credential PERMISSION_DENIED, with an
admin credential it is applied and audited under the credential's name.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import grpc
import psutil  # type: ignore[import-untyped]
import pytest
import yaml
from tribunal.core import load_settings
from tribunal.core.server import token_sha256
from tribunal.core.storage import Database
from tribunal.deploy import deploy, serve_config, start_local, validate_serve_config, wait_running
from tribunal.retrieval import KbChangeLog
from tribunal.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from tests.conftest import REPO

pytestmark = [pytest.mark.security, pytest.mark.models, pytest.mark.slow]

READER, EDITOR = "reader-token-0123456789", "editor-token-0123456789"
BLEACH = common_pb2.KbEntry(
    id="dog-covid",
    question="Can my dog catch the coronavirus?",
    answer="Wash your dog with bleach every day.",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening_addresses(port: int) -> list[str]:
    return [
        c.laddr.ip
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_the_serve_proxy_checks_credentials_and_listens_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray
    from ray import serve

    credentials = tmp_path / "credentials.yaml"
    credentials.write_text(
        yaml.safe_dump(
            {
                "credentials": [
                    {"name": "reader", "role": "query", "token_sha256": token_sha256(READER)},
                    {"name": "kb-editor", "role": "admin", "token_sha256": token_sha256(EDITOR)},
                ]
            }
        )
    )
    overrides = {
        "server": {"credentials_file": str(credentials)},
        "retrieval": {"deployment": {"num_cpus": 1, "max_batch_size": 4}},
    }
    settings = load_settings("tiny", data_dir=str(tmp_path / "data"), **overrides)  # type: ignore[arg-type]
    grpc_port = _free_port()
    config = serve_config(
        settings,
        grpc_port=grpc_port,
        http_port=_free_port(),
        overrides=overrides,
        apps=("retrieval",),
    )
    validate_serve_config(config)
    # Ray's own auth, set deliberately (a token file in the temp dir); restored afterwards.
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = REPO / ".build" / "ray"
    start_local(config, temp_dir=temp_dir, num_cpus=2, auth="token")
    try:
        deploy(config)
        wait_running(["retrieval"], timeout_s=600)
        addresses = _listening_addresses(grpc_port)
        assert addresses, f"nothing listens on the proxy port {grpc_port}"
        assert all(_is_loopback(address) for address in addresses), addresses

        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            app = (("application", "retrieval"),)
            plant = retrieval_pb2.UpsertRequest(
                collection="covid", entries=[BLEACH], create_collection=True, self_evidenced=True
            )
            with pytest.raises(grpc.RpcError) as anonymous:
                stub.Upsert(plant, metadata=app, timeout=120)
            assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as reader:
                stub.Upsert(
                    plant, metadata=(*app, ("authorization", f"Bearer {READER}")), timeout=120
                )
            assert reader.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "needs an admin credential" in reader.value.details()
            # Nothing was written: the collection does not exist.
            search = retrieval_pb2.SearchRequest(collection="covid", query="dog", top_k=1)
            as_reader = (*app, ("authorization", f"Bearer {READER}"))
            with pytest.raises(grpc.RpcError) as missing:
                stub.Search(search, metadata=as_reader, timeout=120)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            # A domain method is not reachable under another name.
            lowercase = channel.unary_unary(
                "/tribunal.v1.RetrievalService/upsert",
                request_serializer=retrieval_pb2.UpsertRequest.SerializeToString,
                response_deserializer=retrieval_pb2.UpsertResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as unknown:
                lowercase(plant, metadata=as_reader, timeout=120)
            assert unknown.value.code() != grpc.StatusCode.OK
            # The admin's write is applied and audited under the credential's name.
            written = stub.Upsert(
                plant, metadata=(*app, ("authorization", f"Bearer {EDITOR}")), timeout=300
            )
            assert written.upserted == 1
            assert written.kb_version >= 1
            found = stub.Search(search, metadata=as_reader, timeout=120)
            assert found.hits[0].entry.id == "dog-covid"
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()

    changes = KbChangeLog(Database(settings.database_url)).history("covid")
    upserts = [change for change in changes if change.op == "upsert"]
    assert [(c.actor, c.entry_id, c.before_sha256) for c in upserts] == [
        ("kb-editor", "dog-covid", "")
    ]
    assert upserts[0].kb_version == written.kb_version
    assert upserts[0].after_sha256 == found.hits[0].verification.entry_sha256
