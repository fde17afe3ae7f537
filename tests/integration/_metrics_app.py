"""A model-free Serve application recording the gateway's metrics (test_metrics_ray)."""

from __future__ import annotations

from ray import serve
from tribunal.core.server._metrics import in_serve_replica
from tribunal.gateway._metrics import record_decision, record_live_state


@serve.deployment(name="gateway")
class DecisionRecorder:
    """Records what an Answer and a Label decision record, or fails when asked."""

    def record(self, fail: bool) -> bool:
        if fail:
            raise ValueError("asked to fail: Serve counts this request as an error")
        record_decision("answer", "FALLBACK", "STAGE_TIMEOUT", {"retrieval": 12.0, "ensemble": 80})
        record_decision("answer", "ACCEPT", "", {"retrieval": 9.0})
        record_decision("label", "ESCALATED", "JUDGES_DISAGREE", {"ensemble": 30.0})
        record_live_state(
            "faq", lower=0.21, upper=0.4, audited=57, mode="fallback", shift_warning=True
        )
        return in_serve_replica()


app = DecisionRecorder.bind()
