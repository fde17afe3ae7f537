"""Mutual TLS as ``tribunal serve deploy`` and the chart set it up, on real gRPC servers.

Serve's gRPC proxy bound by the worker hook with what ``serve deploy`` passes its workers
by default, and a Serve replica's own gRPC server (the gateway's calls to its stages)
bound by Ray with the variables the chart sets: each refuses a plaintext client, a TLS
client without a certificate and one whose certificate another CA signed, and answers a
client presenting a certificate from the deployment's CA.
"""

from __future__ import annotations

import ipaddress
from concurrent import futures
from pathlib import Path

import grpc
import psutil  # type: ignore[import-untyped]
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tribunal.deploy import issue_ca, issue_certificate, local_tls, ray_tls_env
from tribunal.deploy._local import _runtime_env
from tribunal.deploy._serve_grpc import configure_serve_grpc, proxy_server_credentials


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def _server() -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)  # type: ignore[no-untyped-call]
    return server


def _check(channel: grpc.Channel) -> grpc.StatusCode | int:
    """SERVING (1) when the call gets through, else the status code of the failure."""
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(  # type: ignore[no-untyped-call]
            health_pb2.HealthCheckRequest(), timeout=5
        )
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    finally:
        channel.close()
    return int(reply.status)


def _clients(
    port: int, ca: Path, good: tuple[Path, Path], other: tuple[Path, Path]
) -> dict[str, object]:
    target = f"127.0.0.1:{port}"
    roots = ca.read_bytes()

    def tls(cert: tuple[Path, Path] | None) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=roots,
            private_key=cert[1].read_bytes() if cert else None,
            certificate_chain=cert[0].read_bytes() if cert else None,
        )
        return grpc.secure_channel(target, credentials)

    return {
        "plaintext": _check(grpc.insecure_channel(target)),
        "tls without a client certificate": _check(tls(None)),
        "client certificate of another CA": _check(tls(other)),
        "client certificate of the deployment's CA": _check(tls(good)),
    }


_REFUSED = {
    "plaintext": grpc.StatusCode.UNAVAILABLE,
    "tls without a client certificate": grpc.StatusCode.UNAVAILABLE,
    "client certificate of another CA": grpc.StatusCode.UNAVAILABLE,
    "client certificate of the deployment's CA": health_pb2.HealthCheckResponse.SERVING,
}


@pytest.fixture
def other_ca_client(tmp_path: Path) -> tuple[Path, Path]:
    ca = issue_ca(tmp_path / "other-ca")
    files = issue_certificate(
        ca, tmp_path / "other.crt", tmp_path / "other.key", common_name="x", dns_names=["localhost"]
    )
    return files.cert, files.key


@pytest.fixture
def serve_grpc_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve's binding functions, restored after the hook patched them."""
    from ray.serve._private import default_impl, replica

    monkeypatch.setattr(default_impl, "add_grpc_address", default_impl.add_grpc_address)
    monkeypatch.setattr(replica, "add_port_to_grpc_server", replica.add_port_to_grpc_server)


def test_serve_deploy_defaults_give_the_proxy_mutual_tls_on_loopback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    other_ca_client: tuple[Path, Path],
    serve_grpc_hook: None,
) -> None:
    from ray.serve._private import default_impl

    tls = local_tls(tmp_path / "tls")  # what `tribunal serve deploy` makes (--tls mutual)
    for path in (tls.ca.with_suffix(".key"), tls.node.key, tls.client.key):
        assert path.stat().st_mode & 0o777 == 0o600
    # The environment serve deploy gives every Ray worker (default --grpc-host 127.0.0.1).
    worker_env = _runtime_env({}, "127.0.0.1", tls)
    assert worker_env["worker_process_setup_hook"].endswith("configure_serve_grpc")
    for name, value in worker_env["env_vars"].items():
        monkeypatch.setenv(name, value)
    configure_serve_grpc()
    server = _server()
    # What Serve's proxy does at start; the hook binds it with TLS on 127.0.0.1.
    port = default_impl.add_grpc_address(server, "[::]:0")
    server.start()
    try:
        listening = [
            c.laddr
            for c in psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        ]
        assert listening
        assert all(_loopback(address.ip) for address in listening), listening
        outcomes = _clients(port, tls.ca, (tls.client.cert, tls.client.key), other_ca_client)
    finally:
        server.stop(None)
    assert outcomes == _REFUSED


def test_stage_servers_under_the_charts_ray_tls_require_client_certificates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_ca_client: tuple[Path, Path]
) -> None:
    # As the chart's init container does: a CA, then the pod's certificate for its IP.
    ca = issue_ca(tmp_path / "ca")
    pod = issue_certificate(
        ca,
        tmp_path / "pod" / "tls.crt",
        tmp_path / "pod" / "tls.key",
        common_name="pod",
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
    )
    for name, value in ray_tls_env(ca.cert, pod).items():
        monkeypatch.setenv(name, value)
    from ray._common.tls_utils import add_port_to_grpc_server

    server = _server()
    # How a Serve replica binds the gRPC server the gateway's handle calls reach.
    port = add_port_to_grpc_server(server, "127.0.0.1:0")
    server.start()
    try:
        outcomes = _clients(port, ca.cert, (pod.cert, pod.key), other_ca_client)
    finally:
        server.stop(None)
    assert outcomes == _REFUSED


def test_the_proxy_hook_refuses_half_a_tls_configuration(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="go together"):
        proxy_server_credentials({"TRIBUNAL_GRPC_PROXY_TLS_CERT": str(tmp_path / "c")})
    with pytest.raises(ValueError, match="needs"):
        proxy_server_credentials({"TRIBUNAL_GRPC_PROXY_TLS_CLIENT_CA": str(tmp_path / "c")})
    with pytest.raises(ValueError, match="cannot read"):
        proxy_server_credentials(
            {
                "TRIBUNAL_GRPC_PROXY_TLS_CERT": str(tmp_path / "missing.crt"),
                "TRIBUNAL_GRPC_PROXY_TLS_KEY": str(tmp_path / "missing.key"),
            }
        )
    assert proxy_server_credentials({}) is None


def test_a_client_certificate_needs_its_key_and_a_ca(tmp_path: Path) -> None:
    from tribunal.core import ConfigError
    from tribunal.core.server import open_channel

    tls = local_tls(tmp_path / "tls")
    with pytest.raises(ConfigError, match="go together"):
        open_channel("127.0.0.1:1", tls_ca=tls.ca, tls_cert=tls.client.cert)
    with pytest.raises(ConfigError, match="give its CA"):
        open_channel("127.0.0.1:1", tls_cert=tls.client.cert, tls_key=tls.client.key)
    with pytest.raises(ConfigError, match="cannot read the TLS key"):
        open_channel(
            "127.0.0.1:1", tls_ca=tls.ca, tls_cert=tls.client.cert, tls_key=tmp_path / "none"
        )
    open_channel(
        "127.0.0.1:1", tls_ca=tls.ca, tls_cert=tls.client.cert, tls_key=tls.client.key
    ).close()


def test_local_tls_is_made_once_and_reused(tmp_path: Path) -> None:
    first = local_tls(tmp_path / "tls")
    made = first.node.cert.read_bytes()
    again = local_tls(tmp_path / "tls")
    assert again.node.cert.read_bytes() == made
    first.node.cert.unlink()
    assert local_tls(tmp_path / "tls").node.cert.read_bytes() != made
