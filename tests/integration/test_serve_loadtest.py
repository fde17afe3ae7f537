"""The load generator against a real gateway over gRPC, its stages scripted (no model time):
closed and open loop on ``Answer``, a closed loop on ``Label``, JSON and PNG written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.core import load_settings
from tribunal.gateway.servicer import build_host

from loadtest import build_parser, run
from tests.integration import _scripted_stages
from tests.integration._scripted_stages import Script


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, Script]]:
    script = Script()
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        # Room for the open loop's burst on a busy host: what is tested is the load
        # generator's schedule and counts, not the gateway's refusals (tested elsewhere).
        server={
            "port": 0,
            "metrics_port": None,
            "grace_seconds": 0.5,
            "max_workers": 100,
            "max_ongoing_requests": 32,
            "max_queued_requests": 64,
        },
        database_url=f"sqlite:///{tmp_path}/audit.db",
        confidence=script.confidence_settings,
        gateway={
            "kb_trusted_keys": script.trusted_keys,
            "discovery": "grpc",
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
            ),
        },
    )
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(20), host.load_error
    try:
        yield f"127.0.0.1:{port}", script
    finally:
        host.stop(0)
        stages.stop(0)


def _run(target: str, out: Path, *flags: str) -> dict:  # type: ignore[type-arg]
    args = build_parser().parse_args(
        ["--target", target, "--application", "", "--out", str(out), *flags]
    )
    return run(args)


def test_closed_loop_answer(gateway: tuple[str, Script], tmp_path: Path) -> None:
    target, script = gateway
    out = tmp_path / "closed.json"
    summary = _run(target, out, "--mode", "closed", "--concurrency", "4", "--requests", "40")
    assert summary["requests"] == 40
    assert summary["ok"] == 40
    assert summary["decisions"] == {"ACCEPT": 40}  # the script's P(match) 0.9 clears 0.5
    assert summary["throughput_rps"] > 0
    assert summary["latency_ms"]["p50"] <= summary["latency_ms"]["p99"]
    assert script.calls["retrieval"] == 40
    assert json.loads(out.read_text())["concurrency"] == 4
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_open_loop_answer_counts_errors_by_code(
    gateway: tuple[str, Script], tmp_path: Path
) -> None:
    target, script = gateway
    script.p_match = 0.2  # every answer falls back
    summary = _run(
        target,
        tmp_path / "open.json",
        *("--mode", "open", "--rate", "40", "--requests", "30", "--duration", "10"),
        # A deadline generous enough that the gateway's share for each stage outlasts a
        # busy host (at 10 s, retrieval's 1 s share ran out beside a Ray deploy).
        *("--seed", "5", "--timeout", "60"),
    )
    assert summary["requests"] == 30
    assert summary["decisions"] == {"FALLBACK:LOW_CONFIDENCE": 30}, summary["decisions"]
    assert summary["errors_by_code"] == {}, summary["errors_by_code"]
    assert summary["offered_rps"] == pytest.approx(40, rel=0.5)
    # Intended send times are the seeded Poisson schedule.
    from loadtest import poisson_arrivals

    expected = poisson_arrivals(40.0, 30, 10.0, 5)
    assert [row[0] for row in summary["samples"]] == pytest.approx(expected, abs=1e-3)


def test_closed_loop_label_and_caller_errors(gateway: tuple[str, Script], tmp_path: Path) -> None:
    target, _ = gateway
    summary = _run(
        target,
        tmp_path / "label.json",
        "--method",
        "Label",
        "--concurrency",
        "2",
        "--requests",
        "6",
    )
    assert summary["ok"] == 6
    assert set(summary["decisions"]) <= {"RELEVANT", "IRRELEVANT", "HUMAN_QUEUE"}
    # An empty query is the caller's mistake: INVALID_ARGUMENT, counted by code.
    queries = tmp_path / "queries.txt"
    queries.write_text('How long is the incubation period?\n{"query": ""}\n')
    summary = _run(target, tmp_path / "bad.json", "--inputs", str(queries), "--requests", "4")
    assert summary["errors_by_code"] == {"INVALID_ARGUMENT": 2}
    assert summary["ok"] == 2


def test_non_loopback_targets_are_refused() -> None:
    from loadtest._cli import main

    assert main(["--target", "192.0.2.10:9000", "--requests", "1"]) == 2
