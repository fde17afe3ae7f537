"""``tribunal-lab dataset matching|question-similarity|covid-traffic``: the labelled sets
the product trains and calibrates on.

``matching`` writes the ensemble's matching set (the folder ``tribunal ensemble
train|evaluate|export-signals`` read) and has every judge judge it: resumable, cheapest
model first. ``question-similarity`` writes labelled confidence signals from COVID-QA
question pairs (``tribunal confidence fit|evaluate|report --data`` read them).
``covid-traffic`` writes COVID-QA's user questions labelled by answer equivalence (the
traffic ``tribunal calibrate --traffic`` reads).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._paths import data_root

__all__ = ["register"]

_MATCHING = Path(".build/ensemble/dataset")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("dataset", help="build the labelled sets the product trains on")
    actions = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")

    matching = actions.add_parser(
        "matching",
        help="labelled (query, KB entry) pairs from COVID-QA and STS-B, judged by every judge",
        description="Items: each COVID-QA query's top-1 FAQ entry (label 1 iff it is the entry "
        "the query paraphrases), the top-1 with that entry held out for a seeded share of the "
        "queries, and a seeded balanced STS-B dev sample. Then every judge judges every item, "
        "model by model, cheapest first; verdicts are appended as they come (rerun to resume).",
    )
    matching.add_argument(
        "--data", type=Path, default=data_root(), help="data sets folder (covid-qa, stsb)"
    )
    matching.add_argument("--out", type=Path, default=_MATCHING, help="dataset folder")
    matching.add_argument("--seed", type=int, default=13, help="sampling and item-order seed")
    matching.add_argument(
        "--heldout-share", type=float, default=0.5, help="share of COVID queries also held out"
    )
    matching.add_argument("--stsb-per-label", type=int, default=150, help="STS-B pairs per label")
    matching.add_argument(
        "--models", nargs="+", default=None, help="judge only with these model keys (in order)"
    )
    matching.add_argument("--limit", type=int, default=None, help="judge only the first N items")
    matching.add_argument(
        "--chunk-items",
        type=int,
        default=1,
        help="items per engine call (1: an item's two prompts share their prefix in one call)",
    )
    matching.add_argument(
        "--items-only", action="store_true", help="write the items, judge nothing"
    )
    matching.add_argument("--profile", default=None, help="profile name or YAML path")
    matching.add_argument(
        "--backend",
        choices=("transformers", "llamacpp", "openai"),
        default=None,
        help="LLM backend (default: the profile's llm_backend)",
    )
    matching.set_defaults(func=_matching)

    signals = actions.add_parser(
        "question-similarity",
        help="labelled confidence signals from COVID-QA question pairs "
        "(embedder cosine + token-set ratio)",
    )
    signals.add_argument(
        "--source",
        type=Path,
        default=data_root() / "covid-qa" / "question_similarity_en.jsonl",
        help="question_similarity_en.jsonl (default: DATA/covid-qa/)",
    )
    signals.add_argument("-o", "--output", type=Path, required=True, help="JSONL to write")
    signals.add_argument(
        "--limit-per-label", type=int, default=None, help="first N pairs per label"
    )
    signals.add_argument("--profile", default=None, help="profile name or YAML path (embedder)")
    signals.set_defaults(func=_question_similarity)

    traffic = actions.add_parser(
        "covid-traffic",
        help="COVID-QA user questions with every FAQ entry that answers them "
        "(for `tribunal calibrate --traffic`)",
        description="Each user question the pairs file links to an FAQ entry, with that entry, "
        "every entry of its answer-equivalence class and an entry asking the question "
        "verbatim; questions linked to no entry are left out.",
    )
    traffic.add_argument(
        "--data", type=Path, default=data_root() / "covid-qa", help="covid-qa folder"
    )
    traffic.add_argument("-o", "--out", type=Path, required=True, help="JSONL to write")
    traffic.add_argument(
        "--classes", type=Path, default=None, help="answer classes (default: the committed ones)"
    )
    traffic.add_argument(
        "--pairs-only",
        action="store_true",
        help="label by the pairs file's single link (no classes): the labelling to compare",
    )
    traffic.add_argument("--profile", default=None, help="profile (chunk size of ingestion)")
    traffic.set_defaults(func=_covid_traffic)


def _matching(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.ensemble import JudgePanel, judge_specs

    from ..datasets.matching import build_items, judge_items

    settings = load_settings(args.profile)
    items = build_items(
        settings,
        args.data,
        args.out,
        seed=args.seed,
        heldout_share=args.heldout_share,
        stsb_per_label=args.stsb_per_label,
    )
    manifest = json.loads((args.out / "manifest.json").read_text(encoding="utf-8"))
    print(f"{len(items)} items in {args.out}: {json.dumps(manifest['sources'])}")
    if args.items_only:
        return 0
    assert settings.roles is not None
    # Cheapest model first: the profile lists judges strongest first.
    order = args.models or list(reversed(settings.roles.judges))
    specs = judge_specs(settings)
    names = [s.name for m in order for s in specs if s.model_key == m]
    panel = JudgePanel.from_settings(settings, names, backend=args.backend)
    try:
        chosen = items[: args.limit] if args.limit else items
        judge_items(panel, chosen, args.out, chunk_items=args.chunk_items)
    finally:
        panel.close()
    print(f"judged {len(chosen)} items with {', '.join(names)}")
    return 0


def _question_similarity(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings

    from ..datasets.question_similarity import build_question_similarity_signals

    summary = build_question_similarity_signals(
        load_settings(args.profile),
        args.source,
        args.output,
        limit_per_label=args.limit_per_label,
    )
    print(json.dumps(summary, indent=2))
    return 0


def _covid_traffic(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings

    from ..datasets.covid_traffic import CLASSES_PATH, build_covid_traffic

    settings = load_settings(args.profile)
    summary = build_covid_traffic(
        args.data,
        args.out,
        classes_path=None if args.pairs_only else (args.classes or CLASSES_PATH),
        chunk_chars=settings.retrieval.chunk_size_chars,
    )
    print(json.dumps(summary, indent=2))
    return 0
