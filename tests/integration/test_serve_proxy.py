"""Serve's real gRPC proxy answers bad calls with their own status, never a traceback.

One application (confidence: no model) on a local Ray with token auth, deployed from
``tribunal serve config`` with a credentials file, called through the proxy:

- a method the application lacks, even without a credential: UNIMPLEMENTED, with a
  message naming the service, not Serve's INTERNAL with a Python traceback;
- random bytes (seeded): INVALID_ARGUMENT or a valid message, never UNKNOWN;
- the request limit table and the statuses of a ``ServiceHost``: an id over
  ``server.max_id_chars`` INVALID_ARGUMENT, a batch over
  ``confidence.max_items_per_request`` RESOURCE_EXHAUSTED;
- a valid call with a query credential: OK.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest
import yaml
from tribunal.core import load_settings
from tribunal.core.server import token_sha256
from tribunal.deploy import deploy, serve_config, start_local, wait_running
from tribunal.v1 import confidence_pb2, gateway_pb2, gateway_pb2_grpc

from tests.conftest import REPO
from tests.integration._cluster import free_port, ray_token_auth

# The same statuses are held in-process by tests/integration/test_serve_strictness.py;
# this starts Ray Serve to see them through the real proxy.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.security, pytest.mark.extended]

TOKEN = "proxy-query-token-0123456789"
ROUTE = (("application", "confidence"),)
AUTH = (*ROUTE, ("authorization", f"Bearer {TOKEN}"))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    import ray
    from ray import serve

    root = tmp_path_factory.mktemp("proxy")
    credentials = root / "credentials.yaml"
    credentials.write_text(
        yaml.safe_dump(
            {"credentials": [{"name": "c", "role": "query", "token_sha256": token_sha256(TOKEN)}]}
        )
    )
    overrides = {
        "server": {"credentials_file": str(credentials), "max_id_chars": 32},
        "confidence": {"max_items_per_request": 4, "deployment": {"num_cpus": 0.5}},
    }
    settings = load_settings("tiny", **overrides)
    config = serve_config(
        settings,
        grpc_port=free_port(),
        http_port=free_port(),
        overrides=overrides,
        apps=("confidence",),
    )
    with ray_token_auth(root):
        start_local(config, temp_dir=REPO / ".build" / "ray", auth="token", num_cpus=1)
        try:
            deploy(config)
            wait_running(["confidence"], timeout_s=300)
            with grpc.insecure_channel(f"127.0.0.1:{config['grpc_options']['port']}") as channel:
                yield channel
        finally:
            serve.shutdown()
            ray.shutdown()


def _raw(channel: grpc.Channel, method: str) -> grpc.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        f"/tribunal.v1.ConfidenceService/{method}",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )


def test_bad_calls_through_the_proxy_get_their_own_status(proxy: grpc.Channel) -> None:
    # A method of another service, routed to this application, with no credential.
    with pytest.raises(grpc.RpcError) as lacking:
        gateway_pb2_grpc.GatewayServiceStub(proxy).Answer(
            gateway_pb2.AnswerRequest(query="hello"), metadata=ROUTE, timeout=60
        )
    assert lacking.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert lacking.value.details() == (
        "this application serves tribunal.v1.ConfidenceService, which has no method Answer"
    )
    # Random bytes: undecodable ones are INVALID_ARGUMENT, the rest decode and are scored.
    rng = random.Random(20261202)
    score = _raw(proxy, "Score")
    codes: Counter[str] = Counter()
    details: set[str] = set()
    for _ in range(120):
        try:
            score(rng.randbytes(rng.randint(1, 64)), metadata=AUTH, timeout=60)
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1  # type: ignore[attr-defined]
            details.add(exc.details() or "")  # type: ignore[attr-defined]
    assert not [d for d in details if "Traceback" in d or "Unexpected" in d], details
    assert set(codes) <= {"OK", "INVALID_ARGUMENT"}, codes
    assert codes["INVALID_ARGUMENT"] > 60, codes
    # The limit table, with a ServiceHost's statuses.
    with pytest.raises(grpc.RpcError) as long_id:
        score(confidence_pb2.ScoreRequest(item_id="x" * 33).SerializeToString(), metadata=AUTH)
    assert long_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "server.max_id_chars" in long_id.value.details()
    batch = confidence_pb2.BatchScoreRequest(items=[confidence_pb2.ScoreRequest()] * 5)
    with pytest.raises(grpc.RpcError) as too_many:
        _raw(proxy, "BatchScore")(batch.SerializeToString(), metadata=AUTH, timeout=60)
    assert too_many.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "confidence.max_items_per_request" in too_many.value.details()
    # Credentials still come first for the methods it has.
    with pytest.raises(grpc.RpcError) as anonymous:
        score(confidence_pb2.ScoreRequest().SerializeToString(), metadata=ROUTE, timeout=60)
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
    valid = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.9))
    reply = confidence_pb2.ScoreResponse.FromString(
        score(valid.SerializeToString(), metadata=AUTH, timeout=60)
    )
    assert reply.calibrator_version
