"""``tribunal eval NAME``: the papers' metrics on ``../shared/data`` sets.

Each evaluation registers a module here that defines
``add_arguments(parser)`` and ``run(args) -> int``; it is imported only when
its subcommand runs or its ``--help`` is built. Results go to JSON and a
markdown table.
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["EVALUATIONS", "register"]

# name -> (module, one-line help); each issue adds its evaluation.
EVALUATIONS: dict[str, tuple[str, str]] = {
    "debate": (
        "tribunal.evaluation.debate",
        "DREAM debate vs single judge on TREC DL: bAcc on non-escalated, escalation, cost, swap",
    ),
    "entailment": (
        "tribunal.evaluation.entailment",
        "entailment cascade on SciFact and SICK: stage 1, stage 2, cascade (bAcc, AUROC, cost)",
    ),
    "judge": (
        "tribunal.evaluation.judge",
        "single yes/no LLM judge: SciFact support and TREC DL relevance (bAcc, AUROC, s/item)",
    ),
    "matching-features": (
        "tribunal.evaluation.matching_features",
        "KB-entry matching from embedder cosines + token overlap (no LLM): LR and thresholds "
        "fitted on a selection half, accuracy / hallucination / coverage / AUROC on the test half",
    ),
    "sweep": (
        "tribunal.evaluation.sweep",
        "prompt variants x models of the yes/no judges: calibrated, selected on one split, "
        "reported on another (bAcc, AUROC, ECE, cascade escalation, cost, 95%% CIs)",
    ),
    "retrieval": (
        "tribunal.evaluation.retrieval",
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
