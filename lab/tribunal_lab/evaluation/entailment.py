"""Entailment cascade quality and cost: stage 1 alone, stage 2 alone, the cascade.

Sets (positive = entailed):

- ``scifact``: pairs of ``scifact/nli_pairs_train.jsonl`` (``--scifact-pairs``, 0 = all
  919, drawn with ``--seed``); premise = title + abstract, hypothesis = claim;
  positive = SUPPORT, negative = CONTRADICT or NOT_ENOUGH_INFO.
- ``sick``: ``--sick-pairs`` pairs of ``sick2014/test.jsonl`` (drawn with ``--seed``);
  positive = ENTAILMENT, negative = NEUTRAL or CONTRADICTION.

Both checkers of the profile (roles ``entailment_fast`` and ``entailment_strong``)
score every pair once, chunk-and-max as in the service, and each pair's score and
seconds are appended to a JSONL cache as they are done (a killed run resumes). The
cascade is then replayed through the real :class:`EntailmentCascade` routing with
those scores, so its verdicts are exactly the service's; its cost per pair is the
fast checker's plus the strong checker's on the pairs it routed. Reported: balanced
accuracy (a checker alone: P ≥ ``entail_threshold``; the cascade: its labels), AUROC
(95% bootstrap CIs), the share of pairs sent to stage 2 and seconds per pair, on the
half of each set left after a band is selected on the other half (fixed seed): the
narrowest-routing band whose balanced accuracy stays within one point of the strong
checker's there. Writes JSON and markdown.

    tribunal-lab eval entailment [--sets scifact sick] [--scifact-pairs 200] [--sick-pairs 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import read_jsonl
from .._paths import cache_dir, data_root

__all__ = ["Pair", "add_arguments", "load_pairs", "run"]

SETS = ("scifact", "sick")
STAGES = ("fast", "strong")


@dataclass(frozen=True)
class Pair:
    """One labelled (premise, hypothesis) pair."""

    id: str
    premise: str
    hypothesis: str
    label: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--data", type=Path, default=data_root(), help="data sets folder")
    parser.add_argument(
        "--scifact-pairs", type=int, default=200, help="SciFact pairs to sample (0: all 919)"
    )
    parser.add_argument("--sick-pairs", type=int, default=1000, help="SICK pairs to sample")
    parser.add_argument("--seed", type=int, default=13, help="sampling seed")
    parser.add_argument("--batch", type=int, default=8, help="pairs per checker call")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/eval/entailment.json"),
        help="JSON report (markdown beside it, .md)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=cache_dir("entailment"),
        help="per-item results, appended as they finish (a rerun resumes; default "
        "$TRIBUNAL_LAB_CACHE/entailment or .build/lab-cache/entailment)",
    )


def load_pairs(
    name: str, data: Path, *, scifact_pairs: int, sick_pairs: int, seed: int
) -> list[Pair]:
    """The labelled pairs of set ``name``, sampled with ``seed``, grouped by premise."""
    if name == "scifact":
        pairs = [
            Pair(
                f"{row['claim_id']}:{row['doc_id']}",
                f"{row['title']}\n{row['evidence_text']}",
                row["claim"],
                int(row["label"] == "SUPPORT"),
            )
            for row in read_jsonl(data / "scifact" / "nli_pairs_train.jsonl")
        ]
        count = scifact_pairs
    elif name == "sick":
        pairs = [
            Pair(
                str(row["pair_id"]),
                row["sentence_A"],
                row["sentence_B"],
                int(row["entailment_label"] == "ENTAILMENT"),
            )
            for row in read_jsonl(data / "sick2014" / "test.jsonl")
        ]
        count = sick_pairs
    else:
        raise ValueError(f"unknown set {name!r}")
    if 0 < count < len(pairs):
        pairs = random.Random(seed).sample(pairs, count)
    # Pairs sharing a premise run back to back: the checker reuses its KV-cache prefix.
    return sorted(pairs, key=lambda pair: pair.premise)


def _score_stage(
    checker: Any, cascade: Any, pairs: Sequence[Pair], cache: Path, *, batch: int, desc: str
) -> dict[str, dict[str, Any]]:
    """Chunk-and-max scores of one checker for every pair, cached and resumable."""
    import time

    from tqdm import tqdm
    from tribunal.entailment import split_premise

    done = {row["id"]: row for row in read_jsonl(cache)} if cache.exists() else {}
    todo = [pair for pair in pairs if pair.id not in done]
    cache.parent.mkdir(parents=True, exist_ok=True)
    with (
        cache.open("a", encoding="utf-8") as handle,
        tqdm(total=len(pairs), initial=len(pairs) - len(todo), desc=desc, unit="pair") as bar,
    ):
        for start in range(0, len(todo), batch):
            group = todo[start : start + batch]
            chunks = [split_premise(p.premise, cascade.chunk_size_chars) for p in group]
            flat = [(c.text, p.hypothesis) for p, cs in zip(group, chunks, strict=True) for c in cs]
            started = time.perf_counter()
            scores = checker.score(flat)
            seconds = (time.perf_counter() - started) / len(group)
            position = 0
            for pair, pair_chunks in zip(group, chunks, strict=True):
                mine = scores[position : position + len(pair_chunks)]
                position += len(pair_chunks)
                row = {
                    "id": pair.id,
                    "label": pair.label,
                    "chunk_p_entail": [s.p_entail for s in mine],
                    "chunk_p_contradict": [s.p_contradict for s in mine],
                    "seconds": seconds,
                    "model": checker.model_id,
                }
                done[pair.id] = row
                handle.write(json.dumps(row) + "\n")
            handle.flush()
            bar.update(len(group))
    return done


class _ReplayChecker:
    """Serves scores computed earlier (by the same checker on the same chunks) so the
    real cascade routing can be replayed without running the models again."""

    def __init__(self, model_id: str, table: dict[tuple[str, str], tuple[float, float | None]]):
        self.model_id = model_id
        self.table = table

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[Any]:
        from tribunal.entailment import SupportScore

        return [SupportScore(*self.table[pair]) for pair in pairs]


def _replay_table(
    pairs: Sequence[Pair], rows: dict[str, dict[str, Any]], chunk_size_chars: int
) -> dict[tuple[str, str], tuple[float, float | None]]:
    from tribunal.entailment import split_premise

    table = {}
    for pair in pairs:
        row = rows[pair.id]
        for chunk, p, c in zip(
            split_premise(pair.premise, chunk_size_chars),
            row["chunk_p_entail"],
            row["chunk_p_contradict"],
            strict=True,
        ):
            table[(chunk.text, pair.hypothesis)] = (p, c)
    return table


def _metrics(y: np.ndarray, p: np.ndarray, predicted: np.ndarray, seed: int) -> dict[str, Any]:
    """bAcc of the labels given, AUROC of the scores, with bootstrap CIs."""
    from tribunal.core.metrics import auroc, balanced_accuracy, bootstrap_ci, class_recalls

    # Bootstrap bAcc over (label, prediction) pairs: the prediction rides in the score slot.
    def bacc(truth: np.ndarray, pred: np.ndarray) -> float:
        return balanced_accuracy(truth, pred.astype(np.int64))

    recalls = class_recalls(y, predicted)
    return {
        "balanced_accuracy": balanced_accuracy(y, predicted),
        "balanced_accuracy_ci": str(bootstrap_ci(bacc, y, predicted.astype(np.float64), seed=seed)),
        "recall_entailed": recalls.get(1, float("nan")),
        "recall_not_entailed": recalls.get(0, float("nan")),
        "auroc": auroc(y, p),
        "auroc_ci": str(bootstrap_ci(auroc, y, p, seed=seed)),
    }


def _replay(
    replays: dict[str, _ReplayChecker],
    checks: Sequence[Any],
    band: tuple[float, float],
    cascade: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, entailed predictions and routed flags of the real cascade on cached scores."""
    from tribunal.entailment import EntailmentCascade, EntailmentLabel

    replay = EntailmentCascade(
        replays["fast"],
        replays["strong"],
        uncertain_band=band,
        entail_threshold=cascade.entail_threshold,
        chunk_size_chars=cascade.chunk_size_chars,
        max_pairs_per_request=max(len(checks), 1),
        max_premise_chars=10**9,
        max_hypothesis_chars=10**9,
    )
    verdicts = replay.check(checks)
    return (
        np.array([v.p_entail for v in verdicts]),
        np.array([v.label is EntailmentLabel.ENTAILED for v in verdicts], dtype=np.int64),
        np.array([v.decided_by.value == "strong" for v in verdicts]),
    )


def _select_band(
    replays: dict[str, _ReplayChecker],
    pairs: Sequence[Pair],
    fast_p: np.ndarray,
    strong_bacc: float,
    cascade: Any,
) -> tuple[float, float]:
    """The band (from quantiles of the fast scores) that routes the fewest pairs while
    keeping balanced accuracy within one point of the strong checker's, on these pairs."""
    from tribunal.core.metrics import balanced_accuracy
    from tribunal.entailment import PairToCheck

    y = np.array([p.label for p in pairs], dtype=np.int64)
    checks = [PairToCheck(p.premise, p.hypothesis) for p in pairs]
    edges = sorted({round(float(q), 4) for q in np.quantile(fast_p, np.linspace(0, 1, 21))})
    best: tuple[float, float, tuple[float, float]] = (2.0, 0.0, (0.0, 1.0))
    for low in edges:
        for high in (e for e in edges if e >= low):
            _, predicted, routed = _replay(replays, checks, (low, high), cascade)
            score = balanced_accuracy(y, predicted)
            if score >= strong_bacc - 0.01 and (routed.mean(), -score) < best[:2]:
                best = (float(routed.mean()), -score, (low, high))
    return best[2]


def _evaluate_set(
    pairs: list[Pair],
    rows: dict[str, dict[str, dict[str, Any]]],
    cascade: Any,
    seed: int,
) -> dict[str, Any]:
    """Select a band on one half (fixed seed), report everything on the other half."""
    from tribunal.core.metrics import balanced_accuracy
    from tribunal.entailment import PairToCheck

    order = np.random.default_rng(seed).permutation(len(pairs))
    selection = [pairs[i] for i in order[: len(pairs) // 2]]
    test = [pairs[i] for i in order[len(pairs) // 2 :]]
    replays = {
        stage: _ReplayChecker(
            rows[stage][pairs[0].id]["model"],
            _replay_table(pairs, rows[stage], cascade.chunk_size_chars),
        )
        for stage in STAGES
    }

    def scores(stage: str, subset: Sequence[Pair]) -> np.ndarray:
        return np.array([max(rows[stage][x.id]["chunk_p_entail"]) for x in subset])

    threshold = cascade.entail_threshold
    y_sel = np.array([p.label for p in selection], dtype=np.int64)
    strong_sel = balanced_accuracy(y_sel, (scores("strong", selection) >= threshold).astype(int))
    band = _select_band(replays, selection, scores("fast", selection), strong_sel, cascade)

    y = np.array([p.label for p in test], dtype=np.int64)
    seconds = {s: np.array([rows[s][p.id]["seconds"] for p in test]) for s in STAGES}
    report: dict[str, Any] = {
        "pairs": len(pairs),
        "selection_pairs": len(selection),
        "test_pairs": len(test),
        "positives_test": int(y.sum()),
        "selected_band": list(band),
        "rows": {},
    }
    for stage in STAGES:
        p = scores(stage, test)
        report["rows"][f"stage {1 if stage == 'fast' else 2} alone (P ≥ {threshold})"] = {
            **_metrics(y, p, (p >= threshold).astype(np.int64), seed),
            "model": rows[stage][pairs[0].id]["model"],
            "share_to_stage_2": 1.0 if stage == "strong" else 0.0,
            "seconds_per_pair": float(seconds[stage].mean()),
        }
    checks = [PairToCheck(p.premise, p.hypothesis) for p in test]
    for name, chosen in (
        ("configured", tuple(cascade.uncertain_band)),
        ("selected on the other half", band),
    ):
        p, predicted, routed = _replay(replays, checks, chosen, cascade)
        report["rows"][f"cascade, band {chosen[0]:.3f}-{chosen[1]:.3f} ({name})"] = {
            **_metrics(y, p, predicted, seed),
            "model": f"{replays['fast'].model_id} -> {replays['strong'].model_id}",
            "share_to_stage_2": float(routed.mean()),
            "seconds_per_pair": float((seconds["fast"] + routed * seconds["strong"]).mean()),
        }
    return report


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Entailment cascade ({report['date']}, profile {report['profile']})",
        "",
        f"`{report['command']}`",
        "",
    ]
    for name, result in report["sets"].items():
        lines += [
            f"## {name}: band selected on {result['selection_pairs']} pairs, reported on "
            f"{result['test_pairs']} ({result['positives_test']} entailed)",
            "",
            "| checker | bAcc [95% CI] | recall ent / not | AUROC [95% CI] | to stage 2 | s/pair |",
            "|---|---|---|---|---|---|",
        ]
        for row_name, row in result["rows"].items():
            lines.append(
                f"| {row_name} ({row['model']}) | {row['balanced_accuracy_ci']} | "
                f"{row['recall_entailed']:.2f} / {row['recall_not_entailed']:.2f} | "
                f"{row['auroc_ci']} | {row['share_to_stage_2']:.1%} | "
                f"{row['seconds_per_pair']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.entailment import build_cascade, build_checker

    settings = load_settings(args.profile)
    cascade = build_cascade(settings)
    strong = cascade.strong or build_checker(settings, "entailment_strong")
    checkers = {"fast": cascade.fast, "strong": strong}
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "profile": settings.profile,
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "band": list(cascade.uncertain_band),
        "entail_threshold": cascade.entail_threshold,
        "chunk_size_chars": cascade.chunk_size_chars,
        "sets": {},
    }
    for name in args.sets:
        pairs = load_pairs(
            name,
            args.data,
            scifact_pairs=args.scifact_pairs,
            sick_pairs=args.sick_pairs,
            seed=args.seed,
        )
        rows = {
            stage: _score_stage(
                checkers[stage],
                cascade,
                pairs,
                args.cache_dir / f"{name}.{stage}.jsonl",
                batch=args.batch,
                desc=f"{name} {stage}",
            )
            for stage in STAGES
        }
        report["sets"][name] = _evaluate_set(pairs, rows, cascade, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    markdown = _markdown(report)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0
