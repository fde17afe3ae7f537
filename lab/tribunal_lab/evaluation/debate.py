"""DREAM debate on TREC DL 2019 pairs, beside the single-agent judge (LLMJudge).

Items: ``--pairs`` pairs of ``trec-dl-2019/dl19_judged_pairs.jsonl`` drawn with
``--seed`` exactly as ``tribunal-lab eval judge`` draws them (same 300 pairs at seed 13),
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

    tribunal-lab eval debate [--agents llm_weak llm_weak] [--pairs 300] [--stages ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._io import read_jsonl
from .._paths import cache_dir, data_root
from ._debate_report import (
    adjudicated_summary,
    debate_summary,
    judge_summary,
    markdown,
    stance_holding,
    swap_summary,
)

__all__ = ["add_arguments", "result_from_dict", "result_to_dict", "run"]

STAGES = ("debate", "adjudicate", "judge", "swap")


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
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root(),
        help="a labelled FILE of relevance pairs (docs/evaluation.md), or the data sets FOLDER "
        "(TREC DL 2019)",
    )
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
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=cache_dir("debate"),
        help="per-item results, appended as they finish (a rerun resumes; default "
        "$TRIBUNAL_LAB_CACHE/debate or .build/lab-cache/debate)",
    )


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


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings

    from .judge import cache_name, load_items

    settings = load_settings(args.profile)
    backend = args.backend or settings.llm_backend
    assert settings.roles is not None, "the profile defines no roles"
    agents = tuple(args.agents or settings.roles.debate_agents)
    adjudicator = args.adjudicator or settings.roles.adjudicator
    judge_model = args.judge_model or agents[0]
    items = load_items("trec-dl", args.data, trec_pairs=args.pairs, seed=args.seed)
    items = items[: args.limit] if args.limit else items
    # A labelled file's items get their own caches (named by its content).
    folder = (
        args.cache_dir / cache_name(args.data, args.data.stem)
        if args.data.is_file()
        else args.cache_dir
    )
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
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
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
        "debate": [debate_summary(truth, main, r) for r in rounds] if main else [],
        "adjudicated": [adjudicated_summary(truth, main, adjudications, r) for r in rounds]
        if main and adjudications
        else [],
        "judge": judge_summary(judge_rows),
        # The same items as the debate, for a like-for-like row when the runs differ in size.
        "judge_on_debated_items": judge_summary([r for r in judge_rows if r["id"] in main]),
        "swap": [{"max_rounds": r, **swap_summary(main, swapped, r)} for r in rounds],
        "stance_holding_round_1": stance_holding(main) if main else {},
        "caches": {k: str(v) for k, v in caches.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = markdown(report)
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def _load_results(cache: Path) -> dict[str, Any]:
    return {key: result_from_dict(row["result"]) for key, row in _done(cache).items()}
