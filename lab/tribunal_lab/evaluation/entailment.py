"""Entailment cascade quality and cost: stage 1 alone, stage 2 alone, the cascade.

Pairs (positive = entailed) come from a labelled file or the development sets:

- ``--data FILE``: entailment pairs in the documented format (``{"premise",
  "hypothesis", "label"}``; SciFact's NLI pairs and SICK read as they are — see
  docs/evaluation.md), all of them or a seeded ``--sample N``;
- ``--data FOLDER`` (default: the data sets folder) with ``--sets``: ``scifact``
  (``--scifact-pairs`` of ``scifact/nli_pairs_train.jsonl``, 0 = all 919; premise = title +
  abstract, hypothesis = claim; positive = SUPPORT) and ``sick`` (``--sick-pairs`` of
  ``sick2014/test.jsonl``; positive = ENTAILMENT).

Both checkers of the profile (roles ``entailment_fast`` and ``entailment_strong``)
score every pair once, chunk-and-max as in the service, and each pair's score and
seconds are appended to a JSONL cache as they are done (a killed run resumes). The
cascade is then replayed through the real :class:`EntailmentCascade` routing with
those scores, so its verdicts are exactly the service's; its cost per pair is the
fast checker's plus the strong checker's on the pairs it routed.

Every row names the decision point it applies and whose it is. By default nothing is
selected and every pair is reported on: stage 1 alone at its configured "yes" edge
(the band's upper end, ``entailment.uncertain_high``: in the cascade the fast checker
says entailed above it) and at the best threshold on these pairs (an oracle, marked
so: optimistic); stage 2 alone at ``entailment.entail_threshold`` (the strong checker's);
the cascade with the configured band. ``--select-split FRACTION`` selects on a seeded
share of the pairs — stage 1's own threshold (max balanced accuracy) and the
narrowest-routing band whose balanced accuracy stays within one point of the strong
checker's — and reports every row on the rest. Reported: balanced accuracy, class
recalls, AUROC (95% bootstrap CIs), the share sent to stage 2, seconds per pair.
Writes JSON and markdown.

    tribunal-lab eval entailment --data pairs.jsonl [--select-split 0.5]
    tribunal-lab eval entailment [--sets scifact sick] [--scifact-pairs 200] --select-split 0.5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.core import InvalidArgumentError

from .._io import read_jsonl
from .._paths import cache_dir, data_root
from ._entailment_report import entailment_markdown
from ._labelled import EntailmentPair as Pair
from ._labelled import read_entailment_pairs
from ._scoring import Threshold, add_scoring_arguments, best_threshold, decision_row

__all__ = ["Pair", "add_arguments", "evaluate_set", "load_file", "load_pairs", "run"]

SETS = ("scifact", "sick")
STAGES = ("fast", "strong")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--sets", nargs="+", choices=SETS, default=list(SETS), help="development sets (FOLDER)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root(),
        help="a labelled entailment-pairs FILE (docs/evaluation.md), or the data sets FOLDER "
        "(default $TRIBUNAL_LAB_DATA or ../shared/data) for --sets",
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="FILE: score a seeded sample of N pairs (0: all)"
    )
    parser.add_argument(
        "--scifact-pairs", type=int, default=200, help="SciFact pairs to sample (0: all 919)"
    )
    parser.add_argument("--sick-pairs", type=int, default=1000, help="SICK pairs to sample")
    parser.add_argument("--seed", type=int, default=13, help="sampling seed")
    parser.add_argument("--batch", type=int, default=8, help="pairs per checker call")
    add_scoring_arguments(parser)
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
    return _sampled(pairs, count, seed)


def _sampled(pairs: list[Pair], count: int, seed: int) -> list[Pair]:
    if 0 < count < len(pairs):
        pairs = random.Random(seed).sample(pairs, count)
    # Pairs sharing a premise run back to back: the checker reuses its KV-cache prefix.
    return sorted(pairs, key=lambda pair: pair.premise)


def load_file(path: Path, *, sample: int, seed: int) -> tuple[str, list[Pair]]:
    """(set name, pairs) of a labelled file; the name carries a hash of its content, so
    the per-pair cache of one file is never read for another."""
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return f"{path.stem}-{digest}", _sampled(read_entailment_pairs(path), sample, seed)


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


def _split(n: int, select_split: float | None, seed: int) -> tuple[list[int], list[int]]:
    """(selection, report) positions: a seeded permutation's first ``fraction``, or
    nothing and everything."""
    if select_split is None:
        return [], list(range(n))
    order = np.random.default_rng(seed).permutation(n).tolist()
    cut = int(n * select_split)
    if cut < 2 or cut > n - 2:
        raise InvalidArgumentError(
            f"--select-split {select_split} leaves too few of {n} pairs on one side",
            field="select_split",
        )
    return order[:cut], order[cut:]


def evaluate_set(
    pairs: list[Pair],
    rows: dict[str, dict[str, dict[str, Any]]],
    cascade: Any,
    seed: int,
    *,
    select_split: float | None = None,
    resamples: int = 1000,
) -> dict[str, Any]:
    """Every row on the report part: all pairs, or (``select_split``) the pairs left after
    stage 1's threshold and a band are selected on the selection part."""
    from tribunal.core.metrics import balanced_accuracy
    from tribunal.entailment import PairToCheck

    chosen, reported = _split(len(pairs), select_split, seed)
    selection = [pairs[i] for i in chosen]
    test = [pairs[i] for i in reported]
    replays = {
        stage: _ReplayChecker(
            rows[stage][pairs[0].id]["model"],
            _replay_table(pairs, rows[stage], cascade.chunk_size_chars),
        )
        for stage in STAGES
    }
    models = {stage: rows[stage][pairs[0].id]["model"] for stage in STAGES}

    def scores(stage: str, subset: Sequence[Pair]) -> np.ndarray:
        return np.array([max(rows[stage][x.id]["chunk_p_entail"]) for x in subset])

    entail = cascade.entail_threshold
    low, high = (float(x) for x in cascade.uncertain_band)
    y = np.array([p.label for p in test], dtype=np.int64)
    seconds = {s: np.array([rows[s][p.id]["seconds"] for p in test]) for s in STAGES}
    report: dict[str, Any] = {
        "pairs": len(pairs),
        "selection_pairs": len(selection),
        "test_pairs": len(test),
        "reported_on": "all pairs" if select_split is None else "the pairs not selected on",
        "positives_test": int(y.sum()),
        "rows": {},
    }

    def add(
        name: str,
        stage_or_both: str,
        p: np.ndarray,
        predicted: np.ndarray,
        threshold: Threshold,
        *,
        routed: np.ndarray,
    ) -> None:
        cost = seconds["fast"] + routed * seconds["strong"]
        if stage_or_both == "strong":
            cost = seconds["strong"]
        report["rows"][name] = decision_row(
            y,
            p,
            predicted.astype(np.int64),
            threshold,
            resamples=resamples,
            seed=seed,
            model=(
                models[stage_or_both]
                if stage_or_both in models
                else f"{models['fast']} -> {models['strong']}"
            ),
            share_to_stage_2=float(routed.mean()),
            seconds_per_pair=float(cost.mean()),
        )

    fast = scores("fast", test)
    none = np.zeros(len(test))
    everything = np.ones(len(test))
    if select_split is None:
        add(
            "stage 1 alone",
            "fast",
            fast,
            fast > high,
            Threshold(
                f"P > {high:.3f}",
                "configured: entailment.uncertain_high, the fast checker's 'entailed' edge "
                "in the cascade",
            ),
            routed=none,
        )
        oracle = best_threshold(y, fast)
        add(
            "stage 1 alone, oracle",
            "fast",
            fast,
            fast >= oracle,
            Threshold(f"P ≥ {oracle:.3f}", "oracle: the best on these same pairs (optimistic)"),
            routed=none,
        )
    else:
        y_sel = np.array([p.label for p in selection], dtype=np.int64)
        own = best_threshold(y_sel, scores("fast", selection))
        add(
            "stage 1 alone",
            "fast",
            fast,
            fast >= own,
            Threshold(
                f"P ≥ {own:.3f}",
                "the fast checker's own, selected on the selection part (max bAcc)",
            ),
            routed=none,
        )
    strong = scores("strong", test)
    add(
        "stage 2 alone",
        "strong",
        strong,
        strong >= entail,
        Threshold(
            f"P ≥ {entail:.3f}", "configured: entailment.entail_threshold, the strong checker's"
        ),
        routed=everything,
    )
    checks = [PairToCheck(p.premise, p.hypothesis) for p in test]
    bands = [((low, high), "configured: entailment.uncertain_low / uncertain_high")]
    if select_split is not None:
        y_sel = np.array([p.label for p in selection], dtype=np.int64)
        strong_sel = balanced_accuracy(y_sel, (scores("strong", selection) >= entail).astype(int))
        selected = _select_band(replays, selection, scores("fast", selection), strong_sel, cascade)
        bands.append((selected, "selected on the selection part (fewest routed within one point"
                      " of stage 2's bAcc)"))  # fmt: skip
        report["selected_band"] = list(selected)
    for band, source in bands:
        p, predicted, routed = _replay(replays, checks, band, cascade)
        add(
            f"cascade, band {band[0]:.3f}-{band[1]:.3f}",
            "cascade",
            p,
            predicted,
            Threshold(
                f"stage 1 decides outside {band[0]:.3f}-{band[1]:.3f}; stage 2 at P ≥ {entail:.3f}",
                source,
            ),
            routed=routed.astype(np.float64),
        )
    return report


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.entailment import build_cascade, build_checker

    if args.data.is_file():
        named = [load_file(args.data, sample=args.sample, seed=args.seed)]
    elif args.data.is_dir():
        named = [
            (
                name,
                load_pairs(
                    name,
                    args.data,
                    scifact_pairs=args.scifact_pairs,
                    sick_pairs=args.sick_pairs,
                    seed=args.seed,
                ),
            )
            for name in args.sets
        ]
    else:
        raise InvalidArgumentError(
            f"--data {args.data}: no such file or folder (a labelled entailment-pairs file, "
            "or the data sets folder)",
            field="data",
        )
    settings = load_settings(args.profile)
    cascade = build_cascade(settings)
    strong = cascade.strong or build_checker(settings, "entailment_strong")
    checkers = {"fast": cascade.fast, "strong": strong}
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "profile": settings.profile,
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "data": str(args.data),
        "band": list(cascade.uncertain_band),
        "entail_threshold": cascade.entail_threshold,
        "chunk_size_chars": cascade.chunk_size_chars,
        "select_split": args.select_split,
        "sets": {},
    }
    for name, pairs in named:
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
        report["sets"][name] = evaluate_set(
            pairs,
            rows,
            cascade,
            args.seed,
            select_split=args.select_split,
            resamples=args.resamples,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    markdown = entailment_markdown(report)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0
