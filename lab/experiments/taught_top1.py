"""Does a tune's top-1 accuracy change with its taught phrasings or with its refitted head?

`tribunal tune` reports top-1 accuracy over the whole KB on its held-out queries before
(the served head, the KB before teaching) and after (the refitted head, the taught KB).
This separates the two changes: top-1 for each head on each KB, the same held-out
queries and answer sets, and the queries the served head gets right before teaching and
wrong after it, with the entry they went to and that entry's taught phrasings.

    PYTHONPATH=services .venv/bin/python lab/experiments/taught_top1.py \\
        --work .build/eval/leftout-covid/covid/work/taught --collection taught
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tribunal.confidence import read_traffic
from tribunal.core import load_settings
from tribunal.embedding import load_profile_embedder
from tribunal.ensemble import MatchFeaturesArtifact, features_path
from tribunal.retrieval import KnowledgeBase
from tribunal.tuning import EntryTexts, TunedMatcher, current_tuned_dir, pair_features, query_key


def _entries(settings: Any, collection: str) -> tuple[EntryTexts, EntryTexts]:
    """The collection's entries as taught, and with each entry's own question only."""
    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        stored = sorted(kb.collection(collection).store.iter_entries(), key=lambda e: e.id)
    finally:
        kb.close()
    ids = tuple(e.id for e in stored)
    questions = tuple(e.question for e in stored)
    answers = tuple(e.answer for e in stored)
    taught = EntryTexts(
        ids, questions, answers, tuple(e.phrasings() or (e.question,) for e in stored)
    )
    return taught, EntryTexts(ids, questions, answers, tuple((q,) for q in questions))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="an `eval coverage` work folder")
    parser.add_argument("--collection", default="taught")
    args = parser.parse_args()
    data = args.work / "data"
    settings = load_settings("tiny", data_dir=str(data))
    directory = current_tuned_dir(data, args.collection)
    if directory is None:
        parser.error(f"no tune of {args.collection!r} under {data}")
    tuned = TunedMatcher.load(directory)
    taught, untaught = _entries(settings, args.collection)
    held = set(tuned.manifest["split"]["heldout_keys"])
    rows = [
        q
        for q in read_traffic(args.work / "traffic.jsonl").queries
        if query_key(q.query) in held and q.answers
    ]
    column = {entry_id: j for j, entry_id in enumerate(taught.ids)}
    right = np.zeros((len(rows), len(taught.ids)), dtype=bool)
    for i, query in enumerate(rows):
        right[i, [column[a] for a in query.answers if a in column]] = True
    served = MatchFeaturesArtifact.load(features_path(settings))
    heads = {"served": served, "refitted": MatchFeaturesArtifact.load(tuned.head_path)}
    embedder = load_profile_embedder(settings, served.embedder.model_key)
    queries = [q.query for q in rows]
    kbs = {
        "before teaching": pair_features(queries, untaught, embedder),
        "taught": pair_features(queries, taught, embedder),
    }
    best: dict[tuple[str, str], NDArray[np.int64]] = {}
    print(f"{len(rows)} answerable held-out queries\n\n| head | KB | top-1 |\n|---|---|---|")
    for head_name, head in heads.items():
        for kb_name, features in kbs.items():
            flat = {name: values.ravel() for name, values in features.values.items()}
            chosen = np.argmax(head.p_match(flat).reshape(right.shape), axis=1)
            best[(head_name, kb_name)] = chosen
            top1 = right[np.arange(len(rows)), chosen].mean()
            print(f"| {head_name} | {kb_name} | {top1:.3f} |")
    before, after = best[("served", "before teaching")], best[("served", "taught")]
    lost = [i for i in range(len(rows)) if right[i, before[i]] and not right[i, after[i]]]
    won = sum(1 for i in range(len(rows)) if not right[i, before[i]] and right[i, after[i]])
    print(
        f"\nthe served head: {len(lost)} right before teaching and wrong after, {won} the reverse"
    )
    for i in lost:
        j = int(after[i])
        answers = [taught.questions[k] for k in np.flatnonzero(right[i])]
        print(f"\n- {queries[i]!r}\n  right: {answers}")
        print(f"  went to: {taught.questions[j]!r}; taught: {list(taught.phrasings[j][1:])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
