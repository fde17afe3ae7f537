"""JobStore: label jobs and their items over :class:`tribunal.core.storage.Database`.

Exactly once, on SQLite and PostgreSQL alike: items are inserted with ON CONFLICT DO
NOTHING on (job, item_id), and a result is an UPDATE guarded by ``finished_at IS NULL``,
so a second write of the same item (a re-run after a crash between the model call and
the write, or two runners on one job) changes nothing and reports so.

Work is shared by leases: a runner claims pending items (one UPDATE that takes only
items nobody holds, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL) for ``lease_s`` seconds,
renews them while it works, and its result clears them. Concurrent runners therefore
label disjoint items. A runner that dies leaves its leases to expire; on the same host a
lease whose process is gone is taken over at once (a ``kill -9`` and resume loses no
time). An item the pipeline refuses is finished with source ``FAILED`` and the reason.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import case, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError

from ..core import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from ..core.storage import Database
from ._items import LabelItem
from ._job_records import (
    ItemResult,
    JobCounts,
    JobInfo,
    JobItem,
    LeaseHolder,
    aware,
    check_job_name,
    job_info,
    job_item,
    label_item,
    process_gone,
    runner_id,
)
from ._tables import JobItemRow, LabelJobRow

__all__ = [
    "ItemResult",
    "JobCounts",
    "JobInfo",
    "JobItem",
    "JobStore",
    "LeaseHolder",
    "check_job_name",
    "runner_id",
]

_INSERT_CHUNK = 500
_PAGE = 1_000
SOURCES = ("JUDGES", "DEBATE", "HUMAN_QUEUE", "FAILED")
# SQLite answers "database is locked" when a writer holds it past the busy timeout.
_CLAIM_ATTEMPTS = 5


class JobStore:
    """Label jobs in the store; safe across threads and processes."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self.db.create_schema()  # the migrations create and upgrade the job tables

    @classmethod
    def from_url(cls, url: str) -> JobStore:
        return cls(Database(url))

    def close(self) -> None:
        self.db.close()

    def _insert(self) -> Any:
        return postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert

    # -- jobs ---------------------------------------------------------------------------

    def create_job(
        self,
        name: str,
        *,
        mode: str,
        settings: Mapping[str, Any],
        source: Mapping[str, Any],
        resume: bool = False,
    ) -> JobInfo:
        """Register a new job, or (``resume``) return the existing one.

        Raises:
            FailedPreconditionError: the job exists and ``resume`` is false.
            NotFoundError: ``resume`` and there is no such job.
            InvalidArgumentError: ``resume`` with a different mode than the job's.
        """
        check_job_name(name)
        if resume:
            job = self.job(name)
            if job.mode != mode:
                raise InvalidArgumentError(
                    f"job {name!r} runs in mode {job.mode!r}; resume it with --mode "
                    f"{job.mode} (or leave --mode out)",
                    field="mode",
                )
            return job
        statement = (
            self._insert()(LabelJobRow)
            .values(
                name=name,
                mode=mode,
                settings=dict(settings),
                source=dict(source),
                created_at=dt.datetime.now(dt.UTC),
                status="created",
            )
            .on_conflict_do_nothing()
            # RETURNING, not rowcount: psycopg reports -1 for INSERT .. ON CONFLICT here.
            .returning(LabelJobRow.name)
        )
        with self.db.session() as session:
            inserted = session.execute(statement).scalar_one_or_none()
        if inserted is None:
            raise FailedPreconditionError(
                f"job {name!r} already exists; pass --resume to continue it, or choose "
                "another --job name",
                field="job",
            )
        return self.job(name)

    def job(self, name: str) -> JobInfo:
        with self.db.session() as session:
            row = session.get(LabelJobRow, name)
            if row is None:
                raise NotFoundError(
                    f"no label job {name!r} in {self.db.engine.url.render_as_string()}; "
                    "`tribunal label status` lists the jobs"
                )
            return job_info(row)

    def jobs(self) -> list[JobInfo]:
        with self.db.session() as session:
            rows = session.scalars(select(LabelJobRow).order_by(LabelJobRow.created_at)).all()
            return [job_info(row) for row in rows]

    def set_status(self, name: str, status: str) -> None:
        with self.db.session() as session:
            session.execute(
                update(LabelJobRow).where(LabelJobRow.name == name).values(status=status)
            )

    # -- items --------------------------------------------------------------------------

    def add_items(
        self,
        name: str,
        items: Iterable[LabelItem],
        *,
        failed: Mapping[str, str] | None = None,
    ) -> int:
        """Insert the items not yet in the job (keyed by item id); returns how many were new.

        Positions continue after the job's last one, so a resume that adds nothing
        keeps the original order.

        Args:
            failed: Item id -> why the item cannot be labelled (it breaks a limit of
                the pipeline): such an item is stored finished, with source ``FAILED``
                and the reason, and never sent to a labeller.
        """
        refused = dict(failed or {})
        now = dt.datetime.now(dt.UTC)
        before = self._count(name)
        position = self._next_position(name)
        chunk: list[dict[str, Any]] = []
        for item in items:
            row: dict[str, Any] = {
                "job": name,
                "item_id": item.item_id,
                "position": position,
                "query_id": item.query_id,
                "doc_id": item.doc_id,
                "query": item.query,
                "chunk": item.chunk,
                "answers": list(item.answers),
                "gold": item.gold,
                "source": None,
                "error": None,
                "finished_at": None,
            }
            if item.item_id in refused:
                row.update(source="FAILED", error=refused[item.item_id], finished_at=now)
            chunk.append(row)
            position += 1
            if len(chunk) >= _INSERT_CHUNK:
                self._insert_items(chunk)
                chunk = []
        if chunk:
            self._insert_items(chunk)
        return self._count(name) - before

    def _insert_items(self, rows: list[dict[str, Any]]) -> None:
        statement = self._insert()(JobItemRow).values(rows).on_conflict_do_nothing()
        with self.db.session() as session:
            session.execute(statement)

    def _count(self, name: str) -> int:
        with self.db.session() as session:
            return int(session.scalar(select(func.count()).where(JobItemRow.job == name)) or 0)

    def _next_position(self, name: str) -> int:
        with self.db.session() as session:
            last = session.scalar(
                select(func.max(JobItemRow.position)).where(JobItemRow.job == name)
            )
            return 0 if last is None else int(last) + 1

    # -- leases -------------------------------------------------------------------------

    def claim(self, name: str, owner: str, limit: int, *, lease_s: float) -> list[LabelItem]:
        """Lease up to ``limit`` pending items nobody holds (in input order) to ``owner``
        for ``lease_s`` seconds; returns them. Two runners never get the same item."""
        self._free_leases_of_dead_runners(name)
        for attempt in range(_CLAIM_ATTEMPTS):
            try:
                return self._claim_once(name, owner, limit, lease_s)
            except OperationalError:
                # SQLite's single writer: another runner held the file past the busy
                # timeout (PostgreSQL skips locked rows instead).
                if self.db.dialect != "sqlite" or attempt == _CLAIM_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        return []  # pragma: no cover - the loop returns or raises

    def _claim_once(self, name: str, owner: str, limit: int, lease_s: float) -> list[LabelItem]:
        now = dt.datetime.now(dt.UTC)
        free = or_(JobItemRow.lease_expires_at.is_(None), JobItemRow.lease_expires_at < now)
        candidates = (
            select(JobItemRow.item_id)
            .where(JobItemRow.job == name, JobItemRow.finished_at.is_(None), free)
            .order_by(JobItemRow.position)
            .limit(limit)
        )
        if self.db.dialect == "postgresql":
            candidates = candidates.with_for_update(skip_locked=True)
        # A CTE runs once; PostgreSQL may run an IN subquery again per row, each time
        # skipping the rows it just locked, and so lease every pending item.
        claimable = candidates.cte("claimable")
        statement = (
            update(JobItemRow)
            .where(
                JobItemRow.job == name,
                JobItemRow.item_id.in_(select(claimable.c.item_id)),
                JobItemRow.finished_at.is_(None),
                free,
            )
            .values(lease_owner=owner, lease_expires_at=now + dt.timedelta(seconds=lease_s))
            .returning(JobItemRow)
            .execution_options(synchronize_session=False)
        )
        with self.db.session() as session:
            rows = list(session.scalars(statement))
            rows.sort(key=lambda row: row.position)
            return [label_item(row) for row in rows]

    def renew(self, name: str, owner: str, item_ids: Sequence[str], *, lease_s: float) -> int:
        """Extend ``owner``'s leases on these items; returns how many it still held."""
        if not item_ids:
            return 0
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lease_s)
        with self.db.session() as session:
            result = session.execute(
                update(JobItemRow)
                .where(
                    JobItemRow.job == name,
                    JobItemRow.item_id.in_(list(item_ids)),
                    JobItemRow.lease_owner == owner,
                    JobItemRow.finished_at.is_(None),
                )
                .values(lease_expires_at=expires)
                .returning(JobItemRow.item_id)
                .execution_options(synchronize_session=False)
            )
            return len(result.all())

    def release(self, name: str, owner: str, item_ids: Sequence[str] | None = None) -> int:
        """Give back ``owner``'s leases (these items, or all of the job's); returns how many."""
        condition = [JobItemRow.job == name, JobItemRow.lease_owner == owner]
        if item_ids is not None:
            if not item_ids:
                return 0
            condition.append(JobItemRow.item_id.in_(list(item_ids)))
        with self.db.session() as session:
            result = session.execute(
                update(JobItemRow)
                .where(*condition)
                .values(lease_owner=None, lease_expires_at=None)
                .returning(JobItemRow.item_id)
                .execution_options(synchronize_session=False)
            )
            return len(result.all())

    def leased(self, name: str, *, exclude_owner: str = "") -> int:
        """Pending items under a live lease (of owners other than ``exclude_owner``)."""
        now = dt.datetime.now(dt.UTC)
        statement = select(func.count()).where(
            JobItemRow.job == name,
            JobItemRow.finished_at.is_(None),
            JobItemRow.lease_expires_at >= now,
            JobItemRow.lease_owner != exclude_owner,
        )
        with self.db.session() as session:
            return int(session.scalar(statement) or 0)

    def lease_holders(self, name: str) -> list[LeaseHolder]:
        """Who holds the job's pending items now: one row per owner with an unexpired
        lease, and whether its process is known to be gone (same host only)."""
        now = dt.datetime.now(dt.UTC)
        statement = (
            select(
                JobItemRow.lease_owner,
                func.count(),
                func.max(JobItemRow.lease_expires_at),
            )
            .where(
                JobItemRow.job == name,
                JobItemRow.finished_at.is_(None),
                JobItemRow.lease_expires_at >= now,
                JobItemRow.lease_owner.is_not(None),
            )
            .group_by(JobItemRow.lease_owner)
        )
        with self.db.session() as session:
            rows = session.execute(statement).all()
        return [
            LeaseHolder(
                owner=str(owner),
                items=int(count),
                expires_at=aware(expires or now),
                gone=process_gone(str(owner)),
            )
            for owner, count, expires in rows
        ]

    def _free_leases_of_dead_runners(self, name: str) -> None:
        now = dt.datetime.now(dt.UTC)
        with self.db.session() as session:
            owners = session.scalars(
                select(JobItemRow.lease_owner)
                .where(
                    JobItemRow.job == name,
                    JobItemRow.finished_at.is_(None),
                    JobItemRow.lease_expires_at >= now,
                )
                .distinct()
            ).all()
        for owner in owners:
            if owner and process_gone(owner):
                self.release(name, owner)

    def pending(self, name: str, *, limit: int | None = None) -> list[LabelItem]:
        """Items without a result, in input order."""
        statement = (
            select(JobItemRow)
            .where(JobItemRow.job == name, JobItemRow.finished_at.is_(None))
            .order_by(JobItemRow.position)
        )
        if limit is not None:
            statement = statement.limit(limit)
        with self.db.session() as session:
            return [label_item(row) for row in session.scalars(statement)]

    def record(self, name: str, results: Iterable[ItemResult]) -> int:
        """Write results of items not yet finished (one transaction); returns how many
        were written: an item already finished keeps its first result."""
        now = dt.datetime.now(dt.UTC)
        written = 0
        with self.db.session() as session:
            for result in results:
                if result.source not in SOURCES:
                    raise InvalidArgumentError(
                        f"result source {result.source!r} is not one of {SOURCES}"
                    )
                changed = session.execute(
                    update(JobItemRow)
                    .where(
                        JobItemRow.job == name,
                        JobItemRow.item_id == result.item_id,
                        JobItemRow.finished_at.is_(None),
                    )
                    .values(
                        label=result.label,
                        source=result.source,
                        p_relevant=result.p_relevant,
                        outcome=result.outcome or None,
                        tokens=result.tokens,
                        seconds=result.seconds,
                        escalation_id=result.escalation_id or None,
                        audit_id=result.audit_id or None,
                        error=result.error or None,
                        finished_at=now,
                        lease_owner=None,
                        lease_expires_at=None,
                    )
                    .returning(JobItemRow.item_id)
                ).scalar_one_or_none()
                written += changed is not None
        return written

    def set_human_label(self, name: str, item_id: str, label: int, method: str) -> None:
        """The humans' label for an item (``method``: how their votes were aggregated)."""
        if label not in (0, 1):
            raise InvalidArgumentError(f"human label {label!r} must be 0 or 1", field="label")
        with self.db.session() as session:
            changed = session.execute(
                update(JobItemRow)
                .where(JobItemRow.job == name, JobItemRow.item_id == item_id)
                .values(human_label=int(label), human_method=method)
                .returning(JobItemRow.item_id)
            ).scalar_one_or_none()
        if changed is None:
            raise NotFoundError(f"job {name!r} has no item {item_id!r}")

    def set_escalation(self, name: str, item_id: str, escalation_id: str) -> None:
        """Queue a finished item for human review under ``escalation_id`` (an evaluation's
        human sample); its label stays the model's until humans give theirs."""
        with self.db.session() as session:
            changed = session.execute(
                update(JobItemRow)
                .where(JobItemRow.job == name, JobItemRow.item_id == item_id)
                .values(escalation_id=escalation_id)
                .returning(JobItemRow.item_id)
            ).scalar_one_or_none()
        if changed is None:
            raise NotFoundError(f"job {name!r} has no item {item_id!r}")

    def counts(self, name: str) -> JobCounts:
        finished = JobItemRow.finished_at.is_not(None)
        statement = select(
            func.count(),
            func.count(JobItemRow.finished_at),
            func.sum(case((JobItemRow.label == 1, 1), else_=0)),
            func.sum(case((JobItemRow.label == 0, 1), else_=0)),
            func.sum(case((finished & (JobItemRow.source == "HUMAN_QUEUE"), 1), else_=0)),
            func.count(JobItemRow.human_label),
            func.sum(JobItemRow.tokens),
            func.sum(JobItemRow.seconds),
            func.sum(case((JobItemRow.source == "FAILED", 1), else_=0)),
        ).where(JobItemRow.job == name)
        with self.db.session() as session:
            row = session.execute(statement).one()
        total, done, relevant, irrelevant, escalated, human, tokens, seconds, failed = row
        return JobCounts(
            total=int(total),
            finished=int(done),
            relevant=int(relevant or 0),
            irrelevant=int(irrelevant or 0),
            escalated=int(escalated or 0),
            human_labelled=int(human),
            tokens=int(tokens or 0),
            seconds=float(seconds or 0.0),
            failed=int(failed or 0),
        )

    def items(self, name: str, *, finished: bool | None = None) -> Iterator[JobItem]:
        """Every item of the job in input order (``finished``: only those / only pending),
        read a page at a time."""
        after = -1
        while True:
            statement = (
                select(JobItemRow)
                .where(JobItemRow.job == name, JobItemRow.position > after)
                .order_by(JobItemRow.position)
                .limit(_PAGE)
            )
            if finished is True:
                statement = statement.where(JobItemRow.finished_at.is_not(None))
            elif finished is False:
                statement = statement.where(JobItemRow.finished_at.is_(None))
            with self.db.session() as session:
                page = [job_item(row) for row in session.scalars(statement)]
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].position
