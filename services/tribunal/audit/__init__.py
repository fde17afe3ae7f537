"""Live audits: is the certified bound holding on today's traffic?

- :class:`AuditSampler` — which served decisions go to review, with their recorded
  inclusion probability (seeded, stratified by confidence, capped by a daily budget);
- :class:`RateConfidenceSequence` — an anytime-valid confidence sequence on the live
  hallucination rate of accepted answers, inverse-probability weighted;
- :class:`Restart` — a fresh sequence started while serving (when the shift warning comes
  on, or on a schedule) beside the cumulative one, which answers before a change dilute;
  δ is split between them (:func:`cumulative_delta`, :func:`restart_delta`);
- :class:`LiveMonitor` — recomputes a collection's bounds from the reviews, runs the
  shift test against the calibration traffic, and enters the configured safe mode when
  any bound's lower end rises above α (:class:`StateStore` keeps every state);
- :func:`rethreshold` — the served calibrator at the stricter thresholds its reviewed
  audited ACCEPTs certify (a new version: serving it ends the safe mode).

Domain logic only: no grpc, no ray.
"""

from ._live import (
    AuditVerdict,
    LiveBounds,
    LiveMonitor,
    audit_verdicts,
    live_bound,
    live_signals,
    refresh_after_review,
)
from ._recertify import ServedAccepts, audit_traffic, served_accepts, write_audit_traffic
from ._restarts import Restart, cumulative_delta, restart_delta
from ._rethreshold import rethreshold
from ._sampling import AUDIT_REASON, AuditDraw, AuditSampler
from ._sequence import RateConfidenceSequence, RunningBound
from ._shift import SHIFT_SIGNALS, ShiftResult, shift_test
from ._state import NORMAL, LiveState, LiveStateRow, StateStore

__all__ = [
    "AUDIT_REASON",
    "NORMAL",
    "SHIFT_SIGNALS",
    "AuditDraw",
    "AuditSampler",
    "AuditVerdict",
    "LiveBounds",
    "LiveMonitor",
    "LiveState",
    "LiveStateRow",
    "RateConfidenceSequence",
    "Restart",
    "RunningBound",
    "ServedAccepts",
    "ShiftResult",
    "StateStore",
    "audit_traffic",
    "audit_verdicts",
    "cumulative_delta",
    "live_bound",
    "live_signals",
    "refresh_after_review",
    "restart_delta",
    "rethreshold",
    "served_accepts",
    "shift_test",
    "write_audit_traffic",
]
