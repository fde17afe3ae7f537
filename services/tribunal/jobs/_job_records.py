"""What the job store holds and hands out: jobs, items, results, leases, runner ids."""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import psutil  # type: ignore[import-untyped]

from ..core import InvalidArgumentError
from ._items import LabelItem
from ._tables import JobItemRow, LabelJobRow

__all__ = [
    "ItemResult",
    "JobCounts",
    "JobInfo",
    "JobItem",
    "LeaseHolder",
    "aware",
    "check_job_name",
    "job_info",
    "job_item",
    "label_item",
    "process_gone",
    "runner_id",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def runner_id() -> str:
    """A new lease owner in this process: ``host/pid/start time/run`` (the start time
    tells a reused pid apart; ``run`` tells runs of one process apart)."""
    started = int(psutil.Process().create_time())
    return f"{socket.gethostname()[:32]}/{os.getpid()}/{started}/{uuid.uuid4().hex[:8]}"


def process_gone(owner: str) -> bool:
    """True when ``owner`` is a runner on this host whose process no longer runs."""
    parts = owner.split("/")
    if len(parts) < 3 or parts[0] != socket.gethostname()[:32] or not parts[1].isdigit():
        return False
    try:
        return int(psutil.Process(int(parts[1])).create_time()) != int(parts[2])
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, ValueError):
        return False


@dataclass(frozen=True)
class ItemResult:
    """What labelling one item produced (a row of the gateway's LabelResponse)."""

    item_id: str
    label: int | None
    """1 relevant, 0 irrelevant, None: queued for humans."""
    source: str
    """``JUDGES``, ``DEBATE`` or ``HUMAN_QUEUE``."""
    p_relevant: float | None = None
    outcome: str = ""
    tokens: int = 0
    seconds: float = 0.0
    escalation_id: str = ""
    audit_id: str = ""
    error: str = ""
    """Why the item failed (source ``FAILED``)."""


@dataclass(frozen=True)
class LeaseHolder:
    """A runner holding some of a job's pending items under an unexpired lease."""

    owner: str
    """``host/pid/start time/run`` (:func:`runner_id`)."""
    items: int
    expires_at: dt.datetime
    """When its latest lease lapses unless renewed (runners renew while they work)."""
    gone: bool
    """Its process is known to have ended (a runner on this host); the leases are stale."""


def aware(moment: dt.datetime) -> dt.datetime:
    """SQLite hands back naive datetimes: they were written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class JobItem:
    """An item of a job with its result (None while pending) and any human label."""

    item: LabelItem
    position: int
    result: ItemResult | None = None
    finished_at: dt.datetime | None = None
    human_label: int | None = None
    human_method: str | None = None


@dataclass(frozen=True)
class JobInfo:
    name: str
    mode: str
    settings: dict[str, Any]
    source: dict[str, Any]
    status: str
    created_at: dt.datetime | None


@dataclass(frozen=True)
class JobCounts:
    """Where a job stands."""

    total: int
    finished: int
    relevant: int
    irrelevant: int
    escalated: int
    human_labelled: int
    tokens: int
    seconds: float
    failed: int = 0
    """Finished as ``FAILED`` (refused input): no label, with the reason."""

    @property
    def pending(self) -> int:
        return self.total - self.finished

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "finished": self.finished,
            "pending": self.pending,
            "relevant": self.relevant,
            "irrelevant": self.irrelevant,
            "escalated": self.escalated,
            "failed": self.failed,
            "human_labelled": self.human_labelled,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
        }


def check_job_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"job name {name!r} must be 1-128 characters of letters, digits, '.', '_' or '-' "
            "and start with a letter or digit",
            field="job",
        )
    return name


def job_info(row: LabelJobRow) -> JobInfo:
    return JobInfo(
        name=row.name,
        mode=row.mode,
        settings=dict(row.settings or {}),
        source=dict(row.source or {}),
        status=row.status,
        created_at=row.created_at,
    )


def label_item(row: JobItemRow) -> LabelItem:
    return LabelItem(
        item_id=row.item_id,
        query=row.query,
        chunk=row.chunk,
        answers=tuple(row.answers or ()),
        query_id=row.query_id,
        doc_id=row.doc_id,
        gold=row.gold,
    )


def job_item(row: JobItemRow) -> JobItem:
    result = None
    if row.finished_at is not None:
        result = ItemResult(
            item_id=row.item_id,
            label=row.label,
            source=row.source or "",
            p_relevant=row.p_relevant,
            outcome=row.outcome or "",
            tokens=row.tokens or 0,
            seconds=row.seconds or 0.0,
            escalation_id=row.escalation_id or "",
            audit_id=row.audit_id or "",
            error=row.error or "",
        )
    return JobItem(
        item=label_item(row),
        position=row.position,
        result=result,
        finished_at=row.finished_at,
        human_label=row.human_label,
        human_method=row.human_method,
    )
