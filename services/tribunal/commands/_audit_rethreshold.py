"""``tribunal audit rethreshold``: a stricter threshold of the served calibrator,
certified on its reviewed audited ACCEPTs (:func:`tribunal.confidence.served_threshold`).

After the live bound showed the served threshold's rate above α, this keeps the served
calibrator and raises its threshold to the lowest one the audited ACCEPTs certify. On the
served calibrator's scale only former ACCEPTs can be accepted at or above the served
threshold, so every ACCEPT label counts at full weight and no fallback label is needed.
The new artifact (same calibrator, new thresholds, another version) is written to
``--output``; serving it leaves the safe mode, as any re-certification does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..core import load_settings
from ..core.storage import Database

__all__ = ["register_rethreshold", "rethreshold_summary"]


def register_rethreshold(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = actions.add_parser(
        "rethreshold",
        help="certify a stricter threshold of the served calibrator on its audited ACCEPTs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--artifact",
        type=Path,
        default=None,
        help="the served calibrator artifact (default: the one the services load)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="the α whose threshold was served (confidence.alpha); its threshold is the floor",
    )
    parser.add_argument(
        "--collection", default=None, help="default: the one the artifact was calibrated on"
    )
    parser.add_argument(
        "--since", default=None, help="only ACCEPTs audited from then on (30m, 2h, 7d or ISO)"
    )
    parser.add_argument("--delta", type=float, default=None, help="default: the artifact's δ")
    parser.add_argument("-o", "--output", type=Path, required=True, help="new artifact path")
    parser.set_defaults(func=_rethreshold)


def _rethreshold(args: argparse.Namespace) -> int:
    from ..audit import rethreshold
    from ..confidence import CalibratorArtifact, default_artifact_path
    from ._since import parse_since

    settings = load_settings(args.profile)
    path = args.artifact or default_artifact_path(settings)
    artifact = CalibratorArtifact.load(path)
    alpha = args.alpha if args.alpha is not None else settings.confidence.alpha
    delta = args.delta if args.delta is not None else float(artifact.config.get("delta", 0.1))
    new, provenance = rethreshold(
        artifact,
        Database(args.database_url or settings.database_url),
        alpha=alpha,
        delta=delta,
        collection=args.collection,
        since=parse_since(args.since) if args.since else None,
        votes_per_item=settings.audit.votes_per_item,
    )
    new.save(args.output)
    print(json.dumps(rethreshold_summary(new, provenance, args.output), indent=2))
    return 0


def rethreshold_summary(new: Any, provenance: dict[str, Any], output: Path) -> dict[str, Any]:
    """What ``tribunal audit rethreshold`` prints about the artifact it wrote."""
    return {
        **provenance,
        "version": new.version,
        "output": str(output),
        "thresholds": [
            {
                "alpha": t.alpha,
                "threshold": t.threshold,
                "upper_bound": t.upper_bound,
                "accepted": t.accepted,
                "n": t.n,
                "method": t.method,
            }
            for t in new.thresholds
        ],
    }
