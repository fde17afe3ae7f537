"""``tribunal label plan`` and ``tribunal label run --plan``: certified automatic labels.

``plan`` scores a labelled sample with the profile's relevance judge (``--input``) or
reads the scores a finished judge job recorded (``--from-job``), fits a label plan
(:func:`tribunal.jobs.fit_plan`: the thresholds outside which the judge's labels are
wrong at most ε of the time, with probability ≥ 1 − δ), writes it as a versioned JSON
artifact bound to the judge's version, and plots automatic-label error against the
share left to humans. ``run --plan`` applies it: the judge labels outside the band,
the band goes to the human review queue.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from ..core import FailedPreconditionError, InvalidArgumentError, Settings, load_settings
from ..core.settings import PLAN_CALIBRATOR_KINDS, RISK_METHOD_NAMES
from ._label_common import input_spec, relevance_version

__all__ = [
    "add_arguments",
    "apply_plan",
    "plan_for_run",
    "plan_provenance",
    "register",
    "report_plan",
    "run",
]

_OUT = Path("label-plan.json")


def register(
    actions: argparse._SubParsersAction,  # type: ignore[type-arg]
    run_parser: argparse.ArgumentParser,
) -> None:
    """``label plan``, and ``--plan`` on ``label run``."""
    plan = actions.add_parser(
        "plan", help="thresholds for automatic labels at a certified error bound (a plan file)"
    )
    add_arguments(plan)
    plan.set_defaults(func=run)
    run_parser.add_argument(
        "--plan",
        type=Path,
        default=None,
        help="a label plan (`tribunal label plan`): the judge labels outside its band at the "
        "plan's certified error; the band goes to the human review queue",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Fit a label plan on a labelled sample: the judge's P(relevant) thresholds outside "
        "which its automatic labels are wrong at most --epsilon of the time with probability "
        ">= 1 - --delta (risk control on queries the calibrator never saw); the band "
        "between goes to humans. Writes the plan (JSON, bound to the judge's version) and "
        "a PNG of automatic-label error against human share."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--input", type=Path, help="labelled sample: JSONL, BEIR folder or TREC (scored here)"
    )
    source.add_argument(
        "--from-job",
        default=None,
        metavar="JOB",
        help="a finished label job over a labelled sample: plan on the judge's P(relevant) it "
        "recorded (no model runs); the plan is bound to that job's judge",
    )
    parser.add_argument("--database-url", default=None, help="job store of --from-job")
    parser.add_argument("--format", choices=("jsonl", "beir", "trec"), default=None)
    parser.add_argument("--run", type=Path, default=None, help="TREC run of candidates")
    parser.add_argument("--qrels", type=Path, default=None, help="TREC qrels (the gold grades)")
    parser.add_argument("--corpus", type=Path, default=None, help="TREC: passage texts")
    parser.add_argument("--depth", type=int, default=None, help="candidates per query")
    parser.add_argument("--split", default="test", help="BEIR qrels split")
    parser.add_argument("--field", action="append", default=[], metavar="FIELD=KEY")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument(
        "--epsilon", type=float, required=True, help="bound on automatic labels' error rate"
    )
    parser.add_argument(
        "--delta", type=float, default=0.1, help="allowed failure probability (default 0.1)"
    )
    parser.add_argument(
        "--method",
        choices=RISK_METHOD_NAMES,
        default="ltt",
        help="risk control (default ltt: Learn-then-Test, fixed sequence on a 0.02 grid)",
    )
    parser.add_argument(
        "--scheme",
        choices=("nested", "grid"),
        default="nested",
        help="nested: bands around calibrated P = 0.5 (default); grid: every (low, high) "
        "pair of a 0.05 grid, Bonferroni (binomial p-values; --method is not used)",
    )
    parser.add_argument(
        "--clusters",
        choices=("query", "none"),
        default="query",
        help="query (default): every band must also pass a query-level test, so that the "
        "items of one query do not count as independent evidence (ltt, ltt-hb); none: items "
        "only",
    )
    parser.add_argument(
        "--calibrator",
        choices=PLAN_CALIBRATOR_KINDS,
        default="isotonic",
        help="calibration of the judge's P on the calibration queries (default isotonic)",
    )
    parser.add_argument(
        "--relevant-at", type=int, default=2, help="gold grade at or above which = relevant"
    )
    parser.add_argument(
        "--calibration-share",
        type=float,
        default=0.3,
        help="share of the sample's queries that fit the calibrator (the rest certify)",
    )
    parser.add_argument("--seed", type=int, default=0, help="query split seed")
    parser.add_argument("--out", type=Path, default=_OUT, help=f"plan file (default {_OUT})")
    parser.add_argument(
        "--plot", type=Path, default=None, help="PNG of the trade-off (default: OUT with .png)"
    )
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--no-progress", action="store_true")


def _items_digest(items: list[Any]) -> str:
    digest = hashlib.sha256()
    for item in items:
        row = [item.item_id, item.query_id, item.doc_id, item.query, item.chunk, item.gold]
        digest.update(json.dumps(row).encode() + b"\n")
    return digest.hexdigest()


def _judge_scores(settings: Settings, items: list[Any], *, progress: bool) -> list[float]:
    """The profile's relevance judge's P(relevant), in batches, in this process."""
    from ..ensemble import RelevanceItem, RelevanceJudge

    judge = RelevanceJudge.from_settings(settings)
    size = judge.max_items_per_request
    scores: list[float] = []
    for start in range(0, len(items), size):
        batch = items[start : start + size]
        verdicts = judge.judge([RelevanceItem(i.query, i.chunk, tuple(i.answers)) for i in batch])
        scores.extend(v.p_relevant for v in verdicts)
        if progress:
            print(f"  judged {len(scores)}/{len(items)}", file=sys.stderr, flush=True)
    return scores


def _from_input(args: argparse.Namespace, settings: Settings) -> _Sample:
    """Read the sample and score it with the profile's judge, in this process."""
    from ..jobs import ItemLimits, check_items, read_items

    judge = relevance_version(settings)
    if judge is None:
        raise FailedPreconditionError(
            "no relevance artifact: set ensemble.relevance_artifact (see docs/ensemble.md)"
        )
    spec = input_spec(args)
    items = read_items(spec)[: args.limit]
    kept, failed = check_items(items, ItemLimits.from_settings(settings))
    labelled = [i for i in kept if i.item_id not in failed and i.gold is not None]
    _check_sample(labelled, str(args.input), args.relevant_at)
    print(
        f"sample: {len(labelled)} labelled items of {_queries(labelled)} queries "
        f"({len(items) - len(labelled)} skipped: holes or items the pipeline refuses); "
        f"scoring with relevance judge {judge['version']} ...",
        flush=True,
    )
    scores = _judge_scores(settings, labelled, progress=not args.no_progress)
    return _Sample(labelled, scores, judge["version"], {**spec.describe(), "limit": args.limit})


def _from_job(args: argparse.Namespace, settings: Settings) -> _Sample:
    """The judge's P(relevant) a finished job recorded for its items with gold grades."""
    from ..jobs import JobStore

    url = args.database_url or settings.database_url
    store = JobStore.from_url(url)
    try:
        job = store.job(args.from_job)
        recorded = (job.settings or {}).get("relevance_artifact") or {}
        entries = [
            e
            for e in store.items(args.from_job, finished=True)
            if e.result is not None and e.result.p_relevant is not None and e.item.gold is not None
        ]
    finally:
        store.close()
    if not recorded.get("version"):
        raise FailedPreconditionError(
            f"job {args.from_job!r} records no relevance judge version: label the sample "
            "with `tribunal label run --mode judge` and plan from that job"
        )
    labelled = [e.item for e in entries]
    _check_sample(labelled, f"job {args.from_job!r}", args.relevant_at)
    print(
        f"sample: {len(labelled)} labelled items of {_queries(labelled)} queries from job "
        f"{args.from_job} (judge {recorded['version']})",
        flush=True,
    )
    return _Sample(
        labelled,
        [float(e.result.p_relevant) for e in entries],  # type: ignore[union-attr,arg-type]
        str(recorded["version"]),
        {**dict(job.source), "job": args.from_job},
    )


def _queries(items: list[Any]) -> int:
    return len({i.query_id or i.query for i in items})


def _check_sample(items: list[Any], where: str, relevant_at: int) -> None:
    if not items:
        raise InvalidArgumentError(
            f"{where} holds no item with a gold grade: a plan needs labelled items",
            field="input",
        )
    if not any(i.gold >= relevant_at for i in items):
        raise InvalidArgumentError(
            f"no item has gold grade >= {relevant_at}: for 0/1 labels pass --relevant-at 1",
            field="relevant_at",
        )


class _Sample:
    def __init__(
        self, items: list[Any], scores: list[float], judge: str, source: dict[str, Any]
    ) -> None:
        self.items, self.scores, self.judge, self.source = items, scores, judge, source


def run(args: argparse.Namespace) -> int:
    from ..jobs import JudgeBinding, fit_plan, plot_available, write_plan_plot

    if args.limit is not None and args.limit < 1:
        raise InvalidArgumentError("--limit must be >= 1", field="limit")
    settings = load_settings(args.profile)
    sample = _from_job(args, settings) if args.from_job else _from_input(args, settings)
    plan = fit_plan(
        sample.scores,
        [int(i.gold >= args.relevant_at) for i in sample.items],
        [i.query_id or i.query for i in sample.items],
        epsilon=args.epsilon,
        delta=args.delta,
        method=args.method,
        scheme=args.scheme,
        clusters=args.clusters,
        calibrator_kind=args.calibrator,
        calibration_share=args.calibration_share,
        seed=args.seed,
        judge=JudgeBinding(artifact_version=sample.judge, profile=settings.profile),
        data={
            "source": sample.source,
            "sha256": _items_digest(sample.items),
            "relevant_grade": args.relevant_at,
        },
    )
    plan.save(args.out)
    print(plan.summary())
    if plan.plain_human_share is not None:
        print(
            f"a plain band (observed error <= {args.epsilon:g}, no bound) would send "
            f"{plan.plain_human_share:.1%} to humans"
        )
    print(f"plan -> {args.out}")
    plot = args.plot or args.out.with_suffix(".png")
    if plot_available():
        write_plan_plot(plan, plot)
        print(f"plot -> {plot}")
    else:
        print("plot skipped: matplotlib is not installed (pip install 'tribunal[analysis]')")
    if plan.band is not None:
        print(f"label with it: tribunal label run --job NAME --input ITEMS --plan {args.out}")
    return 0


# ---- label run --plan ---------------------------------------------------------------


def plan_for_run(args: argparse.Namespace, store: Any) -> Any:
    """The plan a ``label run`` applies: ``--plan``, or the one a resumed job started with.

    Raises:
        InvalidArgumentError: a bad plan file, a plan with a mode other than cascade, a
            plan with ``--gateway``, or a resume with a plan other than the job's.
        FailedPreconditionError: a plan that certified no band.
    """
    from ..jobs import LabelPlan

    plan = LabelPlan.load(args.plan) if args.plan is not None else None
    if args.resume:
        recorded = store.job(args.job).settings.get("plan")
        if recorded is not None:
            started = LabelPlan.from_json(recorded["artifact"], source=f"job {args.job}")
            if plan is not None and plan.version != started.version:
                raise InvalidArgumentError(
                    f"job {args.job!r} runs plan {started.version}, not {plan.version}: resume "
                    "it without --plan (or with its own plan)",
                    field="plan",
                )
            plan = started
        elif plan is not None:
            raise InvalidArgumentError(
                f"job {args.job!r} was started without a plan: resume it without --plan",
                field="plan",
            )
    if plan is None:
        return None
    if args.mode not in (None, "cascade"):
        raise InvalidArgumentError(
            "--plan labels with the judge outside its band and sends the band to humans: "
            "leave --mode out",
            field="mode",
        )
    if args.gateway:
        raise InvalidArgumentError(
            "--plan applies its thresholds in this process (or with --ray); a remote "
            "--gateway labels with its own settings",
            field="plan",
        )
    if plan.band is None:
        raise FailedPreconditionError(
            f"{plan.summary()}: nothing to label automatically. Plan again with a larger "
            "--epsilon or a larger sample"
        )
    return plan


def apply_plan(settings: Settings, plan: Any, plan_path: str) -> Settings:
    """``settings`` labelling by ``plan``: its thresholds, the band to the human queue.

    Raises:
        FailedPreconditionError: the profile's relevance judge is not the plan's.
    """

    serving = relevance_version(settings)
    plan.check_judge(serving["version"] if serving else None, plan_path=plan_path)
    gateway = settings.gateway.model_copy(
        update={
            "label_relevant_at": plan.band.relevant_at,
            "label_irrelevant_at": plan.band.irrelevant_at,
            "label_band_to": "human",
        }
    )
    return settings.model_copy(update={"gateway": gateway})


def plan_provenance(plan: Any, path: Path | None) -> dict[str, Any]:
    """What a job records of its plan (the whole artifact: a resume re-applies it)."""
    return {
        "plan": {
            "version": plan.version,
            "path": str(path) if path else None,
            "artifact": plan.model_dump(mode="json"),
        }
    }


def report_plan(store: Any, job: str, plan: Any, report_path: Path | None) -> None:
    """Print who labelled what and the certified error; add it to ``--report``'s JSON."""
    from ..jobs import plan_job_report

    summary = plan_job_report(store, job, plan)
    print(summary.text())
    if report_path is not None and report_path.is_file():
        data = json.loads(report_path.read_text(encoding="utf-8"))
        data["plan"] = summary.to_json()
        report_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
