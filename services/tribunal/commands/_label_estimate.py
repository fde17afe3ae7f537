"""``tribunal label run --estimate [N]``: what a job will cost, per mode, before it runs.

N sample items of the job's input (default 5, seeded) are labelled — nothing is
written to the job store, the audit or the human queue — by the relevance judge alone
and, when a mode needs it, by the debate; each item's model time and tokens are
measured. The projection for the whole job, per mode:

- ``judge``: the judge's time and tokens per item × the items;
- ``debate``: the debate's per item × the items;
- ``cascade``: the judge on every item plus the debate on the share of items whose
  P(relevant) falls inside the band (counted on the sample, with its 95%
  Clopper–Pearson interval: a range, not a point, since the sample is small).

Model time is the sum of per-item labelling time; one process runs one judge batch at a
time, so wall time is about model time divided by the runners (``--workers``, ``--ray``)
that have their own models.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, Settings
from ..core.settings import LABEL_MODES

__all__ = [
    "ModeEstimate",
    "SampleCost",
    "add_arguments",
    "estimate_job",
    "estimate_markdown",
    "project",
]

MODES = LABEL_MODES


def add_arguments(run: argparse.ArgumentParser) -> None:
    """``--estimate [N]`` and ``--estimate-modes`` of ``tribunal label run``."""
    run.add_argument(
        "--estimate",
        type=int,
        nargs="?",
        const=5,
        default=None,
        metavar="N",
        help="label nothing: time N sample items (default 5) and print each mode's expected "
        "model time and tokens for the whole job (--report: also as JSON)",
    )
    run.add_argument(
        "--estimate-modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="--estimate: the modes to estimate (default all; the debate runs on the sample "
        "for cascade and debate)",
    )


@dataclass(frozen=True)
class SampleCost:
    """Measured on the sample: mean model seconds and tokens per item of one stage."""

    items: int
    seconds: float
    tokens: float


@dataclass(frozen=True)
class ModeEstimate:
    mode: str
    seconds_per_item: float
    tokens_per_item: float
    items: int
    """Items the projection is for (the job's, or what is left of it)."""
    seconds_range: tuple[float, float] | None = None
    """cascade: the whole job's model seconds at the ends of the in-band share's interval."""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.seconds_per_item * self.items

    @property
    def tokens(self) -> float:
        return self.tokens_per_item * self.items

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seconds_per_item": round(self.seconds_per_item, 3),
            "tokens_per_item": round(self.tokens_per_item, 1),
            "items": self.items,
            "model_seconds": round(self.seconds, 1),
            "model_seconds_range": (
                [round(x, 1) for x in self.seconds_range] if self.seconds_range else None
            ),
            "tokens": round(self.tokens),
            **self.detail,
        }


def _share_interval(k: int, n: int) -> tuple[float, float]:
    """95% Clopper–Pearson interval of a share k / n."""
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def project(
    modes: Sequence[str],
    items: int,
    *,
    judge: SampleCost | None,
    debate: SampleCost | None,
    in_band: int = 0,
    sampled: int = 0,
) -> list[ModeEstimate]:
    """Per mode, the whole job's expected model time and tokens from the sample costs."""
    out = []
    for mode in modes:
        if (mode in ("judge", "cascade") and judge is None) or (
            mode in ("cascade", "debate") and debate is None
        ):
            raise InvalidArgumentError(f"mode {mode} needs the sample cost of its stages")
        if mode == "judge" and judge is not None:
            out.append(ModeEstimate(mode, judge.seconds, judge.tokens, items))
        elif mode == "debate" and debate is not None:
            out.append(ModeEstimate(mode, debate.seconds, debate.tokens, items))
        elif judge is not None and debate is not None:
            if sampled < 1:
                raise InvalidArgumentError("cascade needs the sample's in-band count")
            share = in_band / sampled
            low, high = _share_interval(in_band, sampled)
            per_item = judge.seconds + share * debate.seconds
            out.append(
                ModeEstimate(
                    mode,
                    per_item,
                    judge.tokens + share * debate.tokens,
                    items,
                    seconds_range=(
                        (judge.seconds + low * debate.seconds) * items,
                        (judge.seconds + high * debate.seconds) * items,
                    ),
                    detail={
                        "in_band": in_band,
                        "sampled": sampled,
                        "debated_share": round(share, 3),
                        "debated_share_95ci": [round(low, 3), round(high, 3)],
                    },
                )
            )
    return out


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_markdown(estimates: Sequence[ModeEstimate], *, sample: int, load_s: float) -> str:
    lines = [
        f"Estimate from {sample} sample item(s) (models loaded in {load_s:.0f} s; nothing "
        "written):",
        "",
        "| mode | model s/item | tokens/item | items | expected model time | expected tokens |",
        "|---|---|---|---|---|---|",
    ]
    for one in estimates:
        when = _duration(one.seconds)
        if one.seconds_range is not None:
            low, high = one.seconds_range
            when += f" ({_duration(low)}–{_duration(high)})"
        lines.append(
            f"| {one.mode} | {one.seconds_per_item:.2f} | {one.tokens_per_item:.0f} | "
            f"{one.items} | {when} | {one.tokens:,.0f} |"
        )
    for one in estimates:
        if one.mode == "cascade":
            detail = one.detail
            low, high = detail["debated_share_95ci"]
            lines.append(
                f"\ncascade: {detail['in_band']} of {detail['sampled']} sample items fell in the "
                f"judge's band and would be debated (95% interval of the share {low:.0%}–"
                f"{high:.0%}): the range in brackets."
            )
    lines.append(
        "Model time is per-item labelling time summed; runners with their own models "
        "(--workers with --ray, or several machines) divide the wall time."
    )
    return "\n".join(lines) + "\n"


def _cost(results: Sequence[Any]) -> SampleCost:
    n = max(len(results), 1)
    return SampleCost(
        items=len(results),
        seconds=sum(r.seconds for r in results) / n,
        tokens=sum(r.tokens for r in results) / n,
    )


def _band(settings: Settings) -> tuple[float, float]:
    """(low, high) the cascade applies: the settings' overrides, else the artifact's."""
    from ..ensemble import RelevanceArtifact, relevance_artifact_path

    artifact = RelevanceArtifact.load(relevance_artifact_path(settings))
    low = settings.gateway.label_irrelevant_at
    high = settings.gateway.label_relevant_at
    return (
        artifact.band_low if low is None else low,
        artifact.band_high if high is None else high,
    )


def estimate_job(
    settings: Settings,
    items: Sequence[Any],
    *,
    sample: int,
    modes: Sequence[str],
    seed: int = 0,
    report: Path | None = None,
) -> str:
    """Label ``sample`` of ``items`` per stage the ``modes`` need; the projection as text."""
    from ..jobs import PipelineLabeller

    if sample < 1:
        raise InvalidArgumentError("--estimate needs at least 1 sample item", field="estimate")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise InvalidArgumentError(f"unknown modes {unknown}; known: {MODES}", field="modes")
    if not items:
        raise InvalidArgumentError("the input holds no items to estimate on", field="input")
    picked = random.Random(seed).sample(list(items), min(sample, len(items)))
    need_judge = bool({"judge", "cascade"} & set(modes))
    need_debate = bool({"cascade", "debate"} & set(modes))
    serve = "cascade" if need_judge and need_debate else ("judge" if need_judge else "debate")
    # Nothing of the sample reaches the audit or the human queue.
    quiet = settings.model_copy(
        update={"gateway": settings.gateway.model_copy(update={"audit": False})}
    )
    started = time.perf_counter()
    labeller = PipelineLabeller(quiet, serve)
    load_s = time.perf_counter() - started
    judge = debate = None
    in_band = 0
    try:
        if need_judge:
            labeller.mode = type(labeller.mode).parse("judge")
            labeller.label(picked[:1])  # warm-up, not counted: first-call set-up costs
            judged = labeller.label(picked)
            judge = _cost(judged)
            low, high = _band(settings)
            in_band = sum(
                1 for r in judged if r.p_relevant is not None and low < r.p_relevant < high
            )
        if need_debate:
            labeller.mode = type(labeller.mode).parse("debate")
            debate = _cost(labeller.label(picked))
    finally:
        labeller.close()
    estimates = project(
        [m for m in MODES if m in modes],
        len(items),
        judge=judge,
        debate=debate,
        in_band=in_band,
        sampled=len(picked),
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(
            json.dumps(
                {
                    "sample": len(picked),
                    "load_seconds": round(load_s, 2),
                    "estimates": [e.to_json() for e in estimates],
                },
                indent=2,
            )
            + "\n"
        )
    return estimate_markdown(estimates, sample=len(picked), load_s=load_s)
