"""Yes/no judging speed of the LLM engine vs RAL2M's way, per backend, in one run.

Workload: the RAL2M judge prompt (``matching/ral2m@1``) on COVID-QA query ↔ FAQ
pairs (``../shared/data/covid-qa/question_similarity_en.jsonl``), with the 1.5B
model. Per backend, the same items are judged in five ways:

- ``ral2m``: generate "Yes"/"No" text greedily (max_new_tokens=8), one prompt at a
  time, no KV reuse between prompts: what RAL2M's code does (HF ``generate``);
- ``gen+reuse``: the same generation with the shared prefix kept (llama.cpp's
  default, as measured in MODELS.md);
- ``p_yes``: P(yes) from one forward pass, one prompt at a time, no reuse;
- ``p_yes+reuse``: the same with the prefix KV cache kept between prompts;
- ``p_yes+reuse, batch 8``: batches of 8 sharing the prefix computed once.

Printed: judgments/s of each, the speed-up over ``ral2m``, and how often each
agrees with ``ral2m``'s verdict. Machines here are shared and noisy: compare
ratios within one run, not absolute rates across runs.

    .venv/bin/python bench/llm_engine.py [--items 16] [--candidates 1] [--backends ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tribunal.core import load_settings
from tribunal.core.llm import LLMEngine, Prompt, create_engine
from tribunal.prompts import get_prompt

DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "covid-qa"
    / "question_similarity_en.jsonl"
)


def _items(count: int, candidates: int) -> list[tuple[Prompt, int]]:
    """``count`` judgments: each user query against ``candidates`` KB entries.

    With one candidate a prompt shares only the instructions with the next; with
    several (RAL2M judges its top-k retrieved pairs per query) the query is shared too.
    The first candidate is the query's true FAQ entry, the others are other entries.
    """
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    positives = [r for r in rows if r["label"] == 1]
    negatives = [r for r in rows if r["label"] == 0]
    template = get_prompt("matching/ral2m@1")
    pairs: list[tuple[str, dict[str, str]]] = []  # (user query, KB entry)
    if candidates == 1:  # the data's own pairs, positives and negatives alternating
        chosen = [r for pair in zip(positives, negatives, strict=False) for r in pair][:count]
        pairs = [(r["question_2"], r) for r in chosen]
    else:
        for index, row in enumerate(positives[: -(-count // candidates)]):
            pairs += [
                (row["question_2"], positives[(index + offset * 37) % len(positives)])
                for offset in range(candidates)
            ]
    queries = {r["question_2"]: r["question_1"] for r in positives}
    return [
        (
            template.render(query=query, question=kb["question_1"], answer=kb["q1_faq_answer"]),
            int(queries.get(query) == kb["question_1"]),
        )
        for query, kb in pairs[:count]
    ]


def _with(engine: LLMEngine[Any], **changes: Any) -> None:
    engine.settings = engine.settings.model_copy(update=changes)


def _generated_verdicts(engine: LLMEngine[Any], prompts: list[Prompt]) -> list[bool]:
    verdicts = []
    for prompt in prompts:
        [answer] = engine.generate([prompt], max_new_tokens=8)
        verdicts.append(answer.text.strip().lower().startswith("yes"))
    return verdicts


def _scored_verdicts(engine: LLMEngine[Any], prompts: list[Prompt], batch: int) -> list[bool]:
    scores: list[float] = []
    for start in range(0, len(prompts), batch):
        scores += engine.p_yes(prompts[start : start + batch])
    return [s >= 0.5 for s in scores]


def _measure(
    engine: LLMEngine[Any], prompts: list[Prompt], reuse: bool, run: Callable[[], list[bool]]
) -> tuple[float, list[bool]]:
    _with(engine, prefix_cache=reuse)
    engine.p_yes([prompts[-1]])  # warm up, and leave a different prompt in the cache
    started = time.perf_counter()
    verdicts = run()
    return len(prompts) / (time.perf_counter() - started), verdicts


def bench_backend(backend: str, items: list[tuple[Prompt, int]], batch: int) -> None:
    """Print one table for ``backend``, a row as soon as it is measured."""
    settings = load_settings("tiny")
    started = time.perf_counter()
    engine = create_engine(settings, "llm_strong", backend=backend)
    load = time.perf_counter() - started
    _with(engine, batch_size=batch)
    prompts = [p for p, _ in items]
    labels = [bool(y) for _, y in items]
    ways: list[tuple[str, bool, Callable[[], list[bool]]]] = [
        ("ral2m (generate 8, one by one)", False, lambda: _generated_verdicts(engine, prompts)),
        ("gen+reuse (generate 8, prefix kept)", True, lambda: _generated_verdicts(engine, prompts)),
        ("p_yes (one by one, no reuse)", False, lambda: _scored_verdicts(engine, prompts, 1)),
        ("p_yes+reuse (one by one)", True, lambda: _scored_verdicts(engine, prompts, 1)),
        (f"p_yes+reuse, batch {batch}", True, lambda: _scored_verdicts(engine, prompts, batch)),
    ]  # fmt: skip
    if backend == "transformers":
        # Its generate() keeps no prefix between calls: the row would repeat ral2m's.
        ways.pop(1)
    print(f"\n{backend}: {len(prompts)} judgments each, model loaded in {load:.1f} s")
    print("| way | judgments/s | × ral2m | agrees with ral2m | accuracy |\n|---|---|---|---|---|")
    base_rate, base_verdicts = 0.0, []
    for name, reuse, run in ways:
        rate, verdicts = _measure(engine, prompts, reuse, run)
        if not base_verdicts:  # the first way, RAL2M's, is the baseline
            base_rate, base_verdicts = rate, verdicts
        agree = sum(a == b for a, b in zip(verdicts, base_verdicts, strict=True)) / len(prompts)
        accuracy = sum(v == y for v, y in zip(verdicts, labels, strict=True)) / len(prompts)
        print(
            f"| {name} | {rate:.3f} | {rate / base_rate:.2f} | {agree:.2f} | {accuracy:.2f} |",
            flush=True,
        )
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument(
        "--candidates", type=int, default=1, help="KB candidates judged per user query"
    )
    available = ["transformers"] + (["llamacpp"] if importlib.util.find_spec("llama_cpp") else [])
    parser.add_argument("--backends", nargs="+", default=available, choices=available)
    args = parser.parse_args()
    items = _items(args.items, args.candidates)
    for backend in args.backends:
        bench_backend(backend, items, args.batch)


if __name__ == "__main__":
    main()
