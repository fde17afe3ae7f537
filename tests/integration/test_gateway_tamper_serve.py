"""The tamper suite on the Serve path: stages on a real Ray Serve, replies rewritten
between the gateway and Serve's gRPC proxy never produce an ACCEPT.

The same signed KB, stages and rewrite modes as ``test_gateway_tamper`` (content,
provenance, cross-collection, relabelled verdicts, swapped ids, matcher and confidence
replies), but the retrieval, ensemble and confidence stages run as Serve applications
deployed from ``tribunal serve config`` on a local Ray started as ``tribunal serve
deploy`` starts it: Ray's token auth, every port on loopback, the gRPC proxy behind
mutual TLS. The tampering proxy dials Serve's proxy with the deployment's client
certificate and ``application`` metadata; the gateway dials the tampering proxy.

Starting Ray and the three applications takes minutes on 2 cores, so the module runs
under ``extended`` (``make test-all``); the gRPC path's suite runs in every ``make test``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from tribunal.deploy import deploy as deploy_config
from tribunal.deploy import local_tls, serve_config, start_local, wait_running

from loadtest.verified_kb import LEXICAL_CHECKER
from tests.conftest import REPO
from tests.integration import test_gateway_tamper as tamper
from tests.integration._cluster import ray_token_auth
from tests.integration._tamper_proxy import Mode, TamperProxy
from tests.integration.test_gateway_tamper import Gateway, Stages, gateway  # noqa: F401

# Ray and three applications take minutes to start on 2 cores: `make test-all` runs it.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.models,
    pytest.mark.tamper,
    pytest.mark.slow,
    pytest.mark.extended,
]

STAGE_APPS = ("retrieval", "ensemble", "confidence")
REPRESENTATIVE = "answer-injected-all-hashes-recomputed"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stages]:
    """The signed KB, the stages as Serve applications, the tampering proxy in front of
    Serve's gRPC proxy."""
    import ray
    from ray import serve

    settings, signer = tamper.write_signed_kb(tmp_path_factory)
    overrides: dict[str, Any] = {
        "entailment": LEXICAL_CHECKER,
        "confidence": {"plain_threshold": 0.5, "deployment": {"num_cpus": 0.25}},
        "retrieval": {"deployment": {"num_cpus": 0.5}},
        "ensemble": {"deployment": {"num_cpus": 0.5}},
    }
    config = serve_config(
        settings,
        grpc_port=_free_port(),
        http_port=_free_port(),
        overrides=overrides,
        apps=STAGE_APPS,
    )
    tls = local_tls(tmp_path_factory.mktemp("tls"))
    # Ray caches its auth settings when first imported (earlier tests did): refreshed here.
    with ray_token_auth(tmp_path_factory.mktemp("ray-auth")):
        started = start_local(
            config, temp_dir=REPO / ".build" / "ray", num_cpus=2, auth="token", tls=tls
        )
        credentials = grpc.ssl_channel_credentials(
            root_certificates=tls.ca.read_bytes(),
            private_key=tls.client.key.read_bytes(),
            certificate_chain=tls.client.cert.read_bytes(),
        )
        upstream = f"127.0.0.1:{started.grpc_port}"
        proxy = TamperProxy(
            upstream, upstream_channel=grpc.secure_channel(upstream, credentials), routed=True
        )
        try:
            deploy_config(config)
            wait_running(list(STAGE_APPS), timeout_s=900)
            tamper.capture_foreign(proxy)
            yield Stages(settings.data_dir, proxy, proxy.start(), signer)
        finally:
            proxy.stop()
            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()


def test_untampered_replies_through_serve_are_answered_and_refused_as_usual(
    gateway: Gateway,  # noqa: F811
    stages: Stages,
) -> None:
    tamper.test_untampered_replies_are_answered_and_refused_as_usual(gateway, stages)


@pytest.mark.parametrize(
    "mode",
    [m for m in tamper.MODES if m.name == REPRESENTATIVE],
    ids=lambda mode: mode.name,
)
def test_an_injected_answer_through_serve_falls_back(
    gateway: Gateway,  # noqa: F811
    mode: Mode,
) -> None:
    tamper.test_a_tampered_reply_falls_back_with_its_reason_and_an_audit_row(gateway, mode)


@pytest.mark.extended
@pytest.mark.parametrize(
    "mode",
    [m for m in tamper.MODES if m.name != REPRESENTATIVE],
    ids=lambda mode: mode.name,
)
def test_a_reply_tampered_after_serve_falls_back(
    gateway: Gateway,  # noqa: F811
    mode: Mode,
) -> None:
    tamper.test_a_tampered_reply_falls_back_with_its_reason_and_an_audit_row(gateway, mode)
