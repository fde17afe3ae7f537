"""``tribunal ensemble train|evaluate|export-signals``: the matching ensemble.

All three read a labelled, judged matching set (the folder format of
:mod:`tribunal.ensemble`; the lab's ``tribunal-lab dataset matching`` builds one).
``train`` fits every aggregator on a seeded split and writes the
versioned artifact the service loads; ``evaluate`` reports RAL2M's Table 3 (mean ± sd
over seeds) and the ensemble-size ablation (Table 7); ``export-signals`` writes the
validation and test items of an artifact's split as confidence-service signals.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..core.settings import AGGREGATOR_NAMES

__all__ = ["register"]

_DATASET = Path(".build/ensemble/dataset")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("ensemble", help="LLM judge ensembles: train, evaluate, export")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    train = actions.add_parser(
        "train",
        help="fit every aggregator on a seeded split and write the versioned artifact",
        description="Split the judged items (seeded; by query; 60/20/20 train/validation/test), "
        "fit each judge's vote threshold and every aggregator on train, select epochs and "
        "hyperparameters on validation, report validation and test, write the artifact.",
    )
    train.add_argument("--dataset", type=Path, default=_DATASET, help="dataset folder")
    train.add_argument("--seed", type=int, default=0, help="split and initialisation seed")
    train.add_argument(
        "--out", type=Path, default=None, help="artifact folder (default: the service's)"
    )
    _model_options(train)
    train.add_argument(
        "--default-aggregator",
        choices=AGGREGATOR_NAMES,
        default="latent",
        help="the artifact's default (export-signals uses it; the service uses "
        "ensemble.aggregator)",
    )
    train.add_argument("--profile", default=None, help="profile name or YAML path")
    train.set_defaults(func=_train)

    evaluate = actions.add_parser(
        "evaluate",
        help="RAL2M Table 3 (mean ± sd over seeds) and the ensemble-size ablation (Table 7)",
    )
    evaluate.add_argument("--dataset", type=Path, default=_DATASET, help="dataset folder")
    evaluate.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    evaluate.add_argument(
        "--with-probabilities",
        action="store_true",
        help="also rows for learned aggregators reading P(yes) instead of votes",
    )
    evaluate.add_argument("--no-ablation", action="store_true", help="skip Table 7")
    evaluate.add_argument("--order-seed", type=int, default=0, help="ablation judge order")
    evaluate.add_argument(
        "--out", type=Path, default=Path(".build/ensemble/eval.json"), help="JSON (+ .md beside)"
    )
    _model_options(evaluate)
    evaluate.set_defaults(func=_evaluate)

    export = actions.add_parser(
        "export-signals",
        help="validation and test items of an artifact's split as confidence signals (JSONL)",
        description="One row per item: {id, split, source, signals: {retrieval_score, "
        "retrieval_rank, dense_score, sparse_score, judge_p_yes: {judge: p}, "
        "ensemble_p_match}, label}; signals an item lacks (STS-B has no retrieval) are left "
        "out. `tribunal confidence fit|evaluate --data F` reads it.",
    )
    export.add_argument("--artifact", type=Path, required=True, help="artifact folder")
    export.add_argument("--dataset", type=Path, default=None, help="default: the artifact's")
    export.add_argument("--out", type=Path, required=True, help="JSONL to write")
    export.add_argument("--aggregator", default=None, help="default: the artifact's default")
    export.add_argument(
        "--splits",
        nargs="+",
        default=["validation", "test"],
        choices=("train", "validation", "test"),
    )
    export.set_defaults(func=_export_signals)


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inputs",
        choices=("votes", "probabilities"),
        default="votes",
        help="per-judge input of the learned aggregators (RAL2M: votes)",
    )
    parser.add_argument("--judges", nargs="+", default=None, help="only these judges")
    parser.add_argument(
        "--max-epochs", type=int, default=None, help="epoch cap of the torch aggregators"
    )


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    if args.max_epochs is None:
        return {}
    return {name: {"max_epochs": args.max_epochs} for name in ("neural", "latent")}


def _train(args: argparse.Namespace) -> int:
    from ..core import load_settings
    from ..ensemble import load_matching_data, train_artifact

    settings = load_settings(args.profile)
    data = load_matching_data(args.dataset, args.judges)
    manifest = json.loads((args.dataset / "manifest.json").read_text(encoding="utf-8"))
    artifact = train_artifact(
        data,
        args.seed,
        inputs=args.inputs,
        default_aggregator=args.default_aggregator,
        embedder=manifest["embedder"],
        dataset=str(args.dataset),
        overrides=_overrides(args),
    )
    out = args.out or settings.ensemble.artifact_path or settings.data_dir / "ensemble" / "artifact"
    version = artifact.save(out)
    sizes = artifact.data["split_sizes"]
    print(
        f"{len(data)} items ({data.skipped} not yet judged by every judge left out); "
        f"split seed {args.seed}: {sizes}"
    )
    print("| aggregator | split | Acc | Hallu | Precision | F1 |")
    print("|---|---|---|---|---|---|")
    for name, one in artifact.metrics["aggregators"].items():
        for split in ("validation", "test"):
            m = one[split]
            print(
                f"| {name} | {split} | {m['accuracy']:.3f} | {m['hallucination']:.3f} | "
                f"{m['precision']:.3f} | {m['f1']:.3f} |"
            )
    print(f"wrote artifact {version} to {out}")
    return 0


def _pm(values: tuple[float, float], percent: bool) -> str:
    mean, sd = values
    return f"{100 * mean:.1f} ± {100 * sd:.1f}" if percent else f"{mean:.3f} ± {sd:.3f}"


def _evaluate(args: argparse.Namespace) -> int:
    import datetime as dt
    import sys
    import time

    from ..ensemble import ablation, load_matching_data, summarise, train_artifact

    started = time.perf_counter()
    data = load_matching_data(args.dataset, args.judges)
    runs = [
        train_artifact(data, seed, inputs=args.inputs, overrides=_overrides(args))
        for seed in args.seeds
    ]
    extra = []
    if args.with_probabilities and args.inputs == "votes":
        extra = [
            train_artifact(
                data,
                seed,
                inputs="probabilities",
                overrides=_overrides(args),
                only=("weighted", "neural", "latent"),
            )
            for seed in args.seeds
        ]
    table: list[dict[str, Any]] = []

    def add(label: str, per_seed: list[dict[str, float]]) -> None:
        row: dict[str, Any] = {"method": label}
        for metric in ("accuracy", "hallucination", "precision", "f1"):
            row[metric] = summarise([m[metric] for m in per_seed])
        table.append(row)

    for judge in data.judges:
        add(f"judge {judge}", [r.metrics["judges"][judge]["test"] for r in runs])
    for name in ("majority", "weighted", "neural", "latent"):
        add(name, [r.metrics["aggregators"][name]["test"] for r in runs])
    for name in ("weighted", "neural", "latent"):
        if extra:
            add(f"{name} (P(yes) inputs)", [r.metrics["aggregators"][name]["test"] for r in extra])
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "command": "tribunal " + " ".join(sys.argv[1:]),
        "dataset": str(args.dataset),
        "items": len(data),
        "items_not_fully_judged": data.skipped,
        "positives": int(data.labels.sum()),
        "sources": _source_counts(data),
        "judges": list(data.judges),
        "seeds": args.seeds,
        "split_sizes": runs[0].data["split_sizes"],
        "inputs": args.inputs,
        "selected": {
            name: [r.aggregators[name].fit_info_ for r in runs]
            for name in ("weighted", "neural", "latent")
        },
        "table3": table,
    }
    if not args.no_ablation and len(data.judges) > 2:
        report["table7"] = ablation(
            data,
            args.seeds,
            order_seed=args.order_seed,
            inputs=args.inputs,
            overrides=_overrides(args),
        )
    report["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    text = _markdown(report)
    args.out.with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def _source_counts(data: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for item in data.items:
        one = out.setdefault(item.source, {"items": 0, "positives": 0})
        one["items"] += 1
        one["positives"] += item.label
    return out


def _markdown(report: dict[str, Any]) -> str:
    sizes = report["split_sizes"]
    lines = [
        f"Ensemble matching, {report['items']} items ({report['positives']} matches; "
        f"{report['items_not_fully_judged']} not yet judged by every judge left out), "
        f"test split of {sizes['test']} per seed, seeds {report['seeds']} (each seed "
        f"re-draws the split and the initialisation), {report['date']}",
        "",
        "| method | Acc (%) | Hallu (%) | Precision | F1 |",
        "|---|---|---|---|---|",
    ]
    for row in report["table3"]:
        lines.append(
            f"| {row['method']} | {_pm(row['accuracy'], True)} | "
            f"{_pm(row['hallucination'], True)} | {_pm(row['precision'], False)} | "
            f"{_pm(row['f1'], False)} |"
        )
    if "table7" in report:
        lines += [
            "",
            f"Ensemble size (judges added in the order {report['table7']['order']}):",
            "",
            "| judges | latent Acc (%) | latent Hallu (%) | majority Acc (%) "
            "| majority Hallu (%) |",
            "|---|---|---|---|---|",
        ]
        for row in report["table7"]["rows"]:
            lines.append(
                f"| {row['size']} | {_pm(row['latent_accuracy'], True)} | "
                f"{_pm(row['latent_hallucination'], True)} | "
                f"{_pm(row['majority_accuracy'], True)} | "
                f"{_pm(row['majority_hallucination'], True)} |"
            )
    return "\n".join(lines) + "\n"


def _export_signals(args: argparse.Namespace) -> int:
    import numpy as np

    from ..core import FailedPreconditionError
    from ..ensemble import EnsembleArtifact, load_matching_data, split_data

    artifact = EnsembleArtifact.load(args.artifact)
    dataset = args.dataset or Path(artifact.data["dataset"])
    data = load_matching_data(dataset, artifact.judges)
    if data.sha256 != artifact.data["sha256"]:
        raise FailedPreconditionError(
            f"{dataset} is not the data artifact {artifact.version} was trained on (its judged "
            "items changed since); retrain, or pass the dataset it was trained on",
            field="dataset",
        )
    split = split_data(data, int(artifact.data["split_seed"]))
    aggregator = artifact.aggregator(args.aggregator)
    p_match = aggregator.predict_proba(artifact.inputs(data.p_yes, data.embeddings))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with args.out.open("w", encoding="utf-8") as handle:
        for split_name in args.splits:
            for index in getattr(split, split_name):
                item = data.items[int(index)]
                signals: dict[str, Any] = dict(item.retrieval_signals())
                signals["judge_p_yes"] = {
                    judge: float(data.p_yes[index, column])
                    for column, judge in enumerate(artifact.judges)
                }
                signals["ensemble_p_match"] = float(np.clip(p_match[index], 0.0, 1.0))
                row = {
                    "id": item.id,
                    "split": split_name,
                    "source": item.source,
                    "signals": signals,
                    "label": item.label,
                }
                handle.write(json.dumps(row) + "\n")
                written += 1
    print(
        f"wrote {written} rows ({', '.join(args.splits)} of split seed "
        f"{artifact.data['split_seed']}; aggregator {aggregator.name}, artifact "
        f"{artifact.version}) to {args.out}"
    )
    return 0
