"""The fuzzer of ``test_fuzz.py`` through Serve's gRPC proxy: the Serve path is as strict.

The same requests (``FUZZ_N`` per RPC, default 100, seeded by ``FUZZ_SEED``; the five
kinds of ``_fuzz.py``) go to the same services deployed as Serve applications on a
local Ray (``_fuzz_serve.ServeStack``), four clients at a time. For every RPC: 0
INTERNAL, 0 UNKNOWN, no call outlasting its deadline; random bytes are
INVALID_ARGUMENT (never UNKNOWN from the proxy's decoder) and oversize fields are
refused. Afterwards every application is RUNNING and answers its valid requests.
``FUZZ_REPORT=path`` writes the figures as JSON.

    FUZZ_N=100 pytest -m extended tests/integration/test_fuzz_serve.py -s
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration._fuzz import FuzzResult, fuzz_rpc
from tests.integration._fuzz_serve import SERVE_RPCS, ServeStack

pytestmark = [
    pytest.mark.ray,
    pytest.mark.fuzz,
    pytest.mark.models,
    pytest.mark.slow,
    pytest.mark.extended,
]

COUNT = int(os.environ.get("FUZZ_N", "100"))
SEED = int(os.environ.get("FUZZ_SEED", "20261201"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeStack]:
    running = ServeStack(tmp_path_factory.mktemp("fuzz-serve"))
    running.start()
    try:
        running.seed_knowledge_base()
        yield running
    finally:
        running.stop()


def test_every_rpc_survives_the_fuzzer_through_the_serve_proxy(stack: ServeStack) -> None:
    started = time.perf_counter()
    results: list[FuzzResult] = []
    for rpc in SERVE_RPCS:
        result = fuzz_rpc(stack, rpc, COUNT, seed=SEED)
        results.append(result)
        print(json.dumps(result.to_json()), flush=True)
    after = stack.health()
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "path": "serve-proxy",
        "requests_per_rpc": COUNT,
        "seed": SEED,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "seconds": round(time.perf_counter() - started, 1),
        "rpcs": [r.to_json() for r in results],
        "healthy_after": after,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rpcs"}), flush=True)
    if os.environ.get("FUZZ_REPORT"):
        path = Path(os.environ["FUZZ_REPORT"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")

    for result in results:
        assert result.requests == COUNT
        assert result.codes["INTERNAL"] == 0, result.to_json()
        assert result.codes["UNKNOWN"] == 0, result.to_json()
        assert result.hangs == 0, result.to_json()
        assert set(result.by_kind["bytes"]) <= {"INVALID_ARGUMENT", "OK"}, result.to_json()
        assert result.by_kind["bytes"]["INVALID_ARGUMENT"] > 0, result.to_json()
        assert set(result.by_kind["oversize"]) <= {
            "INVALID_ARGUMENT",
            "RESOURCE_EXHAUSTED",
        }, result.to_json()
    for name, service in after.items():
        assert service["status"].endswith("RUNNING"), after
        assert set(service["valid_requests"].values()) == {"OK"}, (name, after)
