"""``tribunal-lab eval NAME``: the papers' metrics on the development sets or a labelled file.

Each evaluation is a module of :mod:`tribunal_lab.evaluation` that defines
``add_arguments(parser)`` and ``run(args) -> int``; it is imported only when the
``eval`` parser is built. Results go to JSON and a markdown table.
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["EVALUATIONS", "register"]

# name -> (module, one-line help)
EVALUATIONS: dict[str, tuple[str, str]] = {
    "coverage": (
        "tribunal_lab.evaluation.coverage",
        "certified coverage of one KB before and after phrasings and tribunal tune, per "
        "alpha and risk-control method, realized on an untouched test split (BANKING77, COVID)",
    ),
    "debate": (
        "tribunal_lab.evaluation.debate",
        "DREAM debate vs single judge on TREC DL: bAcc on non-escalated, escalation, cost, swap",
    ),
    "entailment": (
        "tribunal_lab.evaluation.entailment",
        "entailment cascade on a labelled file or SciFact and SICK: stage 1, stage 2, cascade "
        "(bAcc, AUROC, cost), each row at its stated decision point",
    ),
    "judge": (
        "tribunal_lab.evaluation.judge",
        "single yes/no LLM judge: SciFact support and TREC DL relevance, or a labelled file "
        "(bAcc, AUROC, s/item)",
    ),
    "relevance": (
        "tribunal_lab.evaluation.relevance",
        "the relevance judge as shipped (an artifact, not refitted) on a labelled file of "
        "relevance pairs: judge mode and the cascade band, each at its stated decision point",
    ),
    "label-plan": (
        "tribunal_lab.evaluation.label_plan",
        "certified auto-labels on judged pairs split by query: plan on one half, label the "
        "other (humans needed and automatic-label error per epsilon, repeated splits)",
    ),
    "label-evaluate": (
        "tribunal_lab.evaluation.label_evaluate",
        "retriever metrics from judge labels + a human sample on TREC DL 2019 against the "
        "full qrels: interval coverage, width vs humans only, pairwise signs, Kendall tau",
    ),
    "matching-features": (
        "tribunal_lab.evaluation.matching_features",
        "KB-entry matching from embedder cosines + token overlap (no LLM): fit on a selection "
        "half and report on the test half, or score a given matcher on a labelled file (--data)",
    ),
    "sweep": (
        "tribunal_lab.evaluation.sweep",
        "prompt variants x models of the yes/no judges: calibrated, selected on one split, "
        "reported on another (bAcc, AUROC, ECE, cascade escalation, cost, 95%% CIs)",
    ),
    "relevance-judges": (
        "tribunal_lab.evaluation.relevance_judges",
        "relevance judges from frozen embeddings (MPNet, EmbeddingGemma cosines, learned "
        "heads): trained, selected and tested on different queries (AUROC, bAcc)",
    ),
    "retrieval": (
        "tribunal_lab.evaluation.retrieval",
        "BM25, dense, hybrid (and hybrid+rerank) nDCG@10 / Recall@100 on BEIR SciFact",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("eval", help="evaluate a stage on the development data sets")
    actions = parser.add_subparsers(dest="evaluation", required=True, metavar="EVALUATION")
    for name, (module_name, summary) in sorted(EVALUATIONS.items()):
        module = importlib.import_module(module_name)
        child = actions.add_parser(name, help=summary, description=module.__doc__)
        module.add_arguments(child)
        child.set_defaults(func=module.run)
