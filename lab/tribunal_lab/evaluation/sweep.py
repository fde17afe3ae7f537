"""Prompt × model sweep of the yes/no judges, selected on one split, reported on another.

    tribunal-lab eval sweep --task relevance --models llm_weak [llm_strong]
        --variants relevance/yesno@1 relevance/answers@1 ... [--pairs 300] [--seed 13]

Items are drawn exactly as ``tribunal-lab eval judge`` draws them (``relevance``: TREC DL
2019 pairs, positive = grade ≥ 2; ``entailment``: SciFact NLI pairs, positive =
SUPPORT), then split, stratified by label and seeded, into a *selection* half and a
*test* half. For every (model, prompt variant) the engine gives P(yes) for all items
(through the persistent answer cache ``llm.response_cache``: a rerun or a bigger
sweep recomputes nothing). On the selection half only, each judge gets:

- a threshold (max balanced accuracy), a Platt (logistic on logit P) and an
  isotonic calibrator;
- for relevance, the cascade's uncertain band: at most ``--max-escalation`` of the
  items escalated, maximising balanced accuracy on the rest;
- ensembles: per model over its prompt variants (self-ensemble) and over the models'
  best variants (cross-model): logistic regression on the members' logit(P(yes)),
  out-of-fold on selection;
- the winner: the best selection figure (cascade bAcc for relevance, bAcc otherwise).

``--features cosine`` / ``cosine:MODEL_KEY`` add non-LLM judges: the cosine of the
embedder role or of any embedder model of the profile between the two texts of a pair
(query and passage; claim and evidence) (judge ``MODEL_KEY:cosine``).

The test half is only reported on: balanced accuracy and class recalls at the
selected threshold, AUROC, ECE (raw, Platt, isotonic), the cascade's kept-item bAcc
and escalation, seconds and prompt tokens per item, with 95% bootstrap intervals.
Writes JSON and a markdown table (``--out``; ``.md`` beside it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.core import InvalidArgumentError

from .._paths import data_root
from ._sweep_stats import (
    Fitted,
    Judge,
    feature_values,
    fit_judge,
    oof_ensemble,
    report_on_test,
    stratified_split,
)

__all__ = ["TASKS", "add_arguments", "analyse", "cosine_features", "markdown", "run"]

TASKS = {"relevance": "trec-dl", "entailment": "scifact"}
# The two texts of a pair the cosine features compare, per task.
_PAIR_FIELDS = {"relevance": ("query", "passage"), "entailment": ("claim", "evidence")}
_DEFAULT_VARIANTS = {
    "relevance": ["relevance/yesno@1"],
    "entailment": ["entailment/support@1"],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--models", nargs="+", default=["llm_weak"], help="model keys")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="prompt ids (role/name@version) of the task's role (default: the role's default)",
    )
    parser.add_argument("--pairs", type=int, default=300, help="pairs to sample (0: all SciFact)")
    parser.add_argument("--seed", type=int, default=13, help="sampling, split and bootstrap seed")
    parser.add_argument(
        "--backend",
        choices=("transformers", "llamacpp", "openai"),
        default=None,
        help="LLM backend (default: the profile's llm_backend)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=data_root(),
        help="a labelled FILE (relevance pairs for --task relevance, entailment pairs for "
        "entailment; docs/evaluation.md), or the data sets FOLDER",
    )
    parser.add_argument(
        "--max-escalation",
        type=float,
        default=0.15,
        help="relevance: most items the cascade's band may escalate (share)",
    )
    parser.add_argument(
        "--features",
        nargs="*",
        default=[],
        metavar="cosine[:MODEL_KEY]",
        help="non-LLM judges to add: the cosine between the pair's texts (query-passage, "
        "claim-evidence) of the profile's "
        "embedder role (cosine) or of any embedder model of the profile (cosine:MODEL_KEY); "
        "judge MODEL_KEY:cosine, e.g. embedder:cosine, embedder_large:cosine",
    )
    parser.add_argument(
        "--export-relevance",
        type=Path,
        default=None,
        help="relevance: write the exported judge (--export-judge, default the winner) as "
        "the ensemble's relevance artifact (tribunal.relevance/1 JSON) to this path",
    )
    parser.add_argument(
        "--export-judge", default=None, help="judge row to export (default: the winner)"
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument(
        "--response-cache",
        type=Path,
        default=None,
        help="answer cache (default: llm.response_cache, else .build/answers.sqlite)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON report (default .build/eval/sweep-TASK.json)"
    )


def _score(args: argparse.Namespace, items: list[Any]) -> tuple[dict[str, Judge], dict[str, str]]:
    """P(yes), seconds and prompt tokens per item for every (model, variant)."""
    from tqdm import tqdm
    from tribunal.core import load_settings
    from tribunal.core.llm import shared_engine
    from tribunal.prompts import get_prompt

    settings = load_settings(args.profile)
    # Checked before any LLM runs: a typo should not cost a sweep.
    embedder_keys = cosine_features(args.features, settings)
    cache = args.response_cache or settings.llm.response_cache or Path(".build/answers.sqlite")
    settings = settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"response_cache": cache})}
    )
    backend = args.backend or settings.llm_backend
    role = args.task
    templates = [get_prompt(v) for v in args.variants or _DEFAULT_VARIANTS[role]]
    for template in templates:
        if template.role != role:
            raise InvalidArgumentError(
                f"--variants: {template.id} is a {template.role} prompt; --task {role} "
                f"needs {role}/NAME@VERSION ids (tribunal.prompts.list_prompts())",
                field="variants",
            )
    judges: dict[str, Judge] = {}
    names: dict[str, str] = {}
    batch = settings.llm.batch_size
    for model in args.models:
        engine = shared_engine(settings, model, backend=backend)
        names[model] = engine.model_name
        for template in templates:
            p = np.zeros(len(items))
            seconds = np.zeros(len(items))
            tokens = np.zeros(len(items))
            with tqdm(total=len(items), desc=f"{model} {template.id}", unit="item") as bar:
                for start in range(0, len(items), batch):
                    chunk = items[start : start + batch]
                    result = engine.judge([template.render(engine, **i.fields) for i in chunk])
                    where = slice(start, start + len(chunk))
                    p[where] = result.p_yes
                    # A batch reports one usage: each item gets an equal share.
                    seconds[where] = result.usage.seconds / len(chunk)
                    tokens[where] = result.usage.prompt_tokens / len(chunk)
                    bar.update(len(chunk))
            name = f"{model}:{template.id}"
            judges[name] = Judge(name, "single", (name,), p, seconds, tokens)
    for key in embedder_keys:
        judge = _cosine_judge(settings, key, items, _PAIR_FIELDS[role])
        judges[judge.name] = judge
        names[key] = str(settings.model_spec(key).artifact or settings.model_spec(key).hf_id)
    return judges, {"backend": backend, "response_cache": str(cache), **names}


def cosine_features(features: list[str], settings: Any) -> list[str]:
    """The embedder model keys of ``--features`` (``cosine``: the embedder role), in order,
    once each.

    Raises:
        InvalidArgumentError: not ``cosine[:MODEL_KEY]``, an unknown key, or a key that
            is not an embedder.
    """
    embedders = settings.model_keys("embedder")
    keys: list[str] = []
    for feature in features:
        name, _, key = feature.partition(":")
        if name != "cosine" or (feature != "cosine" and not key):
            raise InvalidArgumentError(
                f"--features {feature!r}: expected cosine or cosine:MODEL_KEY",
                field="features",
            )
        if settings.roles is None:
            # The embedder loader reads roles.embedder.
            raise InvalidArgumentError(
                f"--features {feature}: profile {settings.profile!r} defines no roles",
                field="features",
            )
        key = key or settings.roles.embedder
        spec = settings.models.get(key)
        if spec is None or spec.kind != "embedder":
            what = "not a model" if spec is None else f"a model of kind {spec.kind}"
            raise InvalidArgumentError(
                f"--features {feature}: {key!r} is {what} in profile {settings.profile!r}; "
                f"cosine needs an embedder model: {', '.join(embedders) or 'none'}",
                field="features",
            )
        if key not in keys:
            keys.append(key)
    return keys


def _cosine_judge(settings: Any, key: str, items: list[Any], fields: tuple[str, str]) -> Judge:
    """Embedder ``key``'s cosine between the ``fields`` of each item as judge ``KEY:cosine``."""
    import time

    from tribunal.embedding import load_profile_embedder

    embedder = load_profile_embedder(settings, key)
    name = f"{key}:cosine"
    started = time.perf_counter()
    queries = embedder.embed([i.fields[fields[0]] for i in items], progress=True)
    passages = embedder.embed([i.fields[fields[1]] for i in items], progress=True)
    cosine = np.sum(np.asarray(queries) * np.asarray(passages), axis=1)
    seconds = np.full(len(items), (time.perf_counter() - started) / len(items))
    return Judge(
        name,
        "single",
        (name,),
        (np.clip(cosine, -1.0, 1.0) + 1) / 2,
        seconds,
        np.zeros(len(items)),
        transform="cosine",
    )


def _target(fitted: Fitted, task: str) -> float:
    value = fitted.selection_cascade_bacc if task == "relevance" else fitted.selection_bacc
    return -1.0 if value is None or math.isnan(value) else value


def _ensemble(
    name: str, kind: str, members: list[Judge], *, y: Any, selection: Any, seed: int
) -> Judge:
    features = np.stack([feature_values(m) for m in members], axis=1)
    p, weights = oof_ensemble(features, y, selection, seed=seed)
    return Judge(
        name,
        kind,
        tuple(m.name for m in members),
        p,
        np.sum([m.seconds for m in members], axis=0),
        np.sum([m.tokens for m in members], axis=0),
        weights=weights,
    )


def analyse(
    singles: dict[str, Judge],
    labels: Any,
    *,
    task: str,
    seed: int,
    max_escalation: float | None,
    n_resamples: int = 1000,
) -> dict[str, Any]:
    """Split, ensembles, fits on selection, winner, test figures (JSON-ready)."""
    y = np.asarray(labels, dtype=np.int64)
    selection, test = stratified_split(y, seed)
    cap = max_escalation if task == "relevance" else None
    judges = dict(singles)
    fitted = {
        name: fit_judge(y[selection], j.p_yes[selection], max_escalation=cap)
        for name, j in judges.items()
    }
    models = sorted({name.split(":", 1)[0] for name in singles})
    best_per_model: list[Judge] = []
    for model in models:
        mine = [j for name, j in singles.items() if name.startswith(model + ":")]
        best_per_model.append(max(mine, key=lambda j: _target(fitted[j.name], task)))
        if len(mine) > 1:
            judge = _ensemble(
                f"{model}:self-ensemble", "self-ensemble", mine, y=y, selection=selection, seed=seed
            )
            judges[judge.name] = judge
    if len(models) > 1:
        for judge in (
            _ensemble(
                "cross-model:best",
                "cross-model",
                best_per_model,
                y=y,
                selection=selection,
                seed=seed,
            ),
            _ensemble(
                "cross-model:all",
                "cross-model",
                list(singles.values()),
                y=y,
                selection=selection,
                seed=seed,
            ),
        ):
            judges[judge.name] = judge
    for name, judge in judges.items():
        if name not in fitted:
            fitted[name] = fit_judge(y[selection], judge.p_yes[selection], max_escalation=cap)
    winner = max(judges, key=lambda name: _target(fitted[name], task))
    rows = []
    for name, judge in judges.items():
        rows.append(
            {
                "judge": name,
                "kind": judge.kind,
                "members": list(judge.members),
                "ensemble_weights": judge.weights,
                "selection": _jsonable(fitted[name].as_dict()),
                "test": _jsonable(
                    report_on_test(judge, fitted[name], y, test, n_resamples=n_resamples, seed=seed)
                ),
            }
        )
    return {
        "split": {
            "seed": seed,
            "selection": {"n": int(selection.size), "positives": int(y[selection].sum())},
            "test": {"n": int(test.size), "positives": int(y[test].sum())},
        },
        "selected_on": "cascade balanced accuracy" if task == "relevance" else "balanced accuracy",
        "max_escalation": cap,
        "winner": winner,
        "judges": rows,
    }


def _jsonable(value: Any) -> Any:
    """Infinite band edges and thresholds become null (strict JSON); NaN too."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _ci(one: dict[str, float] | None) -> str:
    if not one or one.get("value") is None:
        return "–"
    return f"{one['value']:.3f} [{one['low']:.3f}, {one['high']:.3f}]"


def _edge(value: float | None, infinite: str) -> str:
    return infinite if value is None else f"{value:.3f}"


def markdown(report: dict[str, Any]) -> str:
    split = report["split"]
    lines = [
        f"Sweep `{report['task']}` ({report['date']}): {report['items']} items, selection "
        f"{split['selection']['n']} ({split['selection']['positives']} +), test "
        f"{split['test']['n']} ({split['test']['positives']} +), seed {split['seed']}; "
        f"backend {report['engines']['backend']}. Winner (on selection, "
        f"{report['selected_on']}): **{report['winner']}**. All figures on the test split.",
        "",
        "| judge | sel. | bAcc [95% CI] | rec + | rec − | AUROC [95% CI] | ECE raw / Platt / "
        "iso | band | bAcc kept [95% CI] | escalated [95% CI] | s/item | tokens/item |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["judges"]:
        t, s = row["test"], row["selection"]
        chosen = s["selection_cascade_balanced_accuracy"] or s["selection_balanced_accuracy"]
        cascade = t.get("cascade")
        band = (
            f"{_edge(cascade['band']['low'], '−∞')}–{_edge(cascade['band']['high'], '∞')}"
            if cascade
            else "–"
        )
        mark = "**" if row["judge"] == report["winner"] else ""
        ece = t["ece"]
        lines.append(
            f"| {mark}{row['judge']}{mark} | {chosen:.3f} | {_ci(t['balanced_accuracy'])} | "
            f"{t['recall_positive']:.3f} | {t['recall_negative']:.3f} | {_ci(t['auroc'])} | "
            f"{ece['raw']['value']:.3f} / {ece['platt']['value']:.3f} / "
            f"{ece['isotonic']['value']:.3f} | {band} | "
            f"{_ci(cascade['balanced_accuracy_kept']) if cascade else '–'} | "
            f"{_ci(cascade['escalation']) if cascade else '–'} | "
            f"{t['seconds_per_item']['value']:.2f} | {t['tokens_per_item']['value']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from .judge import load_items

    if args.pairs < 0:
        raise InvalidArgumentError("--pairs must be >= 0 (0: every SciFact pair)", field="pairs")
    if args.task != "relevance" and args.export_relevance:
        raise InvalidArgumentError("--export-relevance is for --task relevance", field="task")
    items = load_items(
        TASKS[args.task],
        args.data,
        trec_pairs=args.pairs or 10_000,
        scifact_pairs=args.pairs,
        seed=args.seed,
    )
    singles, engines = _score(args, items)
    report: dict[str, Any] = {
        "task": args.task,
        "date": dt.date.today().isoformat(),
        "command": "tribunal-lab " + " ".join(sys.argv[1:]),
        "data": (
            f"{args.data} (labelled file)"
            if args.data.is_file()
            else {
                "relevance": "trec-dl-2019 dl19_judged_pairs (grade >= 2)",
                "entailment": "scifact nli_pairs_train (SUPPORT)",
            }[args.task]
        ),
        "items": len(items),
        "models": args.models,
        "variants": args.variants or _DEFAULT_VARIANTS[args.task],
        "engines": engines,
    }
    report.update(
        analyse(
            singles,
            [item.label for item in items],
            task=args.task,
            seed=args.seed,
            max_escalation=args.max_escalation,
            n_resamples=args.bootstrap,
        )
    )
    out = args.out or Path(f".build/eval/sweep-{args.task}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    table = markdown(report)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {out} and {out.with_suffix('.md')}")
    if args.export_relevance:
        from ._relevance_export import export_relevance

        artifact = export_relevance(
            report,
            singles,
            args.export_judge or report["winner"],
            labels=[item.label for item in items],
            backend=engines["backend"],
        )
        args.export_relevance.parent.mkdir(parents=True, exist_ok=True)
        args.export_relevance.write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
        print(f"wrote the relevance artifact {args.export_relevance} ({artifact['version']})")
    return 0
