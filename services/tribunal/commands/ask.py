"""``tribunal ask``: one question, or a file of them, through the gateway's ``Answer``.

``tribunal ask "question"`` prints one decision. ``tribunal ask --file queries.jsonl``
(``-``: standard input) asks every query of a JSONL file with one gateway load: the
stages ``Answer`` calls (retrieval, ensemble, confidence) run in this process, wired by
the gateway's own code, and every decision is audited as a running gateway's would be.
``--address HOST:PORT`` sends the queries to a running gateway instead (``--token`` /
``--token-file``, ``--tls-ca`` for its credentials and TLS).

Each query gives one JSONL row (``--out FILE``, else standard output): decision, KB entry
id, confidence, threshold, reason, evidence and latency. A row may name its own
``collection`` and ``id``; one with ``answers`` (the ids of every entry that answers it,
empty when none does — the labelled-traffic format of ``tribunal calibrate``) is also
marked right or wrong. A progress bar (rate, ETA) and a summary table go to standard
error when rows go to standard output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Protocol

from ..core import InvalidArgumentError, NotFoundError, Settings, load_settings
from ._ask_rows import (
    AskedQuery,
    error_row,
    input_lines,
    read_queries,
    reply_row,
    summary_markdown,
    with_answer_classes,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    ask = sub.add_parser(
        "ask",
        help="ask the gateway one question, or every query of a file (--file), in this "
        "process or against a running gateway (--address)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("query", nargs="?", default=None, help="the question (or use --file)")
    ask.add_argument(
        "--file",
        type=Path,
        default=None,
        help='JSONL of {"query": ..., optional "id", "collection", "answers"} ("-": stdin)',
    )
    ask.add_argument(
        "--out", type=Path, default=None, help="--file: write the rows here (default stdout)"
    )
    ask.add_argument(
        "--classes",
        type=Path,
        default=None,
        help="--file: answer-classes file; a labelled query's answers are widened to their "
        "whole classes, so any entry of a right entry's class counts as right (as in "
        "tribunal calibrate --classes)",
    )
    ask.add_argument("--collection", default="", help="default: gateway.collection")
    ask.add_argument("--address", default=None, help="host:port of a running gateway")
    ask.add_argument("--token", default=None, help="bearer token for --address")
    ask.add_argument(
        "--token-file", type=Path, default=None, help="read the bearer token from this file"
    )
    ask.add_argument(
        "--tls-ca", type=Path, default=None, help="--address serves TLS: trust this CA (PEM)"
    )
    ask.add_argument(
        "--tls-cert",
        type=Path,
        default=None,
        help="--address asks for a client certificate (mutual TLS, e.g. tribunal serve "
        "deploy's proxy): present this one (PEM, with --tls-key)",
    )
    ask.add_argument("--tls-key", type=Path, default=None, help="the key of --tls-cert (PEM)")
    ask.add_argument(
        "--tls-server-name", default="", help="the name the gateway's certificate is issued for"
    )
    ask.add_argument("--timeout", type=float, default=None, help="deadline per query (seconds)")
    ask.add_argument("--profile", default=None, help="profile name or YAML path")
    ask.add_argument("--json", action="store_true", help="one question: print the response JSON")
    ask.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="--file: queries in flight at once (default 1; more helps a remote gateway)",
    )
    ask.add_argument("--no-progress", action="store_true", help="no progress bar")
    ask.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="in-process: accept at the calibrator's threshold certified for this "
        "hallucination rate (default: the profile's confidence.alpha)",
    )
    ask.add_argument(
        "--plain-threshold",
        type=_plain_threshold,
        default=None,
        help="in-process: accept at this fixed confidence instead (no guarantee)",
    )
    ask.set_defaults(func=_ask)


def _plain_threshold(value: str) -> float | None:
    from .demo import _plain_threshold as parse

    return parse(value)


# -- gateways -----------------------------------------------------------------------------


class _Gateway(Protocol):
    def answer(self, query: str, collection: str) -> Any: ...

    def close(self) -> None: ...


class _LocalGateway:
    """``Gateway.Answer``'s pipeline in this process over the stages it calls, loaded
    once; decisions go to the audit store as a running gateway's do."""

    def __init__(self, settings: Settings) -> None:
        from ..gateway import ANSWER_STAGES, LocalTransport, build_pipelines, open_audit_store

        self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="ask-stage")
        self._transport = LocalTransport(settings, ANSWER_STAGES, max_workers=8)
        try:
            self._store = open_audit_store(settings)
            self._pipeline, _ = build_pipelines(
                settings, self._transport, executor=self._executor, store=self._store
            )
        except BaseException:
            self._close_stages()
            raise

    def answer(self, query: str, collection: str) -> Any:
        from ..v1 import gateway_pb2

        return self._pipeline.answer(gateway_pb2.AnswerRequest(query=query, collection=collection))

    def _close_stages(self) -> None:
        self._transport.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self._close_stages()
        if self._store is not None:
            self._store.close()


class _RemoteGateway:
    """A running gateway's ``Answer`` over gRPC, with a bearer token and TLS if given."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None,
        tls_ca: Path | None,
        server_name: str,
        timeout_s: float,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
    ) -> None:
        from ..core.server import RETRIED_READS, bearer_metadata, open_channel
        from ..v1 import gateway_pb2_grpc

        for flag, path in (("--tls-ca", tls_ca), ("--tls-cert", tls_cert), ("--tls-key", tls_key)):
            if path is not None and not path.is_file():
                raise InvalidArgumentError(
                    f"{flag} {path}: no such file", field=flag[2:].replace("-", "_")
                )
        # A token never travels in plaintext beyond loopback (open_channel refuses).
        self._channel = open_channel(
            address,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            server_name=server_name,
            sends_credentials=bool(token),
            what="the gateway",
            # A replica being replaced answers UNAVAILABLE: Answer is tried again in time.
            retried=RETRIED_READS,
        )
        self._stub: Any = gateway_pb2_grpc.GatewayServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = bearer_metadata(token)
        self._timeout_s = timeout_s

    def answer(self, query: str, collection: str) -> Any:
        from ..v1 import gateway_pb2

        return self._stub.Answer(
            gateway_pb2.AnswerRequest(query=query, collection=collection),
            timeout=self._timeout_s,
            metadata=self._metadata,
        )

    def close(self) -> None:
        self._channel.close()


def _token(args: argparse.Namespace) -> str | None:
    if args.token and args.token_file:
        raise InvalidArgumentError("give --token or --token-file, not both", field="token")
    if args.token_file is not None:
        if not args.token_file.is_file():
            raise InvalidArgumentError(
                f"--token-file {args.token_file}: no such file", field="token_file"
            )
        return args.token_file.read_text(encoding="utf-8").strip() or None
    return str(args.token) if args.token else None


@contextlib.contextmanager
def _gateway(
    args: argparse.Namespace, log: IO[str], collections: Sequence[str] = ()
) -> Iterator[tuple[_Gateway, Settings]]:
    """The gateway to ask: ``--address``, else the Answer stages loaded here, after the
    calibrator was checked against the α and ``collections`` (each query's, "" = the
    default): a problem is said once, and stops everything when nothing could be accepted.
    """
    from ._calibration_check import require_calibration
    from .demo import _certification, _in_process_settings

    if args.address is not None:
        settings = load_settings(args.profile)
        gateway: _Gateway = _RemoteGateway(
            args.address,
            token=_token(args),
            tls_ca=args.tls_ca,
            server_name=args.tls_server_name,
            timeout_s=args.timeout or settings.gateway.deadline_s + 5,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        )
    else:
        with contextlib.redirect_stdout(log):
            settings = _in_process_settings(args.profile, args.plain_threshold, args.alpha)
        default = args.collection or settings.gateway.collection
        problem = require_calibration(settings, [c or default for c in collections or [""]])
        if settings.confidence.plain_threshold is None:
            print(_certification(settings), file=log)
        if problem is not None:
            print(f"NOTE: {problem}", file=log)
        print("loading the retrieval, ensemble and confidence stages ...", file=log, flush=True)
        started = time.perf_counter()
        gateway = _LocalGateway(settings)
        print(
            f"ready in {time.perf_counter() - started:.1f} s; audit store "
            f"{settings.database_url if settings.gateway.audit else 'off'}",
            file=log,
            flush=True,
        )
    try:
        yield gateway, settings
    finally:
        gateway.close()


# -- one query ----------------------------------------------------------------------------


def _ask_one(gateway: _Gateway, asked: AskedQuery, collection: str) -> dict[str, Any]:
    """One query's row; a query the gateway refuses (or cannot reach) is an ERROR row."""
    import grpc

    started = time.perf_counter()
    try:
        reply = gateway.answer(asked.query, asked.collection or collection)
    except (InvalidArgumentError, NotFoundError) as exc:
        return error_row(asked, f"{exc.code.name}: {exc}", time.perf_counter() - started)
    except grpc.RpcError as exc:
        message = f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
        return error_row(asked, message, time.perf_counter() - started)
    return reply_row(asked, reply, time.perf_counter() - started)


# -- the command --------------------------------------------------------------------------


def _ask(args: argparse.Namespace) -> int:
    if (args.query is None) == (args.file is None):
        raise InvalidArgumentError(
            'give one question ("tribunal ask QUESTION") or --file FILE, not both',
            field="query",
        )
    if args.concurrency < 1:
        raise InvalidArgumentError("--concurrency must be >= 1", field="concurrency")
    if args.file is not None:
        return _ask_file(args)
    if args.out is not None or args.classes is not None:
        raise InvalidArgumentError("--out and --classes go with --file", field="out")
    import grpc

    with _gateway(args, sys.stdout) as (gateway, _):
        started = time.perf_counter()
        try:
            reply = gateway.answer(args.query, args.collection)
        except grpc.RpcError as exc:  # a running gateway refused it: say why, no traceback
            code = exc.code().name  # type: ignore[attr-defined]
            print(f"tribunal: error: {code}: {exc.details()}", file=sys.stderr)  # type: ignore[attr-defined]
            return 2
        seconds = time.perf_counter() - started
    _print_one(reply, seconds, as_json=args.json)
    return 0


def _print_one(reply: Any, seconds: float, *, as_json: bool) -> None:
    from google.protobuf.json_format import MessageToDict

    from ..v1 import common_pb2, gateway_pb2

    if as_json:
        print(json.dumps(MessageToDict(reply, preserving_proto_field_name=True), indent=2))
        return
    decision = common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_")
    confidence = f"{reply.confidence:.3f}" if reply.HasField("confidence") else "-"
    print(f"decision:   {decision}  (confidence {confidence}, threshold {reply.threshold:.3f})")
    if reply.decision == common_pb2.DECISION_ACCEPT:
        print(f"KB entry:   {reply.kb_entry_id} (KB version {reply.kb_version})")
        checker = f", checker {reply.checker_version}" if reply.checker_version else ""
        print(f"evidenced:  {reply.evidence_policy}{checker}; answer sha256 {reply.answer_sha256}")
    else:
        reason = gateway_pb2.FallbackReason.Name(reply.fallback_reason)
        print(
            f"reason:     {reason}"
            + (f" (stage {reply.failed_stage})" if reply.failed_stage else "")
        )
    print(f"answer:     {reply.answer}")
    for evidence in reply.evidence:
        text = evidence.text[:120]
        print(f"evidence:   [{evidence.chunk_id}] p_entail={evidence.p_entail:.2f} {text}")
    stages = ", ".join(f"{s.stage} {s.milliseconds:.0f}" for s in reply.latencies)
    print(f"latency ms: {seconds * 1000:.0f} in all; {stages}")
    print(f"audit id:   {reply.audit_id}")


def _ask_file(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    lines, source = input_lines(args.file)
    queries = read_queries(lines, source)  # every line checked before any model loads
    if args.classes is not None:
        queries = with_answer_classes(queries, args.classes)
    # Rows on stdout: everything else on stderr, so the rows can be piped.
    log = sys.stderr if args.out is None else sys.stdout
    sink: IO[str]
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        sink = args.out.open("w", encoding="utf-8")
    else:
        sink = sys.stdout
    rows: list[dict[str, Any]] = []
    try:
        with _gateway(args, log, [q.collection for q in queries]) as (gateway, _):
            started = time.perf_counter()
            bar = tqdm(
                total=len(queries), desc="asking", unit="query", file=log, disable=args.no_progress
            )
            with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
                # map keeps the input order: row i answers query i.
                for row in pool.map(lambda q: _ask_one(gateway, q, args.collection), queries):
                    rows.append(row)
                    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                    sink.flush()
                    bar.update()
                    if row["decision"] != "ERROR":
                        bar.set_postfix(accepted=sum(r["decision"] == "ACCEPT" for r in rows))
            bar.close()
            wall = time.perf_counter() - started
    finally:
        if args.out is not None:
            sink.close()
    print(summary_markdown(rows, wall), file=log, end="")
    errors = [r for r in rows if r["decision"] == "ERROR"]
    for row in errors[:5]:
        print(f"query {row['id']}: {row['error']}", file=log)
    if args.out is not None:
        print(f"rows: {args.out}", file=log)
    return 1 if errors else 0
