"""``tribunal calibrate`` and ``tribunal answer-classes``: certify a threshold on your traffic.

``tribunal calibrate --collection C --traffic FILE`` runs the gateway's own
stages (retrieval, then the matcher, with the profile's settings) on every
labelled query of FILE, records the signals the gateway would send to the
confidence service, fits the calibrator, certifies one threshold per α with the
chosen risk-control method, and writes one artifact bound to the collection's
content version, the matcher, the retrieval embedder and the profile, with a
report (per α: certified bound and coverage, held-out outcome; a hallucination
vs coverage plot; the reliability diagram).

``tribunal answer-classes build|check`` groups a KB's entries that answer the
same question alike, so labelled traffic can list every right entry.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import InvalidArgumentError, load_settings
from ..core.settings import CALIBRATOR_KINDS, RISK_METHOD_NAMES
from . import _calibrate_recertify as _recertify
from ._calibration_signals import observe_traffic, read_signals, write_signals

if TYPE_CHECKING:
    from ..confidence import CalibrationConfig, Traffic
    from ..core import Settings

__all__ = ["calibration_config", "register", "tuned_part", "with_answer_classes"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "calibrate",
        help="certify a hallucination-rate threshold on labelled traffic of one KB collection",
        description="Run retrieval and the matcher (the gateway's stages, this profile's "
        "settings) on every labelled query, fit the calibrator, certify one threshold per "
        "alpha, and write one artifact bound to the collection's content version, the "
        'matcher, the embedder and the profile. Traffic: JSONL of {"query": ..., '
        '"answers": [ids of every entry that answers it; empty when none does]}.',
    )
    parser.add_argument("--collection", required=True, help="the KB collection the traffic asks")
    parser.add_argument(
        "--traffic", type=Path, default=None, help="labelled queries (JSONL; or --from-audit)"
    )
    parser.add_argument(
        "--from-audit",
        action="store_true",
        help="re-certify on the collection's reviewed live audits instead of --traffic "
        "(every label, weighted by its inverse inclusion probability; the new artifact ends "
        "a safe mode)",
    )
    parser.add_argument(
        "--audit-weighting",
        choices=("ipw", "thin"),
        default="ipw",
        help="--from-audit: weight every audited label by 1/pi (ipw, default) or thin them to "
        "one uniform share (thin: fewer labels)",
    )
    parser.add_argument(
        "--database-url", default=None, help="--from-audit: default settings.database_url"
    )
    parser.add_argument(
        "--audit-since",
        default=None,
        help="--from-audit: only items audited since (30m, 2h, 7d or ISO time), e.g. since "
        "the shift warning",
    )
    _recertify.add_arguments(parser)
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--classes",
        type=Path,
        default=None,
        help="answer-classes file: each query's answers are widened to their whole classes",
    )
    # Every default below is the profile's `confidence` settings (shown in --help).
    parser.add_argument(
        "--alpha", type=float, nargs="+", default=None, help="target rates (confidence.alphas)"
    )
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="each guarantee holds with prob. 1 - delta (confidence.delta)",
    )
    parser.add_argument(
        "--method",
        choices=RISK_METHOD_NAMES,
        default=None,
        help="risk control (confidence.method)",
    )
    parser.add_argument(
        "--calibrator",
        choices=CALIBRATOR_KINDS,
        default=None,
        help="calibrator kind (confidence.calibrator)",
    )
    parser.add_argument(
        "--signal",
        nargs="+",
        default=None,
        help="columns of the monotone calibrator (default: ensemble_p_match "
        "ensemble_p_match_margin retrieval_reciprocal_rank retrieval_score dense_score "
        "neighbour_vote)",
    )
    parser.add_argument("--score", default=None, help="the column an isotonic/temperature reads")
    parser.add_argument(
        "--holdout-fraction",
        type=float,
        default=None,
        help="held out, by group (confidence.holdout_fraction)",
    )
    parser.add_argument(
        "--fit-fraction",
        type=float,
        default=None,
        help="of the rest, fits the calibrator (1 - confidence.risk_fraction)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the grouped split (confidence.seed)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="artifact path (default: confidence.artifact_path or "
        "DATA_DIR/confidence/calibrator.json, which the services then load)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="report folder (default: .build/calibrate/COLLECTION)",
    )
    parser.add_argument(
        "--signals-out",
        type=Path,
        default=None,
        help="also write the recorded candidate signals (JSONL) for --from-signals",
    )
    parser.add_argument(
        "--from-signals",
        type=Path,
        default=None,
        help="reuse signals recorded by --signals-out instead of running the stages",
    )
    parser.add_argument(
        "--created",
        default=None,
        help="creation time to record (ISO 8601); fixed, the artifact is rebuilt bit for bit",
    )
    parser.set_defaults(func=_calibrate)

    classes = sub.add_parser(
        "answer-classes",
        help="group a KB's entries that answer the same question alike (for labelling)",
    )
    actions = classes.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="link entries by question cosine and answer token-set ratio, apply a review, "
        "write the classes",
    )
    build.add_argument("--kb", type=Path, required=True, help="the KB file (JSONL)")
    build.add_argument("-o", "--output", type=Path, required=True, help="classes file to write")
    build.add_argument("--embedder", default="embedder_large", help="profile embedder model key")
    build.add_argument("--question-cosine", type=float, default=0.85)
    build.add_argument("--answer-ratio", type=float, default=0.5)
    build.add_argument(
        "--review",
        type=Path,
        default=None,
        help='JSON {"rejected": [{"pair": [a, b], "reason": ...}], "added": [...]} '
        "(or a classes file, whose review is reused)",
    )
    build.add_argument("--profile", default=None, help="profile name or YAML path")
    build.set_defaults(func=_classes_build)
    check = actions.add_parser(
        "check", help="recompute a classes file from its KB and method; exit 1 on a difference"
    )
    check.add_argument("--kb", type=Path, required=True, help="the KB file (JSONL)")
    check.add_argument("--classes", type=Path, required=True, help="the committed classes file")
    check.add_argument("--profile", default=None, help="profile name or YAML path")
    check.set_defaults(func=_classes_check)


# -- tribunal calibrate ------------------------------------------------------------------


def with_answer_classes(traffic: Traffic, path: Path) -> Traffic:
    from dataclasses import replace

    from ..confidence import AnswerClasses

    classes = AnswerClasses.load(path)
    return replace(
        traffic,
        queries=tuple(replace(q, answers=classes.expand(q.answers)) for q in traffic.queries),
    )


def calibration_config(args: argparse.Namespace, settings: Settings) -> CalibrationConfig:
    """The command line's choices; each one it leaves out, the ``confidence`` setting's."""
    from ..confidence import CalibrationConfig

    return CalibrationConfig.from_settings(
        settings.confidence,
        calibrator=args.calibrator,
        signals=tuple(args.signal) if args.signal else None,
        score=args.score,
        alphas=tuple(args.alpha) if args.alpha else None,
        delta=args.delta,
        method=args.method,
        holdout_fraction=args.holdout_fraction,
        fit_fraction=args.fit_fraction,
        seed=args.seed,
    )


def _calibrate(args: argparse.Namespace) -> int:
    from ..confidence import (
        calibrate,
        calibration_markdown,
        default_artifact_path,
        read_traffic,
        write_calibration_report,
    )

    settings = load_settings(args.profile)
    output = args.output or _writable_default(settings, default_artifact_path(settings))
    if args.from_audit and args.recertify == "rethreshold":
        return _recertify.rethreshold_only(args, settings, output)
    config = _recertify.best_config(args, settings, calibration_config(args, settings))
    traffic = read_traffic(_traffic_path(args, settings))
    if args.classes is not None:
        traffic = with_answer_classes(traffic, args.classes)
    labelled = len(traffic)  # a tune's own queries count towards what certifying takes
    settings, traffic = tuned_part(settings, args.collection, traffic)
    started = time.perf_counter()
    if args.from_signals is not None:
        observed, binding = read_signals(args.from_signals, traffic)
        if binding.collection != args.collection:
            raise InvalidArgumentError(
                f"{args.from_signals} was recorded on collection {binding.collection!r}",
                field="collection",
            )
    else:
        observed, binding = observe_traffic(settings, args.collection, traffic)
        print(
            f"{len(traffic)} queries through retrieval + matching in "
            f"{time.perf_counter() - started:.0f} s"
        )
    if args.signals_out is not None:
        write_signals(args.signals_out, traffic, observed, binding)
    result = calibrate(
        traffic, observed, config, binding, created=args.created, labelled_queries=labelled
    )
    report_dir = args.report or Path(".build/calibrate") / args.collection
    written = write_calibration_report(result, report_dir)
    print(calibration_markdown(result.report))
    artifact = result.artifact
    if args.from_audit:
        artifact = _recertify.choose(args, settings, artifact, output)
    artifact.save(output)
    print(f"wrote {output} (version {artifact.version})")
    print(f"report: {', '.join(str(p) for p in written)}")
    return 0


def tuned_part(settings: Settings, collection: str, traffic: Traffic) -> tuple[Settings, Traffic]:
    """With a tuned matcher for ``collection``: serve it, and keep only traffic it never saw
    (:func:`tribunal.tuning.certifiable_traffic`)."""
    from ..tuning import TunedMatcher, certifiable_traffic, current_tuned_dir

    if settings.ensemble.matcher != "features":
        return settings, traffic
    directory = settings.ensemble.tuned_matcher or current_tuned_dir(settings.data_dir, collection)
    if directory is None:
        return settings, traffic
    tuned = TunedMatcher.load(directory)
    kept, note = certifiable_traffic(traffic, tuned, collection)
    print(
        f"tuned matcher {tuned.version}: calibrating on {len(kept)} of {len(traffic)} queries "
        f"({note['traffic']})"
    )
    ensemble = settings.ensemble.model_copy(update={"tuned_matcher": directory})
    return settings.model_copy(update={"ensemble": ensemble}), kept


def _traffic_path(args: argparse.Namespace, settings: Settings) -> Path:
    """``--traffic``, or the reviewed live audits written as traffic (``--from-audit``)."""
    if args.from_audit == (args.traffic is not None):
        raise InvalidArgumentError(
            "give exactly one of --traffic FILE and --from-audit", field="traffic"
        )
    if args.traffic is not None:
        return Path(args.traffic)
    from ..audit import audit_traffic, write_audit_traffic
    from ..core.storage import Database
    from ._since import parse_since

    rows, counts = audit_traffic(
        Database(args.database_url or settings.database_url),
        collection=args.collection,
        votes_per_item=settings.audit.votes_per_item,
        seed=args.seed,
        since=parse_since(args.audit_since) if args.audit_since else None,
        weighting=args.audit_weighting,
    )
    report_dir = args.report or Path(".build/calibrate") / args.collection
    path = write_audit_traffic(rows, report_dir / "audit-traffic.jsonl")
    how = {
        "ipw": "every one weighted by its inverse inclusion probability",
        "uniform": "one inclusion probability for every decision, no weights needed",
        "thin": "kept after thinning to one inclusion probability",
    }[counts["weighting"]]
    print(
        f"{counts['reviewed']} reviewed audit items ({counts['by_decision']}), "
        f"{counts['kept']} {how} ({counts['answerable']} answerable): {path}"
    )
    return path


def _writable_default(settings: Settings, resolved: Path) -> Path:
    """Never overwrite a shipped artifact by default: write the data_dir one instead."""
    if settings.confidence.artifact_path is not None:
        return resolved
    return settings.data_dir / "confidence" / "calibrator.json"


# -- tribunal answer-classes --------------------------------------------------------------


def _kb_entries(settings: Settings, path: Path) -> list[Any]:
    from ..kb import deduplicate, read_entries

    entries, _ = deduplicate(
        read_entries(path, record_format="auto", max_chars=settings.retrieval.chunk_size_chars)
    )
    return entries


def _compute_classes(settings: Settings, kb: Path, rule: Any, rejected: Any, added: Any) -> Any:
    from ..confidence import AnswerClasses, candidate_links, file_sha256
    from ..embedding import load_profile_embedder

    entries = _kb_entries(settings, kb)
    ids = [e.id for e in entries]
    vectors = load_profile_embedder(settings, rule.embedder).embed([e.question for e in entries])
    links = candidate_links(ids, vectors, [e.answer for e in entries], rule)
    described = {
        e.id: {"question": e.question, "source": str(e.metadata.get("source", ""))} for e in entries
    }
    return AnswerClasses.build(
        {"source": kb.name, "sha256": file_sha256(kb), "entries": len(entries)},
        ids,
        links,
        rule,
        rejected=rejected,
        added=added,
        described=described,
    )


def _review(path: Path | None) -> tuple[list[Any], list[Any]]:
    from ..confidence import ReviewedLink

    if path is None:
        return [], []
    data = json.loads(path.read_text())
    review = data.get("review", data)

    def links(items: list[dict[str, Any]]) -> list[Any]:
        return [ReviewedLink.of(item["pair"][0], item["pair"][1], item["reason"]) for item in items]

    return links(review.get("rejected", [])), links(review.get("added", []))


def _classes_build(args: argparse.Namespace) -> int:
    from ..confidence import ClassRule

    settings = load_settings(args.profile)
    rule = ClassRule(args.embedder, args.question_cosine, args.answer_ratio)
    rejected, added = _review(args.review)
    classes = _compute_classes(settings, args.kb, rule, rejected, added)
    classes.save(args.output)
    sizes = sorted((len(c) for c in classes.classes), reverse=True)
    print(
        f"{len(classes.links)} links by the rule, {len(rejected)} rejected and {len(added)} "
        f"added by review: {len(classes.classes)} classes of sizes {sizes}; wrote {args.output}"
    )
    return 0


def _classes_check(args: argparse.Namespace) -> int:
    from ..confidence import AnswerClasses

    settings = load_settings(args.profile)
    committed = AnswerClasses.load(args.classes)
    recomputed = _compute_classes(
        settings, args.kb, committed.rule, committed.rejected, committed.added
    )
    differences = recomputed.differences(committed)
    if recomputed.kb.get("sha256") != committed.kb.get("sha256"):
        differences.insert(0, f"the KB file changed (sha256 {recomputed.kb['sha256'][:12]})")
    for line in differences:
        print(line)
    if differences:
        print(f"{args.classes}: {len(differences)} difference(s)")
        return 1
    print(
        f"{args.classes}: the same {len(committed.links)} links and {len(committed.classes)} "
        "classes, recomputed from the KB and the recorded method and review"
    )
    return 0
