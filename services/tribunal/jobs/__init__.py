"""Bulk labelling jobs, human review of escalations, aggregation of human labels.

store = JobStore.from_url(settings.database_url)
store.create_job("dl19", mode="cascade", settings={...}, source=spec.describe())
store.add_items("dl19", read_items(spec))       # idempotent: keyed by (job, item_id)
report = run_job(store, "dl19", PipelineLabeller(settings, "cascade"), mode="cascade")
export_job(store, "dl19", labels=..., qrels=..., holes=..., escalations=...)

Items run through ``Gateway.Label``'s own pipeline; results are written once per item
(a guarded write), so a job killed at any point resumes without loss or duplicates.
"""

from typing import Any

from ._compare import JobComparison, compare_jobs, comparison_markdown
from ._heartbeat import LeaseHeartbeat
from ._inputs import (
    JSONL_FIELDS,
    InputSpec,
    ItemLimits,
    LabelItem,
    check_items,
    detect_format,
    read_beir,
    read_corpus,
    read_items,
    read_jsonl,
    read_qrels,
    read_run,
    read_topics,
    read_trec,
)
from ._labeller import (
    GatewayLabeller,
    Labeller,
    PartialBatchError,
    PipelineLabeller,
    failed_result,
    label_request,
    label_result,
)
from ._outputs import ExportCounts, export_job, final_label, qrels_ids
from ._plan import calibrate, fit_plan
from ._plan_artifact import PLAN_FORMAT, JudgeBinding, LabelPlan, replan_command
from ._plan_bands import BandOutcome, apply_band, band_outcome
from ._plan_report import PlanJobReport, plan_job_report
from ._review import (
    AttentionItem,
    ReviewItem,
    ReviewQueue,
    VoteResult,
    export_votes,
    item_view,
    load_attention,
    review_stats,
)
from ._review_tables import ReviewVoteRow
from ._runner import JobProgress, RunReport, batched, run_job
from ._store import (
    ItemResult,
    JobCounts,
    JobInfo,
    JobItem,
    JobStore,
    LeaseHolder,
    check_job_name,
    runner_id,
)
from ._tables import JobItemRow, LabelJobRow

__all__ = [
    "JSONL_FIELDS",
    "PLAN_FORMAT",
    "AggregationResult",
    "Agreement",
    "AttentionItem",
    "BandOutcome",
    "ExportCounts",
    "GatewayLabeller",
    "InputSpec",
    "ItemLimits",
    "ItemResult",
    "JobComparison",
    "JobCounts",
    "JobInfo",
    "JobItem",
    "JobItemRow",
    "JobProgress",
    "JobStore",
    "JudgeBinding",
    "LabelAggregator",
    "LabelItem",
    "LabelJobRow",
    "LabelPlan",
    "Labeller",
    "LeaseHeartbeat",
    "LeaseHolder",
    "Method",
    "PartialBatchError",
    "PipelineLabeller",
    "PlanJobReport",
    "ReviewItem",
    "ReviewQueue",
    "ReviewVoteRow",
    "RunReport",
    "VoteResult",
    "aggregate",
    "agreement",
    "apply_band",
    "band_outcome",
    "batched",
    "calibrate",
    "check_items",
    "check_job_name",
    "compare_jobs",
    "comparison_markdown",
    "create_app",
    "detect_format",
    "export_job",
    "export_votes",
    "failed_result",
    "final_label",
    "fit_plan",
    "item_view",
    "label_request",
    "label_result",
    "load_attention",
    "plan_job_report",
    "qrels_ids",
    "read_beir",
    "read_corpus",
    "read_items",
    "read_jsonl",
    "read_qrels",
    "read_run",
    "read_topics",
    "read_trec",
    "read_votes",
    "replan_command",
    "review_server",
    "review_stats",
    "run_job",
    "runner_id",
]


_AGGREGATION = frozenset(
    (
        "AggregationResult",
        "Agreement",
        "LabelAggregator",
        "Method",
        "aggregate",
        "agreement",
        "read_votes",
    )
)


def __getattr__(name: str) -> Any:
    # Imported on first use, so that importing the jobs domain pulls in neither a web
    # server nor the analysis stack: the review web app is the adapter (Starlette,
    # uvicorn: the `review` extra); vote aggregation needs pandas and crowd-kit (the
    # `analysis` extra).
    if name in ("create_app", "review_server"):
        from . import _review_web

        return getattr(_review_web, name)
    if name in _AGGREGATION:
        from . import _aggregate

        return getattr(_aggregate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
