"""Bulk labelling jobs, human review of escalations, aggregation of human labels.

store = JobStore.from_url(settings.database_url)
store.create_job("dl19", mode="cascade", settings={...}, source=spec.describe())
store.add_items("dl19", read_items(spec))       # idempotent: keyed by (job, item_id)
report = run_job(store, "dl19", PipelineLabeller(settings, "cascade"), mode="cascade")
export_job(store, "dl19", labels=..., qrels=..., holes=..., escalations=...)

Items run through ``Gateway.Label``'s own pipeline; results are written once per item
(a guarded write), so a job killed at any point resumes without loss or duplicates.
"""

from typing import TYPE_CHECKING, Any

from ._compare import compare_jobs, comparison_markdown
from ._inputs import (
    InputSpec,
    ItemLimits,
    check_items,
    detect_format,
    read_items,
    read_jsonl,
)
from ._items import LabelItem
from ._labeller import GatewayLabeller, Labeller, PipelineLabeller
from ._outputs import export_job
from ._plan import fit_plan
from ._plan_artifact import JudgeBinding, LabelPlan
from ._plan_bands import BandOutcome, band_outcome
from ._plan_plot import plot_available, write_plan_plot
from ._plan_report import plan_job_report
from ._ray import run_on_ray
from ._review import ReviewQueue, debate_rounds, export_votes, load_attention, review_stats
from ._review_annotators import AnnotatorRegistry
from ._runner import run_job
from ._store import JobStore, check_job_name

if TYPE_CHECKING:
    from ._aggregate import aggregate, read_votes
    from ._review_web import review_server

__all__ = [
    "AnnotatorRegistry",
    "BandOutcome",
    "GatewayLabeller",
    "InputSpec",
    "ItemLimits",
    "JobStore",
    "JudgeBinding",
    "LabelItem",
    "LabelPlan",
    "Labeller",
    "PipelineLabeller",
    "ReviewQueue",
    "aggregate",
    "band_outcome",
    "check_items",
    "check_job_name",
    "compare_jobs",
    "comparison_markdown",
    "debate_rounds",
    "detect_format",
    "export_job",
    "export_votes",
    "fit_plan",
    "load_attention",
    "plan_job_report",
    "plot_available",
    "read_items",
    "read_jsonl",
    "read_votes",
    "review_server",
    "review_stats",
    "run_job",
    "run_on_ray",
    "write_plan_plot",
]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that importing the jobs domain pulls in neither a web
    # server nor the analysis stack: the review web app is the adapter (Starlette,
    # uvicorn: the `review` extra); vote aggregation needs pandas and crowd-kit (the
    # `analysis` extra).
    if name == "review_server":
        from . import _review_web

        return _review_web.review_server
    if name in ("aggregate", "read_votes"):
        from . import _aggregate

        return getattr(_aggregate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
