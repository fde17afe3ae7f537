"""The fuzzer of ``test_fuzz.py``: every service's RPCs, seeded, bounded.

:class:`Stack` runs every Tribunal service in this process, each on its own real gRPC
server built by the service's own ``build_host`` (the same host ``tribunal serve``
runs), in configurations cheap enough to fuzz: retrieval on MiniLM (no verifier, no
reranker), entailment with the model-free lexical checker, confidence with the
shipped calibrator, the ensemble's feature matcher (MPNet) and a relevance judge on the
MiniLM query-passage cosine alone (an artifact of one feature, coefficients chosen: no
LLM, so that thousands of valid requests stay cheap), and a gateway wired to those stages
over gRPC. The debate's agents are the one TEST DOUBLE: a scripted engine
(``tests/unit/_debate_engine.py``) that answers each turn at once, because a real debate
takes seconds per turn and the fuzzer targets the service's handling of requests, not the
model.

:func:`fuzz_rpc` sends requests of five kinds to one RPC, from a seed (a valid
request) and a ``random.Random``: one-field mutations, random messages, random bytes,
valid requests with a 1 ms deadline, and requests with a field over its limit (now and
then a whole message over ``server.max_message_bytes``); it records each call's status
code and time.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tribunal.core import Settings, load_settings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.debate._debate import DreamDebate
from tribunal.debate.servicer import SERVICE_NAME as DEBATE_SERVICE
from tribunal.debate.servicer import DebateServicer
from tribunal.ensemble import RelevanceArtifact
from tribunal.ensemble._relevance import RelevanceFeature
from tribunal.kb import entry_to_proto
from tribunal.v1 import (
    common_pb2,
    confidence_pb2,
    debate_pb2,
    debate_pb2_grpc,
    ensemble_pb2,
    entailment_pb2,
    gateway_pb2,
    retrieval_pb2,
)

from tests.integration._admin import ADMIN_TOKEN, as_admin
from tests.integration._retrieval import ENTRIES
from tests.unit._debate_engine import ScriptedEngine, turn_json

from ._llm_backend import LLM_BACKEND

KINDS = ("mutation", "random", "bytes", "deadline_1ms", "oversize")
TIMEOUT_S = 20.0
HANG_SLACK_S = 5.0
BIG_MESSAGE_EVERY = 100  # one oversize request in this many is a whole message > the limit


# -- the services ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rpc:
    service: str
    method: str
    request: Message
    streaming: bool = False

    @property
    def path(self) -> str:
        return f"/tribunal.v1.{self.service}/{self.method}"


QUESTION = "How long should I wash my hands?"
PASSAGE = "Wash your hands with soap and water for at least 20 seconds."
CANDIDATE = entry_to_proto(ENTRIES[4])
_SIGNALS = confidence_pb2.Signals(
    retrieval_score=0.03, retrieval_rank=1, ensemble_p_match=0.8, supporting_passages=1
)
_ASSESS = debate_pb2.AssessRequest(
    query=QUESTION, chunk=PASSAGE, answers=["20 seconds"], item_id="d1"
)
_LABEL = gateway_pb2.LabelRequest(
    query=QUESTION, chunk=PASSAGE, mode=gateway_pb2.LABEL_MODE_JUDGE, item_id="l1"
)
_SEARCH = retrieval_pb2.SearchRequest(collection="default", query=QUESTION, top_k=3)
_MATCH = ensemble_pb2.MatchRequest(query=QUESTION, candidate=CANDIDATE, item_id="m1")
_PAIR = entailment_pb2.EntailmentPair(
    premise=PASSAGE, hypothesis="Hands need 20 seconds of washing.", quote="soap and water"
)

RPCS = [
    Rpc("RetrievalService", "Search", _SEARCH),
    Rpc(
        "RetrievalService", "BatchSearch", retrieval_pb2.BatchSearchRequest(searches=[_SEARCH] * 2)
    ),
    Rpc(
        "RetrievalService",
        "Upsert",
        retrieval_pb2.UpsertRequest(
            collection="fuzzed",
            entries=[
                common_pb2.KbEntry(id="f1", question="Where can I get tested?", answer="At a site.")
            ],
            create_collection=True,
        ),
    ),
    Rpc("RetrievalService", "Delete", retrieval_pb2.DeleteRequest(collection="fuzzed", ids=["f1"])),
    Rpc("RetrievalService", "Stats", retrieval_pb2.StatsRequest(collection="default")),
    Rpc(
        "RetrievalService",
        "Sign",
        retrieval_pb2.SignRequest(
            collection="fuzzed",
            records=[
                retrieval_pb2.SignedRecord(
                    record=b'{"collection":"fuzzed","kb_content_version":"kb-0000000000000000",'
                    b'"kb_version":1,"kind":"tribunal.kb-head.v1","self_evidenced":false}',
                    key_id="kb-0000000000000000",
                    signature=b"\x00" * 64,
                )
            ],
        ),
    ),
    Rpc("EntailmentService", "Check", entailment_pb2.CheckRequest(pairs=[_PAIR])),
    Rpc(
        "EntailmentService",
        "CheckQuotes",
        entailment_pb2.CheckQuotesRequest(
            quotes=[entailment_pb2.QuoteQuery(premise=PASSAGE, quote="with soap and water")]
        ),
    ),
    Rpc("ConfidenceService", "Score", confidence_pb2.ScoreRequest(signals=_SIGNALS, item_id="s1")),
    Rpc(
        "ConfidenceService",
        "BatchScore",
        confidence_pb2.BatchScoreRequest(items=[confidence_pb2.ScoreRequest(signals=_SIGNALS)] * 2),
    ),
    Rpc("EnsembleService", "Match", _MATCH),
    Rpc("EnsembleService", "BatchMatch", ensemble_pb2.BatchMatchRequest(items=[_MATCH] * 2)),
    Rpc(
        "EnsembleService",
        "JudgeRelevance",
        ensemble_pb2.JudgeRelevanceRequest(query=QUESTION, chunk=PASSAGE, answers=["20 seconds"]),
    ),
    Rpc("DebateService", "Assess", _ASSESS),
    Rpc("DebateService", "BatchAssess", debate_pb2.BatchAssessRequest(items=[_ASSESS] * 2), True),
    Rpc(
        "GatewayService", "Answer", gateway_pb2.AnswerRequest(query=QUESTION, collection="default")
    ),
    Rpc("GatewayService", "Label", _LABEL),
    Rpc("GatewayService", "BatchLabel", gateway_pb2.BatchLabelRequest(items=[_LABEL] * 2), True),
]

STAGES = ("retrieval", "entailment", "confidence", "ensemble", "debate")
SERVICE_OF = {
    "retrieval": "RetrievalService",
    "entailment": "EntailmentService",
    "confidence": "ConfidenceService",
    "ensemble": "EnsembleService",
    "debate": "DebateService",
    "gateway": "GatewayService",
}


def _debate_script(text: str) -> str:
    if "Final arguments" in text:  # the adjudicator
        return json.dumps({"label": "relevant", "rationale": "both read"})
    return turn_json("relevant", evidence="soap and water")


def _debate_host(settings: Settings) -> ServiceHost:
    """The debate service's host with the scripted agents (a test double, see above)."""
    from tribunal.core.server import RequestLimits

    engine = ScriptedEngine(_debate_script)
    servicer = DebateServicer()
    options = settings.debate
    servicer.set_debate(
        DreamDebate(
            (engine, engine),
            adjudicator=engine,
            max_rounds=options.max_rounds,
            profile="fuzz",
            max_items_per_request=options.max_items_per_request,
            max_query_chars=options.max_query_chars,
            max_chunk_chars=options.max_chunk_chars,
            max_answers_per_item=options.max_answers_per_item,
        )
    )
    return ServiceHost(
        settings.server,
        request_limits=RequestLimits.from_settings(settings),
        name="debate",
        bindings=[
            ServiceBinding(
                DEBATE_SERVICE,
                lambda server: debate_pb2_grpc.add_DebateServiceServicer_to_server(  # type: ignore[no-untyped-call]
                    servicer, server
                ),
            )
        ],
    )


def stack_settings(root: Path) -> Settings:
    return load_settings("tiny", **stack_overrides(root))


def stack_overrides(root: Path) -> dict[str, Any]:
    """The fuzzed services' settings over the tiny profile (writes the relevance artifact)."""
    relevance = root / "relevance.json"
    RelevanceArtifact(
        version="fuzz-cosine",
        features=(RelevanceFeature("embedder/cosine", "cosine", "embedder"),),
        coef=(6.0,),
        intercept=-3.0,
        threshold=0.5,
        band_low=0.3,
        band_high=0.7,
        fitted_on={"data": "chosen for the fuzzer", "n": 0},
    ).save(relevance)
    return {
        "data_dir": str(root / "data"),
        "database_url": f"sqlite:///{root}/audit.db",
        "llm_backend": LLM_BACKEND,
        "llm": {"n_threads": 1},
        "server": {
            "port": 0,
            "metrics_port": None,
            "grace_seconds": 0.5,
            "max_ongoing_requests": 4,
            "max_queued_requests": 8,
            "auth_token": ADMIN_TOKEN,  # KB changes always need an admin credential
        },
        "retrieval": {"verifier": "none", "rerank_enabled": False},
        "entailment": {"fast_backend": "lexical", "two_stage": False},
        "ensemble": {"matcher": "features", "relevance_artifact": str(relevance)},
        "gateway": {"label_mode": "judge", "deadline_s": 15.0},
    }


class Stack:
    """Every service on its own real gRPC server; :meth:`restart` stops and starts them all
    again on the same data (collections, audit database)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.hosts: dict[str, ServiceHost] = {}
        self.ports: dict[str, int] = {}
        self.channels: dict[str, grpc.Channel] = {}

    def start(self) -> None:
        from tribunal.confidence.servicer import build_host as confidence_host
        from tribunal.ensemble.servicer import build_host as ensemble_host
        from tribunal.entailment.servicer import build_host as entailment_host
        from tribunal.gateway.servicer import build_host as gateway_host
        from tribunal.retrieval.servicer import build_host as retrieval_host

        builders: dict[str, Callable[[Settings], ServiceHost]] = {
            "retrieval": retrieval_host,
            "entailment": entailment_host,
            "confidence": confidence_host,
            "ensemble": lambda settings: ensemble_host(settings, preload_relevance=True),
            "debate": _debate_host,
        }
        for name, build in builders.items():
            self._start(name, build(self.settings))
        gateway = self.settings.model_copy(
            update={
                "gateway": self.settings.gateway.model_copy(
                    update={
                        "discovery": "grpc",
                        "addresses": {s: f"127.0.0.1:{self.ports[s]}" for s in STAGES},
                    }
                )
            }
        )
        self._start("gateway", gateway_host(gateway))

    def _start(self, name: str, host: ServiceHost) -> None:
        port = host.start()
        assert host.wait_until_ready(600), f"{name}: {host.load_error}"
        self.hosts[name], self.ports[name] = host, port
        self.channels[name] = as_admin(grpc.insecure_channel(f"127.0.0.1:{port}"))

    def stop(self) -> None:
        for channel in self.channels.values():
            channel.close()
        for name in ("gateway", *STAGES):
            if name in self.hosts:
                self.hosts[name].stop(0)
        self.hosts, self.ports, self.channels = {}, {}, {}

    def restart(self) -> None:
        self.stop()
        self.start()

    def seed_knowledge_base(self) -> None:
        stub = self.channels["retrieval"].unary_unary(
            "/tribunal.v1.RetrievalService/Upsert",
            request_serializer=retrieval_pb2.UpsertRequest.SerializeToString,
            response_deserializer=retrieval_pb2.UpsertResponse.FromString,
        )
        stub(
            retrieval_pb2.UpsertRequest(
                collection="default",
                entries=[entry_to_proto(e) for e in ENTRIES],
                create_collection=True,
                self_evidenced=True,
            ),
            timeout=120,
        )

    def channel_for(self, rpc: Rpc) -> grpc.Channel:
        name = next(k for k, v in SERVICE_OF.items() if v == rpc.service)
        return self.channels[name]

    def metadata_for(self, rpc: Rpc) -> tuple[tuple[str, str], ...]:
        """Metadata every call of ``rpc`` carries (none: each service has its own port)."""
        return ()

    def drain(self, timeout_s: float = 300.0) -> float:
        """Wait until no service has a call at work or queued; returns the seconds it took
        (calls the gateway made for clients that have gone end at their own deadlines)."""
        started = time.monotonic()
        while any(h.admission.ongoing or h.admission.queued for h in self.hosts.values()):
            assert time.monotonic() - started < timeout_s, "calls still at work"
            time.sleep(0.1)
        return time.monotonic() - started

    def health(self) -> dict[str, dict[str, Any]]:
        """Each service: its health status and the codes its valid requests get now."""
        out: dict[str, dict[str, Any]] = {}
        for name, channel in self.channels.items():
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            probes = [
                r
                for r in RPCS
                if r.service == SERVICE_OF[name] and r.method not in ("Delete", "Sign")
            ]
            out[name] = {
                "health": health_pb2.HealthCheckResponse.ServingStatus.Name(health.status),
                "valid_requests": {
                    rpc.method: call(channel, rpc, rpc.request, TIMEOUT_S)[0] for rpc in probes
                },
            }
        return out


# -- one call ----------------------------------------------------------------------------------


def _identity(data: bytes) -> bytes:
    return data


def call(
    channel: grpc.Channel,
    rpc: Rpc,
    request: Message | bytes,
    timeout: float,
    metadata: tuple[tuple[str, str], ...] = (),
) -> tuple[str, float]:
    """(status code name, seconds) of one call; bytes are sent as they are."""
    serialize = _identity if isinstance(request, bytes) else type(request).SerializeToString
    started = time.perf_counter()
    try:
        if rpc.streaming:
            stream = channel.unary_stream(
                rpc.path, request_serializer=serialize, response_deserializer=_identity
            )
            for _ in stream(request, timeout=timeout, metadata=metadata):
                pass
        else:
            unary = channel.unary_unary(
                rpc.path, request_serializer=serialize, response_deserializer=_identity
            )
            unary(request, timeout=timeout, metadata=metadata)
        code = "OK"
    except grpc.RpcError as exc:
        code = exc.code().name  # type: ignore[attr-defined]
    return code, time.perf_counter() - started


# -- requests -------------------------------------------------------------------------------------

_WORDS = ["virus", "the", "a", "masks", "soap", "20", "seconds", "of", "hands", "test", "q"]
_ODD = [
    "",
    " ",
    "\x00",
    "\x00" * 7,
    "😀🎉👍",
    "\u202eevil\u202d",
    "e\u0301\u0301\u0301",
    "'; DROP TABLE audit_decisions; --",
    "../../etc/passwd",
    "%s%n{0}{!r}",
    "\n\t\r" * 5,
    "ﬁ\ufeff\u200b",
    "the",
    "a",
]


def random_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(_ODD)
    if roll < 0.7:
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12)))
    if roll < 0.9:
        return "".join(chr(rng.randint(1, 0xD7FF)) for _ in range(rng.randint(1, 40)))
    return rng.choice("xyz ") * rng.randint(100, 5_000)


def _number(field: FieldDescriptor, rng: random.Random) -> Any:
    kind = field.type
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice(
            [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e300, -1e300, math.nan, math.inf, -math.inf, 5e-324]
        )
    if kind == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    bits = 64 if kind in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64) else 32
    signed = kind not in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64)
    low = -(2 ** (bits - 1)) if signed else 0
    high = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
    return rng.choice([0, 1, -1 if signed else 2, 3, 7, 99, low, high, rng.randint(low, high)])


def _enum(field: FieldDescriptor, rng: random.Random) -> int:
    known = [v.number for v in field.enum_type.values]
    return rng.choice([*known, rng.randint(-5, 1_000)])


def _scalar(field: FieldDescriptor, rng: random.Random) -> Any:
    if field.type == FieldDescriptor.TYPE_STRING:
        return random_text(rng)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.randint(0, 32))
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum(field, rng)
    return _number(field, rng)


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def set_random(message: Message, field: FieldDescriptor, rng: random.Random, depth: int) -> None:
    """Give ``field`` of ``message`` a random value (a value the type cannot hold is skipped)."""
    value_field = (
        field.message_type.fields_by_name["value"]
        if field.message_type is not None and field.message_type.GetOptions().map_entry
        else None
    )
    container = getattr(message, field.name)
    try:
        if value_field is not None:  # a map
            container.clear()
            for _ in range(rng.choice([0, 1, 2, 5])):
                key = random_text(rng)[:200]
                if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                    container[key].CopyFrom(
                        random_message(value_field.message_type, rng, depth + 1)
                    )
                else:
                    container[key] = _scalar(value_field, rng)
        elif _repeated(field):
            del container[:]
            for _ in range(rng.choice([0, 1, 2, 3, rng.randint(0, 8)])):
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    container.add().CopyFrom(random_message(field.message_type, rng, depth + 1))
                else:
                    container.append(_scalar(field, rng))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            container.CopyFrom(random_message(field.message_type, rng, depth + 1))
        else:
            setattr(message, field.name, _scalar(field, rng))
    except (ValueError, TypeError, OverflowError):
        pass  # e.g. 1e300 in a 32-bit float: not a value a client can send


def random_message(descriptor: Descriptor, rng: random.Random, depth: int = 0) -> Message:
    from google.protobuf import message_factory

    message = message_factory.GetMessageClass(descriptor)()
    if depth > 3:
        return message
    for member in descriptor.fields:
        if rng.random() < 0.6:
            set_random(message, member, rng, depth)
    return message


def _fields(message: Message) -> Iterator[tuple[Message, FieldDescriptor]]:
    """Every (message, field) of ``message`` and of the messages set inside it."""
    for member in message.DESCRIPTOR.fields:
        yield message, member
    for member, value in message.ListFields():
        if member.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        if member.message_type.GetOptions().map_entry:
            continue
        for inner in value if _repeated(member) else [value]:
            yield from _fields(inner)


def mutate(seed: Message, rng: random.Random) -> Message:
    request = type(seed)()
    request.CopyFrom(seed)
    target, field = rng.choice(list(_fields(request)))
    set_random(target, field, rng, 0)
    return request


def oversize(seed: Message, rng: random.Random, settings: Settings, number: int) -> Message:
    """The seed with one bounded field just over its limit (a text, or a repeated field)."""
    from tribunal.core.server import RequestLimits

    request = type(seed)()
    request.CopyFrom(seed)
    if number % BIG_MESSAGE_EVERY == 0:
        # Over server.max_message_bytes: gRPC's own limit answers RESOURCE_EXHAUSTED.
        text_fields = [(m, f) for m, f in _fields(request) if f.type == FieldDescriptor.TYPE_STRING]
        target, field = rng.choice([(m, f) for m, f in text_fields if not _repeated(f)])
        setattr(target, field.name, "x" * (settings.server.max_message_bytes + 1))
        return request
    limits = RequestLimits.from_settings(settings)
    bounded = [
        (m, f, bound)
        for m, f in _fields(request)
        if (bound := limits.limit(m.DESCRIPTOR.full_name, f.name)) is not None
        and not (f.message_type is not None and f.message_type.GetOptions().map_entry)
        and bound[1] <= 100_000
    ]
    target, field, (_, limit) = rng.choice(bounded)
    if _repeated(field):
        container = getattr(target, field.name)
        template = container[0] if len(container) else None
        while len(container) <= limit:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                item = container.add()
                if template is not None:
                    item.CopyFrom(template)
            else:
                blank = b"x" if field.type == FieldDescriptor.TYPE_BYTES else "x"
                container.append(template if template is not None else blank)
    else:
        filler = b"y" if field.type == FieldDescriptor.TYPE_BYTES else "y"
        setattr(target, field.name, filler * (limit + 1 + rng.randint(0, limit)))
    return request


def make_request(
    rpc: Rpc, kind: str, rng: random.Random, settings: Settings, number: int
) -> tuple[Message | bytes, float]:
    """One request of ``kind`` and its deadline."""
    if kind == "mutation":
        return mutate(rpc.request, rng), TIMEOUT_S
    if kind == "random":
        return random_message(rpc.request.DESCRIPTOR, rng), TIMEOUT_S
    if kind == "bytes":
        return rng.randbytes(rng.randint(1, 64)), TIMEOUT_S
    if kind == "deadline_1ms":
        return rpc.request, 0.001
    return oversize(rpc.request, rng, settings, number), TIMEOUT_S


# -- one RPC ---------------------------------------------------------------------------------------


@dataclass
class FuzzResult:
    rpc: str
    requests: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    hangs: int = 0
    slowest_s: float = 0.0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "rpc": self.rpc,
            "requests": self.requests,
            "codes": dict(sorted(self.codes.items())),
            "by_kind": {k: dict(sorted(v.items())) for k, v in self.by_kind.items()},
            "hangs": self.hangs,
            "slowest_s": round(self.slowest_s, 3),
            "seconds": round(self.seconds, 1),
        }


class FuzzTarget(Protocol):
    """What :func:`fuzz_rpc` sends to: this module's :class:`Stack`, or the same services
    behind Serve's gRPC proxy (``_fuzz_serve.ServeStack``)."""

    settings: Settings

    def channel_for(self, rpc: Rpc) -> grpc.Channel: ...

    def metadata_for(self, rpc: Rpc) -> tuple[tuple[str, str], ...]: ...


def fuzz_rpc(stack: FuzzTarget, rpc: Rpc, count: int, *, seed: int, clients: int = 4) -> FuzzResult:
    """``count`` requests to ``rpc`` (the kinds in turn), ``clients`` at a time."""
    rng = random.Random(f"{seed}:{rpc.path}")
    requests = []
    for number in range(count):
        kind = KINDS[number % len(KINDS)]
        request, timeout = make_request(rpc, kind, rng, stack.settings, number // len(KINDS))
        requests.append((kind, request, timeout))
    result = FuzzResult(f"{rpc.service}.{rpc.method}")
    channel = stack.channel_for(rpc)
    metadata = stack.metadata_for(rpc)
    started = time.perf_counter()

    def send(job: tuple[str, Message | bytes, float]) -> tuple[str, str, float, float]:
        kind, request, timeout = job
        code, seconds = call(channel, rpc, request, timeout, metadata)
        return kind, code, seconds, timeout

    with ThreadPoolExecutor(max_workers=clients) as pool:
        for kind, code, seconds, timeout in pool.map(send, requests):
            result.requests += 1
            result.codes[code] += 1
            result.by_kind.setdefault(kind, Counter())[code] += 1
            result.slowest_s = max(result.slowest_s, seconds)
            if seconds > timeout + HANG_SLACK_S:
                result.hangs += 1
    result.seconds = time.perf_counter() - started
    return result
