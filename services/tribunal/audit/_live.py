"""The live bound of a collection, computed from the audit trail and the reviews.

The stream is every ACCEPT of the collection served under one calibrator version with a
positive inclusion probability, in serving order. An audited answer's verdict is the
majority of its reviewers' votes once it has ``votes_per_item`` of them (a tie counts as
wrong); the stream is cut just before the first audited answer still waiting for its
verdict, so a verdict that arrives late never reorders the stream. Attention-check votes
never count.

:class:`LiveMonitor` recomputes the bound, runs the shift test, and switches the
collection to its safe mode when the lower end rises above α; each change is one
appended :class:`~._state.LiveState`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, String, column, select, table

from ..core import TribunalError
from ..core.settings import AuditSettings, Settings
from ..core.storage import AuditDecisionRow, Database, EscalationRow
from ._restarts import SCHEDULE, SHIFT, Restart, as_utc, cumulative_delta, restart_delta
from ._sampling import AUDIT_REASON
from ._sequence import RateConfidenceSequence, RunningBound
from ._shift import ShiftResult, shift_test
from ._state import NORMAL, LiveState, StateStore

__all__ = [
    "AuditVerdict",
    "LiveBounds",
    "LiveMonitor",
    "audit_verdicts",
    "live_bound",
    "live_signals",
    "refresh_after_review",
]

log = logging.getLogger(__name__)

# The review page's votes (the jobs package owns the table; named here, not imported: the
# jobs package imports the gateway, which imports this package).
_VOTES = table(
    "review_votes",
    column("item_key", String),
    column("label", String),
    column("entry_id", String),
    column("is_attention", Boolean),
)


@dataclass(frozen=True)
class AuditVerdict:
    """What reviewers said about one audited decision."""

    audit_id: str
    escalation_id: str
    decision: str
    """``ACCEPT`` or ``FALLBACK``: what was served."""
    entry_id: str
    """The entry shown to the reviewers (the served one, or the best candidate)."""
    query: str
    collection: str
    inclusion: float
    created_at: dt.datetime | None
    """When the item was queued (with its decision)."""
    answers: bool | None
    """True: the entry answers the query (for a FALLBACK: some entry does); False: it
    does not; None: votes still missing."""
    chosen: str | None = None
    """A FALLBACK's verdict on *which entry, if any, answers*: the entry a majority of the
    votes picked, "" for none (none won, or no entry has a majority); None before the
    votes are in, and for an ACCEPT."""


def _fallback_choice(entry_id: str, votes: list[tuple[str, str | None]]) -> str:
    """The entry a strict majority of a fallback's votes picked, else "" (none).

    A vote picks its ``entry_id``; a ``relevant`` vote without one (cast before the page
    asked which entry) picks the entry shown; ``irrelevant`` picks none. Without a
    majority the item counts as unanswerable — the side that can only make a
    re-certification more conservative.
    """
    picks = [(picked or entry_id) if label == "relevant" else "" for label, picked in votes]
    best = max(set(picks), key=lambda pick: (picks.count(pick), pick))
    return best if 2 * picks.count(best) > len(picks) else ""


def audit_verdicts(db: Database, *, votes_per_item: int = 1) -> dict[str, AuditVerdict]:
    """Every audit item by the audit id of its decision."""
    db.create_schema()
    with db.session() as session:
        items = session.scalars(
            select(EscalationRow).where(EscalationRow.reason == AUDIT_REASON)
        ).all()
        votes = session.execute(
            select(_VOTES.c.item_key, _VOTES.c.label, _VOTES.c.entry_id).where(
                _VOTES.c.is_attention.is_(False),
                _VOTES.c.item_key.in_([item.id for item in items]),
            )
        ).all()
        tally: dict[str, list[tuple[str, str | None]]] = {}
        for key, label, picked in votes:
            tally.setdefault(key, []).append((label, picked))
        verdicts: dict[str, AuditVerdict] = {}
        for item in items:
            cast = tally.get(item.id, [])
            history: dict[str, Any] = item.history if isinstance(item.history, dict) else {}
            answers: bool | None = None
            chosen: str | None = None
            if len(cast) >= votes_per_item:
                yes = sum(1 for label, _ in cast if label == "relevant")
                answers = yes > len(cast) - yes
                if history.get("decision") == "FALLBACK":
                    chosen = _fallback_choice(str(history.get("kb_entry_id", "")), cast)
                    answers = bool(chosen)
            verdicts[item.audit_id] = AuditVerdict(
                audit_id=item.audit_id,
                escalation_id=item.id,
                decision=str(history.get("decision", "")),
                entry_id=str(history.get("kb_entry_id", "")),
                query=item.query,
                collection=str(history.get("collection", "")),
                inclusion=float(history.get("p", 0.0)),
                created_at=item.created_at,
                answers=answers,
                chosen=chosen,
            )
    return verdicts


def _calibrator(row_versions: Any) -> str:
    versions = row_versions if isinstance(row_versions, dict) else {}
    confidence = versions.get("confidence", {})
    return str(confidence.get("calibrator", "")) if isinstance(confidence, dict) else ""


@dataclass(frozen=True)
class LiveBounds:
    """The sequences of one collection and calibrator version at one time."""

    cumulative: RunningBound
    """Since the calibrator started serving (δ/2)."""
    restarted: tuple[tuple[Restart, RunningBound], ...]
    """Each restarted sequence since its start (δ_k), oldest first."""
    pending: int
    """Audited answers still waiting for a verdict (the streams stop at the first)."""

    def violation(self, alpha: float) -> str | None:
        """Why the fail-safe trips (a sequence's lower end above α), or None."""
        if self.cumulative.lower > alpha:
            return (
                f"live bound's lower end {self.cumulative.lower:.4f} > alpha {alpha} "
                f"after {self.cumulative.audited} audited answers"
            )
        for restart, bound in self.restarted:
            if bound.lower > alpha:
                return (
                    f"restarted bound #{restart.index} ({restart.reason}, from "
                    f"{restart.at.isoformat()}): lower end {bound.lower:.4f} > alpha {alpha} "
                    f"after {bound.audited} audited answers since its start"
                )
        return None


def live_bound(
    db: Database,
    settings: AuditSettings,
    *,
    collection: str,
    calibrator_version: str,
    restarts: Sequence[Restart] = (),
) -> LiveBounds:
    """The bounds on the collection's live rate under the calibrator: the cumulative one
    and one per restart (on the answers served after its start)."""
    verdicts = audit_verdicts(db, votes_per_item=settings.votes_per_item)
    statement = (
        select(
            AuditDecisionRow.id,
            AuditDecisionRow.created_at,
            AuditDecisionRow.detail,
            AuditDecisionRow.versions,
        )
        .where(
            AuditDecisionRow.kind == "answer",
            AuditDecisionRow.collection == collection,
            AuditDecisionRow.decision == "ACCEPT",
        )
        .order_by(AuditDecisionRow.created_at, AuditDecisionRow.id)
    )
    served_at: list[dt.datetime] = []
    wrong: list[bool] = []
    audited: list[bool] = []
    inclusion: list[float] = []
    minimum = 1.0
    pending = 0
    with db.session() as session:
        rows = session.execute(statement).all()
    for audit_id, created_at, detail, versions in rows:
        if _calibrator(versions) != calibrator_version:
            continue
        draw = (detail or {}).get("audit") if isinstance(detail, dict) else None
        if not isinstance(draw, dict) or float(draw.get("p", 0.0)) <= 0.0:
            continue
        verdict = verdicts.get(audit_id)
        if draw.get("sampled") and (verdict is None or verdict.answers is None):
            pending += 1
            continue
        if pending:
            continue  # past the first answer still waiting: not in the stream yet
        minimum = min(minimum, float(draw.get("min_p") or draw["p"]))
        served_at.append(as_utc(created_at))
        inclusion.append(float(draw["p"]))
        sampled = bool(draw.get("sampled"))
        audited.append(sampled)
        wrong.append(bool(sampled and verdict is not None and verdict.answers is False))
    floor = min(minimum, 1.0)
    cumulative = RateConfidenceSequence(delta=cumulative_delta(settings.delta), min_inclusion=floor)
    restarted: list[tuple[Restart, RunningBound]] = []
    for restart in restarts:
        first = bisect.bisect_right(served_at, restart.at)
        sequence = RateConfidenceSequence(
            delta=restart_delta(settings.delta, restart.index), min_inclusion=floor
        )
        restarted.append(
            (restart, sequence.running(wrong[first:], audited[first:], inclusion[first:]))
        )
    return LiveBounds(
        cumulative=cumulative.running(wrong, audited, inclusion),
        restarted=tuple(restarted),
        pending=pending,
    )


def _top1_similarity(signals: Any) -> float | None:
    if not isinstance(signals, dict):
        return None
    scores = [
        float(item["signals"]["dense_score"])
        for item in signals.values()
        if isinstance(item, dict)
        and isinstance(item.get("signals"), dict)
        and "dense_score" in item["signals"]
    ]
    return max(scores) if scores else None


def live_signals(db: Database, *, collection: str, window: int) -> dict[str, list[float]]:
    """The shift test's signals over the latest ``window`` answer decisions that were
    scored (the served confidence, the top-1 similarity)."""
    statement = (
        select(AuditDecisionRow.confidence, AuditDecisionRow.signals)
        .where(
            AuditDecisionRow.kind == "answer",
            AuditDecisionRow.collection == collection,
            AuditDecisionRow.confidence.is_not(None),
        )
        .order_by(AuditDecisionRow.created_at.desc())
        .limit(window)
    )
    with db.session() as session:
        rows = session.execute(statement).all()
    confidence = [float(value) for value, _ in rows]
    similarity = [s for s in (_top1_similarity(signals) for _, signals in rows) if s is not None]
    return {"confidence": confidence, "top1_similarity": similarity}


class LiveMonitor:
    """Recomputes a collection's live state and enters its safe mode on a violation."""

    def __init__(self, db: Database, settings: AuditSettings) -> None:
        self.db = db
        self.settings = settings
        self.states = StateStore(db)

    def refresh(
        self,
        *,
        collection: str,
        calibrator_version: str,
        alpha: float,
        reference: Mapping[str, Sequence[float]] | None = None,
        actor: str = "monitor",
    ) -> tuple[LiveState, ShiftResult | None]:
        """The collection's state now; appended when it changed."""
        previous = self.states.latest(collection)
        restarts = previous.restarts_for(calibrator_version) if previous is not None else []
        bounds = live_bound(
            self.db,
            self.settings,
            collection=collection,
            calibrator_version=calibrator_version,
            restarts=restarts,
        )
        shift = None
        if reference:
            live = live_signals(self.db, collection=collection, window=self.settings.shift_window)
            shift = shift_test(reference, live, level=self.settings.shift_level)
        mode = previous.mode_for(calibrator_version) if previous is not None else NORMAL
        bound = bounds.cumulative
        detail: dict[str, Any] = {
            "pending": bounds.pending,
            "estimate": round(bound.estimate, 6),
            "cumulative_delta": bound.delta,
        }
        violation = bounds.violation(alpha)
        if mode == NORMAL and violation is not None:
            mode = self.settings.safe_mode
            detail["entered"] = {"mode": mode, "why": violation}
            log.warning(
                "safe mode entered",
                extra={"collection": collection, "mode": mode, "why": violation},
            )
        if shift is not None:
            detail["shift"] = shift.to_json()
        shown: list[dict[str, Any]] = [
            {**r.to_json(), **_bound_json(b)} for r, b in bounds.restarted
        ]
        # A new start is decided last, from what was read above, and holds only answers
        # served after this moment: a stopping time, never back-dated (see _restarts).
        reason = self._restart_reason(previous, calibrator_version, shift, bounds)
        if reason is not None:
            restart = Restart(len(restarts) + 1, dt.datetime.now(dt.UTC), reason)
            fresh = {"accepted": 0, "audited": 0, "wrong": 0, "lower": 0.0, "upper": 1.0}
            delta_k = restart_delta(self.settings.delta, restart.index)
            shown.append({**restart.to_json(), **fresh, "delta_k": delta_k})
            log.info(
                "live bound restarted",
                extra={"collection": collection, "index": restart.index, "reason": reason},
            )
        detail["restarts"] = shown
        latest = shown[-1] if shown else None
        state = LiveState(
            collection=collection,
            calibrator_version=calibrator_version,
            alpha=alpha,
            delta=self.settings.delta,
            accepted=bound.accepted,
            audited=bound.audited,
            wrong=bound.wrong,
            lower=round(bound.lower, 6),
            upper=round(bound.upper, 6),
            mode=mode,
            shift_p_value=None if shift is None else shift.p_value,
            shift_warning=bool(shift is not None and shift.warning),
            actor=actor,
            detail=detail,
            restarts=len(shown),
            restart_at=None if latest is None else dt.datetime.fromisoformat(latest["at"]),
            restart_accepted=0 if latest is None else latest["accepted"],
            restart_audited=0 if latest is None else latest["audited"],
            restart_wrong=0 if latest is None else latest["wrong"],
            restart_lower=0.0 if latest is None else latest["lower"],
            restart_upper=1.0 if latest is None else latest["upper"],
        )
        if previous is None or not state.same_as(previous):
            self.states.append(state)
        return state, shift

    def _restart_reason(
        self,
        previous: LiveState | None,
        calibrator_version: str,
        shift: ShiftResult | None,
        bounds: LiveBounds,
    ) -> str | None:
        """Whether to start a fresh sequence now: the shift warning has just come on, or
        ``restart_every`` accepted answers were served since the latest start."""
        warned_before = (
            previous is not None
            and previous.calibrator_version == calibrator_version
            and previous.shift_warning
        )
        warns = shift is not None and shift.warning
        if self.settings.restart_on_shift and warns and not warned_before:
            return SHIFT
        every = self.settings.restart_every
        if every:
            since = bounds.restarted[-1][1] if bounds.restarted else bounds.cumulative
            if since.accepted >= every:
                return SCHEDULE
        return None


def _bound_json(bound: RunningBound) -> dict[str, Any]:
    return {
        "delta_k": bound.delta,
        "accepted": bound.accepted,
        "audited": bound.audited,
        "wrong": bound.wrong,
        "lower": round(bound.lower, 6),
        "upper": round(bound.upper, 6),
    }


def refresh_after_review(db: Database, settings: Settings, item_id: str) -> LiveState | None:
    """Recompute the live state of the collection a just-reviewed audit item belongs to
    (nothing for other review items). The shift test's baseline is the served artifact's
    reference sample when that artifact is the item's calibrator."""
    from ..confidence import CalibratorArtifact, default_artifact_path

    with db.session() as session:
        row = session.get(EscalationRow, item_id)
        if row is None or row.reason != AUDIT_REASON or not isinstance(row.history, dict):
            return None
        history = dict(row.history)
    collection = str(history.get("collection", ""))
    calibrator = str(history.get("calibrator", ""))
    reference: Mapping[str, Sequence[float]] | None = None
    try:
        artifact = CalibratorArtifact.load(default_artifact_path(settings))
        if artifact.version == calibrator:
            reference = artifact.reference
    except TribunalError:
        log.warning("no calibrator artifact to compare live signals with")
    state, _ = LiveMonitor(db, settings.audit).refresh(
        collection=collection,
        calibrator_version=calibrator,
        alpha=settings.confidence.alpha,
        reference=reference,
        actor="review",
    )
    return state
