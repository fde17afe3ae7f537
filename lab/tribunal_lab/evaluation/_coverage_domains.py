"""The development domains of ``tribunal-lab eval coverage``: a KB, a team's labelled
traffic and an untouched test split, built seeded from the data sets.

- **banking77** (77 fine-grained intents, train 10,003 / test 3,080 queries). A seeded
  set of intents is *held out*: left out of the KB, their queries are the out-of-scope
  ones (same domain, same wording: the hard case). Each remaining intent is one entry
  whose answer is a stub made from the intent's name (an FAQ: the answer is returned
  verbatim, only the match matters); its phrasings are seeded train queries. The
  traffic is a seeded sample of the *other* train queries (held-out intents included,
  labelled ``answers: []``); the test split is test.jsonl, which no step touches.
- **covid** (the demo's COVID FAQ and its 240 labelled user questions,
  ``tribunal-lab dataset covid-traffic``). A seeded share of the 240 is the test split;
  the rest is the traffic. Out-of-scope queries are BANKING77 queries (another domain:
  train ones in the traffic, test ones in the test split) at ``oos_share``. The FAQ has
  one question per entry, so the *phrased* KB adds the fit part of the traffic (the
  queries ``tribunal tune`` would fit on) as phrasings of the entries that answer
  them, as an admin approving reviewed links would (``tribunal kb phrasings approve``).
"""

from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tribunal.core import jsonl_rows
from tribunal.kb import KbEntry, phrasing_key

from ..datasets.banking77 import read_banking77

__all__ = ["CoverageDomain", "LabelledRow", "banking77_domain", "covid_domain", "intent_answer"]

LabelledRow = dict[str, Any]
"""``{"query": str, "answers": [entry ids]}``: a line of a traffic file."""


@dataclass(frozen=True)
class CoverageDomain:
    """One domain's KBs, traffic and test split."""

    name: str
    one: tuple[KbEntry, ...]
    """One phrasing per entry."""
    phrased: tuple[KbEntry, ...] | None
    """Several phrasings per entry; None: made from the tune's fit part of the traffic."""
    traffic: tuple[LabelledRow, ...]
    test: tuple[LabelledRow, ...]
    described: dict[str, Any] = field(default_factory=dict)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [row.value for row in jsonl_rows(path)]


def intent_answer(intent: str) -> str:
    """The stub answer of a BANKING77 intent ("card_arrival" -> "Card arrival.")."""
    return intent.replace("_", " ").capitalize() + "."


def banking77_domain(
    folder: Path,
    *,
    seed: int,
    traffic_size: int,
    heldout_intents: int,
    phrasings: int,
    test_size: int | None = None,
) -> CoverageDomain:
    """See the module docstring."""
    train, test, by_intent = read_banking77(folder)
    rng = random.Random(seed)
    intents = sorted({row["intent"] for row in train})
    outside = set(rng.sample(intents, heldout_intents))
    one: list[KbEntry] = []
    phrased: list[KbEntry] = []
    used: set[str] = set()
    for intent in intents:
        if intent in outside:
            continue
        chosen = rng.sample(sorted(set(by_intent[intent])), phrasings)
        used.update(chosen)
        answer = intent_answer(intent)
        one.append(KbEntry(intent, chosen[0], answer))
        # BANKING77 repeats a few queries up to case and spacing: one phrasing each (the
        # draw itself is unchanged, so draws without repeats stay as they were).
        distinct = {phrasing_key(text): text for text in reversed(chosen)}
        questions = tuple(
            text
            for text in dict.fromkeys(chosen[1:])
            if distinct.get(phrasing_key(text)) == text
            and phrasing_key(text) != phrasing_key(chosen[0])
        )
        phrased.append(KbEntry(intent, chosen[0], answer, questions=questions))

    def labelled(row: dict[str, str]) -> LabelledRow:
        answers = [] if row["intent"] in outside else [row["intent"]]
        return {"query": row["query"], "answers": answers}

    pool = [row for row in train if row["query"] not in used]
    traffic = [labelled(row) for row in rng.sample(pool, min(traffic_size, len(pool)))]
    if test_size is not None:
        test = random.Random(seed + 1).sample(test, min(test_size, len(test)))
    return CoverageDomain(
        "banking77",
        tuple(one),
        tuple(phrased),
        tuple(traffic),
        tuple(labelled(row) for row in test),
        {
            "entries": len(one),
            "phrasings_per_entry": phrasings,
            "out_of_scope": f"{heldout_intents} intents held out of the KB (seeded)",
            "heldout_intents": sorted(outside),
        },
    )


def covid_domain(
    covid: Path, banking: Path, *, seed: int, test_share: float, oos_share: float, chunk_chars: int
) -> CoverageDomain:
    """See the module docstring."""
    from tribunal.kb import deduplicate, read_entries

    from ..datasets.covid_traffic import build_covid_traffic

    entries, _ = deduplicate(
        read_entries(covid / "faq_kb_en.jsonl", record_format="faq", max_chars=chunk_chars)
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "covid-traffic.jsonl"
        build_covid_traffic(covid, path)
        labelled = _rows(path)
    rng = random.Random(seed)
    order = rng.sample(labelled, len(labelled))
    cut = round(test_share * len(order))
    test, traffic = order[:cut], order[cut:]

    def outside(rows: list[dict[str, Any]], count: int) -> list[LabelledRow]:
        return [{"query": r["query"], "answers": []} for r in rng.sample(rows, count)]

    def oos_count(answerable: int) -> int:
        return round(answerable * oos_share / (1.0 - oos_share))

    traffic += outside(_rows(banking / "train.jsonl"), oos_count(len(traffic)))
    test += outside(_rows(banking / "test.jsonl"), oos_count(len(test)))
    rows = [{"query": r["query"], "answers": list(r["answers"])} for r in traffic]
    return CoverageDomain(
        "covid",
        tuple(entries),
        None,
        tuple(rng.sample(rows, len(rows))),
        tuple({"query": r["query"], "answers": list(r["answers"])} for r in test),
        {
            "entries": len(entries),
            "labelled_queries": len(labelled),
            "out_of_scope": f"BANKING77 queries, {oos_share:.0%} of traffic and test",
        },
    )


def with_phrasings(
    entries: tuple[KbEntry, ...], rows: list[LabelledRow]
) -> tuple[tuple[KbEntry, ...], int]:
    """``entries`` with each row's query added as a phrasing of every entry answering it,
    and how many phrasings were added."""
    extra: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        for entry_id in row["answers"]:
            extra[entry_id].append(row["query"])
    added = 0
    out = []
    for entry in entries:
        new = [q for q in dict.fromkeys(extra.get(entry.id, [])) if q not in entry.phrasings()]
        added += len(new)
        out.append(replace(entry, questions=(*entry.questions, *new)) if new else entry)
    return tuple(out), added
