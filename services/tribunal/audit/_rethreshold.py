"""The served calibrator at the stricter thresholds its reviewed audited ACCEPTs certify.

What ``tribunal audit rethreshold`` and ``tribunal calibrate --from-audit --recertify
rethreshold|best`` write: the same calibrator (same scores on every query), every α of
the artifact re-certified by :func:`tribunal.confidence.served_threshold` with the served
α's threshold as the floor, and ``config.rethreshold`` recording where it came from. The
new thresholds make it another version, so a gateway serving it is out of the safe mode
(the mode belongs to the version it was shown on) and its live bounds start afresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core import FailedPreconditionError, InvalidArgumentError
from ..core.storage import Database
from ._recertify import served_accepts

if TYPE_CHECKING:
    from ..confidence import CalibratorArtifact

__all__ = ["rethreshold"]


def rethreshold(
    artifact: CalibratorArtifact,
    db: Database,
    *,
    alpha: float,
    delta: float,
    collection: str | None = None,
    since: dt.datetime | None = None,
    votes_per_item: int = 1,
    created: str | None = None,
    alphas: Sequence[float] | None = None,
) -> tuple[CalibratorArtifact, dict[str, Any]]:
    """The served ``artifact`` re-thresholded on its reviewed audited ACCEPTs (from
    ``since`` on), each of its α certified at ``delta``; and the provenance recorded in it.

    ``alpha``: the α whose threshold was served (the floor of every new threshold);
    ``alphas``: the αs to certify (default: the artifact's).

    Raises:
        FailedPreconditionError: the served α had no certified threshold (nothing was
            accepted), or :func:`served_accepts` finds no usable ACCEPT.
        InvalidArgumentError: the artifact is bound to no collection and none is given.
    """
    from ..confidence import served_threshold

    served = artifact.threshold_for(alpha).threshold
    if served is None:
        raise FailedPreconditionError(
            f"calibrator {artifact.version}: no threshold was certified for alpha={alpha}, "
            "so nothing was accepted to re-threshold; refit with "
            "`tribunal calibrate --from-audit`"
        )
    binding = artifact.binding
    collection = collection or (binding.collection if binding is not None else None)
    if collection is None:
        raise InvalidArgumentError(
            "the artifact is bound to no collection: pass --collection", field="collection"
        )
    sample = served_accepts(
        db,
        collection=collection,
        calibrator_version=artifact.version,
        served=served,
        votes_per_item=votes_per_item,
        since=since,
    )
    thresholds = tuple(
        served_threshold(
            sample.confidence,
            sample.correct,
            sample.weight,
            served=served,
            alpha=target,
            delta=delta,
        )
        for target in (artifact.alphas if alphas is None else sorted(set(alphas)))
    )
    provenance: dict[str, Any] = {
        "served_version": artifact.version,
        "served_alpha": alpha,
        "served_threshold": served,
        "audited_accepts": int(sample.confidence.size),
        "since": since.isoformat() if since else None,
        "delta": delta,
    }
    new = dataclasses.replace(
        artifact,
        thresholds=thresholds,
        config={**artifact.config, "rethreshold": provenance},
        created=created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    return new, provenance
