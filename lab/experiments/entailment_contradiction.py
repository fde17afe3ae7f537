"""Entailment probe: does asking the 1.5B about *contradiction* fix its errors?

On 400 SciFact pairs the strong checker (`entailment/support@1`) calls a quarter of the
CONTRADICT pairs supported even at its best threshold (docs/results/). This probe asks
the same model a second yes/no question, "does the evidence contradict the claim?", on
the same 400 pairs (seed 13, in the sample's own order, so a stopped run leaves a random
prefix; rows append to ``--out`` and a rerun skips them, the answer cache keeps the
model's answers), then reports the two prompts alone and their logistic combination
through the sweep's analysis (fitted on the selection half, reported on the test half).
Run from the repository root::

    .venv/bin/python lab/experiments/entailment_contradiction.py score \\
        --out lab/results/probes/contradict-llm_strong.jsonl
    .venv/bin/python lab/experiments/entailment_contradiction.py report \\
        --out lab/results/probes/contradict-llm_strong.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
from tqdm import tqdm
from tribunal.core import load_settings
from tribunal.core.llm import shared_engine
from tribunal.prompts import get_prompt
from tribunal.prompts._template import PromptTemplate
from tribunal_lab import data_root, read_jsonl
from tribunal_lab.evaluation import sweep
from tribunal_lab.evaluation._sweep_stats import Judge
from tribunal_lab.evaluation.judge import load_items

DATA = data_root()
PAIRS = 400
CONTRADICT = PromptTemplate(
    role="entailment",
    name="contradict",
    version=1,
    system="You are a meticulous fact checker.",
    instructions=(
        "You check whether a piece of evidence contradicts a claim. Answer Yes if the "
        "evidence reports a finding opposite to the claim (the other direction, no effect "
        "where the claim says there is one, or the reverse) or otherwise shows the claim is "
        "false. Answer No if the evidence supports the claim, is about something else, or "
        "does not say enough to decide."
    ),
    item="Evidence: {evidence}\nClaim: {claim}",
    question="Does the evidence contradict the claim? Answer Yes or No.",
    truncatable="evidence",
)


def score(args: argparse.Namespace) -> None:
    rows = list(read_jsonl(DATA / "scifact" / "nli_pairs_train.jsonl"))
    # load_items draws the same sample and sorts it by abstract; keep the draw's order.
    order = [f"{r['claim_id']}:{r['doc_id']}" for r in random.Random(13).sample(rows, PAIRS)]
    items = {i.id: i for i in load_items("scifact", DATA, scifact_pairs=PAIRS, seed=13)}
    settings = load_settings("tiny")
    llm = settings.llm.model_copy(
        update={"response_cache": Path(".build/answers.sqlite"), "n_threads": args.threads}
    )
    engine = shared_engine(
        settings.model_copy(update={"llm": llm}), "llm_strong", backend="transformers"
    )
    support = get_prompt("entailment/support@1")
    done = {row["id"] for row in read_jsonl(args.out)} if args.out.exists() else set()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as out:
        for start in tqdm(range(0, PAIRS, 4), desc="contradict + support (1.5B)", unit="x4"):
            chunk = [items[i] for i in order[start : start + 4] if i not in done]
            if not chunk:
                continue
            p_contradict = engine.judge([CONTRADICT.render(engine, **i.fields) for i in chunk])
            p_support = engine.judge([support.render(engine, **i.fields) for i in chunk])
            for item, pc, ps in zip(chunk, p_contradict.p_yes, p_support.p_yes, strict=True):
                row = {"id": item.id, "label": item.label, "p_contradict": pc, "p_support": ps}
                out.write(json.dumps(row) + "\n")
            out.flush()


def report(args: argparse.Namespace) -> None:
    rows = list({row["id"]: row for row in read_jsonl(args.out)}.values())
    gold = {
        f"{r['claim_id']}:{r['doc_id']}": r["label"]
        for r in read_jsonl(DATA / "scifact" / "nli_pairs_train.jsonl")
    }
    y = np.array([row["label"] for row in rows])
    p_support = np.array([row["p_support"] for row in rows])
    p_contradict = np.array([row["p_contradict"] for row in rows])
    labels = np.array([gold[row["id"]] for row in rows])
    print(f"{len(rows)} pairs\n\n| SciFact label (n) | mean P(support) | mean P(contradict) |")
    print("|---|---|---|")
    for name in ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"):
        m = labels == name
        print(f"| {name} ({m.sum()}) | {p_support[m].mean():.3f} | {p_contradict[m].mean():.3f} |")
    zeros = np.zeros(len(rows))
    judges = {
        name: Judge(name, "single", (name,), p, zeros, zeros)
        for name, p in (("1.5B:support", p_support), ("1.5B:not-contradict", 1 - p_contradict))
    }
    result = sweep.analyse(judges, y, task="entailment", seed=13, max_escalation=0.15)
    result.update(task="entailment", date="-", items=len(rows), engines={"backend": "-"})
    print(sweep.markdown(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(required=True)
    run = commands.add_parser("score", help="ask both questions on the 400 pairs")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--threads", type=int, default=1)
    run.set_defaults(run=score)
    rep = commands.add_parser("report", help="the sweep's analysis of the two prompts")
    rep.add_argument("--out", type=Path, required=True)
    rep.set_defaults(run=report)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
