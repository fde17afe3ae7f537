"""DREAM debate on TREC DL 2019 pairs, beside the single-agent judge (LLMJudge).

Items: ``--pairs`` pairs of ``trec-dl-2019/dl19_judged_pairs.jsonl`` drawn with
``--seed`` exactly as ``tribunal eval judge`` draws them (same 300 pairs at seed 13),
relevant = NIST grade ≥ 2. TREC DL has no reference answers, so each query is its
own answer set (the debate prompt lists the query as the answer sought).

Stages (``--stages``), each resumable (one JSONL row per finished item, a rerun
skips what is done):

- ``debate``: one debate per item with R = ``--max-rounds`` (3). Greedy decoding
  makes round k depend only on rounds before it, so the first R rounds of this run
  are the R-round debate: R = 1, 2, 3 are all read from it by truncation.
- ``adjudicate``: the LLM adjudicator on the items still disagreeing after R rounds,
  for each R (from the truncated histories; cached per item and R).
- ``judge``: the single-agent baseline, one P(yes) per item with ``relevance/yesno@1``.
- ``swap``: the same debates with the stance order swapped (B speaks first, models
  swapped): the share of labels that change.

Reported: balanced accuracy and class recalls on the non-escalated items, escalation
ratio, failures, tokens and model seconds per item; the same with the adjudicator;
the judge; the swap. ``--report-only`` rebuilds the report from the caches.

    tribunal eval debate [--agents llm_weak llm_weak] [--pairs 300] [--stages ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ._io import read_jsonl

__all__ = ["add_arguments", "result_from_dict", "result_to_dict", "run"]

STAGES = ("debate", "adjudicate", "judge", "swap")
DREAM_PAPER = "DREAM (Llama-3.3-70B, R = 2, humans on escalations): bAcc 95.2% at 3.5% escalation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--backend", choices=("transformers", "llamacpp", "openai"), default=None)
    parser.add_argument(
        "--agents", nargs=2, default=None, metavar="KEY", help="model keys of agents A and B"
    )
    parser.add_argument("--adjudicator", default=None, help="model key of the adjudicator")
    parser.add_argument(
        "--judge-model", default=None, help="model key of the single judge (default: agent A's)"
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--pairs", type=int, default=300, help="TREC DL pairs to sample")
    parser.add_argument("--seed", type=int, default=13, help="sampling seed (as eval judge)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument("--max-rounds", type=int, default=3, help="R of the run (1..5)")
    parser.add_argument("--batch", type=int, default=16, help="items debated together")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--report-only", action="store_true", help="no models: report caches")
    parser.add_argument(
        "--shard",
        default="1/1",
        help="K/N: run only items K, K+N, ... (parallel processes; the report reads all shards)",
    )
    parser.add_argument("--out", type=Path, default=Path(".build/eval/debate.json"))


# ----------------------------------------------------------------- serialisation
def result_to_dict(result: Any) -> dict[str, Any]:
    """A :class:`~tribunal.debate.DebateResult` as JSON-ready data."""
    data = asdict(result)

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return getattr(value, "value", value)  # enums to their strings

    return dict(plain(data))


def result_from_dict(data: dict[str, Any]) -> Any:
    """The inverse of :func:`result_to_dict`."""
    from tribunal.core.llm import Usage
    from tribunal.debate import (
        Adjudication,
        AgentTurn,
        DebateLabel,
        DebateOutcome,
        DebateResult,
        DebateRound,
    )

    def label(value: str | None) -> DebateLabel | None:
        return None if value is None else DebateLabel(value)

    rounds = tuple(
        DebateRound(
            r["number"],
            tuple(
                AgentTurn(**{**t, "label": label(t["label"]), "usage": Usage(**t["usage"])})
                for t in r["turns"]
            ),
        )
        for r in data["rounds"]
    )
    adjudication = data.get("adjudication")
    return DebateResult(
        **{
            **data,
            "label": label(data["label"]),
            "outcome": DebateOutcome(data["outcome"]),
            "rounds": rounds,
            "usage": Usage(**data["usage"]),
            "adjudication": None
            if adjudication is None
            else Adjudication(
                **{
                    **adjudication,
                    "label": label(adjudication["label"]),
                    "usage": Usage(**adjudication["usage"]),
                }
            ),
        }
    )


# ----------------------------------------------------------------- running
def _done(cache: Path) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in read_jsonl(cache)} if cache.exists() else {}


def _debate_stage(
    debate: Any, items: list[Any], cache: Path, *, max_rounds: int, swap: bool, batch: int
) -> None:
    from tqdm import tqdm

    from tribunal.debate import DebateItem

    done = _done(cache)
    todo = [item for item in items if item.id not in done]
    cache.parent.mkdir(parents=True, exist_ok=True)
    desc = "debate (swapped)" if swap else "debate"
    with (
        cache.open("a", encoding="utf-8") as handle,
        tqdm(total=len(items), initial=len(items) - len(todo), desc=desc, unit="item") as bar,
    ):
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            requests = [
                DebateItem(
                    query=item.fields["query"],
                    chunk=item.fields["passage"],
                    item_id=item.id,
                    max_rounds=max_rounds,
                    swap_stance_order=swap,
                    adjudicate=False,
                )
                for item in chunk
            ]
            for index, result in debate.stream(requests):
                row = {"key": chunk[index].id, "label": chunk[index].label}
                row["result"] = result_to_dict(result)
                handle.write(json.dumps(row) + "\n")
                handle.flush()
                bar.update(1)


def _adjudicate_stage(
    debate: Any, items: list[Any], results: dict[str, Any], cache: Path, max_rounds: int
) -> None:
    from tqdm import tqdm

    from tribunal.debate import DebateItem, DebateOutcome

    done = _done(cache)
    cases: list[tuple[str, Any, Any]] = []
    for rounds in range(1, max_rounds + 1):
        for item in items:
            if item.id not in results:
                continue
            cut = results[item.id].truncated(rounds)
            key = f"{item.id}@R{rounds}"
            if cut.outcome is DebateOutcome.ESCALATED and key not in done:
                request = DebateItem(query=item.fields["query"], chunk=item.fields["passage"])
                cases.append((key, request, cut))
    with (
        cache.open("a", encoding="utf-8") as handle,
        tqdm(total=len(cases), desc="adjudicate", unit="item") as bar,
    ):
        for start in range(0, len(cases), 8):
            chunk = cases[start : start + 8]
            decisions = debate.adjudicate_states([(c[1], c[2].rounds[-1]) for c in chunk])
            for (key, _, _), decision in zip(chunk, decisions, strict=True):
                handle.write(
                    json.dumps({"key": key, "adjudication": asdict(decision)}, default=_enum)
                )
                handle.write("\n")
            handle.flush()
            bar.update(len(chunk))


def _enum(value: Any) -> Any:
    return getattr(value, "value", str(value))


# ----------------------------------------------------------------- metrics
def _labels(rows: Iterable[tuple[int, Any]]) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(y, int(label.value == "relevant")) for y, label in rows]
    y = np.array([p[0] for p in pairs], dtype=np.int64)
    predicted = np.array([p[1] for p in pairs], dtype=np.int64)
    return y, predicted


def _classification(rows: list[tuple[int, Any]]) -> dict[str, Any]:
    from .metrics import balanced_accuracy, class_recalls

    if not rows:
        return {"n": 0}
    y, predicted = _labels(rows)
    recalls = class_recalls(y, predicted)
    return {
        "n": len(rows),
        "positives": int(y.sum()),
        "balanced_accuracy": balanced_accuracy(y, predicted),
        "recall_relevant": recalls.get(1, float("nan")),
        "recall_irrelevant": recalls.get(0, float("nan")),
        "predicted_relevant_share": float(predicted.mean()),
    }


def _cost(results: list[Any]) -> dict[str, float]:
    n = max(len(results), 1)
    return {
        "prompt_tokens_per_item": sum(r.usage.prompt_tokens for r in results) / n,
        "completion_tokens_per_item": sum(r.usage.completion_tokens for r in results) / n,
        "model_seconds_per_item": sum(r.usage.seconds for r in results) / n,
    }


def _debate_summary(truth: dict[str, int], results: dict[str, Any], rounds: int) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    cut = {key: r.truncated(rounds) for key, r in results.items()}
    n = max(len(cut), 1)
    agreed = [(truth[k], r.label) for k, r in cut.items() if r.outcome is DebateOutcome.AGREED]
    outcome_counts = {o.value: sum(r.outcome is o for r in cut.values()) for o in DebateOutcome}
    turns = [t for r in cut.values() for one in r.rounds for t in one.turns if t.label is not None]
    return {
        "max_rounds": rounds,
        "items": len(cut),
        "outcomes": outcome_counts,
        "escalation_ratio": outcome_counts["escalated"] / n,
        "failure_ratio": outcome_counts["failed"] / n,
        "agreed_in_round": {
            str(k): sum(
                r.outcome is DebateOutcome.AGREED and len(r.rounds) == k for r in cut.values()
            )
            for k in range(1, rounds + 1)
        },
        "non_escalated": _classification(agreed),
        "quote_found_share": float(np.mean([t.evidence_found for t in turns])) if turns else 0.0,
        **_cost(list(cut.values())),
    }


def _adjudicated_summary(
    truth: dict[str, int], results: dict[str, Any], adjudications: dict[str, Any], rounds: int
) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    rows: list[tuple[int, Any]] = []
    extra_tokens = extra_seconds = 0.0
    missing = failed = 0
    for key, result in results.items():
        cut = result.truncated(rounds)
        if cut.outcome is DebateOutcome.AGREED:
            rows.append((truth[key], cut.label))
        elif cut.outcome is DebateOutcome.ESCALATED:
            decision = adjudications.get(f"{key}@R{rounds}")
            if decision is None:
                missing += 1
                continue
            usage = decision["usage"]
            extra_tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            extra_seconds += usage["seconds"]
            if decision["label"] is None:
                failed += 1
            else:
                from tribunal.debate import DebateLabel

                rows.append((truth[key], DebateLabel(decision["label"])))
        else:
            failed += 1
    n = max(len(results), 1)
    return {
        "max_rounds": rounds,
        "all_labelled": _classification(rows),
        "not_adjudicated_yet": missing,
        "failed": failed,
        "adjudicator_tokens_per_item": extra_tokens / n,
        "adjudicator_seconds_per_item": extra_seconds / n,
    }


def _swap_summary(main: dict[str, Any], swapped: dict[str, Any], rounds: int) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    keys = sorted(set(main) & set(swapped))
    if not keys:
        return {"items": 0}

    def final(result: Any) -> str:
        cut = result.truncated(rounds)
        return str(cut.label.value if cut.outcome is DebateOutcome.AGREED else cut.outcome.value)

    pairs = [(final(main[k]), final(swapped[k])) for k in keys]
    both_agreed = [p for p in pairs if p[0] in ("relevant", "irrelevant")]
    both_agreed = [p for p in both_agreed if p[1] in ("relevant", "irrelevant")]
    return {
        "items": len(keys),
        "changed_share": sum(a != b for a, b in pairs) / len(pairs),
        "both_agreed": len(both_agreed),
        "changed_among_both_agreed": sum(a != b for a, b in both_agreed) / max(len(both_agreed), 1),
        "relevant_to_irrelevant": sum(p == ("relevant", "irrelevant") for p in pairs),
        "irrelevant_to_relevant": sum(p == ("irrelevant", "relevant") for p in pairs),
    }


def _stance_holding(results: dict[str, Any]) -> dict[str, float]:
    """Share of round-1 turns that kept the agent's assigned initial stance."""
    from tribunal.debate import AGENT_STANCES

    kept = {"A": [], "B": []}  # type: dict[str, list[bool]]
    for result in results.values():
        if result.rounds:
            for turn in result.rounds[0].turns:
                if turn.label is not None:
                    kept[turn.agent].append(turn.label is AGENT_STANCES[turn.agent])
    return {f"agent_{a}": float(np.mean(v)) if v else 0.0 for a, v in kept.items()}


def _judge_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from tribunal.debate import DebateLabel

    pairs = [
        (r["label"], DebateLabel.RELEVANT if r["p_yes"] >= 0.5 else DebateLabel.IRRELEVANT)
        for r in rows
    ]
    out = _classification(pairs)
    if rows:
        out["seconds_per_item"] = float(np.mean([r["seconds"] for r in rows]))
        out["prompt_tokens_per_item"] = float(np.mean([r["prompt_tokens"] for r in rows]))
    return out


# ----------------------------------------------------------------- report
def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


def _metric(summary: dict[str, Any], name: str) -> str:
    return _pct(summary.get(name, float("nan")))


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"DREAM debate on TREC DL 2019 ({report['items']} pairs, seed {report['seed']}): "
        f"agents {report['models']['agents']}, adjudicator {report['models']['adjudicator']}, "
        f"{report['backend']} ({report['date']})",
        "",
        "| method | non-escalated n | bAcc | recall relevant | recall irrelevant | "
        "escalated | failed | tokens/item | model s/item |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, title in (("judge", ""), ("judge_on_debated_items", ", debated items only")):
        judge = report.get(name) or {}
        if not judge.get("n") or (name != "judge" and judge["n"] == report["judge"]["n"]):
            continue
        lines.append(
            f"| single judge (`relevance/yesno@1`, P(yes) ≥ 0.5{title}) | {judge['n']} | "
            f"{_pct(judge['balanced_accuracy'])} | {_pct(judge['recall_relevant'])} | "
            f"{_pct(judge['recall_irrelevant'])} | 0% | 0% | "
            f"{judge['prompt_tokens_per_item']:.0f} | {judge['seconds_per_item']:.2f} |"
        )
    for one in report.get("debate", []):
        c = one["non_escalated"]
        tokens = one["prompt_tokens_per_item"] + one["completion_tokens_per_item"]
        lines.append(
            f"| DREAM R = {one['max_rounds']} | {c['n']} | {_metric(c, 'balanced_accuracy')} | "
            f"{_metric(c, 'recall_relevant')} | {_metric(c, 'recall_irrelevant')} | "
            f"{_pct(one['escalation_ratio'])} | {_pct(one['failure_ratio'])} | {tokens:.0f} | "
            f"{one['model_seconds_per_item']:.2f} |"
        )
    for one in report.get("adjudicated", []):
        c = one["all_labelled"]
        base = next(d for d in report["debate"] if d["max_rounds"] == one["max_rounds"])
        tokens = (
            base["prompt_tokens_per_item"]
            + base["completion_tokens_per_item"]
            + one["adjudicator_tokens_per_item"]
        )
        seconds = base["model_seconds_per_item"] + one["adjudicator_seconds_per_item"]
        pending = (
            f" ({one['not_adjudicated_yet']} not yet adjudicated)"
            if one["not_adjudicated_yet"]
            else ""
        )
        lines.append(
            f"| DREAM R = {one['max_rounds']} + LLM adjudicator{pending} | {c['n']} | "
            f"{_metric(c, 'balanced_accuracy')} | {_metric(c, 'recall_relevant')} | "
            f"{_metric(c, 'recall_irrelevant')} | 0% | "
            f"{_pct(one['failed'] / max(report['items'], 1))} | {tokens:.0f} | {seconds:.2f} |"
        )
    lines += ["", f"Reference: {DREAM_PAPER}.", ""]
    for one in report.get("debate", []):
        lines.append(
            f"R = {one['max_rounds']}: outcomes {one['outcomes']}, agreed in round "
            f"{one['agreed_in_round']}, quotes found {_pct(one['quote_found_share'])}"
        )
    stance = report.get("stance_holding_round_1")
    if stance:
        lines.append(
            f"Round 1 kept the assigned stance: A (relevant) {_pct(stance['agent_A'])}, "
            f"B (irrelevant) {_pct(stance['agent_B'])}"
        )
    for one in report.get("swap", []):
        if one["items"]:
            lines.append(
                f"Stance-order swap, R = {one['max_rounds']}, {one['items']} items: final result "
                f"changed on {_pct(one['changed_share'])}; among {one['both_agreed']} agreed in "
                f"both, {_pct(one['changed_among_both_agreed'])} changed (relevant→irrelevant "
                f"{one['relevant_to_irrelevant']}, irrelevant→relevant "
                f"{one['irrelevant_to_relevant']})"
            )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings

    from .judge import load_items

    settings = load_settings(args.profile)
    backend = args.backend or settings.llm_backend
    assert settings.roles is not None, "the profile defines no roles"
    agents = tuple(args.agents or settings.roles.debate_agents)
    adjudicator = args.adjudicator or settings.roles.adjudicator
    judge_model = args.judge_model or agents[0]
    items = load_items("trec-dl", args.data, trec_pairs=args.pairs, seed=args.seed)
    items = items[: args.limit] if args.limit else items
    folder = args.out.with_suffix("")
    tag = f"{agents[0]}-{agents[1]}-{backend}-R{args.max_rounds}"
    shard, shards = (int(x) for x in args.shard.split("/"))
    suffix = f"-shard{shard}of{shards}" if shards > 1 else ""
    caches = {
        "debate": folder / f"debate-{tag}{suffix}.jsonl",
        "swap": folder / f"swapped-{tag}{suffix}.jsonl",
        "adjudicate": folder / f"adjudication-{tag}-{adjudicator}{suffix}.jsonl",
        "judge": folder / f"judge-{judge_model}-{backend}-relevance_yesno@1{suffix}.jsonl",
    }
    mine = items[shard - 1 :: shards]

    def every(kind: str) -> list[Path]:
        # All shards' caches of this kind (a run in N processes writes N files).
        name = caches[kind].name.replace(suffix, "") if suffix else caches[kind].name
        return sorted(folder.glob(name.replace(".jsonl", "*.jsonl")))

    started = time.perf_counter()
    if not args.report_only:
        from tribunal.debate import build_debate

        debate = build_debate(
            settings,
            agents=(agents[0], agents[1]),
            adjudicator=adjudicator if "adjudicate" in args.stages else None,
            backend=backend,
        )
        for stage in args.stages:
            if stage in ("debate", "swap"):
                _debate_stage(
                    debate,
                    mine,
                    caches[stage],
                    max_rounds=args.max_rounds,
                    swap=stage == "swap",
                    batch=args.batch,
                )
            elif stage == "adjudicate":
                # Every shard's finished debates (a separate process may adjudicate them).
                main = {k: v for f in every("debate") for k, v in _load_results(f).items()}
                _adjudicate_stage(debate, mine, main, caches["adjudicate"], args.max_rounds)
            elif stage == "judge":
                from tribunal.core.llm import shared_engine

                from .judge import _judge_set

                engine = shared_engine(settings, judge_model, backend=backend)
                _judge_set(engine, "trec-dl", mine, caches["judge"], settings.llm.batch_size)
    wanted = {item.id for item in items}
    truth = {item.id: item.label for item in items}

    main = {k: v for f in every("debate") for k, v in _load_results(f).items() if k in wanted}
    swapped = {k: v for f in every("swap") for k, v in _load_results(f).items() if k in wanted}
    adjudications = {
        row["key"]: row["adjudication"] for f in every("adjudicate") for row in _done(f).values()
    }
    judge_rows = [r for f in every("judge") for r in read_jsonl(f) if r["id"] in wanted]
    rounds = range(1, args.max_rounds + 1)
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "command": "tribunal " + " ".join(sys.argv[1:]),
        "backend": backend,
        "models": {
            "agents": " + ".join(
                f"{k} ({settings.model_spec(k).artifact or settings.model_spec(k).hf_id})"
                for k in agents
            ),
            "adjudicator": adjudicator,
            "judge": judge_model,
        },
        "seed": args.seed,
        "items": len(main),
        "items_sampled": len(items),
        "answers": "none in TREC DL: each query is its own answer set",
        "seconds_this_run": time.perf_counter() - started,
        "debate": [_debate_summary(truth, main, r) for r in rounds] if main else [],
        "adjudicated": [_adjudicated_summary(truth, main, adjudications, r) for r in rounds]
        if main and adjudications
        else [],
        "judge": _judge_summary(judge_rows),
        # The same items as the debate, for a like-for-like row when the runs differ in size.
        "judge_on_debated_items": _judge_summary([r for r in judge_rows if r["id"] in main]),
        "swap": [{"max_rounds": r, **_swap_summary(main, swapped, r)} for r in rounds],
        "stance_holding_round_1": _stance_holding(main) if main else {},
        "caches": {k: str(v) for k, v in caches.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = _markdown(report)
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def _load_results(cache: Path) -> dict[str, Any]:
    return {key: result_from_dict(row["result"]) for key, row in _done(cache).items()}
