"""The job on Ray: Ray Data ``map_batches`` over an actor pool, results written as they come.

Each actor builds its own in-process :class:`PipelineLabeller` (the models load once per
actor); the pool has one actor per GPU of the cluster, or ``workers``. The driver reads
the labelled batches as the streaming executor produces them and writes each to the
store at once, so a killed job resumes exactly as a local one does.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..core import Settings
from ._heartbeat import LeaseHeartbeat
from ._items import LabelItem
from ._runner import JobProgress, RunReport, record_closing_status
from ._store import ItemResult, JobStore, runner_id

__all__ = ["pool_size", "run_on_ray"]

_NO_LABEL = -1


class LabelActor:
    """One pool member: a PipelineLabeller of its own; batches of columns in and out."""

    def __init__(self, settings: Settings, mode: str) -> None:
        from ._labeller import PipelineLabeller

        self.labeller = PipelineLabeller(settings, mode)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        items = [
            LabelItem(
                item_id=str(item_id),
                query=str(query),
                chunk=str(chunk),
                answers=tuple(json.loads(str(answers))),
            )
            for item_id, query, chunk, answers in zip(
                batch["item_id"], batch["query"], batch["chunk"], batch["answers"], strict=True
            )
        ]
        results = self.labeller.label(items)
        return {
            "item_id": [r.item_id for r in results],
            "label": [_NO_LABEL if r.label is None else r.label for r in results],
            "source": [r.source for r in results],
            "p_relevant": [math.nan if r.p_relevant is None else r.p_relevant for r in results],
            "outcome": [r.outcome for r in results],
            "tokens": [r.tokens for r in results],
            "seconds": [r.seconds for r in results],
            "escalation_id": [r.escalation_id for r in results],
            "audit_id": [r.audit_id for r in results],
            "error": [r.error for r in results],
        }


def _results(batch: dict[str, np.ndarray]) -> list[ItemResult]:
    return [
        ItemResult(
            item_id=str(batch["item_id"][i]),
            label=None if int(batch["label"][i]) == _NO_LABEL else int(batch["label"][i]),
            source=str(batch["source"][i]),
            p_relevant=None
            if math.isnan(batch["p_relevant"][i])
            else float(batch["p_relevant"][i]),
            outcome=str(batch["outcome"][i]),
            tokens=int(batch["tokens"][i]),
            seconds=float(batch["seconds"][i]),
            escalation_id=str(batch["escalation_id"][i]),
            audit_id=str(batch["audit_id"][i]),
            error=str(batch["error"][i]),
        )
        for i in range(len(batch["item_id"]))
    ]


def pool_size(resources: dict[str, float], workers: int | None) -> tuple[int, float, float]:
    """(actors, GPUs per actor, CPUs per actor): ``workers`` actors, else one per GPU
    (one when the cluster has none); GPUs and CPUs shared out evenly, at most one each."""
    gpus = float(resources.get("GPU", 0.0))
    cpus = float(resources.get("CPU", 1.0))
    size = workers if workers is not None else max(1, int(gpus))
    gpu_share = min(1.0, gpus / size) if gpus > 0 else 0.0
    cpu_share = max(0.1, min(1.0, cpus / size))
    return size, gpu_share, cpu_share


def _init_ray(address: str | None) -> None:
    loaded = sys.modules.get("ray")
    if loaded is not None and loaded.is_initialized():
        return
    env = {k: v for k, v in os.environ.items() if k.startswith("TRIBUNAL_")}
    if address:
        import ray

        ray.init(address=address, runtime_env={"env_vars": env}, logging_level=logging.WARNING)
        return
    # A throwaway cluster of this machine, as `tribunal serve deploy` starts one: Ray's
    # token auth with a token file in the build area (never ~/.ray), every port on
    # 127.0.0.1. RAY_AUTH_MODE set by the caller wins (it may be read already).
    from ..deploy._local import ray_node_address, set_ray_auth, start_ray_node

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = Path(os.environ.get("RAY_TMPDIR") or ".build/ray").resolve()
    temp_dir.mkdir(parents=True, exist_ok=True)
    auth = os.environ.get("RAY_AUTH_MODE", "token")
    # Before Ray is imported: its core library reads the auth mode when it loads.
    set_ray_auth("disabled" if auth == "disabled" else "token", temp_dir)
    start_ray_node(
        include_dashboard=False,
        _temp_dir=str(temp_dir),
        logging_level=logging.WARNING,
        runtime_env={"env_vars": env},
        **ray_node_address("127.0.0.1"),
    )


def run_on_ray(
    store: JobStore,
    job: str,
    settings: Settings,
    *,
    mode: str,
    workers: int | None = None,
    batch_size: int = 4,
    progress: bool = True,
    address: str | None = None,
    lease_s: float = 300.0,
) -> RunReport:
    """Label every pending item of ``job`` no other runner holds, on Ray (a local cluster
    unless ``address``), holding them under a lease renewed every ``lease_s`` / 3."""
    import ray

    _init_ray(address)
    context = ray.data.DataContext.get_current()
    # Our bar (rate, ETA, escalations, tokens) replaces Ray Data's progress output.
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    size, gpus, cpus = pool_size(ray.cluster_resources(), workers)  # type: ignore[no-untyped-call]
    report = RunReport(job=job, mode=mode, runner="ray", workers=size)
    # The items this run labels are leased to it, and the lease renewed by a heartbeat
    # while Ray works: other runners leave them alone, and `label status` sees it running.
    owner = runner_id()
    pending = store.counts(job).pending
    claimed = store.claim(job, owner, max(pending, 1), lease_s=lease_s) if pending else []
    report.claimed = len(claimed)
    rows = [
        {
            "item_id": item.item_id,
            "query": item.query,
            "chunk": item.chunk,
            "answers": json.dumps(list(item.answers)),
        }
        for item in claimed
    ]
    tracker = JobProgress(store, report, total=len(rows), show=progress)
    store.set_status(job, "running")
    heartbeat = LeaseHeartbeat(
        store, job, owner, [row["item_id"] for row in rows], lease_s=lease_s
    ).start()
    started = time.perf_counter()
    finished_ok = False
    try:
        if rows:
            labelled = ray.data.from_items(rows).map_batches(
                LabelActor,
                fn_constructor_kwargs={"settings": settings, "mode": mode},
                batch_size=batch_size,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=size),
                num_gpus=gpus,
                num_cpus=cpus,
            )
            for batch in labelled.iter_batches(batch_size=None, batch_format="numpy"):
                tracker.add(_results(batch))
        finished_ok = True
    finally:
        report.wall_seconds = time.perf_counter() - started
        tracker.close()
        heartbeat.stop()
        store.release(job, owner)
        report.remaining = store.counts(job).pending
        report.held_by_others = store.leased(job)
        record_closing_status(store, job, report, finished_ok=finished_ok)
    return report
