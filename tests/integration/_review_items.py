"""Review-queue fixtures: escalations with a real debate history, attention checks."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from tribunal.core.storage import Database, EscalationRecord
from tribunal.v1 import common_pb2, debate_pb2


def debate_history(chunk: str, relevant_quote: str, irrelevant_quote: str) -> dict[str, object]:
    """What the gateway stores for a debate that ended in disagreement."""
    result = debate_pb2.AssessResponse(
        outcome=debate_pb2.DEBATE_OUTCOME_ESCALATED,
        rounds=[
            debate_pb2.DebateRound(
                number=number,
                turns=[
                    debate_pb2.DebateTurn(
                        agent="A",
                        model="qwen2.5-0.5b",
                        label=common_pb2.LABEL_RELEVANT,
                        evidence=relevant_quote,
                        rationale=f"round {number}: the quote states the answer",
                        evidence_found=relevant_quote.lower() in chunk.lower(),
                    ),
                    debate_pb2.DebateTurn(
                        agent="B",
                        model="qwen2.5-1.5b",
                        label=common_pb2.LABEL_IRRELEVANT,
                        evidence=irrelevant_quote,
                        rationale=f"round {number}: it is about <i>recovery</i>, not the query",
                        evidence_found=irrelevant_quote.lower() in chunk.lower(),
                    ),
                ],
            )
            for number in (1, 2)
        ],
    )
    return MessageToDict(result, preserving_proto_field_name=True)


_C1 = "The incubation period is 2 to 14 days after exposure. Most people recover."
_C2 = "Pets can be infected by people, but the risk that they spread it is low."
_C3 = "Masks are most useful indoors, in crowded rooms with poor ventilation."

ESCALATIONS = [
    EscalationRecord(
        query="How long is the incubation period of COVID-19?",
        chunk=_C1,
        answers=("2 to 14 days",),
        item_id="q1/d1",
        reason="debate_disagreement",
        history=debate_history(_C1, "incubation period is 2 to 14 days", "Most people recover"),
    ),
    EscalationRecord(
        query="Can pets spread the virus?",
        chunk=_C2,
        answers=("the risk is low",),
        item_id="q2/d7",
        reason="debate_disagreement",
        history=debate_history(_C2, "THE RISK THAT THEY SPREAD IT IS LOW", "cats are popular pets"),
    ),
    EscalationRecord(
        query="Should I wear a mask outdoors?",
        chunk=_C3,
        answers=("not usually needed outdoors",),
        item_id="q3/d2",
        reason="debate_disagreement",
        history=debate_history(_C3, "most useful indoors", "poor ventilation"),
    ),
]

ATTENTION = [
    {
        "id": "a1",
        "query": "What is the capital of France?",
        "chunk": "Paris is the capital and largest city of France.",
        "answers": ["Paris"],
        "label": "relevant",
        # DREAM F.2: a check comes with two conflicting arguments, like a real item.
        "history": debate_history(
            "Paris is the capital and largest city of France.",
            "Paris is the capital",
            "a city in Texas is also called Paris",
        ),
    },
    {
        "id": "a2",
        "query": "Who wrote Hamlet?",
        "chunk": "Hamlet is a tragedy written by William Shakespeare around 1600.",
        "answers": ["William Shakespeare"],
        "label": 1,
    },
]


def seed_escalations(db: Database, count: int) -> list[str]:
    """Queue the first ``count`` escalations, oldest first; returns their ids."""
    return [db.add_escalation(record) for record in ESCALATIONS[:count]]


def write_attention(path: Path, items: list[dict[str, object]] = ATTENTION) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


@contextlib.contextmanager
def serving(server: Any, sock: socket.socket) -> Iterator[int]:
    """Run a review page's uvicorn ``server`` on ``sock`` in a thread until the block ends;
    yields the port once the server has started."""
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "the review server exited during start-up"
        assert time.monotonic() < deadline, "the review server did not start in 20 s"
        time.sleep(0.05)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
