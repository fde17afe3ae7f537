"""The chart's Serve config on a real multi-node Ray cluster, applied as KubeRay applies it.

One head node (GCS, dashboard, Serve's controller; no CPUs for replicas), one "cpu"
worker node and two "gpu" worker nodes, each a separate raylet on this machine marked by
the chart's group resource (there is no GPU here: ``tribunal_group_gpu`` stands in). The
RayService's ``serveConfigV2`` comes from ``helm template charts/tribunal`` (values for a
local run: the tiny profile, this machine's model and data folders, every application
routed, one replica each, the KB writer's public key in ``kbTrustedKeys``) and is PUT to
the dashboard's Serve REST API with Ray's token. The replicas read the rest from their
environment, as the pods read the ConfigMap: credentials, the audit database, the
mounted trusted-keys folder, and model-free choices where a test needs no model
(entailment's lexical checker, no reranker; the debate on the 135M model). The KB is the
COVID FAQ as the demo writes it, signed by a writer key the cluster never sees.

In file order (the last one is destructive):

1. every application reaches RUNNING and answers through the gRPC proxy with a
   credential; without one it is UNAUTHENTICATED, a method it lacks UNIMPLEMENTED with
   no traceback, random bytes INVALID_ARGUMENT;
2. every model application runs on "gpu" nodes only, the gateway and confidence on the
   "cpu" node;
3. scaling one application leaves every other one's replicas untouched (same replica and
   actor ids), and the dashboard's replicas panel, read from the live export, shows the
   target and healthy replicas of each application;
4. a config update under a bounded load (a new calibrator artifact for confidence and
   the gateway, a new replica count) fails no request of Tribunal's client;
5. a "gpu" node killed under a bounded load: ACCEPTs before, the gateway falls back
   naming the stage meanwhile, no ACCEPT lacks a current signed verification; the
   replicas come back on the other node and ACCEPTs resume.

``pytest -m extended tests/integration/test_cluster.py -s`` prints the figures
(docs/results/scaling.md).
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from tribunal.confidence import CalibratorArtifact, default_artifact_path
from tribunal.core import Settings, load_settings
from tribunal.retrieval import KbSigner
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
    free_port,
    local_values,
    mount_trusted_keys,
    ray_token_auth,
    render_chart,
    token_file_credentials,
    with_replicas,
)

from ._llm_backend import HAS_LLAMACPP

pytest.importorskip("tribunal_lab")

pytestmark = [pytest.mark.ray, pytest.mark.models, pytest.mark.slow, pytest.mark.extended]

APPS = [*MODEL_APPS, *CPU_APPS]
ADMIN, QUERY = "cluster-admin-token-0123456789", "cluster-query-token-0123456789"
COVID = SHARED / "data" / "covid-qa"
# The replicas' environment beyond the chart's args: what the ConfigMap would carry.
MODEL_FREE = {
    "TRIBUNAL_ENTAILMENT__FAST_BACKEND": "lexical",
    "TRIBUNAL_ENTAILMENT__TWO_STAGE": "false",
    "TRIBUNAL_RETRIEVAL__RERANK_ENABLED": "false",
    "TRIBUNAL_RETRIEVAL__VERIFIER": "none",
    # The 135M model through llama.cpp where the llamacpp extra is built, else through
    # transformers (the tiny profile's own backend).
    **(
        {"TRIBUNAL_LLM_BACKEND": "llamacpp", "TRIBUNAL_LLM__N_THREADS": "1"} if HAS_LLAMACPP else {}
    ),
    "TRIBUNAL_ROLES__DEBATE_AGENTS": '["llm_tiny", "llm_tiny"]',
    "TRIBUNAL_ROLES__ADJUDICATOR": "llm_tiny",
    "TRIBUNAL_DEBATE__MAX_NEW_TOKENS": "48",
    "TRIBUNAL_DEBATE__MAX_ROUNDS": "1",
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
    kb: dict[str, StoredEntry]
    """Entry id -> the entry as the KB holds it and its writer signed it."""
    root: Path


def _metadata(app: str, token: str | None = ADMIN) -> tuple[tuple[str, str], ...]:
    auth = (("authorization", f"Bearer {token}"),) if token else ()
    return (("application", app), *auth)


@dataclass(frozen=True)
class StoredEntry:
    """An entry as the KB holds it, and what its writer signed about it."""

    question: str
    answer: str
    entry_sha256: str
    signed: dict[str, Any]
    """The signed served record's fields, opened with the writer's public key."""


def _ingest(settings: Settings, signer: KbSigner) -> dict[str, StoredEntry]:
    """The COVID FAQ as the demo writes it: a self-evidenced collection (answers without
    supporting documents are their own source: no entailment model needed to verify
    them), signed by the KB's writer, and the feature matcher's vectors of its entries."""
    from tribunal.ensemble import precompute_entry_vectors
    from tribunal.kb import deduplicate, entry_sha256, read_entries
    from tribunal.retrieval import KnowledgeBase, TrustedKeys

    entries, _ = deduplicate(
        read_entries(
            COVID / "faq_kb_en.jsonl",
            record_format="faq",
            max_chars=settings.retrieval.chunk_size_chars,
        )
    )
    collection = settings.gateway.collection
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    try:
        kb.upsert(collection, entries, create=True, self_evidenced=True)
        _, found, signed, _ = kb.collection(collection).served_entries([e.id for e in entries])
    finally:
        kb.close()
    precompute_entry_vectors(settings, entries)
    trusted = TrustedKeys.of(signer.public_key)
    return {
        id_: StoredEntry(
            entry.question, entry.answer, entry_sha256(entry), trusted.open(signed[id_])
        )
        for id_, (entry, _) in found.items()
    }


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
        # The KB's writer: its private key stays on its side (never in the data folder the
        # replicas read); the gateway gets the public key through the chart.
        signer = KbSigner.generate()
        kb = _ingest(settings, signer)
        grpc_port = free_port()
        values = local_values(
            grpc_port=grpc_port,
            http_port=free_port(),
            model_dir=settings.model_dir,
            data_dir=root / "data",
            kb_public_keys={signer.key_id: signer.public_pem().decode()},
        )
        rendered = render_chart(values)
        config = rendered.serve_config
        env.update(mount_trusted_keys(rendered, root / "mounted" / "kb-trusted"))
        cluster = LocalCluster(root, {"cpu": 1, "gpu": 2}, env=env)
        started = time.monotonic()
        auth = ray_token_auth(root)
        auth.__enter__()
        cluster.start()
        try:
            FIGURES["cluster_start_s"] = round(time.monotonic() - started, 1)
            cluster.apply(config)
            FIGURES["deploy_s"] = round(cluster.wait_running(APPS, timeout_s=900), 1)
            # Real users' paraphrases of FAQ questions, and FAQ questions as written.
            pairs = COVID / "question_similarity_en.jsonl"
            rows = [json.loads(line) for line in pairs.read_text().splitlines() if line]
            draw = random.Random(7)
            queries = draw.sample([r["question_2"] for r in rows if int(r["label"]) == 1], 8)
            queries += [kb[id_].question for id_ in draw.sample(sorted(kb), 4)]
            draw.shuffle(queries)
            yield Running(
                cluster, config, values, settings, f"127.0.0.1:{grpc_port}", queries, kb, root
            )
        finally:
            cluster.stop()
            auth.__exit__(None, None, None)
            print("\nFIGURES " + json.dumps(FIGURES, indent=1), flush=True)


@pytest.fixture(autouse=True)
def _figures_so_far() -> Iterator[None]:
    """Print the figures after every test too: a long run stopped midway keeps them."""
    yield
    print("\nFIGURES so far " + json.dumps(FIGURES), flush=True)


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


def _scrape() -> dict[str, dict[str, float]]:
    """What the dashboard's replicas panel shows, per application: each of its lines
    (``target``, ``healthy``) read from every live node's export as Prometheus would
    scrape it, combined across deployments as the panel's query does."""
    import ray  # the test process is a driver of the cluster
    from tribunal_lab.k8s_checks import replica_series

    lines = replica_series()
    combine: dict[str, Callable[[list[float]], float]] = {
        "sum": sum,
        "max": max,
        "min": min,
        "avg": lambda v: sum(v) / len(v),
    }
    values: dict[str, dict[str, list[float]]] = {kind: {} for kind in lines}
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for line in text.splitlines():
            for kind, series in lines.items():
                if line.startswith(series.metric + "{"):
                    labels, value = line[len(series.metric) + 1 :].rsplit("} ", 1)
                    app = labels.split('application="', 1)[1].split('"', 1)[0]
                    values[kind].setdefault(app, []).append(float(value))
    return {
        kind: {app: combine[lines[kind].aggregation](v) for app, v in apps.items()}
        for kind, apps in values.items()
    }


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
        exported = _scrape()
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


def _surge(running: Running) -> dict[str, int]:
    """Each deployment's ``max_surge_percent`` as Serve runs it."""
    assert running.cluster.rest is not None
    apps = running.cluster.rest.details()["applications"]
    return {
        app: int(deployment["deployment_config"]["max_surge_percent"])
        for app, info in apps.items()
        for deployment in info["deployments"].values()
    }


def test_a_config_update_under_load_fails_no_request(running: Running) -> None:
    # Replacements start before the old replicas stop: a one-replica gateway restarted
    # by the update keeps answering meanwhile.
    assert _surge(running) == dict.fromkeys(APPS, 100)
    calibrator = _new_calibrator(running)
    updated = with_replicas(running.config, "confidence", 2)
    for app in updated["applications"]:
        if app["name"] in ("confidence", "gateway"):  # the gateway trusts the same artifact
            section = app["args"]["settings"].setdefault("confidence", {})
            section["artifact_path"] = str(calibrator)
    # Tribunal's client (Answer retried on UNAVAILABLE within the deadline), and beside
    # it a bare gRPC client: what reaches a caller that retries nothing.
    load = AnswerLoad(running.address, running.queries, QUERY, clients=2, interval_s=0.3)
    bare = AnswerLoad(
        running.address, running.queries, QUERY, clients=1, interval_s=0.3, retried=False
    )
    began = time.monotonic()
    with load.running(began), bare.running(began):
        time.sleep(5)
        applied_at = load.now()
        running.cluster.apply(updated)
        took = running.cluster.wait_running(APPS, timeout_s=600, replicas={"confidence": 2})
        # Until the old replicas have stopped: every replica on the new version.
        deadline = time.monotonic() + 120
        while any(r.state != "RUNNING" for rs in running.cluster.replicas().values() for r in rs):
            assert time.monotonic() < deadline, running.cluster.replicas()
            time.sleep(0.5)
        settled = load.now() - applied_at
        time.sleep(5)
    thresholds = {
        o.reply.threshold for o in load.outcomes if o.reply is not None and o.at > applied_at
    }
    FIGURES["config_update"] = {
        "requests": len(load.outcomes),
        "failed": sum(o.code != "OK" for o in load.outcomes),
        "rolled_out_s": round(took, 1),
        "old_replicas_stopped_s": round(settled, 1),
        "outcomes": dict(load.summary()),
        "outcomes_during_rollout": dict(load.summary(applied_at, applied_at + settled)),
        "bare_client": {
            "requests": len(bare.outcomes),
            "outcomes": dict(bare.summary()),
        },
        "thresholds_seen": sorted(thresholds),
        "max_surge_percent": _surge(running),
    }
    failed = [o for o in load.outcomes if o.code != "OK"]
    assert failed == [], FIGURES["config_update"]
    for outcome in (*load.outcomes, *bare.outcomes):
        if outcome.decision == "DECISION_ACCEPT" and outcome.reply is not None:
            assert not _verified_accept_problems(running, outcome.reply), outcome.reply
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
    """Why an ACCEPT is not a KB answer verbatim with a current verification its writer
    signed (empty: it is)."""
    import hashlib

    problems = []
    stored = running.kb.get(reply.kb_entry_id)
    if stored is None:
        return [f"{reply.kb_entry_id!r} is not in the KB"]
    if reply.answer != stored.answer:
        problems.append("answer is not the KB's text")
    if reply.answer_sha256 != hashlib.sha256(reply.answer.encode()).hexdigest():
        problems.append("answer_sha256 does not match the answer")
    if (reply.entry_sha256, reply.answer_sha256) != (
        stored.signed["entry_sha256"],
        stored.signed["answer_sha256"],
    ):
        problems.append("not the entry version its writer signed")
    if reply.entry_sha256 != stored.entry_sha256:
        problems.append("entry_sha256 is not the KB's")
    if reply.evidence_policy != "self_evidenced":
        problems.append(f"evidence policy {reply.evidence_policy!r}")
    return problems


@pytest.mark.timeout(2400)  # the cluster fixture (KB, cluster, deploy) runs in this budget too
def test_a_gpu_node_lost_under_load_falls_back_then_recovers(running: Running) -> None:
    replicas = running.cluster.replicas()
    victim_id = next(r.node_id for r in replicas["ensemble"])
    (victim,) = [n for n in running.cluster.nodes["gpu"] if n.node_id == victim_id]
    lost = sorted(app for app, rs in replicas.items() if any(r.node_id == victim_id for r in rs))
    load = AnswerLoad(running.address, running.queries, QUERY, clients=2, interval_s=0.3)

    def accepts(since: float, until: float = float("inf")) -> int:
        return sum(o.decision == "DECISION_ACCEPT" for o in load.outcomes if since <= o.at < until)

    with load.running():
        # ACCEPTs before the loss: the signed KB is served.
        deadline = time.monotonic() + 120
        while accepts(0.0) < 3:
            assert time.monotonic() < deadline, load.summary()
            time.sleep(0.5)
        killed_at = load.now()
        running.cluster.remove_node(victim)
        # Until Serve has replaced every replica the node held on a live node.
        deadline, shown = time.monotonic() + 420, 0.0
        while True:
            now = running.cluster.replicas()
            if time.monotonic() - shown > 30:
                shown = time.monotonic()
                print(f"after the loss, {load.now() - killed_at:.0f} s: {now}", flush=True)
            if all(
                any(r.state == "RUNNING" and r.node_id != victim_id for r in now.get(app, []))
                and not any(r.node_id == victim_id for r in now.get(app, []))
                for app in lost
            ):
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.5)
        replaced_at = load.now()
        # Answers resume: five in a row with every stage answering, and ACCEPTs again.
        deadline = time.monotonic() + 300
        while True:
            recent = [o for o in load.outcomes if o.at > replaced_at][-5:]
            if (
                len(recent) == 5
                and all(o.code == "OK" and not o.failed_stage for o in recent)
                and accepts(replaced_at) >= 3
            ):
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
    accepted = [o for o in load.outcomes if o.decision == "DECISION_ACCEPT" and o.reply is not None]
    bad_accepts = {
        o.reply.kb_entry_id: _verified_accept_problems(running, o.reply)
        for o in accepted
        if o.reply is not None and _verified_accept_problems(running, o.reply)
    }
    FIGURES["node_loss"] = {
        "applications_on_the_lost_node": lost,
        "requests": len(load.outcomes),
        "replicas_running_again_s": round(replaced_at - killed_at, 1),
        "answers_resumed_s": round(resumed_at - killed_at, 1),
        "before": dict(load.summary(0.0, killed_at)),
        "during_outage": dict(load.summary(killed_at, resumed_at)),
        "after": dict(load.summary(resumed_at)),
        "fallback_stages": stages,
        "accepts": len(accepted),
        "accepts_without_current_verification": len(bad_accepts),
    }
    assert not bad_accepts, bad_accepts
    assert accepts(0.0, killed_at), FIGURES["node_loss"]
    assert accepts(resumed_at), FIGURES["node_loss"]
    assert fallbacks, FIGURES["node_loss"]  # the outage was seen, and named
    assert set(stages) <= set(lost), FIGURES["node_loss"]
    # No call failed: each one was answered, with a decision.
    assert all(o.code == "OK" for o in load.outcomes), FIGURES["node_loss"]
    # The replicas came back on the surviving gpu node.
    placement = running.cluster.replicas()
    for app in lost:
        assert all(running.cluster.node_group.get(r.node_id) == "gpu" for r in placement[app])
        assert all(r.node_id != victim_id for r in placement[app])
