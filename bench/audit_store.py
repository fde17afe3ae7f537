"""The two statements the gateway runs on its audit store per ``Answer`` — the serving
mode's read and the decision's write — as the store runs them (a statement built once,
executed on a plain connection) against the way it ran them before (the statement built
per call, in an ORM session), side by side in one run: CPU and wall microseconds per
call, one caller, the ways in turn each round.

    .venv/bin/python bench/audit_store.py [--database-url sqlite:///...] [--rounds 3]
        [--calls 1000]

Without ``--database-url`` it uses a fresh SQLite file (the embedded default); pass a
PostgreSQL URL to measure that.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select
from tribunal.audit import LiveStateRow, StateStore
from tribunal.core.storage import AuditDecisionRow, Database, DecisionRecord
from tribunal.core.storage._database import _DECISION_COLUMNS as DECISION_COLUMNS


def _per_call_us(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """(CPU, wall) microseconds per call, after one warm-up call."""
    call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    return (
        1e6 * (time.process_time() - cpu) / calls,
        1e6 * (time.perf_counter() - wall) / calls,
    )


def _paths(db: Database) -> dict[str, Callable[[], object]]:
    states = StateStore(db)
    record = DecisionRecord(kind="answer", query="q", decision="ACCEPT", candidate_ids=("a",))

    def read_in_session() -> object:
        statement = (
            select(LiveStateRow)
            .where(LiveStateRow.collection == "bench")
            .order_by(LiveStateRow.created_at.desc(), LiveStateRow.id)
            .limit(1)
        )
        with db.session() as session:
            return session.scalars(statement).first()

    def write_in_session() -> object:
        values = {name: getattr(record, name) for name in DECISION_COLUMNS}
        values["candidate_ids"] = list(record.candidate_ids)
        with db.session() as session:
            session.add(AuditDecisionRow(id=uuid.uuid4().hex, **values))
        return None

    def write_on_connection() -> object:
        return db.record_decision(record)

    return {
        "mode read, before: built per call, ORM session": read_in_session,
        "mode read, now: built once, plain connection": lambda: states.latest("bench"),
        "decision write, before: ORM object in a session": write_in_session,
        "decision write, now: built once, plain connection": write_on_connection,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1000, help="per path and round")
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    db = Database(url)
    db.create_schema()
    paths = _paths(db)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    names = list(paths)
    for number in range(args.rounds):
        order = names if number % 2 == 0 else list(reversed(names))
        for name in order:
            calls = args.calls if "read" in name else max(1, args.calls // 4)
            samples[name].append(_per_call_us(paths[name], calls))
    print(f"{db.dialect}, {args.rounds} rounds, one caller (median round):")
    print("| statement | CPU µs per call | wall µs per call |")
    print("|---|---|---|")
    for name, values in samples.items():
        cpu = statistics.median(v[0] for v in values)
        wall = statistics.median(v[1] for v in values)
        print(f"| {name} | {cpu:.0f} | {wall:.0f} |")
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
