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

from ._aggregate import (
    AggregationResult,
    Agreement,
    LabelAggregator,
    Method,
    aggregate,
    agreement,
    read_votes,
)
from ._compare import JobComparison, compare_jobs, comparison_markdown
from ._crowdrag import (
    CROWDRAG_DIMENSIONS,
    CROWDRAG_PAPER_ALPHA,
    CrowdRagRatings,
    DimensionReport,
    read_crowdrag,
    reproduce_crowdrag,
    reproduction_markdown,
)
from ._inputs import (
    JSONL_FIELDS,
    InputSpec,
    LabelItem,
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
    MODES,
    GatewayLabeller,
    Labeller,
    PipelineLabeller,
    label_request,
    label_result,
    stages_for_mode,
)
from ._outputs import ExportCounts, export_job, final_label, qrels_ids
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
from ._store import ItemResult, JobCounts, JobInfo, JobItem, JobStore, check_job_name
from ._tables import JobItemRow, LabelJobRow

__all__ = [
    "CROWDRAG_DIMENSIONS",
    "CROWDRAG_PAPER_ALPHA",
    "JSONL_FIELDS",
    "MODES",
    "AggregationResult",
    "Agreement",
    "AttentionItem",
    "CrowdRagRatings",
    "DimensionReport",
    "ExportCounts",
    "GatewayLabeller",
    "InputSpec",
    "ItemResult",
    "JobComparison",
    "JobCounts",
    "JobInfo",
    "JobItem",
    "JobItemRow",
    "JobProgress",
    "JobStore",
    "LabelAggregator",
    "LabelItem",
    "LabelJobRow",
    "Labeller",
    "Method",
    "PipelineLabeller",
    "ReviewItem",
    "ReviewQueue",
    "ReviewVoteRow",
    "RunReport",
    "VoteResult",
    "aggregate",
    "agreement",
    "batched",
    "check_job_name",
    "compare_jobs",
    "comparison_markdown",
    "create_app",
    "detect_format",
    "export_job",
    "export_votes",
    "final_label",
    "item_view",
    "label_request",
    "label_result",
    "load_attention",
    "qrels_ids",
    "read_beir",
    "read_corpus",
    "read_crowdrag",
    "read_items",
    "read_jsonl",
    "read_qrels",
    "read_run",
    "read_topics",
    "read_trec",
    "read_votes",
    "reproduce_crowdrag",
    "reproduction_markdown",
    "review_server",
    "review_stats",
    "run_job",
    "stages_for_mode",
]


def __getattr__(name: str) -> Any:
    # The review web app is the adapter (Starlette, uvicorn): imported on first use, so
    # importing the jobs domain does not pull in a web server.
    if name in ("create_app", "review_server"):
        from . import _review_web

        return getattr(_review_web, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
