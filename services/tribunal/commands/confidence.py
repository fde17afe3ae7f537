"""``tribunal confidence fit|evaluate|report``: calibrators and their guarantee.

Data: JSONL of ``{"signals": {...proto Signals field names...}, "label": 0|1}``
(label 1 = the candidate is a correct answer). Defaults come from the
``confidence`` settings (``TRIBUNAL_CONFIDENCE__*``). The reliability diagrams of
``evaluate`` and ``report`` need the ``analysis`` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, Settings, load_settings
from ..core.settings import CALIBRATOR_KINDS, RISK_METHOD_NAMES
from ._extras import require_extra

__all__ = ["register"]

_SCORE_KINDS = tuple(kind for kind in CALIBRATOR_KINDS if kind != "monotone")
"""What ``report`` compares by default: the calibrators of one score (and platt)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "confidence", help="fit and evaluate calibrators with a hallucination-rate guarantee"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    fit = actions.add_parser(
        "fit",
        help="fit a calibrator, select a threshold per alpha, write the artifact",
        description="Split the data (seeded, stratified) into fit / risk / held-out parts, fit "
        "the calibrator on the fit part, and certify per alpha, on the risk part, the lowest "
        "threshold whose hallucination rate P(wrong | accepted) is <= alpha with probability "
        ">= 1 - delta (--method). For labelled traffic of one KB collection, `tribunal "
        "calibrate` runs the stages itself and binds the artifact to the KB.",
    )
    fit.add_argument("--data", type=Path, required=True, help="labelled signals (JSONL)")
    fit.add_argument(
        "--calibrator", choices=CALIBRATOR_KINDS, default=None, help="default: settings"
    )
    fit.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="artifact path (default: "
        "confidence.artifact_path or DATA_DIR/confidence/calibrator.json)",
    )
    _add_fit_options(fit)
    fit.set_defaults(func=_fit)

    evaluate = actions.add_parser(
        "evaluate",
        help="held-out report: calibration before/after, hallucination rate and coverage per alpha",
    )
    evaluate.add_argument("--artifact", type=Path, nargs="+", required=True, help="artifact(s)")
    evaluate.add_argument("--data", type=Path, required=True, help="labelled signals (JSONL)")
    _add_report_options(evaluate)
    evaluate.set_defaults(func=_evaluate)

    report = actions.add_parser(
        "report",
        help="one command: fit each calibrator on DATA and evaluate them together",
    )
    report.add_argument("--data", type=Path, required=True, help="labelled signals (JSONL)")
    report.add_argument(
        "--calibrator",
        nargs="+",
        default=list(_SCORE_KINDS),
        metavar="KIND[:SCORE]",
        help="calibrators to fit, each optionally with its own score signal, e.g. platt "
        "isotonic:dense_score temperature:extra.token_set_ratio (default: all three on --score)",
    )
    _add_fit_options(report)
    _add_report_options(report)
    report.set_defaults(func=_report)


def _add_fit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--score",
        default=None,
        help="score signal (default: settings "
        "confidence.score_signal), e.g. dense_score, judge_p_yes.strong",
    )
    parser.add_argument("--alpha", type=float, nargs="+", default=None, help="target rates")
    parser.add_argument("--delta", type=float, default=None, help="guarantee holds w.p. 1-delta")
    parser.add_argument("--holdout-fraction", type=float, default=None)
    parser.add_argument("--risk-fraction", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--method",
        choices=RISK_METHOD_NAMES,
        default=None,
        help="risk control (see `tribunal calibrate --help`; default: confidence.method)",
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")


def _add_report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/confidence"),
        help="folder for the report (JSON, markdown, reliability PNGs)",
    )
    parser.add_argument(
        "--raw-score",
        nargs="+",
        default=None,
        help="raw signal(s) reported as 'before' (default: the calibrators' scores)",
    )
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    if not any(a.dest == "profile" for a in parser._actions):
        parser.add_argument("--profile", default=None, help="profile name or YAML path")


def _fit_config(
    args: argparse.Namespace, settings: Settings, calibrator: str, score: str | None = None
) -> Any:
    from ..confidence import FitConfig

    config = settings.confidence
    return FitConfig(
        calibrator=calibrator,  # type: ignore[arg-type]
        score=score or args.score or config.score_signal,
        alphas=tuple(args.alpha or config.alphas),
        delta=config.delta if args.delta is None else args.delta,
        holdout_fraction=args.holdout_fraction or config.holdout_fraction,
        risk_fraction=args.risk_fraction or config.risk_fraction,
        seed=config.seed if args.seed is None else args.seed,
        method=args.method or config.method,
    )


def _fit(args: argparse.Namespace) -> int:
    from ..confidence import default_artifact_path, fit_artifact, read_labelled_signals

    settings = load_settings(args.profile)
    config = _fit_config(args, settings, args.calibrator or settings.confidence.calibrator)
    artifact = fit_artifact(read_labelled_signals(args.data), config)
    path = artifact.save(args.output or default_artifact_path(settings))
    print(f"wrote {path} (version {artifact.version})")
    print(f"split: {json.dumps(dict(artifact.training_data)['split'])}")
    for threshold in artifact.thresholds:
        chosen = "none qualifies" if threshold.threshold is None else f"{threshold.threshold:.4f}"
        print(
            f"alpha={threshold.alpha:g} delta={threshold.delta:g}: threshold {chosen}, "
            f"risk-split coverage {threshold.coverage:.3f} "
            f"({threshold.accepted}/{threshold.n}, {threshold.errors} wrong)"
        )
    return 0


def _write_report(report: dict[str, Any], out: Path) -> None:
    from ..confidence import json_ready, markdown_report

    out.mkdir(parents=True, exist_ok=True)
    (out / "confidence-report.json").write_text(
        json.dumps(json_ready(report), indent=2, allow_nan=False) + "\n"
    )
    table = markdown_report(report)
    (out / "confidence-report.md").write_text(table)
    print(table)
    print(f"wrote {out / 'confidence-report.json'}, {out / 'confidence-report.md'} and PNGs")


def _require_plots() -> None:
    require_extra(
        "analysis", ("matplotlib",), what="the reliability diagrams of tribunal confidence"
    )


def _evaluate(args: argparse.Namespace) -> int:
    from ..confidence import CalibratorArtifact, evaluate_artifacts, read_labelled_signals

    _require_plots()

    artifacts = [CalibratorArtifact.load(path) for path in args.artifact]
    data = read_labelled_signals(args.data)
    report = evaluate_artifacts(
        artifacts, data, args.out, raw_scores=args.raw_score, n_resamples=args.resamples
    )
    _write_report(report, args.out)
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..confidence import evaluate_artifacts, fit_artifact, read_labelled_signals

    _require_plots()

    settings = load_settings(args.profile)
    data = read_labelled_signals(args.data)
    artifacts, skipped = [], []
    for spec in args.calibrator:
        kind, _, score = spec.partition(":")
        if kind not in CALIBRATOR_KINDS:
            raise InvalidArgumentError(
                f"unknown calibrator {kind!r} in {spec!r}; choose {', '.join(CALIBRATOR_KINDS)}",
                field="calibrator",
            )
        try:
            artifact = fit_artifact(data, _fit_config(args, settings, kind, score or None))
        except InvalidArgumentError as exc:
            # One calibrator that cannot read this score must not hide the others' figures.
            print(f"skipped {spec}: {exc}")
            skipped.append({"calibrator": spec, "reason": exc.message})
            continue
        name = kind if not score else f"{kind}-{score}"
        artifact.save(args.out / f"calibrator-{name}.json")
        artifacts.append(artifact)
    if not artifacts:
        raise InvalidArgumentError("no calibrator could be fitted on this data", field="calibrator")
    report = evaluate_artifacts(
        artifacts, data, args.out, raw_scores=args.raw_score, n_resamples=args.resamples
    )
    report["skipped"] = skipped
    _write_report(report, args.out)
    return 0
