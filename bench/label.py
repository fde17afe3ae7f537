"""Judge-mode label jobs: one item at a time (the old path) vs a batch at once (the job
now), against the relevance judge's embedder alone on the same texts; and ``label run
--plan`` jobs (a cascade whose band goes to humans: the judge alone) before and after
they batched like judge mode.

Both paths run real label jobs (``run_job``: leases, the job store, the audit row of
every item) through ``Gateway.Label``'s pipeline in this process, on the same TREC DL
2019 (query, passage) pairs in the file's order (a query's ~100 passages together):

- **old**: items labelled one after the other, each embedding its query and passage in
  its own forward pass (``retrieval.micro_batch_texts: 1``, no memory of recent
  texts), batches of 4 items — what a judge-mode job did before.
- **new**: the job's defaults now: 64 items per batch, 32 at a time, their embeddings
  gathered into shared forward passes; a query's vector computed once and reused.
- **plan-old** / **plan**: the next ``--items`` pairs of the file (not the judge paths'
  ones: the job's embedder remembers recent texts, which would spare a plan job the
  embeddings a judge job just computed) as a ``label run --plan`` job labels them
  (cascade mode, ``gateway.label_band_to: human``, the judge artifact's own band as the
  plan's thresholds, items in the band queued for humans): one item at a time in
  batches of 4 (what ``--plan`` did before), and its defaults now (as judge mode).
- **limit**: the judge's embedder alone (no job, no gRPC, no cache) embedding each
  distinct query once and every passage, in batches of 64, before and after the jobs.

The items are split into rounds labelled by each path in turn (old, new, old, ...), so
load on the shared machine hits both. The labels of the two paths are compared item by
item.

    .venv/bin/python bench/label.py [--items 400] [--rounds 4] [--paths new plan]
        [--out .build/bench/label.json]

Prints items/s of each path and the ratios new / old, plan / new (judge mode) and
plan / plan-old, of the paths run (``--paths``, default all four; the one-at-a-time
paths are the slow ones, so a measurement of the batched paths alone can leave them out).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tribunal.core import Settings, load_settings
from tribunal.embedding import load_profile_embedder
from tribunal.ensemble import RelevanceArtifact, relevance_artifact_path
from tribunal.jobs import JobStore, LabelItem, PipelineLabeller, read_jsonl, run_job

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019"
BATCH = 64
PATHS = ("old", "new", "plan-old", "plan")


def _limit(settings: Settings, items: list[LabelItem]) -> float:
    """Items/s of the judge's embedder alone over the items' distinct queries and passages."""
    artifact = RelevanceArtifact.load(relevance_artifact_path(settings))
    [key] = {feature.model_key for feature in artifact.features if feature.kind == "cosine"}
    embedder = load_profile_embedder(settings, key)
    texts = list(dict.fromkeys(item.query for item in items)) + [item.chunk for item in items]
    embedder.embed(texts[:BATCH])  # warm-up
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        embedder.embed(texts[start : start + BATCH])
    return len(items) / (time.perf_counter() - started)


def _job(store: JobStore, name: str, items: list[LabelItem], mode: str) -> None:
    store.create_job(name, mode=mode, settings={}, source={"bench": "label"})
    store.add_items(name, items)


def _report(
    args: argparse.Namespace,
    store: JobStore,
    *,
    paths: dict[str, dict[str, Any]],
    limits: list[float],
    load: list[tuple[float, float, float]],
    count: int,
) -> None:
    """Prints the table and ratios of the paths run; writes them to ``args.out``."""
    labels = {
        name: {
            row.item.item_id: row.result.label if row.result is not None else None
            for number in range(1, args.rounds + 1)
            for row in store.items(f"{name}-{number}")
        }
        for name in paths
    }
    limit = sum(limits) / len(limits)
    rates = {name: count / path["seconds"] for name, path in paths.items()}
    loads = ", ".join(f"{one:.1f}" for one, _, _ in load)
    print(f"\n{count} TREC DL 2019 pairs per path (1-min load average: {loads}):")
    print("| path | items/s | share of the limit |\n|---|---|---|")
    for name, label in (
        ("old", "old: one item at a time"),
        ("new", "new: batched job"),
        ("plan-old", "label run --plan, before: one item at a time"),
        ("plan", "label run --plan, now: batched"),
    ):
        if name in rates:
            print(f"| {label} | {rates[name]:.1f} | {rates[name] / limit:.0%} |")
    print(
        f"| limit: the judge's embedder alone, batched | {limit:.1f} | 100% |\n"
        f"(limit before {limits[0]:.1f}, after {limits[1]:.1f} items/s)"
    )
    summary: dict[str, Any] = {
        "items": count,
        "rounds": args.rounds,
        "paths": list(paths),
        "items_per_s": rates,
        "rounds_items_per_s": {name: path["rounds"] for name, path in paths.items()},
        "limit_items_per_s": limits,
        "load": load,
    }
    if "new" in rates:
        summary["share_of_limit"] = rates["new"] / limit
    for a, b, same_key, what in (
        ("new", "old", "identical_labels", "identical labels"),
        ("plan", "new", None, ""),
        ("plan", "plan-old", "plan_same_routing", "the same routing"),
    ):
        if a not in rates or b not in rates:
            continue
        names = {"new": "judge mode (new)"}
        line = f"{a} / {names.get(b, b)}: {rates[a] / rates[b]:.2f}x"
        summary[f"{a}_over_{b}".replace("-", "_")] = rates[a] / rates[b]
        if same_key is not None:
            same = sum(labels[a][key] == labels[b].get(key) for key in labels[a])
            summary[same_key] = same
            line += f"; {what} on {same} of {len(labels[a])} items"
        print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--data", type=Path, default=SHARED / "dl19_judged_pairs.jsonl")
    parser.add_argument("--out", type=Path, default=Path(".build/bench/label.json"))
    parser.add_argument(
        "--paths", nargs="+", choices=PATHS, default=list(PATHS), help="the paths to run"
    )
    args = parser.parse_args()

    items = read_jsonl(args.data, {"chunk": "passage", "query_id": "qid", "doc_id": "pid"})
    # The plan paths label the next ``--items`` rows, not the judge paths' items: the
    # job's embedder keeps recently embedded texts, so a plan job run after a judge
    # job on the same passages would skip their embeddings and look many times faster.
    plan_items = items[args.items : 2 * args.items]
    items = items[: args.items]
    if len(plan_items) < len(items):
        raise SystemExit(f"{args.data} has under {2 * args.items} rows")
    Path(".build").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="label-bench-", dir=".build"))
    settings = load_settings(
        "tiny",
        data_dir=str(workdir),
        server={"port": 0, "metrics_port": None},
    )
    old_settings = settings.model_copy(
        update={
            "retrieval": settings.retrieval.model_copy(
                update={"micro_batch_texts": 1, "shared_recent_texts": 0}
            )
        }
    )
    artifact = RelevanceArtifact.load(relevance_artifact_path(settings))
    plan_settings = settings.model_copy(
        update={
            "gateway": settings.gateway.model_copy(
                update={
                    "label_relevant_at": artifact.band_high,
                    "label_irrelevant_at": artifact.band_low,
                    "label_band_to": "human",
                }
            )
        }
    )
    store = JobStore.from_url(settings.database_url)
    plan_old_settings = plan_settings.model_copy(update={"retrieval": old_settings.retrieval})
    every: dict[str, tuple[Settings, str, int, int | None]] = {
        # (settings, mode, batch size, concurrency: None for the job's default)
        "old": (old_settings, "judge", 4, 1),
        "new": (settings, "judge", BATCH, None),
        # As the old judge path: no memory of recent texts, which would otherwise hand the
        # next plan job every vector it needs.
        "plan-old": (plan_old_settings, "cascade", 4, 1),
        "plan": (plan_settings, "cascade", BATCH, None),
    }
    # Only the paths asked for get a labeller (each loads its embedder).
    paths: dict[str, dict[str, Any]] = {}
    for name in PATHS:
        if name in args.paths:
            path_settings, mode, batch, concurrency = every[name]
            extra = {} if concurrency is None else {"concurrency": concurrency}
            paths[name] = {
                "labeller": PipelineLabeller(path_settings, mode, **extra),
                "batch": batch,
                "mode": mode,
            }
    load = [os.getloadavg()]
    limits = [_limit(settings, items)]
    print(f"  limit: {limits[0]:.1f} items/s", flush=True)
    size = -(-len(items) // args.rounds)
    try:
        for number, start in enumerate(range(0, len(items), size), start=1):
            for name, path in paths.items():
                chunk = (plan_items if name.startswith("plan") else items)[start : start + size]
                job = f"{name}-{number}"
                _job(store, job, chunk, path["mode"])
                report = run_job(
                    store,
                    job,
                    path["labeller"],
                    mode=path["mode"],
                    batch_size=path["batch"],
                    progress=False,
                )
                path.setdefault("seconds", 0.0)
                path["seconds"] += report.wall_seconds
                path.setdefault("rounds", []).append(len(chunk) / report.wall_seconds)
                print(
                    f"  round {number}: {name} {len(chunk) / report.wall_seconds:6.1f} items/s",
                    flush=True,
                )
            load.append(os.getloadavg())
    finally:
        for path in paths.values():
            path["labeller"].close()
    limits.append(_limit(settings, items))
    load.append(os.getloadavg())

    _report(args, store, paths=paths, limits=limits, load=load, count=len(items))
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
