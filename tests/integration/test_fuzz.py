"""Fuzzing every RPC of every service: no server error, no hang, every service healthy.

``FUZZ_N`` requests per RPC (default 200; ``make fuzz`` sends 1,000), seeded by
``FUZZ_SEED``, of five kinds in turn (see ``_fuzz.py``): one-field mutations of a valid
request, random messages, random bytes, 1 ms deadlines, and fields over their limits.
Four clients at a time. For every RPC: 0 INTERNAL, 0 UNKNOWN, 0 calls that outlast their
deadline; random bytes are INVALID_ARGUMENT and oversize fields are refused. Afterwards,
and again after a restart of every service on the same data, each service reports
SERVING and answers its valid requests. ``FUZZ_REPORT=path`` writes the figures as JSON.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration._fuzz import RPCS, FuzzResult, Stack, fuzz_rpc, stack_settings

pytestmark = [pytest.mark.fuzz, pytest.mark.models]

COUNT = int(os.environ.get("FUZZ_N", "200"))
SEED = int(os.environ.get("FUZZ_SEED", "20261201"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = Stack(stack_settings(tmp_path_factory.mktemp("fuzz")))
    running.start()
    running.seed_knowledge_base()
    try:
        yield running
    finally:
        running.stop()


def test_every_rpc_survives_the_fuzzer(stack: Stack) -> None:
    started = time.perf_counter()
    results: list[FuzzResult] = []
    for rpc in RPCS:
        result = fuzz_rpc(stack, rpc, COUNT, seed=SEED)
        results.append(result)
        print(json.dumps(result.to_json()), flush=True)
    drained_s = stack.drain()
    after = stack.health()
    stack.restart()
    after_restart = stack.health()
    seconds = time.perf_counter() - started
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "requests_per_rpc": COUNT,
        "seed": SEED,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "seconds": round(seconds, 1),
        "drained_s": round(drained_s, 1),
        "rpcs": [r.to_json() for r in results],
        "healthy_after": after,
        "healthy_after_restart": after_restart,
    }
    if os.environ.get("FUZZ_REPORT"):
        path = Path(os.environ["FUZZ_REPORT"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")

    for result in results:
        assert result.requests == COUNT
        assert result.codes["INTERNAL"] == 0, result.to_json()
        assert result.codes["UNKNOWN"] == 0, result.to_json()
        assert result.hangs == 0, result.to_json()
        # Undecodable bytes are the caller's fault (empty bytes would be a valid message).
        assert set(result.by_kind["bytes"]) <= {"INVALID_ARGUMENT", "OK"}, result.to_json()
        assert result.by_kind["bytes"]["INVALID_ARGUMENT"] > 0, result.to_json()
        # A field over its limit never gets through.
        assert set(result.by_kind["oversize"]) <= {
            "INVALID_ARGUMENT",
            "RESOURCE_EXHAUSTED",
        }, result.to_json()
    for state in (after, after_restart):
        for service in state.values():
            assert service["health"] == "SERVING", state
            assert set(service["valid_requests"].values()) == {"OK"}, state
