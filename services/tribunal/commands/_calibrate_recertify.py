"""``tribunal calibrate --from-audit --recertify refit|rethreshold|best``: which
re-certification to write after a trip.

Two certificates can be read from the reviewed live audits of a window:

- **refit** (the default): a new calibrator fitted and certified on every reviewed label,
  each weighted by its inverse inclusion probability. It can answer former FALLBACKs; its
  certificate needs the fallback labels to bound them.
- **rethreshold**: the served calibrator kept, its threshold raised to the lowest one its
  reviewed audited ACCEPTs certify (what ``tribunal audit rethreshold`` writes). Only
  former ACCEPTs can be accepted, so only the ACCEPT labels count, each at full weight; it
  never answers more than the served calibrator did.

Each holds with probability ≥ 1 − δ on traffic like the audited window, when it was the
one chosen in advance. **best** looks at both and writes the refit when it certifies the
served α (``confidence.alpha``), else the re-threshold when it does, else the refit
(nothing certified): since the one written depends on both results, each is certified at
δ/2, so that the one written still holds with probability ≥ 1 − δ (a union bound).

With ``refit``, when the refit certifies nothing at the served α, the command says so and
what the re-threshold would certify on the same window, and how to write it. Choosing it
after seeing the refit fail is ``best``'s procedure at δ each, whose guarantee is only
1 − 2δ: rerun with ``--recertify best`` to keep 1 − δ, or ``rethreshold`` when that is
the choice made in advance.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, TribunalError
from ..core.settings import Settings

__all__ = ["add_arguments", "best_config", "choose", "rethreshold_only"]

RECERTIFY = ("refit", "rethreshold", "best")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recertify",
        choices=RECERTIFY,
        default="refit",
        help="--from-audit: refit a calibrator on every audited label (default); "
        "rethreshold: keep the served calibrator, raise its threshold on its audited "
        "ACCEPTs (as `tribunal audit rethreshold`); best: certify both at delta/2 and "
        "write the refit if it certifies confidence.alpha, else the re-threshold",
    )
    parser.add_argument(
        "--served-artifact",
        type=Path,
        default=None,
        help="--from-audit: the calibrator artifact served when the audits were drawn, "
        "which rethreshold and best raise (default: the one the services load)",
    )


def _served(args: argparse.Namespace, settings: Settings) -> Any:
    from ..confidence import CalibratorArtifact, default_artifact_path

    return CalibratorArtifact.load(args.served_artifact or default_artifact_path(settings))


def _rethreshold(
    args: argparse.Namespace, settings: Settings, served: Any, delta: float
) -> tuple[Any, dict[str, Any]]:
    from ..audit import rethreshold
    from ..core.storage import Database
    from ._since import parse_since

    return rethreshold(
        served,
        Database(args.database_url or settings.database_url),
        alpha=settings.confidence.alpha,
        delta=delta,
        collection=args.collection,
        since=parse_since(args.audit_since) if args.audit_since else None,
        votes_per_item=settings.audit.votes_per_item,
        created=args.created,
    )


def _certified(artifact: Any, alpha: float) -> float | None:
    """``artifact``'s certified threshold for ``alpha``; None when it has none."""
    try:
        return artifact.threshold_for(alpha).threshold  # type: ignore[no-any-return]
    except InvalidArgumentError:
        return None


def best_config(args: argparse.Namespace, settings: Settings, config: Any) -> Any:
    """The refit's configuration: with ``best``, at δ/2 (the re-threshold takes the other
    half), and certifying the served α."""
    if not args.from_audit and args.recertify != "refit":
        raise InvalidArgumentError(
            "--recertify rethreshold|best re-certify from the live audits: add --from-audit",
            field="recertify",
        )
    if not (args.from_audit and args.recertify == "best"):
        return config
    alpha = settings.confidence.alpha
    if not any(abs(a - alpha) < 1e-12 for a in config.alphas):
        raise InvalidArgumentError(
            f"--recertify best picks by the served alpha {alpha} (confidence.alpha): "
            "include it in --alpha",
            field="alpha",
        )
    return dataclasses.replace(config, delta=config.delta / 2)


def rethreshold_only(args: argparse.Namespace, settings: Settings, output: Path) -> int:
    """``--recertify rethreshold``: what ``tribunal audit rethreshold`` writes, at the
    configured δ; no refit, no model run."""
    from ._audit_rethreshold import rethreshold_summary

    delta = args.delta if args.delta is not None else settings.confidence.delta
    new, provenance = _rethreshold(args, settings, _served(args, settings), delta)
    new.save(output)
    print(json.dumps(rethreshold_summary(new, provenance, output), indent=2))
    print(_written(new, output, "the served calibrator re-thresholded on its audited ACCEPTs"))
    return 0


def choose(args: argparse.Namespace, settings: Settings, refit: Any, output: Path) -> Any:
    """After the refit (``refit`` or ``best``): the artifact to write, and what is said."""
    alpha = settings.confidence.alpha
    if _certified(refit, alpha) is not None:
        if args.recertify == "best":
            print(f"--recertify best: the refit certifies alpha={alpha} at δ/2: it is written")
        return refit
    delta = refit.thresholds[0].delta if refit.thresholds else settings.confidence.delta
    try:
        served = _served(args, settings)
        new, provenance = _rethreshold(args, settings, served, delta)
    except (TribunalError, OSError) as error:
        print(
            f"the refit certifies no threshold at alpha={alpha} (confidence.alpha): serving "
            f"it ends the safe mode but answers nothing. The served calibrator cannot be "
            f"re-thresholded either: {error}"
        )
        return refit
    threshold = new.threshold_for(alpha)
    if args.recertify == "best":
        if threshold.threshold is None:
            print(
                f"--recertify best: neither the refit nor the re-threshold certifies "
                f"alpha={alpha} at δ/2 = {delta:g}: the refit is written (it answers nothing)"
            )
            return refit
        print(
            f"--recertify best: the refit certifies no threshold at alpha={alpha}; the "
            f"served calibrator {served.version} re-thresholded on its "
            f"{provenance['audited_accepts']} audited ACCEPTs certifies it at "
            f"{threshold.threshold:.4g} (bound {threshold.upper_bound:.4g}, δ/2 = {delta:g}): "
            "it is written instead"
        )
        return new
    if threshold.threshold is None:
        print(
            f"the refit certifies no threshold at alpha={alpha} (confidence.alpha): serving "
            f"it ends the safe mode but answers nothing; the served calibrator re-thresholded "
            f"on its {provenance['audited_accepts']} audited ACCEPTs certifies none either"
        )
        return refit
    command = ["tribunal", "calibrate", "--collection", args.collection, "--from-audit"]
    if args.audit_since:
        command += ["--audit-since", args.audit_since]
    command += ["--recertify", "rethreshold", "-o", str(output)]
    print(
        f"the refit certifies no threshold at alpha={alpha} (confidence.alpha): serving it "
        f"ends the safe mode but answers nothing. The served calibrator {served.version} "
        f"re-thresholded on its {provenance['audited_accepts']} audited ACCEPTs certifies "
        f"alpha={alpha} at {threshold.threshold:.4g} (bound {threshold.upper_bound:.4g}, "
        f"δ = {delta:g}). To write it: {shlex.join(command)}. Chosen after this refit "
        f"failed, the one served holds with probability ≥ 1 − 2δ; `--recertify best` "
        "certifies each at δ/2 and keeps 1 − δ"
    )
    return refit


def _written(artifact: Any, output: Path, what: str) -> str:
    return f"wrote {output} (version {artifact.version}): {what}"
