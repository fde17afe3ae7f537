"""The chart's Serve config on a real multi-node Ray cluster, applied as KubeRay applies it.

One head node (GCS, dashboard, Serve's controller; no CPUs for replicas), one "cpu"
worker node and two "gpu" worker nodes, each a separate raylet on this machine marked by
the chart's group resource (there is no GPU here: ``tribunal_group_gpu`` stands in). The
RayService's ``serveConfigV2`` comes from ``helm template charts/tribunal`` (values for a
local run: the tiny profile, this machine's model and data folders, every application
routed, one replica each) and is PUT to the dashboard's Serve REST API with Ray's token.
The replicas read the rest from their environment, as the pods read the ConfigMap:
credentials, the audit database, and model-free choices where a test needs no model
(entailment's lexical checker, no reranker; the debate on the 135M model).

In file order (the last one is destructive):

1. every application reaches RUNNING and answers through the gRPC proxy with a
   credential; without one it is UNAUTHENTICATED, a method it lacks UNIMPLEMENTED with
   no traceback, random bytes INVALID_ARGUMENT;
2. every model application runs on "gpu" nodes only, the gateway and confidence on the
   "cpu" node;
3. scaling one application leaves every other one's replicas untouched (same replica and
   actor ids), and Ray exports the target and actual replica counts the dashboard shows;
4. a config update under a bounded load (a new calibrator artifact for confidence and
   the gateway, a new replica count) fails no request;
5. a "gpu" node killed under a bounded load: the gateway falls back naming the stage, no
   ACCEPT lacks a current verification; the replicas come back on the other node and
   answers resume.

``pytest -m extended tests/integration/test_cluster.py -s`` prints the figures
(docs/results/scaling.md).
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from tribunal.confidence import CalibratorArtifact, default_artifact_path
from tribunal.core import Settings, load_settings
from tribunal.v1 import (
    confidence_pb2,
    confidence_pb2_grpc,
    debate_pb2,
    debate_pb2_grpc,
    ensemble_pb2,
    ensemble_pb2_grpc,
    entailment_pb2,
    entailment_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
)

from tests.conftest import SHARED
from tests.integration._cluster import (
    CPU_APPS,
    GROUP_RESOURCE,
    MODEL_APPS,
    AnswerLoad,
    LocalCluster,
    chart_serve_config,
    free_port,
    local_values,
    ray_token_auth,
    token_file_credentials,
    with_replicas,
)

pytest.importorskip("tribunal_lab")

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.extended]

APPS = [*MODEL_APPS, *CPU_APPS]
ADMIN, QUERY = "cluster-admin-token-0123456789", "cluster-query-token-0123456789"
COVID = SHARED / "data" / "covid-qa"
# The replicas' environment beyond the chart's args: what the ConfigMap would carry.
MODEL_FREE = {
    "TRIBUNAL_ENTAILMENT__FAST_BACKEND": "lexical",
    "TRIBUNAL_ENTAILMENT__TWO_STAGE": "false",
    "TRIBUNAL_RETRIEVAL__RERANK_ENABLED": "false",
    "TRIBUNAL_RETRIEVAL__VERIFIER": "none",
    "TRIBUNAL_LLM_BACKEND": "llamacpp",
    "TRIBUNAL_LLM__N_THREADS": "1",
    "TRIBUNAL_ROLES__DEBATE_AGENTS": '["llm_tiny", "llm_tiny"]',
    "TRIBUNAL_ROLES__ADJUDICATOR": "llm_tiny",
    "TRIBUNAL_DEBATE__MAX_NEW_TOKENS": "48",
    "TRIBUNAL_DEBATE__MAX_ROUNDS": "1",
    "TRIBUNAL_GATEWAY__CANDIDATES": "1",
}
FIGURES: dict[str, Any] = {}


@dataclass
class Running:
    cluster: LocalCluster
    config: dict[str, Any]
    values: dict[str, Any]
    settings: Settings
    address: str
    queries: list[str]
    kb: dict[str, tuple[str, str]]
    """Entry id -> (answer, entry sha256) as the KB holds it."""
    root: Path


def _metadata(app: str, token: str | None = ADMIN) -> tuple[tuple[str, str], ...]:
    auth = (("authorization", f"Bearer {token}"),) if token else ()
    return (("application", app), *auth)


def _ingest(settings: Settings) -> dict[str, tuple[str, str]]:
    """The COVID FAQ as a self-evidenced collection: answers without supporting documents
    are their own source (no entailment model needed to verify them)."""
    from tribunal.kb import deduplicate, entry_sha256, read_entries
    from tribunal.retrieval import KnowledgeBase

    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        read, _ = deduplicate(
            read_entries(COVID / "faq_kb_en.jsonl", record_format="faq", max_chars=2000)
        )
        entries = [dataclasses.replace(entry, chunks=()) for entry in read]
        kb.upsert(settings.gateway.collection, entries, create=True, self_evidenced=True)
        stored = kb.collection(settings.gateway.collection).entries([e.id for e in entries])
        return {id_: (entry.answer, entry_sha256(entry)) for id_, entry in stored.items()}
    finally:
        kb.close()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("cluster")
    credentials = token_file_credentials(
        root / "credentials.yaml", {"operator": ("admin", ADMIN), "client": ("query", QUERY)}
    )
    env = {
        **MODEL_FREE,
        "TRIBUNAL_DATA_DIR": str(root / "data"),
        "TRIBUNAL_SERVER__CREDENTIALS_FILE": str(credentials),
        "TRIBUNAL_DATABASE_URL": f"sqlite:///{root}/audit.db",
    }
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        settings = load_settings("tiny")
        kb = _ingest(settings)
        grpc_port = free_port()
        values = local_values(
            grpc_port=grpc_port,
            http_port=free_port(),
            model_dir=settings.model_dir,
            data_dir=root / "data",
        )
        config = chart_serve_config(values)
        cluster = LocalCluster(root, {"cpu": 1, "gpu": 2}, env=env)
        started = time.monotonic()
        auth = ray_token_auth(root)
        auth.__enter__()
        cluster.start()
        try:
            FIGURES["cluster_start_s"] = round(time.monotonic() - started, 1)
            cluster.apply(config)
            FIGURES["deploy_s"] = round(cluster.wait_running(APPS, timeout_s=900), 1)
            pairs = COVID / "question_similarity_en.jsonl"
            rows = [json.loads(line) for line in pairs.read_text().splitlines() if line]
            queries = random.Random(7).sample(
                [r["question_2"] for r in rows if int(r["label"]) == 1], 12
            )
            yield Running(
                cluster, config, values, settings, f"127.0.0.1:{grpc_port}", queries, kb, root
            )
        finally:
            cluster.stop()
            auth.__exit__(None, None, None)
            print("\nFIGURES " + json.dumps(FIGURES, indent=1), flush=True)


def _answer(running: Running, query: str, token: str = QUERY) -> gateway_pb2.AnswerResponse:
    with grpc.insecure_channel(running.address) as channel:
        reply: gateway_pb2.AnswerResponse = gateway_pb2_grpc.GatewayServiceStub(channel).Answer(
            gateway_pb2.AnswerRequest(query=query), metadata=_metadata("gateway", token), timeout=60
        )
        return reply


def test_every_application_of_the_chart_runs_and_answers_with_credentials(
    running: Running,
) -> None:
    assert running.config["grpc_options"]["grpc_servicer_functions"]
    with grpc.insecure_channel(running.address) as channel:
        search = retrieval_pb2_grpc.RetrievalServiceStub(channel).Search(
            retrieval_pb2.SearchRequest(
                collection=running.settings.gateway.collection,
                query="How does the virus spread?",
                top_k=2,
            ),
            metadata=_metadata("retrieval", QUERY),
            timeout=60,
        )
        assert len(search.hits) == 2
        quotes = entailment_pb2_grpc.EntailmentServiceStub(channel).CheckQuotes(
            entailment_pb2.CheckQuotesRequest(
                quotes=[entailment_pb2.QuoteQuery(premise="Wash hands often.", quote="hands")]
            ),
            metadata=_metadata("entailment", QUERY),
            timeout=60,
        )
        assert quotes.matches[0].found
        entry = search.hits[0].entry
        match = ensemble_pb2_grpc.EnsembleServiceStub(channel).Match(
            ensemble_pb2.MatchRequest(query=entry.question, candidate=entry),
            metadata=_metadata("ensemble", QUERY),
            timeout=60,
        )
        assert 0.0 <= match.p_match <= 1.0
        score = confidence_pb2_grpc.ConfidenceServiceStub(channel).Score(
            confidence_pb2.ScoreRequest(
                signals=confidence_pb2.Signals(ensemble_p_match=match.p_match, retrieval_rank=1)
            ),
            metadata=_metadata("confidence", QUERY),
            timeout=60,
        )
        assert score.calibrator_version
        assessed = debate_pb2_grpc.DebateServiceStub(channel).Assess(
            debate_pb2.AssessRequest(
                query="How long should I wash my hands?",
                chunk="Wash your hands for at least 20 seconds.",
                answers=["20 seconds"],
            ),
            metadata=_metadata("debate", QUERY),
            timeout=300,
        )
        assert assessed.rounds
        # No credential: refused before any work; a method the application lacks:
        # UNIMPLEMENTED with a message, not a traceback; bytes that are no message.
        with pytest.raises(grpc.RpcError) as anonymous:
            gateway_pb2_grpc.GatewayServiceStub(channel).Answer(
                gateway_pb2.AnswerRequest(query="hi"), metadata=_metadata("gateway", None)
            )
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as lacking:
            gateway_pb2_grpc.GatewayServiceStub(channel).Answer(
                gateway_pb2.AnswerRequest(query="hi"), metadata=_metadata("retrieval", None)
            )
        assert lacking.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "Traceback" not in lacking.value.details()
        raw = channel.unary_unary(
            "/tribunal.v1.GatewayService/Answer",
            request_serializer=lambda data: data,
            response_deserializer=lambda data: data,
        )
        with pytest.raises(grpc.RpcError) as garbage:
            raw(b"\xff\xff\xff\xff", metadata=_metadata("gateway", QUERY), timeout=60)
        assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reply = _answer(running, running.queries[0])
    assert reply.failed_stage == "", reply  # every stage it needed answered
    assert {s.stage for s in reply.latencies} >= {"retrieval", "ensemble"}


def test_model_applications_run_on_gpu_nodes_and_the_gateway_on_cpu_nodes(
    running: Running,
) -> None:
    groups = running.cluster.node_group
    placement = {
        app: sorted({groups.get(r.node_id, "head") for r in replicas})
        for app, replicas in running.cluster.replicas().items()
    }
    FIGURES["placement"] = placement
    assert placement == {
        **{app: ["gpu"] for app in MODEL_APPS},
        **{app: ["cpu"] for app in CPU_APPS},
    }
    # Each replica asked for its group's resource (the chart's ray_actor_options).
    for app in running.config["applications"]:
        (deployment,) = app["deployments"]
        group = "gpu" if app["name"] in MODEL_APPS else "cpu"
        assert GROUP_RESOURCE.format(group) in deployment["ray_actor_options"]["resources"]


def _ids(running: Running) -> dict[str, set[tuple[str, str]]]:
    return {
        app: {(r.replica_id, r.actor_id) for r in replicas if r.state == "RUNNING"}
        for app, replicas in running.cluster.replicas().items()
    }


def _scrape(running: Running) -> dict[str, dict[str, float]]:
    """``ray_serve_autoscaling_target_replicas`` and the sum of
    ``ray_serve_deployment_replica_healthy`` per application, from every node's export."""
    import ray  # the test process is a driver of the cluster

    series: dict[str, dict[str, float]] = {"target": {}, "healthy": {}}
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for line in text.splitlines():
            for name, key in (
                ("ray_serve_autoscaling_target_replicas{", "target"),
                ("ray_serve_deployment_replica_healthy{", "healthy"),
            ):
                if line.startswith(name):
                    labels, value = line[len(name) :].rsplit("} ", 1)
                    app = labels.split('application="', 1)[1].split('"', 1)[0]
                    if key == "target":
                        series[key][app] = float(value)
                    else:
                        series[key][app] = series[key].get(app, 0.0) + float(value)
    return series


def test_scaling_one_application_leaves_every_other_untouched(running: Running) -> None:
    before = _ids(running)
    assert all(len(ids) == 1 for ids in before.values()), before
    scaled = with_replicas(running.config, "ensemble", 2)
    started = time.monotonic()
    running.cluster.apply(scaled)
    took = running.cluster.wait_running(APPS, timeout_s=600, replicas={"ensemble": 2})
    FIGURES["scale_ensemble_1_to_2_s"] = round(took, 1)
    after = _ids(running)
    assert len(after["ensemble"]) == 2
    assert before["ensemble"] < after["ensemble"]  # the first replica kept serving
    untouched = {app: after[app] == before[app] for app in APPS if app != "ensemble"}
    FIGURES["untouched_after_scaling"] = untouched
    assert all(untouched.values()), (before, after)
    # What the dashboard's "Replicas per service" panel reads, as Ray exports it.
    deadline = started + took + 60
    while True:
        exported = _scrape(running)
        if exported["target"].get("ensemble") == 2 and exported["healthy"].get("ensemble") == 2:
            break
        assert time.monotonic() < deadline, exported
        time.sleep(2)
    FIGURES["exported_replicas"] = exported
    assert all(exported["target"].get(app) == 1 for app in APPS if app != "ensemble"), exported
    running.config = scaled
    assert _answer(running, running.queries[1]).failed_stage == ""


def _new_calibrator(running: Running) -> Path:
    """The calibrator the applications load, re-issued as a new artifact (new version)."""
    current = CalibratorArtifact.load(default_artifact_path(running.settings))
    renewed = dataclasses.replace(
        current, metrics={**current.metrics, "reissued": "config update test"}
    )
    assert renewed.version != current.version
    return renewed.save(running.root / "calibrator-v2.json")


def test_a_config_update_under_load_fails_no_request(running: Running) -> None:
    calibrator = _new_calibrator(running)
    updated = with_replicas(running.config, "confidence", 2)
    for app in updated["applications"]:
        if app["name"] in ("confidence", "gateway"):  # the gateway trusts the same artifact
            section = app["args"]["settings"].setdefault("confidence", {})
            section["artifact_path"] = str(calibrator)
    load = AnswerLoad(running.address, running.queries, QUERY, clients=2, interval_s=0.3)
    with load.running():
        time.sleep(5)
        applied_at = load.now()
        running.cluster.apply(updated)
        took = running.cluster.wait_running(APPS, timeout_s=600, replicas={"confidence": 2})
        time.sleep(5)
    versions = {
        o.reply.threshold for o in load.outcomes if o.reply is not None and o.at > applied_at
    }
    FIGURES["config_update"] = {
        "requests": len(load.outcomes),
        "rolled_out_s": round(took, 1),
        "outcomes": dict(load.summary()),
        "outcomes_during_rollout": dict(load.summary(applied_at, applied_at + took)),
        "thresholds_seen": sorted(versions),
    }
    failed = [o for o in load.outcomes if o.code != "OK"]
    assert failed == [], FIGURES["config_update"]
    with grpc.insecure_channel(running.address) as channel:
        score = confidence_pb2_grpc.ConfidenceServiceStub(channel).Score(
            confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.5)),
            metadata=_metadata("confidence", QUERY),
            timeout=60,
        )
    assert score.calibrator_version == CalibratorArtifact.load(calibrator).version
    assert _answer(running, running.queries[2]).failed_stage == ""
    running.config = updated


def _verified_accept_problems(running: Running, reply: gateway_pb2.AnswerResponse) -> list[str]:
    """Why an ACCEPT is not a KB answer verbatim with a current verification (empty: it is)."""
    import hashlib

    problems = []
    stored = running.kb.get(reply.kb_entry_id)
    if stored is None:
        return [f"{reply.kb_entry_id!r} is not in the KB"]
    answer, entry_sha = stored
    if reply.answer != answer:
        problems.append("answer is not the KB's text")
    if reply.answer_sha256 != hashlib.sha256(reply.answer.encode()).hexdigest():
        problems.append("answer_sha256 does not match")
    if reply.entry_sha256 != entry_sha:
        problems.append("entry_sha256 is not the KB's")
    if reply.evidence_policy != "self_evidenced":
        problems.append(f"evidence policy {reply.evidence_policy!r}")
    return problems


def test_a_gpu_node_lost_under_load_falls_back_then_recovers(running: Running) -> None:
    replicas = running.cluster.replicas()
    victim_id = next(r.node_id for r in replicas["ensemble"])
    (victim,) = [n for n in running.cluster.nodes["gpu"] if n.node_id == victim_id]
    lost = sorted(app for app, rs in replicas.items() if any(r.node_id == victim_id for r in rs))
    load = AnswerLoad(running.address, running.queries, QUERY, clients=2, interval_s=0.3)
    with load.running():
        time.sleep(5)
        killed_at = load.now()
        running.cluster.remove_node(victim)
        # Until Serve has replaced every replica the node held on a live node.
        deadline = time.monotonic() + 600
        while True:
            now = running.cluster.replicas()
            if all(
                any(r.state == "RUNNING" and r.node_id != victim_id for r in now.get(app, []))
                and not any(r.node_id == victim_id for r in now.get(app, []))
                for app in lost
            ):
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.5)
        replaced_at = load.now()
        # Answers resume: five in a row with every stage answering.
        deadline = time.monotonic() + 300
        while True:
            recent = [o for o in load.outcomes if o.at > replaced_at][-5:]
            if len(recent) == 5 and all(o.code == "OK" and not o.failed_stage for o in recent):
                break
            assert time.monotonic() < deadline, load.summary(replaced_at)
            time.sleep(0.5)
        resumed_at = next(
            o.at
            for o in sorted(load.outcomes, key=lambda o: o.at)
            if o.at > killed_at
            and o.code == "OK"
            and not o.failed_stage
            and all(p.code == "OK" and not p.failed_stage for p in load.outcomes if p.at >= o.at)
        )
    outage = [o for o in load.outcomes if killed_at <= o.at < resumed_at]
    fallbacks = [o for o in outage if o.failed_stage]
    stages = sorted({o.failed_stage for o in fallbacks})
    accepts = [o for o in load.outcomes if o.decision == "ACCEPT" and o.reply is not None]
    bad_accepts = {
        o.reply.kb_entry_id: _verified_accept_problems(running, o.reply)
        for o in accepts
        if o.reply is not None and _verified_accept_problems(running, o.reply)
    }
    FIGURES["node_loss"] = {
        "applications_on_the_lost_node": lost,
        "requests": len(load.outcomes),
        "replicas_running_again_s": round(replaced_at - killed_at, 1),
        "answers_resumed_s": round(resumed_at - killed_at, 1),
        "during_outage": dict(load.summary(killed_at, resumed_at)),
        "fallback_stages": stages,
        "accepts": len(accepts),
        "accepts_without_current_verification": len(bad_accepts),
    }
    assert not bad_accepts, bad_accepts
    assert fallbacks, FIGURES["node_loss"]  # the outage was seen, and named
    assert set(stages) <= set(lost), FIGURES["node_loss"]
    # The replicas came back on the surviving gpu node.
    placement = running.cluster.replicas()
    for app in lost:
        assert all(running.cluster.node_group.get(r.node_id) == "gpu" for r in placement[app])
        assert all(r.node_id != victim_id for r in placement[app])
