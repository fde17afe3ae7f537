"""DREAM variant: the label read from the logits after the agents argued.

The shipped debate reads each agent's generated label, and on TREC DL the agents yield
rather than argue (docs/results/, "Debate"). This variant keeps DREAM's round 1 (A
argues "relevant", B "irrelevant", each with a quote and a rationale) and then asks the
model one yes/no question with both arguments in view (``debate/readout@1``), reading
P(yes) from the logits — a judge that has heard both sides. Compared on the same items
with the plain single judge (``relevance/yesno@1``, same model): AUROC with a 95%
bootstrap interval, and the cost. Does hearing the debate add ranking information?

``--agents M1 M2`` pits two models against each other (DREAM's heterogeneous debate):
items alternate which model argues "relevant" (``swap_stance_order`` on every second
item), so neither model always holds the same side; the readout and the single judge
use ``--model``. Each row records which model argued "relevant".

Items: the test half (seed 13, stratified by label, as ``tribunal-lab eval sweep --task
relevance``) of the 300 TREC DL 2019 pairs ``tribunal-lab eval judge`` draws; the first
``--limit`` of them in a seeded shuffle. Resumable: one JSONL row per finished item.

    .venv/bin/python lab/experiments/debate_logits.py run --limit 80     # ~25 s/item, 1.5B agents
    .venv/bin/python lab/experiments/debate_logits.py run --limit 120 --agents llm_strong llm_weak
    .venv/bin/python lab/experiments/debate_logits.py report [--agents llm_strong llm_weak]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm
from tribunal.core import load_settings
from tribunal.core.llm import shared_engine
from tribunal.core.metrics import bootstrap_ci
from tribunal.debate import DebateItem, build_debate
from tribunal.debate._turns import adjudicator_prompt
from tribunal.prompts import get_prompt
from tribunal_lab import cache_dir, data_root
from tribunal_lab.evaluation._sweep_stats import auroc, stratified_split
from tribunal_lab.evaluation.judge import load_items

_RESULTS = cache_dir("probes")


def _out_path(args: argparse.Namespace) -> Path:
    if args.out is not None:
        return Path(args.out)
    first, second = args.agents or (args.model, args.model)
    if first == second == args.model:
        return _RESULTS / f"debate-readout-{args.model}.jsonl"  # the homogeneous run's name
    return _RESULTS / f"debate-readout-{first}-vs-{second}-read-{args.model}.jsonl"


def _test_items(data: Path, limit: int) -> list[Any]:
    items = load_items("trec-dl", data, trec_pairs=300, seed=13)
    labels = np.array([int(i.label) for i in items], dtype=np.int64)
    _, test = stratified_split(labels, seed=13)
    order = np.random.default_rng(13).permutation(test)
    return [items[i] for i in order[:limit]]


def _run(args: argparse.Namespace) -> None:
    settings = load_settings(
        "tiny", llm_backend=args.backend, debate={"max_rounds": 1, "adjudicate": False}
    )
    agents = tuple(args.agents or (args.model, args.model))
    debate = build_debate(settings, agents=agents)  # type: ignore[arg-type]
    heterogeneous = agents[0] != agents[1]
    engine = shared_engine(settings, args.model)
    readout = get_prompt("debate/readout@1")
    yesno = get_prompt("relevance/yesno@1")
    out_path = _out_path(args)
    done = set()
    if out_path.is_file():
        done = {json.loads(line)["id"] for line in out_path.read_text().splitlines()}
    items = _test_items(args.data, args.limit)
    # Alternate by position in the fixed item order, so a resumed run swaps the same items.
    swapped = {item.id: heterogeneous and index % 2 == 1 for index, item in enumerate(items)}
    todo = [i for i in items if i.id not in done]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("a", encoding="utf-8") as out:
        for item in tqdm(todo, desc="debate + readout", unit="item"):
            query, passage = item.fields["query"], item.fields["passage"]
            debate_item = DebateItem(
                query=query, chunk=passage, item_id=item.id, swap_stance_order=swapped[item.id]
            )
            started = time.perf_counter()
            result = debate.assess(debate_item)
            debated = time.perf_counter() - started
            [round_one] = result.rounds[:1]
            started = time.perf_counter()
            # The adjudicator's layout (item, then both agents' final arguments) with the
            # readout's yes/no question instead of its JSON verdict.
            p_readout = engine.p_yes([adjudicator_prompt(readout, engine, debate_item, round_one)])
            read = time.perf_counter() - started
            p_plain = engine.p_yes([yesno.render(engine, query=query, passage=passage)])
            row = {
                "id": item.id,
                "label": int(item.label),
                "p_readout": p_readout[0],
                "p_yesno": p_plain[0],
                "agent_labels": [t.label.value if t.label else None for t in round_one.turns],
                "relevant_side": agents[1] if swapped[item.id] else agents[0],
                "debate_seconds": debated,
                "readout_seconds": read,
                "debate_tokens": result.usage.prompt_tokens + result.usage.completion_tokens,
            }
            out.write(json.dumps(row) + "\n")
            out.flush()


def _report(args: argparse.Namespace) -> None:
    out_path = _out_path(args)
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    print(f"{len(rows)} items ({sum(r['label'] for r in rows)} relevant), {out_path}")
    print("| scorer | items | AUROC [95% CI] | s/item |\n|---|---|---|---|")
    sides = sorted({r.get("relevant_side") for r in rows} - {None})
    subsets = [("all", rows)]
    if len(sides) > 1:  # heterogeneous: also each stance assignment on its own
        subsets += [
            (f"{side} argued relevant", [r for r in rows if r["relevant_side"] == side])
            for side in sides
        ]
    for subset, chosen in subsets:
        _report_rows(args.model, subset, chosen)
    for subset, chosen in subsets[1:]:  # does the stronger arguer pull the readout its way?
        mean = {y: np.mean([r["p_readout"] for r in chosen if r["label"] == y]) for y in (1, 0)}
        print(f"mean readout P(yes), {subset}: relevant {mean[1]:.3f}, irrelevant {mean[0]:.3f}")
        malformed = sum(None in r["agent_labels"] for r in chosen)
        conceded = sum(set(r["agent_labels"]) == {"irrelevant"} for r in chosen)
        print(f"{subset}: {malformed} items with a malformed turn, {conceded} both irrelevant")
    agree = np.mean([len(set(r["agent_labels"])) == 1 for r in rows])
    print(f"round-1 agreement (both agents gave one label): {agree:.0%}")


def _report_rows(model: str, subset: str, rows: list[dict[str, Any]]) -> None:
    y = np.array([r["label"] for r in rows], dtype=np.int64)
    for name, key, cost in (
        (f"{model} `relevance/yesno@1` (single judge), {subset}", "p_yesno", None),
        (f"{model} `debate/readout@1` after round 1, {subset}", "p_readout", "debate"),
    ):
        p = np.array([r[key] for r in rows])
        ranks = (np.argsort(np.argsort(p)) + 1) / len(p)  # bootstrap_ci wants [0, 1] values
        ci = bootstrap_ci(auroc, y, ranks, n_resamples=1000, seed=13)
        # The single judge's P(yes) may come from the answer cache: its time is not
        # this run's (one short prompt, ~1-2 s on these cores).
        seconds = (
            f"{np.mean([r['debate_seconds'] + r['readout_seconds'] for r in rows]):.1f}"
            if cost
            else "–"
        )
        print(
            f"| {name} | {len(rows)} ({int(y.sum())} +) "
            f"| {auroc(y, p):.3f} [{ci.low:.3f}, {ci.high:.3f}] | {seconds} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "report"))
    parser.add_argument("--data", type=Path, default=data_root())
    parser.add_argument(
        "--model", default="llm_strong", help="the readout's and single judge's model key"
    )
    parser.add_argument(
        "--agents", nargs=2, metavar=("M1", "M2"), help="two agents' model keys (default: --model)"
    )
    parser.add_argument("--backend", default="llamacpp")
    parser.add_argument("--limit", type=int, default=80, help="test-half items to run")
    parser.add_argument(
        "--out",
        type=Path,
        help="rows (default: $TRIBUNAL_LAB_CACHE/probes/ or .build/lab-cache/probes/, by models)",
    )
    args = parser.parse_args()
    (_run if args.action == "run" else _report)(args)


if __name__ == "__main__":
    main()
