"""What the in-process ``tribunal ask`` and ``tribunal demo`` know before any question:
whether the calibrator they answer with can accept anything in the collections asked.

A calibrator that certifies no threshold at the chosen α, or one bound to other KB
content, another retrieval model, another matcher or another candidate count, makes the
gateway refuse every
question (NO_CERTIFIED_THRESHOLD). That is a configured state, the same for every
question: it is said once, up front, with the command that fixes it, and no question
is run through retrieval and matching only to be refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core import FailedPreconditionError, InvalidArgumentError, Settings

__all__ = ["CalibrationCheck", "check_calibration", "require_calibration"]

_PLAIN = "or accept at a fixed confidence with no guarantee: --plain-threshold P"


@dataclass(frozen=True)
class CalibrationCheck:
    """What :func:`check_calibration` found."""

    problem: str | None
    """Why answers in some collections asked cannot be accepted (None: nothing known)."""
    refused: tuple[str, ...] = ()
    """The collections asked where nothing can be accepted (every one: stop)."""


def _calibrate_command(collection: str) -> str:
    return f"`tribunal calibrate --collection {collection} --traffic LABELLED.jsonl`"


def check_calibration(settings: Settings, collections: Sequence[str]) -> CalibrationCheck:
    """Check the calibrator the in-process gateway trusts against the chosen α and the
    ``collections`` to be asked (their stores read, no model loaded). A collection that
    does not exist is left to the gateway, which refuses it by name."""
    from ..confidence import CalibratorArtifact, artifact_not_certified, default_artifact_path

    asked = tuple(dict.fromkeys(collections))
    if settings.confidence.plain_threshold is not None:
        return CalibrationCheck(None)  # no guarantee, so nothing to be bound to
    artifact = CalibratorArtifact.load(default_artifact_path(settings))
    alpha = settings.confidence.alpha
    certified = [f"{t.alpha:g}" for t in artifact.thresholds if t.threshold is not None]
    try:
        threshold = artifact.threshold_for(alpha).threshold
    except InvalidArgumentError:
        threshold = None
    if threshold is None:
        at = f"--alpha {' or '.join(certified)}" if certified else ""
        fixes = [f"ask at a certified alpha ({at})"] if at else []
        fixes.append(f"calibrate on your labelled traffic: {_calibrate_command(asked[0])}")
        return CalibrationCheck(
            f"calibrator {artifact.version} certifies no threshold at alpha={alpha:g}: every "
            "answer would fall back (NO_CERTIFIED_THRESHOLD), so no question is asked: "
            f"{artifact_not_certified(artifact, alpha)}. Fix: " + "; ".join(fixes) + f"; {_PLAIN}",
            asked,
        )
    binding = artifact.binding
    if binding is None:
        return CalibrationCheck(None)
    certified_for = (
        f"calibrator {artifact.version} is certified for collection {binding.collection!r} "
        f"at content version {binding.collection_version}"
    )
    problems = _setting_problems(settings, binding.matcher, binding.candidates)
    if problems:
        return CalibrationCheck(
            f"{certified_for}, {' and '.join(problems)}: no answer can be accepted "
            "(NO_CERTIFIED_THRESHOLD), so no question is asked. Fix: set it back, or "
            f"recalibrate: {_calibrate_command(asked[0])}; {_PLAIN}",
            asked,
        )
    from ..retrieval import stored_content_version, stored_retrieval_model

    other = {}
    for name in asked:
        version = stored_content_version(settings, name)
        if version is not None and version != binding.collection_version:
            other[name] = f"is at {version} (other entries)"
            continue
        model = stored_retrieval_model(settings, name)
        if model is not None and model != binding.embedder:
            other[name] = f"is searched with {model}, not {binding.embedder}"
    if not other:
        return CalibrationCheck(None)
    where = ", ".join(f"{name!r} {why}" for name, why in other.items())
    stop = len(other) == len(asked)
    first = next(iter(other))
    return CalibrationCheck(
        f"{certified_for}; {where}: no answer can be accepted there "
        f"(NO_CERTIFIED_THRESHOLD)"
        + (", so no question is asked" if stop else "")
        + f". Fix: calibrate on that collection's labelled traffic: {_calibrate_command(first)}"
        f" (then ask again); {_PLAIN}",
        tuple(other),
    )


def _setting_problems(settings: Settings, matcher: str, candidates: int) -> list[str]:
    """How this gateway's candidate count and (feature) matcher differ from the calibrated
    ones; a judge panel's version is known only once loaded: the gateway checks it."""
    problems = []
    if candidates and candidates != settings.gateway.candidates:
        problems.append(
            f"for {candidates} candidate(s) per query; this gateway scores "
            f"{settings.gateway.candidates} (gateway.candidates)"
        )
    if settings.ensemble.matcher == "features" and matcher.startswith("features:"):
        from ..ensemble import served_feature_matcher

        served = served_feature_matcher(settings)  # a tune of gateway.collection, if any
        if served != matcher:
            problems.append(f"with matcher {matcher}; this gateway matches with {served}")
    return problems


def require_calibration(settings: Settings, collections: Sequence[str]) -> str | None:
    """:func:`check_calibration`, raising when nothing asked could be accepted.

    Returns:
        The problem to report once before asking (some collections only), or None.

    Raises:
        FailedPreconditionError: no collection asked can have an answer accepted; the
            message names the command that fixes it.
    """
    found = check_calibration(settings, collections)
    if found.problem is not None and set(found.refused) >= set(collections):
        raise FailedPreconditionError(found.problem, field="confidence")
    return found.problem
