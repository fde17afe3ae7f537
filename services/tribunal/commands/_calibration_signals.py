"""The signals the gateway would send for each labelled query, observed or replayed.

:func:`observe_traffic` runs every query through the gateway's own retrieval and
matching (no scoring); :func:`write_signals` / :func:`read_signals` keep those signals
in a file bound to the queries (``--signals-out`` / ``--from-signals``), so a
calibration can be redone on corrected labels without the models.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import InvalidArgumentError, jsonl_rows

if TYPE_CHECKING:
    from ..confidence import CalibrationBinding, ObservedCandidate, Traffic
    from ..core import Settings

__all__ = ["observe_traffic", "read_signals", "write_signals"]

_SIGNALS_FORMAT = "tribunal.calibration-signals/1"
_OBSERVE_WORKERS = 8
"""Queries in flight at once while calibrating (the gateway's stages batch them)."""


def observe_traffic(
    settings: Settings, collection: str, traffic: Traffic
) -> tuple[list[list[ObservedCandidate]], CalibrationBinding]:
    """Every query through the gateway's retrieval and matching; the binding they imply."""
    from tqdm import tqdm

    from ..confidence import CalibrationBinding, embedder_version
    from ..core.server import ServiceHost
    from ..entailment import checker_version
    from ..gateway import (
        AnswerPipeline,
        AnswerPolicy,
        StageError,
        StageTransport,
        connect_stages,
        serve_stages,
    )
    from ..retrieval import trusted_keys
    from ..v1 import gateway_pb2, retrieval_pb2

    transport: StageTransport
    host: ServiceHost | None
    if settings.gateway.discovery == "in-process":
        # Only the stages whose replies become signals: no entailment or debate models.
        transport, host = serve_stages(settings, ("retrieval", "ensemble"), name="calibrate")
    else:
        transport, host = connect_stages(settings)
    # Retrieval and matching only: nothing is scored, so no trusted calibrator is needed.
    policy = AnswerPolicy(
        scorer=None,  # type: ignore[arg-type]
        checker_version=checker_version(settings),
        rrf_k=settings.retrieval.rrf_k,
        bm25_k1=settings.retrieval.bm25_k1,
        trusted_keys=trusted_keys(settings),
    )
    pipeline = AnswerPipeline(
        settings.gateway,
        transport,
        store=None,
        policy=policy,
        max_id_chars=settings.server.max_id_chars,
    )
    observed: list[list[ObservedCandidate]] = []
    versions: set[tuple[str, str]] = set()
    retrieval_models: set[str] = set()
    failures: list[str] = []
    try:
        stats = transport.call(
            "retrieval", "Stats", retrieval_pb2.StatsRequest(collection=collection), 60.0
        )

        def one(item: Any) -> Any:
            try:
                return pipeline.candidate_signals(
                    gateway_pb2.AnswerRequest(query=item.query, collection=collection),
                    leave_out_own_phrasing=item.taught,
                )
            except StageError as failure:
                return failure

        # Concurrent queries, as live traffic arrives: the stages' micro-batching
        # embedders then embed several queries in one model pass. Order is kept.
        with ThreadPoolExecutor(max_workers=_OBSERVE_WORKERS) as pool:
            replies = tqdm(
                pool.map(one, traffic.queries),
                total=len(traffic),
                desc="retrieve + match",
                unit="query",
            )
            for item, found in zip(traffic.queries, replies, strict=True):
                if isinstance(found, StageError):
                    # The gateway falls back on this query whatever the threshold: it stays
                    # in the traffic with no candidate (never accepted); the count is printed.
                    failures.append(f"{item.query[:60]!r}: {found}")
                    observed.append([])
                    continue
                retrieval_models.add(found.versions.retrieval_model)
                observed.append(
                    [
                        _observed(entry_id, signals)
                        for entry_id, signals in zip(found.entry_ids, found.signals, strict=True)
                    ]
                )
                if found.versions.matcher:
                    versions.add((found.versions.collection_version, found.versions.matcher))
    finally:
        transport.close()
        if host is not None:
            host.stop(0)
    if failures:
        print(f"{len(failures)} queries fell back in a stage (kept, never accepted):")
        for line in failures[:10]:
            print(f"  {line}")
    if len(versions) != 1:
        raise InvalidArgumentError(
            f"the KB or matcher changed while calibrating ({sorted(versions)}); rerun",
            field="collection",
        )
    content, matcher = versions.pop()
    entries = sum(s.entries for s in stats.collections if s.name == collection)
    binding = CalibrationBinding(
        collection=collection,
        collection_version=content,
        entries=int(entries),
        matcher=matcher,
        embedder=_retrieval_model(retrieval_models) or embedder_version(settings),
        profile=settings.profile,
        candidates=settings.gateway.candidates,
    )
    return observed, binding


def _retrieval_model(reported: set[str]) -> str:
    """The one model the collection's dense search compared while calibrating ("" when
    retrieval reported none: the profile's embedder is then the one that searched).

    Raises:
        InvalidArgumentError: it changed during the calibration (the collection was
            re-embedded): the signals mix two models' scores.
    """
    if len(reported) > 1:
        raise InvalidArgumentError(
            f"the collection's retrieval model changed while calibrating ({sorted(reported)}); "
            "rerun",
            field="collection",
        )
    return next(iter(reported), "")


def _observed(entry_id: str, message: Any) -> ObservedCandidate:
    """The candidate's signals, floats rounded to 1e-6 so the fit does not depend on the
    last bits of a model's arithmetic (the artifact is then rebuilt bit for bit)."""
    from google.protobuf.json_format import MessageToDict

    from ..confidence import ObservedCandidate
    from ..confidence.servicer import signals_from_proto
    from ..v1 import confidence_pb2

    values = MessageToDict(message, preserving_proto_field_name=True)
    rounded: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, float):
            rounded[name] = round(value, 6)
        elif isinstance(value, dict):
            rounded[name] = {k: round(v, 6) for k, v in value.items()}
        else:
            rounded[name] = value
    parsed = confidence_pb2.Signals()
    from google.protobuf.json_format import ParseDict

    ParseDict(rounded, parsed)
    return ObservedCandidate(entry_id, signals_from_proto(parsed))


def write_signals(
    path: Path,
    traffic: Traffic,
    observed: list[list[ObservedCandidate]],
    binding: CalibrationBinding,
) -> None:
    lines = [
        json.dumps(
            {
                "format": _SIGNALS_FORMAT,
                "queries_sha256": _queries_sha256(traffic),
                "binding": binding.to_dict(),
            },
            sort_keys=True,
        )
    ]
    for item, candidates in zip(traffic.queries, observed, strict=True):
        lines.append(
            json.dumps(
                {
                    "query": item.query,
                    "candidates": [
                        {"entry_id": c.entry_id, "signals": c.signals.to_mapping()}
                        for c in candidates
                    ],
                },
                sort_keys=True,
            )
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def read_signals(
    path: Path, traffic: Traffic
) -> tuple[list[list[ObservedCandidate]], CalibrationBinding]:
    from ..confidence import CalibrationBinding, ObservedCandidate, Signals

    lines = [row.value for row in jsonl_rows(path, field="from_signals")]
    if not lines or lines[0].get("format") != _SIGNALS_FORMAT:
        raise InvalidArgumentError(
            f"{path} is not a file written by --signals-out", field="from_signals"
        )
    header, rows = lines[0], lines[1:]
    # The signals depend on the queries only: labels may be corrected without rerunning.
    if header["queries_sha256"] != _queries_sha256(traffic) or len(rows) != len(traffic):
        raise InvalidArgumentError(
            f"{path} was recorded for other queries than {traffic.source}'s",
            field="from_signals",
        )
    observed = [
        [
            ObservedCandidate(c["entry_id"], Signals.from_mapping(c["signals"]))
            for c in row["candidates"]
        ]
        for row in rows
    ]
    return observed, CalibrationBinding.from_dict(header["binding"])


def _queries_sha256(traffic: Traffic) -> str:
    import hashlib

    # A taught query's signals leave its own phrasing out: not the same signals.
    lines = (q.query + ("\x00taught" if q.taught else "") for q in traffic.queries)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
