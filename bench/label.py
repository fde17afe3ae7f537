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

    .venv/bin/python bench/label.py [--items 400] [--rounds 4] [--out .build/bench/label.json]

Prints items/s of each path and the ratios new / old, plan / new (judge mode) and
plan / plan-old.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--data", type=Path, default=SHARED / "dl19_judged_pairs.jsonl")
    parser.add_argument("--out", type=Path, default=Path(".build/bench/label.json"))
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
    paths: dict[str, Any] = {
        "old": {
            "labeller": PipelineLabeller(old_settings, "judge", concurrency=1),
            "batch": 4,
            "mode": "judge",
        },
        "new": {"labeller": PipelineLabeller(settings, "judge"), "batch": BATCH, "mode": "judge"},
        "plan-old": {
            # As the old judge path: no memory of recent texts, which would otherwise
            # hand the next plan job every vector it needs.
            "labeller": PipelineLabeller(
                plan_settings.model_copy(update={"retrieval": old_settings.retrieval}),
                "cascade",
                concurrency=1,
            ),
            "batch": 4,
            "mode": "cascade",
        },
        "plan": {
            "labeller": PipelineLabeller(plan_settings, "cascade"),
            "batch": BATCH,
            "mode": "cascade",
        },
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
                print(
                    f"  round {number}: {name} {len(chunk) / report.wall_seconds:6.1f} items/s",
                    flush=True,
                )
    finally:
        for path in paths.values():
            path["labeller"].close()
    limits.append(_limit(settings, items))
    load.append(os.getloadavg())

    labels = {
        name: {
            row.item.item_id: row.result.label if row.result is not None else None
            for number in range(1, args.rounds + 1)
            for row in store.items(f"{name}-{number}")
        }
        for name in paths
    }
    same = sum(labels["old"][key] == labels["new"].get(key) for key in labels["old"])
    same_plan = sum(labels["plan"][key] == labels["plan-old"].get(key) for key in labels["plan"])
    limit = sum(limits) / len(limits)
    print(f"\n{len(items)} TREC DL 2019 pairs, judge mode (load {load[0]} -> {load[1]}):")
    print("| path | items/s | share of the limit |\n|---|---|---|")
    rates = {name: len(items) / path["seconds"] for name, path in paths.items()}
    for name, label in (
        ("old", "old: one item at a time"),
        ("new", "new: batched job"),
        ("plan-old", "label run --plan, before: one item at a time"),
        ("plan", "label run --plan, now: batched"),
    ):
        print(f"| {label} | {rates[name]:.1f} | {rates[name] / limit:.0%} |")
    print(
        f"| limit: the judge's embedder alone, batched | {limit:.1f} | 100% |\n"
        f"(limit before {limits[0]:.1f}, after {limits[1]:.1f} items/s)\n"
        f"new / old: {rates['new'] / rates['old']:.1f}x; identical labels on {same} of "
        f"{len(labels['old'])} items\n"
        f"plan / judge mode (new): {rates['plan'] / rates['new']:.2f}x; plan / plan-old: "
        f"{rates['plan'] / rates['plan-old']:.1f}x; plan and plan-old route the same on "
        f"{same_plan} of {len(labels['plan'])} items"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "items": len(items),
                "items_per_s": rates,
                "limit_items_per_s": limits,
                "share_of_limit": rates["new"] / limit,
                "identical_labels": same,
                "plan_over_judge": rates["plan"] / rates["new"],
                "plan_over_plan_old": rates["plan"] / rates["plan-old"],
                "plan_same_routing": same_plan,
                "load": load,
            },
            indent=2,
        )
    )
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
