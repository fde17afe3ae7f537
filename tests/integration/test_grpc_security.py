"""TLS, mutual TLS, credentials and roles on a real ServiceHost; health stays open for probes.

A credentials file gives each caller a name and a role: without a credential a call is
UNAUTHENTICATED, a ``query`` credential on ``Upsert`` is PERMISSION_DENIED, and the
servicer learns who called (the KB change audit records it). During a rotation the old
and the new token both work until the old one is removed from the file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import ValidationError
from tribunal.core import ServerSettings
from tribunal.core.server import ServiceBinding, ServiceHost, caller_of, token_sha256
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc

from tests.integration._certificates import certificate
from tests.integration._test_service import binding

pytestmark = pytest.mark.security

TOKEN = "s3cret-token-of-the-admin"


def _host(*bindings: ServiceBinding, **server: object) -> Iterator[int]:
    settings = ServerSettings(port=0, metrics_port=None, grace_seconds=0.5, **server)  # type: ignore[arg-type]
    host = ServiceHost(settings, name="secured", bindings=list(bindings) or [binding()])
    port = host.start()
    assert host.wait_until_ready(10)
    try:
        yield port
    finally:
        host.stop(0)


def _score(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] | None = None) -> float:
    stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
    request = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.25))
    response = stub.Score(request, timeout=5, metadata=metadata)
    return float(response.confidence)


def test_bearer_token_guards_methods_but_not_health() -> None:
    for port in _host(auth_token=TOKEN):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for metadata in (None, (("authorization", "Bearer wrong"),)):
                with pytest.raises(grpc.RpcError) as denied:
                    _score(channel, metadata)
                assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "authorization: Bearer" in denied.value.details()
            assert _score(channel, (("authorization", f"Bearer {TOKEN}"),)) == 0.25
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_tls_and_mutual_tls(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path, "server")
    for port in _host(tls_cert_file=cert, tls_key_file=key):
        trusted = grpc.ssl_channel_credentials(cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", trusted) as channel:
            assert _score(channel) == 0.25
        with grpc.insecure_channel(f"localhost:{port}") as plain, pytest.raises(grpc.RpcError):
            _score(plain)

    client_cert, client_key = certificate(tmp_path, "client")
    for port in _host(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=client_cert):
        anonymous = grpc.ssl_channel_credentials(cert.read_bytes())
        with (
            grpc.secure_channel(f"localhost:{port}", anonymous) as channel,
            pytest.raises(grpc.RpcError),
        ):
            _score(channel)
        identified = grpc.ssl_channel_credentials(
            cert.read_bytes(), client_key.read_bytes(), client_cert.read_bytes()
        )
        with grpc.secure_channel(f"localhost:{port}", identified) as channel:
            assert _score(channel) == 0.25


def test_half_a_tls_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="go together"):
        ServerSettings(tls_cert_file=tmp_path / "a.pem")


class RecordingRetrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    """Answers Upsert and Search, remembering who called (the KB is not the point here)."""

    def __init__(self) -> None:
        self.callers: list[str] = []

    def Upsert(
        self, request: retrieval_pb2.UpsertRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.UpsertResponse:
        self.callers.append(caller_of(context).name)
        return retrieval_pb2.UpsertResponse(upserted=len(request.entries))

    def Search(
        self, request: retrieval_pb2.SearchRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.SearchResponse:
        self.callers.append(caller_of(context).name)
        return retrieval_pb2.SearchResponse(request_id=request.request_id)


def _credentials(path: Path, **tokens: tuple[str, str]) -> Path:
    """Write ``name=(role, token)`` credentials, stored as the tokens' sha256."""
    entries = [
        {"name": name, "role": role, "token_sha256": token_sha256(token)}
        for name, (role, token) in tokens.items()
    ]
    path.write_text(yaml.safe_dump({"credentials": entries}), encoding="utf-8")
    return path


def _as(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def test_roles_unauthenticated_then_permission_denied(tmp_path: Path) -> None:
    servicer = RecordingRetrieval()
    mounted = ServiceBinding(
        "tribunal.v1.RetrievalService",
        lambda server: retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(  # type: ignore[no-untyped-call]
            servicer, server
        ),
    )
    path = _credentials(
        tmp_path / "credentials.yaml",
        reader=("query", "reader-token-0123456789"),
        editor=("admin", "editor-token-0123456789"),
    )
    for port in _host(mounted, credentials_file=path):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            upsert = retrieval_pb2.UpsertRequest(collection="faq")
            search = retrieval_pb2.SearchRequest(collection="faq", query="q", top_k=1)
            with pytest.raises(grpc.RpcError) as missing:
                stub.Upsert(upsert, timeout=5)
            assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as denied:
                stub.Upsert(upsert, timeout=5, metadata=_as("reader-token-0123456789"))
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "needs an admin credential" in denied.value.details()
            stub.Search(search, timeout=5, metadata=_as("reader-token-0123456789"))
            stub.Upsert(upsert, timeout=5, metadata=_as("editor-token-0123456789"))
    # The refused calls never reached the servicer; the others name their caller.
    assert servicer.callers == ["reader", "editor"]


def test_old_and_new_credential_both_work_during_rotation(tmp_path: Path) -> None:
    path = _credentials(tmp_path / "credentials.yaml", gateway_1=("query", "old-token-0123456789"))
    for port in _host(credentials_file=path):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert _score(channel, _as("old-token-0123456789")) == 0.25
            # Step 1: the new credential is added next to the old one; no restart.
            _credentials(
                path,
                gateway_1=("query", "old-token-0123456789"),
                gateway_2=("query", "new-token-0123456789"),
            )
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert _score(channel, _as("new-token-0123456789")) == 0.25
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, "the new credential was never accepted"
                    time.sleep(0.2)
            assert _score(channel, _as("old-token-0123456789")) == 0.25
            # Step 2: the old one is removed; it stops working, the new one goes on.
            _credentials(path, gateway_2=("query", "new-token-0123456789"))
            deadline = time.monotonic() + 10
            code = None
            while code is None:
                try:
                    _score(channel, _as("old-token-0123456789"))
                except grpc.RpcError as exc:
                    code = exc.code()
                assert time.monotonic() < deadline, "the old credential was never dropped"
                time.sleep(0.2)
            assert code == grpc.StatusCode.UNAUTHENTICATED
            assert _score(channel, _as("new-token-0123456789")) == 0.25


def test_the_gateway_sends_the_stage_credential_its_file_holds(tmp_path: Path) -> None:
    from tribunal.core import UnauthenticatedError
    from tribunal.gateway._grpc_transport import GrpcTransport, TokenFile

    path = _credentials(
        tmp_path / "credentials.yaml",
        gateway_1=("query", "old-token-0123456789"),
        gateway_2=("query", "new-token-0123456789"),
    )
    token = tmp_path / "stage-token"
    token.write_text("old-token-0123456789\n")
    request = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.25))
    for port in _host(credentials_file=path):
        transport = GrpcTransport(
            {"confidence": f"127.0.0.1:{port}"}, max_message_bytes=1 << 20, token=TokenFile(token)
        )
        try:
            assert transport.call("confidence", "Score", request, 5.0).confidence == 0.25
            token.write_text("a-token-nobody-has-01234")
            with pytest.raises(UnauthenticatedError, match=r"gateway\.stage_token_file"):
                transport.call("confidence", "Score", request, 5.0)
            # The file is read again when it changes: a rotated token needs no restart.
            token.write_text("new-token-0123456789")
            assert transport.call("confidence", "Score", request, 5.0).confidence == 0.25
        finally:
            transport.close()
