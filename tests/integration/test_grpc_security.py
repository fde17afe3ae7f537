"""TLS, mutual TLS and the bearer token on a real ServiceHost; health stays open for probes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import ValidationError
from tribunal.core import ServerSettings
from tribunal.core.server import ServiceHost
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc

from tests.integration._test_service import binding

TOKEN = "s3cret-token"


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for localhost (openssl, as an operator would make one)."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def _host(**server: object) -> Iterator[int]:
    settings = ServerSettings(port=0, metrics_port=None, grace_seconds=0.5, **server)  # type: ignore[arg-type]
    host = ServiceHost(settings, name="secured", bindings=[binding()])
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
    cert, key = _certificate(tmp_path, "server")
    for port in _host(tls_cert_file=cert, tls_key_file=key):
        trusted = grpc.ssl_channel_credentials(cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", trusted) as channel:
            assert _score(channel) == 0.25
        with grpc.insecure_channel(f"localhost:{port}") as plain, pytest.raises(grpc.RpcError):
            _score(plain)

    client_cert, client_key = _certificate(tmp_path, "client")
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
