"""``tribunal-lab eval NAME``: the papers' metrics on the development data sets.

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
    "debate": (
        "tribunal_lab.evaluation.debate",
        "DREAM debate vs single judge on TREC DL: bAcc on non-escalated, escalation, cost, swap",
    ),
    "entailment": (
        "tribunal_lab.evaluation.entailment",
        "entailment cascade on SciFact and SICK: stage 1, stage 2, cascade (bAcc, AUROC, cost)",
    ),
    "judge": (
        "tribunal_lab.evaluation.judge",
        "single yes/no LLM judge: SciFact support and TREC DL relevance (bAcc, AUROC, s/item)",
    ),
    "matching-features": (
        "tribunal_lab.evaluation.matching_features",
        "KB-entry matching from embedder cosines + token overlap (no LLM): LR and thresholds "
        "fitted on a selection half, accuracy / hallucination / coverage / AUROC on the test half",
    ),
    "sweep": (
        "tribunal_lab.evaluation.sweep",
        "prompt variants x models of the yes/no judges: calibrated, selected on one split, "
        "reported on another (bAcc, AUROC, ECE, cascade escalation, cost, 95%% CIs)",
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
