"""What a job run under a label plan produced: who labelled what, and how wrong it may be.

The certified figure is the plan's (error of automatic labels ≤ ε with probability
≥ 1 − δ, for items like the plan's sample). When the job's items carry gold grades the
report also measures the automatic labels' error on them, with an exact (Clopper–Pearson)
95% interval — a check of the certificate, not a part of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from scipy import stats

from ._plan_artifact import LabelPlan
from ._store import JobStore

__all__ = ["PlanJobReport", "plan_job_report"]


@dataclass(frozen=True)
class PlanJobReport:
    plan: str
    epsilon: float
    delta: float
    certified_bound: float | None
    """The plan's (1 − δ) upper bound on the automatic labels' error rate."""
    items: int
    finished: int
    by_source: dict[str, int]
    """Final label's source: ``judge``, ``debate``, ``human`` (human label given),
    ``human_queue`` (waiting for humans), ``failed`` (refused input)."""
    auto_labelled: int
    human_share: float
    """Items of the band (labelled by humans or waiting for them) / finished items."""
    holes_auto_labelled: int
    """Automatic labels on pairs the input's qrels had not judged."""
    gold_checked: int
    """Automatic labels whose item has a gold grade."""
    gold_errors: int
    measured_error: float | None
    measured_error_ci: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        shares = ", ".join(f"{k} {v}" for k, v in sorted(self.by_source.items()))
        lines = [
            f"plan {self.plan}: {self.finished} of {self.items} items finished ({shares}); "
            f"{self.human_share:.1%} for humans",
            f"  automatic labels: {self.auto_labelled} ({self.holes_auto_labelled} holes), "
            f"certified error <= {self.epsilon:g} with probability >= {1 - self.delta:g}"
            + (f" (bound {self.certified_bound:.4f})" if self.certified_bound is not None else ""),
        ]
        if self.measured_error is not None and self.measured_error_ci is not None:
            low, high = self.measured_error_ci
            lines.append(
                f"  measured on the {self.gold_checked} with gold grades: error "
                f"{self.measured_error:.4f} [{low:.4f}, {high:.4f}] ({self.gold_errors} wrong)"
            )
        return "\n".join(lines)


def _interval(errors: int, n: int) -> tuple[float, float]:
    low = 0.0 if errors == 0 else float(stats.beta.ppf(0.025, errors, n - errors + 1))
    high = 1.0 if errors == n else float(stats.beta.ppf(0.975, errors + 1, n - errors))
    return low, high


def plan_job_report(store: JobStore, job: str, plan: LabelPlan) -> PlanJobReport:
    """Count the job's labels by source and check the automatic ones against gold grades."""
    relevant_grade = plan.data.relevant_grade
    sources: Counter[str] = Counter()
    items = finished = auto = holes = checked = wrong = 0
    for entry in store.items(job):
        items += 1
        result = entry.result
        if result is None:
            continue
        finished += 1
        if entry.human_label is not None:
            sources["human"] += 1
        elif result.source == "JUDGES":
            sources["judge"] += 1
        elif result.source == "DEBATE":
            sources["debate"] += 1
        elif result.source == "HUMAN_QUEUE":
            sources["human_queue"] += 1
        else:
            sources["failed"] += 1
        if result.source in ("JUDGES", "DEBATE") and result.label is not None:
            auto += 1
            gold = entry.item.gold
            if gold is None:
                holes += 1
            else:
                checked += 1
                wrong += int(result.label != int(gold >= relevant_grade))
    band = sources["human"] + sources["human_queue"]
    cert = plan.certification
    return PlanJobReport(
        plan=plan.version,
        epsilon=cert.epsilon,
        delta=cert.delta,
        certified_bound=cert.upper_bound,
        items=items,
        finished=finished,
        by_source=dict(sources),
        auto_labelled=auto,
        human_share=band / finished if finished else 0.0,
        holes_auto_labelled=holes,
        gold_checked=checked,
        gold_errors=wrong,
        measured_error=wrong / checked if checked else None,
        measured_error_ci=_interval(wrong, checked) if checked else None,
    )
