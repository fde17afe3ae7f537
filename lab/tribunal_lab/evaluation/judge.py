"""Single yes/no LLM judge baselines: SciFact support and TREC DL 2019 relevance.

The judge reads P(yes) from one forward pass (:meth:`tribunal.core.llm.LLMEngine.judge`)
with a registered prompt (``entailment/support``, ``relevance/yesno``):

- ``scifact``: ``--scifact-pairs`` pairs (0: all 919) of ``scifact/nli_pairs_train.jsonl``
  drawn with ``--seed``; positive = SUPPORT, negative = CONTRADICT or NOT_ENOUGH_INFO;
  the abstract (title + text, ~350 tokens) is the evidence.
- ``trec-dl``: ``--trec-pairs`` pairs of ``trec-dl-2019/dl19_judged_pairs.jsonl`` drawn
  with ``--seed``; positive = NIST grade ≥ 2 (the TREC DL convention).

Reported per set: balanced accuracy and class recalls at P(yes) ≥ 0.5, AUROC (with
95% bootstrap intervals), ECE, Brier, balanced accuracy with the threshold chosen
on the other half (2-fold cross-fit: the ranking with a calibrated threshold), and
seconds per item. Each item's result is appended to a JSONL cache as it is done,
so a killed run continues where it stopped. Writes JSON and a markdown table.

    tribunal-lab eval judge [--backend llamacpp] [--sets scifact trec-dl] [--limit N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import read_jsonl
from .._paths import cache_dir, data_root

__all__ = ["Item", "add_arguments", "load_items", "run"]

SETS = ("scifact", "trec-dl")
_PROMPTS = {"scifact": "entailment/support@1", "trec-dl": "relevance/yesno@1"}
_KIND_SET = {"entailment": "scifact", "relevance": "trec-dl"}
"""A labelled file is judged with the prompt of the development set of its kind."""


@dataclass(frozen=True)
class Item:
    """One labelled pair and the prompt fields that judge it."""

    id: str
    label: int
    fields: dict[str, str]
    group: str
    """Items of one group share prompt text (e.g. the same abstract) and run together."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--model", default="llm_strong", help="model key of the profile")
    parser.add_argument(
        "--backend",
        choices=("transformers", "llamacpp", "openai"),
        default=None,
        help="LLM backend (default: the profile's llm_backend)",
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root(),
        help="a labelled FILE of relevance or entailment pairs (docs/evaluation.md), or the "
        "data sets FOLDER for --sets",
    )
    parser.add_argument(
        "--relevant-at", type=int, default=2, help="graded relevance files: relevant at/above"
    )
    parser.add_argument("--trec-pairs", type=int, default=300, help="TREC DL pairs to sample")
    parser.add_argument(
        "--scifact-pairs",
        type=int,
        default=300,
        help="SciFact pairs to sample (0: all 919; ~7 s each on 2 CPU cores)",
    )
    parser.add_argument("--seed", type=int, default=13, help="sampling seed")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items a set")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/eval/judge.json"),
        help="JSON report (the markdown table goes beside it, .md)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=cache_dir("judge"),
        help="per-item results, appended as they finish (a rerun resumes; default "
        "$TRIBUNAL_LAB_CACHE/judge or .build/lab-cache/judge)",
    )


def load_items(
    name: str,
    data: Path,
    *,
    trec_pairs: int = 300,
    scifact_pairs: int = 0,
    seed: int = 13,
    relevant_at: int = 2,
) -> list[Item]:
    """The labelled items of set ``name`` (sampled with ``seed``), in a prefix-friendly order.

    ``data`` may be a labelled file instead of the data sets folder: relevance pairs for
    ``trec-dl``, entailment pairs for ``scifact``, sampled with the same counts."""
    if data.is_file():
        items = file_items(data, name, relevant_at=relevant_at)
        count = trec_pairs if name == "trec-dl" else scifact_pairs
        if 0 < count < len(items):
            items = random.Random(seed).sample(items, count)
    elif name == "scifact":
        items = [
            Item(
                id=f"{row['claim_id']}:{row['doc_id']}",
                label=int(row["label"] == "SUPPORT"),
                fields={
                    "evidence": f"{row['title']}\n{row['evidence_text']}",
                    "claim": row["claim"],
                },
                group=str(row["doc_id"]),
            )
            for row in read_jsonl(data / "scifact" / "nli_pairs_train.jsonl")
        ]
        if 0 < scifact_pairs < len(items):
            items = random.Random(seed).sample(items, scifact_pairs)
    elif name == "trec-dl":
        rows = list(read_jsonl(data / "trec-dl-2019" / "dl19_judged_pairs.jsonl"))
        sample = random.Random(seed).sample(rows, min(trec_pairs, len(rows)))
        items = [
            Item(
                id=f"{row['qid']}:{row['pid']}",
                label=int(int(row["relevance"]) >= 2),
                fields={"query": row["query"], "passage": row["passage"]},
                group=str(row["qid"]),
            )
            for row in sample
        ]
    else:
        raise ValueError(f"unknown set {name!r}")
    # Stable sort by group: items sharing an abstract run back to back (prefix reuse).
    return sorted(items, key=lambda item: item.group)


def file_items(path: Path, name: str, *, relevant_at: int = 2) -> list[Item]:
    """A labelled file as the items of set ``name`` (its kind must be that set's).

    Raises:
        InvalidArgumentError: the file holds another kind of pairs.
    """
    from tribunal.core import InvalidArgumentError

    from ._labelled import detect_kind, read_entailment_pairs, read_relevance_pairs

    kind = detect_kind(path)
    if _KIND_SET.get(kind) != name:
        wanted = next(k for k, v in _KIND_SET.items() if v == name)
        raise InvalidArgumentError(
            f"{path} holds {kind} records; this needs {wanted} pairs (docs/evaluation.md)",
            field="data",
        )
    if kind == "entailment":
        return [
            Item(p.id, p.label, {"evidence": p.premise, "claim": p.hypothesis}, p.premise)
            for p in read_entailment_pairs(path)
        ]
    return [
        Item(p.id, p.label, {"query": p.query, "passage": p.passage}, p.group)
        for p in read_relevance_pairs(path, relevant_at=relevant_at)
    ]


def _cross_fit_balanced_accuracy(y: np.ndarray, p: np.ndarray, seed: int) -> float:
    """Balanced accuracy when each half is thresholded at the best threshold of the other."""
    from tribunal.core.metrics import balanced_accuracy

    order = np.random.default_rng(seed).permutation(len(y))
    halves = (order[: len(y) // 2], order[len(y) // 2 :])
    predictions = np.zeros(len(y), dtype=np.int64)
    for fit, apply in (halves, halves[::-1]):
        candidates = np.unique(p[fit])
        scores = [balanced_accuracy(y[fit], (p[fit] >= t).astype(np.int64)) for t in candidates]
        best = float(candidates[int(np.argmax(scores))])
        predictions[apply] = (p[apply] >= best).astype(np.int64)
    return balanced_accuracy(y, predictions)


def _judge_set(
    engine: Any, name: str, items: list[Item], cache: Path, batch: int
) -> list[dict[str, Any]]:
    from tqdm import tqdm
    from tribunal.prompts import get_prompt

    template = get_prompt(_PROMPTS[name])
    done = {row["id"]: row for row in read_jsonl(cache)} if cache.exists() else {}
    todo = [item for item in items if item.id not in done]
    cache.parent.mkdir(parents=True, exist_ok=True)
    with (
        cache.open("a", encoding="utf-8") as handle,
        tqdm(total=len(items), initial=len(items) - len(todo), desc=name, unit="item") as bar,
    ):
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            prompts = [template.render(engine, **item.fields) for item in chunk]
            result = engine.judge(prompts)
            seconds = result.usage.seconds / len(chunk)
            for item, p_yes, mass in zip(chunk, result.p_yes, result.yes_no_mass, strict=True):
                row = {
                    "id": item.id,
                    "label": item.label,
                    "p_yes": p_yes,
                    "yes_no_mass": mass,
                    "prompt_id": template.id,
                    "seconds": seconds,
                    "prompt_tokens": result.usage.prompt_tokens / len(chunk),
                    "cached_tokens": result.usage.cached_tokens / len(chunk),
                }
                done[item.id] = row
                handle.write(json.dumps(row) + "\n")
            handle.flush()
            bar.update(len(chunk))
    return [done[item.id] for item in items]


def _summary(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    from tribunal.core.metrics import auroc, balanced_accuracy, binary_report, bootstrap_ci

    y = np.array([r["label"] for r in rows], dtype=np.int64)
    p = np.array([r["p_yes"] for r in rows], dtype=np.float64)

    def bacc(truth: np.ndarray, scores: np.ndarray) -> float:
        return balanced_accuracy(truth, (scores >= 0.5).astype(np.int64))

    tokens = sum(r["prompt_tokens"] for r in rows)
    return {
        "prompt_id": rows[0]["prompt_id"] if rows else None,
        "report": binary_report(y, p, 0.5).as_dict(),
        "balanced_accuracy_ci": str(bootstrap_ci(bacc, y, p, seed=seed)),
        "auroc_ci": str(bootstrap_ci(auroc, y, p, seed=seed)),
        "balanced_accuracy_cross_fit_threshold": _cross_fit_balanced_accuracy(y, p, seed),
        "seconds_per_item": float(np.mean([r["seconds"] for r in rows])) if rows else 0.0,
        "mean_prompt_tokens": tokens / max(len(rows), 1),
        "cached_token_share": sum(r["cached_tokens"] for r in rows) / max(tokens, 1),
        "mean_yes_no_mass": float(np.mean([r["yes_no_mass"] for r in rows])) if rows else 0.0,
    }


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Single yes/no judge: {report['model']} on {report['backend']} ({report['date']})",
        "",
        "| set | prompt | n (pos) | bAcc @0.5 | recall + | recall − | AUROC | "
        "bAcc, cross-fit threshold | ECE | s/item |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, one in report["sets"].items():
        r = one["report"]
        lines.append(
            f"| {name} | `{one['prompt_id']}` | {r['n']} ({r['positives']}) | "
            f"{one['balanced_accuracy_ci']} | {r['recall_positive']:.3f} | "
            f"{r['recall_negative']:.3f} | {one['auroc_ci']} | "
            f"{one['balanced_accuracy_cross_fit_threshold']:.3f} | {r['ece']:.3f} | "
            f"{one['seconds_per_item']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.core.llm import create_engine

    settings = load_settings(args.profile)
    backend = args.backend or settings.llm_backend
    started = time.perf_counter()
    engine = create_engine(settings, args.model, backend=backend)
    load_seconds = time.perf_counter() - started
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "model": f"{args.model} ({engine.model_name})",
        "backend": backend,
        "load_seconds": load_seconds,
        "seed": args.seed,
        "sets": {},
    }
    if args.data.is_file():
        from ._labelled import detect_kind

        named = [(_KIND_SET.get(detect_kind(args.data), "trec-dl"), args.data.stem)]
    else:
        named = [(name, name) for name in args.sets]
    for name, title in named:
        items = load_items(
            name,
            args.data,
            trec_pairs=args.trec_pairs,
            scifact_pairs=args.scifact_pairs,
            seed=args.seed,
            relevant_at=args.relevant_at,
        )
        items = items[: args.limit] if args.limit else items
        cache = (
            args.cache_dir / f"{cache_name(args.data, title)}-{args.model}-{backend}-"
            f"{_PROMPTS[name].replace('/', '_')}.jsonl"
        )
        rows = _judge_set(engine, name, items, cache, settings.llm.batch_size)
        report["sets"][title] = _summary(rows, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = _markdown(report)
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def cache_name(data: Path, title: str) -> str:
    """A development set's name, or a file's stem and content hash (never another file's)."""
    if not data.is_file():
        return title
    import hashlib

    return f"{title}-{hashlib.sha256(data.read_bytes()).hexdigest()[:10]}"
