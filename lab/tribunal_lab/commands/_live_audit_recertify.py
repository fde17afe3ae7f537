"""Re-certification in ``tribunal-lab live-audit``: what ``tribunal calibrate --from-audit
--audit-since`` does after a trip, on the replay's cached signals.

Three candidates are certified on the items audited since the shift warning (or the
trip): the weighted refit (every audited label, weighted by its inverse inclusion
probability), the thinned refit (the labels thinned to one share), and the served
calibrator re-thresholded on its audited ACCEPTs (``tribunal audit rethreshold``:
:func:`tribunal.audit.rethreshold`, the same artifact the command writes). Which one is
*served* from then on is ``--recertify``, as for the command:

- ``refit``: the weighted refit, at δ;
- ``rethreshold``: the re-thresholded served calibrator, at δ;
- ``best``: both certified at δ/2; the refit when it certifies α, else the re-threshold
  when it does, else the refit (nothing certified: the collection keeps falling back).

The others are counted beside, at δ, on the same later queries (never served).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["DELTA", "RECERTIFY", "recertify"]

DELTA = 0.1
"""The re-certification's δ (the calibration's)."""
RECERTIFY = ("refit", "rethreshold", "best")
CREATED = "2026-12-02T00:00:00+00:00"
"""Fixed creation time: the artifacts are rebuilt bit for bit."""


def recertify(replay: Any, since: dt.datetime | None, position: int) -> dict[str, Any]:
    """Certify every candidate; set ``replay.artifact`` to the served one and
    ``replay.beside`` to the ones counted beside. The report of each."""
    old = replay.artifact
    alpha = replay.args.alpha
    rethreshold, served = _try(_rethreshold, replay, since, DELTA)
    # Beside: also α = 0.3, a looser target, to compare where α is out of reach.
    _, served_beside = _try(_rethreshold, replay, since, DELTA, (alpha, 0.3))
    weighted, refit = _try(_refit, replay, since, "ipw", DELTA)
    thinned, thin = _try(_refit, replay, since, "thin", DELTA)
    candidates = {"ipw": refit, "thin": thin, "served": served_beside}
    replay.beside = {name: c for name, c in candidates.items() if c is not None}
    how = replay.args.recertify
    report: dict[str, Any] = {
        "query": position,
        "old_version": old.version,
        "recertify": how,
        **weighted,
        "thinned": thinned,
        "served_scale": rethreshold,
    }
    # Best: each at δ/2, so that whichever is served holds w.p. ≥ 1 − δ; computed for
    # every run (reported), served when --recertify best.
    half = DELTA / 2
    best_served_report, best_served = _try(_rethreshold, replay, since, half)
    best_refit_report, best_refit = _try(_refit, replay, since, "ipw", half, "best")
    if _certified(best_refit, alpha):
        best_choice, best = "refit", best_refit
    elif _certified(best_served, alpha):
        best_choice, best = "rethreshold", best_served
    else:
        best_choice, best = "refit", best_refit
    report["best"] = {
        "delta_each": half,
        "chosen": best_choice,
        "refit": best_refit_report,
        "rethreshold": best_served_report,
    }
    if how == "refit":
        chosen, artifact = "refit", refit
    elif how == "rethreshold":
        chosen, artifact = "rethreshold", served
    else:
        chosen, artifact = best_choice, best
    if artifact is None:
        # Nothing could be written: the old artifact stays, and so does its safe mode.
        report["served"] = {"chosen": None, "version": old.version}
        report["new_version"] = old.version
        return report
    replay.artifact = artifact
    threshold = artifact.threshold_for(alpha)
    report["served"] = {
        "chosen": chosen,
        "version": artifact.version,
        "threshold": threshold.threshold,
        "upper_bound": threshold.upper_bound,
        "delta": threshold.delta,
    }
    report["new_version"] = artifact.version
    return report


def _try(certify: Any, *args: Any) -> tuple[dict[str, Any], Any]:
    """``certify(*args)``; a refusal (too few labels of a kind, no ACCEPT) reported."""
    from tribunal.core import TribunalError

    try:
        return certify(*args)  # type: ignore[no-any-return]
    except TribunalError as error:
        return {"error": str(error)}, None


def _certified(artifact: Any, alpha: float) -> bool:
    return artifact is not None and artifact.threshold_for(alpha).threshold is not None


def _rethreshold(
    replay: Any, since: dt.datetime | None, delta: float, alphas: Any = None
) -> tuple[dict[str, Any], Any]:
    """The served calibrator re-thresholded on its audited ACCEPTs, as
    ``tribunal audit rethreshold`` writes it (every α of the artifact, α's threshold as
    the floor)."""
    from tribunal.audit import rethreshold

    new, provenance = rethreshold(
        replay.artifact,
        replay.db,
        alpha=replay.args.alpha,
        delta=delta,
        collection=replay.collection,
        since=since,
        created=CREATED,
        alphas=alphas,
    )
    mine = new.threshold_for(replay.args.alpha)
    report = {
        "accepts": provenance["audited_accepts"],
        "served_threshold": provenance["served_threshold"],
        "version": new.version,
        "method": mine.method,
        "threshold": mine.threshold,
        "upper_bound": mine.upper_bound,
        "certified": mine.certified,
        "certify_accepted": mine.accepted,
        "certify_items": mine.n,
        "per_alpha": [
            {"alpha": t.alpha, "threshold": t.threshold, "upper_bound": t.upper_bound}
            for t in new.thresholds
        ],
    }
    return report, new


def _refit(
    replay: Any, since: dt.datetime | None, weighting: str, delta: float, name: str = ""
) -> tuple[dict[str, Any], Any]:
    """The calibrator refitted and certified on the audited sample (``tribunal calibrate
    --from-audit --audit-weighting WEIGHTING``)."""
    from tribunal.audit import audit_traffic, write_audit_traffic
    from tribunal.confidence import CalibrationConfig, calibrate, read_traffic

    args = replay.args
    rows, counts = audit_traffic(
        replay.db,
        collection=replay.collection,
        votes_per_item=1,
        seed=args.seed,
        since=since,
        weighting=weighting,  # type: ignore[arg-type]
    )
    path = write_audit_traffic(rows, args.out / f"recertify-{name or weighting}.jsonl")
    traffic = read_traffic(path)
    observed = [replay.observed[replay.audit_index[row["audit_id"]]] for row in rows]
    result = calibrate(
        traffic,
        observed,
        CalibrationConfig(
            # α = 0.3 beside: a looser target, to compare where α is out of reach.
            alphas=tuple(sorted({0.1, 0.2, args.alpha, 0.3})),
            delta=delta,
            seed=args.seed,
        ),
        replay.binding,
        created=CREATED,
    )
    threshold = result.artifact.threshold_for(args.alpha)
    report = {
        **counts,
        "version": result.artifact.version,
        "split": result.report["traffic"]["split"],
        "method": threshold.method,
        "threshold": threshold.threshold,
        "upper_bound": threshold.upper_bound,
        "certified": threshold.certified,
        "certify_accepted": threshold.accepted,
        "certify_items": threshold.n,
        "per_alpha": [
            {
                "alpha": t.alpha,
                "threshold": t.threshold,
                "upper_bound": t.upper_bound,
                "certify_accepted": t.accepted,
            }
            for t in result.artifact.thresholds
        ],
    }
    return report, result.artifact
