"""A label plan as a file: ``tribunal.label-plan/1``, content-hashed, bound to one judge.

A plan says which items a label job may label automatically — the relevance judge's
P(relevant) at or above ``band.relevant_at`` (RELEVANT) or at or below
``band.irrelevant_at`` (IRRELEVANT) — and what that is certified to cost: the error
rate of those automatic labels is ≤ ε with probability ≥ 1 − δ (``certification``).
Everything between goes to humans. The plan was fitted on one judge's scores, so it
names that judge's artifact version and a job refuses it under another judge.

The ``version`` is ``plan-`` + the first 12 hex digits of the sha256 of the plan's
canonical JSON without its version: an edited file no longer matches its version and
is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core import FailedPreconditionError, InvalidArgumentError
from ..core.settings import PlanCalibratorKind

__all__ = [
    "PLAN_FORMAT",
    "BandChoice",
    "Certification",
    "CurvePoint",
    "DebateRouting",
    "JudgeBinding",
    "LabelPlan",
    "PlanCalibrator",
    "PlanData",
    "PlanSplit",
    "replan_command",
]

PLAN_FORMAT = "tribunal.label-plan/1"

Probability = float


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JudgeBinding(_Part):
    """The relevance judge whose P(relevant) the plan's thresholds are on."""

    artifact_version: str = Field(min_length=1)
    """The relevance artifact's version (``ensemble.relevance_artifact``)."""
    profile: str = Field(min_length=1)
    """The profile the scores were computed under."""


class PlanData(_Part):
    """The labelled sample the plan was fitted on."""

    source: dict[str, Any]
    """The input as ``tribunal label run`` describes it (path, format, run, qrels, ...)."""
    sha256: str
    """Of the items read (ids, texts, grades), whatever the input's layout."""
    items: int = Field(ge=1)
    """Items with a gold grade (holes are not used)."""
    queries: int = Field(ge=1)
    relevant: int = Field(ge=0)
    relevant_grade: int
    """Gold grade at or above which an item counts as relevant."""


class PlanSplit(_Part):
    """How the sample's queries were divided: the calibrator never sees a certified query."""

    seed: int
    calibration_share: float = Field(gt=0.0, lt=1.0)
    calibration_queries: list[str]
    certification_queries: list[str]


class PlanCalibrator(_Part):
    """Calibration of the judge's P(relevant), fitted on the calibration queries.

    ``platt``: sigmoid(coef · logit(p) + intercept), coef > 0. ``isotonic``: the monotone
    piecewise-linear map through the points (``x``, ``y``), flat beyond its ends.
    """

    kind: PlanCalibratorKind = "platt"
    coef: float | None = None
    intercept: float | None = None
    x: list[float] = Field(default_factory=list)
    y: list[float] = Field(default_factory=list)
    items: int = Field(ge=1)
    queries: int = Field(ge=1)

    @model_validator(mode="after")
    def _parameters(self) -> Self:
        if self.kind == "platt":
            if self.coef is None or self.intercept is None or self.x or self.y:
                raise ValueError("a platt calibrator has coef and intercept only")
            if not (math.isfinite(self.coef) and math.isfinite(self.intercept)):
                raise ValueError("calibrator coef and intercept must be finite")
            if self.coef <= 0:
                raise ValueError("calibrator coef must be > 0")
            return self
        if self.coef is not None or self.intercept is not None:
            raise ValueError("an isotonic calibrator has x and y only")
        if not self.x or len(self.x) != len(self.y):
            raise ValueError("an isotonic calibrator needs as many x as y values (at least one)")
        if any(b < a for a, b in zip(self.x, self.x[1:], strict=False)) or any(
            b < a for a, b in zip(self.y, self.y[1:], strict=False)
        ):
            raise ValueError("isotonic x and y must be non-decreasing")
        if not all(0.0 <= v <= 1.0 for v in (*self.x, *self.y)):
            raise ValueError("isotonic x and y must lie in [0, 1]")
        return self


class BandChoice(_Part):
    """Thresholds on the judge's P(relevant) and, for reading, on the calibrated P."""

    relevant_at: Probability = Field(ge=0.0, le=1.0)
    """Judge P(relevant) ≥ this: labelled RELEVANT automatically."""
    irrelevant_at: Probability = Field(ge=0.0, le=1.0)
    """Judge P(relevant) ≤ this: labelled IRRELEVANT automatically; between: humans."""
    calibrated_high: Probability = Field(ge=0.0, le=1.0)
    calibrated_low: Probability = Field(ge=0.0, le=1.0)
    auto_relevant: bool = True
    """False: no judge score reaches ``calibrated_high``; ``relevant_at`` is then 1.0 and
    nothing is labelled RELEVANT automatically (a judge P of exactly 1 aside)."""
    auto_irrelevant: bool = True
    """False: likewise for IRRELEVANT; ``irrelevant_at`` is then 0.0."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.irrelevant_at > self.relevant_at or self.calibrated_low > self.calibrated_high:
            raise ValueError("a band needs irrelevant_at <= relevant_at")
        return self


class Certification(_Part):
    """What the risk control certified on the certification queries."""

    epsilon: float = Field(gt=0.0, lt=1.0)
    """Bound on the error rate of automatic labels."""
    delta: float = Field(gt=0.0, lt=1.0)
    """Allowed probability that the bound fails (an unlucky sample)."""
    method: str
    """Risk-control method (``tribunal.confidence.RISK_METHODS``)."""
    scheme: Literal["nested", "grid"]
    """``nested``: bands around calibrated P = 0.5 tested in fixed sequence from the
    widest; ``grid``: every (low, high) pair of a fixed grid, Bonferroni over the pairs."""
    clusters: Literal["query", "none"] = "query"
    """``query``: each band also passed a query-level (cluster-robust) test, so that the
    items of one query do not count as independent evidence; ``none``: items only."""
    hypotheses: int = Field(ge=1)
    """Bands in the tested family: the grid's Bonferroni divisor; a fixed-sequence
    (nested) scan tests them in order and needs no correction."""
    certified: bool
    """False: no band met ε at δ on this sample; the plan labels nothing automatically."""
    items: int = Field(ge=0)
    queries: int = Field(ge=0)
    auto_labelled: int = Field(ge=0)
    errors: int = Field(ge=0)
    upper_bound: float | None = None
    """(1 − δ) upper bound on the automatic labels' error rate at the chosen band."""
    human_share: float = Field(ge=0.0, le=1.0)
    """Share of the certification items the band sends to humans."""


class CurvePoint(_Part):
    """One nested band on the certification items (for the trade-off plot)."""

    calibrated_high: float
    human_share: float
    error: float | None
    """Observed error rate of the automatic labels; None when none."""
    upper_bound: float | None
    """Pointwise (1 − δ) Clopper–Pearson bound (not a guarantee over the whole curve)."""


class DebateRouting(_Part):
    """Whether the band may go to the debate before humans."""

    measured: bool = False
    note: str = (
        "debate not measured on the band: band items go to humans; routing them to the "
        "debate needs its accuracy there measured against the judge's"
    )


class LabelPlan(_Part):
    """A certified labelling plan (see the module docstring)."""

    format: Literal["tribunal.label-plan/1"] = "tribunal.label-plan/1"
    version: str = ""
    created: str
    judge: JudgeBinding
    data: PlanData
    split: PlanSplit
    calibrator: PlanCalibrator
    certification: Certification
    band: BandChoice | None
    """None when nothing was certified."""
    plain_band: BandChoice | None = None
    """The narrowest nested band whose *observed* error on the certification items is ≤ ε
    (no confidence bound): what an uncertified choice would take, for comparison."""
    plain_human_share: float | None = None
    curve: list[CurvePoint] = Field(default_factory=list)
    debate: DebateRouting = DebateRouting()

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.certification.certified != (self.band is not None):
            raise ValueError("a certified plan has a band, an uncertified one none")
        return self

    def content_version(self) -> str:
        body = self.model_dump(mode="json", exclude={"version"})
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return "plan-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def sealed(self) -> LabelPlan:
        """This plan with its content version set."""
        return self.model_copy(update={"version": self.content_version()})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(self.sealed().model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
        )

    @classmethod
    def from_json(cls, data: Any, *, source: str = "(in memory)") -> LabelPlan:
        """Validate a plan and its version.

        Raises:
            InvalidArgumentError: not a ``tribunal.label-plan/1`` plan, a field out of
                range, or contents that no longer match the version (an edited file).
        """
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise InvalidArgumentError(
                f"label plan {source}: format is {found!r}; this build reads {PLAN_FORMAT!r} "
                "(make one with `tribunal label plan`)",
                field="plan",
            )
        try:
            plan = cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or '(plan)'}: {error['msg']}"
                for error in exc.errors()
            )
            raise InvalidArgumentError(f"label plan {source}: {problems}", field="plan") from None
        if plan.version != plan.content_version():
            raise InvalidArgumentError(
                f"label plan {source}: its contents do not match its version {plan.version!r} "
                "(the file was edited): make a new plan with `tribunal label plan`",
                field="plan",
            )
        return plan

    @classmethod
    def load(cls, path: Path) -> LabelPlan:
        if not path.is_file():
            raise InvalidArgumentError(
                f"no label plan at {path}: make one with `tribunal label plan`", field="plan"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidArgumentError(f"label plan {path}: not readable JSON: {exc}") from None
        return cls.from_json(data, source=str(path))

    def check_judge(self, artifact_version: str | None, *, plan_path: str = "PLAN") -> None:
        """Refuse a judge other than the one the plan was fitted on.

        Raises:
            FailedPreconditionError: the profile's relevance artifact is another version
                (or absent); the message names the command that makes a new plan.
        """
        if artifact_version == self.judge.artifact_version:
            return
        serving = f"version {artifact_version!r}" if artifact_version else "no relevance artifact"
        raise FailedPreconditionError(
            f"label plan {self.version} was fitted on relevance judge "
            f"{self.judge.artifact_version!r}, but this profile serves {serving}: its "
            f"thresholds do not apply. Make a new plan for this judge: "
            f"{replan_command(self, plan_path)}"
        )

    def summary(self) -> str:
        cert = self.certification
        if self.band is None:
            return (
                f"plan {self.version}: no band certifies error <= {cert.epsilon:g} at "
                f"delta {cert.delta:g} on {cert.items} items ({cert.queries} queries); "
                "every item would go to humans"
            )
        band = self.band
        relevant = (
            f"RELEVANT when P >= {band.relevant_at:.4f}"
            if band.auto_relevant
            else "no automatic RELEVANT"
        )
        irrelevant = (
            f"IRRELEVANT when P <= {band.irrelevant_at:.4f}"
            if band.auto_irrelevant
            else "no automatic IRRELEVANT"
        )
        return (
            f"plan {self.version} (judge {self.judge.artifact_version}): automatic labels "
            f"error <= {cert.epsilon:g} with probability >= {1 - cert.delta:g} "
            f"({cert.method}, {cert.scheme} bands, clusters {cert.clusters}; bound "
            f"{cert.upper_bound:.4f} on {cert.auto_labelled} automatic of {cert.items} items, "
            f"{cert.errors} wrong, {cert.queries} queries). {relevant}, {irrelevant}, humans "
            f"between: {cert.human_share:.1%} of the sample"
        )


def replan_command(plan: LabelPlan, plan_path: str = "PLAN") -> str:
    """The ``tribunal label plan`` command line that refits ``plan`` on its own sample."""
    cert, source = plan.certification, plan.data.source
    options = (
        [f"--from-job {source['job']}"]
        if source.get("job")
        else [f"--input {source.get('path', 'SAMPLE')}"]
    )
    for key in ("run", "qrels", "corpus", "depth"):
        if source.get(key):
            options.append(f"--{key} {source[key]}")
    options += [f"--field {name}={key}" for name, key in (source.get("fields") or {}).items()]
    return (
        f"tribunal label plan {' '.join(options)} --epsilon {cert.epsilon:g} "
        f"--delta {cert.delta:g} --method {cert.method} --scheme {cert.scheme} "
        f"--clusters {cert.clusters} --calibrator {plan.calibrator.kind} "
        f"--calibration-share {plan.split.calibration_share:g} "
        f"--relevant-at {plan.data.relevant_grade} --seed {plan.split.seed} --out {plan_path}"
    )
