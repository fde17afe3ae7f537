"""Every outgoing gRPC client dials through one builder, which never sends a credential
in plaintext beyond loopback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tribunal.core import ConfigError
from tribunal.core.server import open_channel
from tribunal.core.server._channel import host_of

SERVICES = Path(__file__).resolve().parents[2] / "services" / "tribunal"


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("127.0.0.1:50051", "127.0.0.1"),
        ("[::1]:50051", "::1"),
        ("localhost:9000", "localhost"),
        ("dns:///gateway.example:443", "gateway.example"),
        ("unix:/tmp/tribunal.sock", "localhost"),
    ],
)
def test_the_host_of_a_target(address: str, host: str) -> None:
    assert host_of(address) == host


@pytest.mark.parametrize(
    "address", ["10.0.0.7:50051", "gateway.example:443", "[2001:db8::1]:50051", "0.0.0.0:1"]
)
def test_a_credential_is_never_sent_in_plaintext_beyond_loopback(address: str) -> None:
    with pytest.raises(ConfigError) as refused:
        open_channel(address, sends_credentials=True, what="the gateway")
    assert f"refusing to send a credential in plaintext to the gateway at {address}" in str(
        refused.value
    )
    open_channel(address, sends_credentials=False).close()  # no credential: allowed


@pytest.mark.parametrize("address", ["127.0.0.1:50051", "[::1]:50051", "localhost:50051"])
def test_loopback_may_carry_a_credential_in_plaintext(address: str) -> None:
    open_channel(address, sends_credentials=True).close()


def test_no_client_builds_its_own_channel() -> None:
    """Only the builder opens channels (a test double or a proxy in tests/ may)."""
    builders = re.compile(r"grpc\.(insecure_channel|secure_channel|ssl_channel_credentials)\(")
    found = [
        str(path.relative_to(SERVICES))
        for path in SERVICES.rglob("*.py")
        if "v1" not in path.parts and builders.search(path.read_text(encoding="utf-8"))
    ]
    assert found == ["core/server/_channel.py"], found
