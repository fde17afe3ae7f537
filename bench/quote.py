"""Quote alignment: the bounded quote check against one full fuzzy alignment, side by side.

Premises: COVID FAQ answers joined to ``--premise-chars`` characters (the entailment
service's ``max_premise_chars`` is 20,000). For each quote length, two quotes: a span of
the premise with every 8th word changed (found, ratio >= 90), and a span of the
FAQ's answers not in the premise (absent). Per quote: the time of rapidfuzz's
``partial_ratio_alignment`` over the whole normalised premise (normalisation included),
as the check did before it was bounded, and of
``QuoteChecker.find`` (normalisation, the 3-gram prefilter, alignment of its windows;
quotes over ``max_quote_chars`` are matched exactly only), their ratio, and whether
both agree on found / not found.

    .venv/bin/python bench/quote.py [--premise-chars 20000] [--lengths 250,500,1000,2000,5000]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from rapidfuzz import fuzz
from tribunal.entailment._quote import QuoteChecker, normalise_with_offsets

FAQ = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa" / "faq_kb_en.jsonl"


def _texts() -> list[str]:
    rows = [json.loads(line) for line in FAQ.read_text().splitlines() if line.strip()]
    return [" ".join(str(row["answer"]).split()) for row in rows]


def _changed(span: str, rng: random.Random) -> str:
    words = span.split(" ")
    for i in range(3, len(words), 8):
        words[i] = rng.choice(["often", "people", "may", "never", "health"])
    return " ".join(words)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--premise-chars", type=int, default=20_000)
    parser.add_argument("--lengths", default="250,500,1000,2000,5000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = _texts()
    half = len(texts) // 2
    premise = " ".join(texts[:half])[: args.premise_chars]
    elsewhere = " ".join(texts[half:])
    checker = QuoteChecker(max_quote_chars=1_000)
    print("| quote chars | quote | full alignment s | bounded check s | full / bounded | agree |")
    print("|---|---|---|---|---|---|")
    for length in (int(x) for x in args.lengths.split(",")):
        start = rng.randrange(0, len(premise) - length)
        other = rng.randrange(0, len(elsewhere) - length)
        quotes = {
            "present, edited": _changed(premise[start : start + length], rng),
            "absent": elsewhere[other : other + length],
        }
        for what, quote in quotes.items():
            started = time.perf_counter()  # what the check did before: normalise, align all
            normalised, _ = normalise_with_offsets(premise)
            full = fuzz.partial_ratio_alignment(normalise_with_offsets(quote)[0], normalised)
            full_s = time.perf_counter() - started
            started = time.perf_counter()
            bounded = checker.find(premise, quote)
            bounded_s = time.perf_counter() - started
            full_found = full is not None and full.score >= checker.min_ratio
            print(
                f"| {length} | {what} | {full_s:.3f} | {bounded_s:.3f} | "
                f"{full_s / bounded_s:.1f}x | {'yes' if full_found == bounded.found else 'no'} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
