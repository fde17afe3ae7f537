"""The gateway's side of live audits: the audit coin on each decision, and the
collection's serving mode (normal, or the safe mode its live bound put it in).

The mode is read from the collection's latest live state on every answer, so a switch
written by the monitor is honoured from the next request on; the same read refreshes
the live-audit gauges this process exports.
"""

from __future__ import annotations

from typing import Any

from ..audit import AUDIT_REASON, NORMAL, AuditDraw, AuditSampler, StateStore
from ..core.settings import AuditSettings
from ..core.storage import Database, EscalationRecord
from ._metrics import record_live_state

__all__ = ["LiveAudit"]


class LiveAudit:
    """Draws audit items and reads the serving mode; thread-safe."""

    def __init__(self, settings: AuditSettings, store: Database) -> None:
        self.settings = settings
        self.states = StateStore(store)
        self.sampler = AuditSampler(settings, queued_today=self._queued_since(store))

    @staticmethod
    def _queued_since(store: Database) -> Any:
        from sqlalchemy import func, select

        from ..core.storage import EscalationRow

        def count(start: Any) -> int:
            statement = select(func.count()).where(
                EscalationRow.reason == AUDIT_REASON, EscalationRow.created_at >= start
            )
            with store.session() as session:
                return int(session.scalar(statement) or 0)

        return count

    def mode(self, collection: str, calibrator_version: str) -> str:
        """The mode to serve ``collection`` in under the trusted calibrator."""
        state = self.states.latest(collection)
        if state is None:
            return NORMAL
        mode = state.mode_for(calibrator_version)
        record_live_state(
            collection,
            lower=state.lower,
            upper=state.upper,
            audited=state.audited,
            mode=mode,
            shift_warning=state.shift_warning,
            restart=(
                state.restarts,
                state.restart_lower,
                state.restart_upper,
                state.restart_audited,
            )
            if state.calibrator_version == calibrator_version
            else (0, 0.0, 1.0, 0),
        )
        return mode

    def sample(
        self,
        audit_id: str,
        *,
        decision: str,
        confidence: float | None,
        query: str,
        collection: str,
        entry: dict[str, str] | None,
        calibrator_version: str,
    ) -> tuple[AuditDraw, EscalationRecord | None]:
        """The coin of one decision and, when it comes up, its review item: one question —
        does this entry (the served one, or a fallback's best candidate) answer the query?"""
        if entry is None:
            return AuditDraw(0.0, False, "none", 0.0), None
        draw = self.sampler.draw(audit_id, decision, confidence)
        if not draw.sampled:
            return draw, None
        item = EscalationRecord(
            query=query,
            chunk=f"Q: {entry['question']}\nA: {entry['answer']}",
            reason=AUDIT_REASON,
            item_id=audit_id,
            history={
                "decision": decision,
                "kb_entry_id": entry["id"],
                "collection": collection,
                "calibrator": calibrator_version,
                "p": draw.inclusion,
                "stratum": draw.stratum,
                "question": "Does this entry answer the query?",
            },
        )
        return draw, item
