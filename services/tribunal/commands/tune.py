"""``tribunal tune``: teach a collection's KB and refit its matcher on the fit part of its
labelled traffic.

The train part's answerable queries become phrasings of the entries that answer them
(proposed and approved phrasing links: an audited, signed KB change), the matching
head is refitted on the head part, and, with ``--encoder-epochs`` > 0, the bi-encoder
is fine-tuned first. It writes ``DATA_DIR/tuned/<collection>/<version>/`` (the model,
the matching head, a manifest with the split, the binding and the before/after AUROC) and points
``DATA_DIR/tuned/<collection>/current`` at it; the feature matcher then serves it for
that collection, and ``tribunal calibrate`` certifies on the held-out part only.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import InvalidArgumentError, load_settings

if TYPE_CHECKING:
    from ..confidence import Traffic
    from ..core import Settings
    from ..embedding import VectorStore
    from ..tuning import TuneConfig, TunedMatcher, TuneOutcome

__all__ = ["register", "tune_collection"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "tune",
        help="teach a collection's KB and refit its matcher on the fit part of its traffic",
        description="Split the labelled traffic (seeded, recorded) into train and held-out "
        "parts (and a head part with --head-fraction); add the train queries as phrasings of "
        "the entries that answer them (an audited, signed KB change through approved phrasing "
        "links); optionally fine-tune the feature matcher's bi-encoder on them "
        "(--encoder-epochs); refit its matching head on the train queries, each with its own "
        "phrasing left out (on the head part when there is one); report AUROC before and "
        "after on the held-out part, and write a versioned directory bound to the collection. "
        "`tribunal calibrate` then certifies on the held-out part only.",
    )
    parser.add_argument("--collection", required=True, help="the KB collection the traffic asks")
    parser.add_argument("--traffic", type=Path, required=True, help="labelled queries (JSONL)")
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument(
        "--classes", type=Path, default=None, help="answer-classes file (widens each answer set)"
    )
    parser.add_argument(
        "--base",
        default=None,
        help="profile embedder to fine-tune (default: the one the feature matcher uses)",
    )
    parser.add_argument(
        "--heldout-fraction",
        type=float,
        default=None,
        help="share never fitted on, left to certify on (default: 0.5; 0.3 with "
        "--encoder-epochs, whose head part takes a quarter of the rest)",
    )
    parser.add_argument(
        "--head-fraction",
        type=float,
        default=None,
        help="share of the fit part kept apart to fit the matching head (default: 0, the "
        "head fitted on the train queries with their own phrasings left out; 0.25 with "
        "--encoder-epochs)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and trainer (0)")
    parser.add_argument(
        "--encoder-epochs",
        "--epochs",
        dest="epochs",
        type=float,
        default=0.0,
        help="epochs of the encoder's contrastive fine-tune; 0 skips it (0)",
    )
    parser.add_argument(
        "--no-teach",
        dest="teach",
        action="store_false",
        help="do not add the train queries to the KB's phrasings",
    )
    parser.add_argument(
        "--retrieval",
        action="store_true",
        help="also search the collection with the tune (`tribunal kb reembed --model "
        "tuned`): one model pass per query",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="(32)")
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="(2e-5)")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after N steps (-1: epochs)")
    parser.add_argument(
        "--time-budget-s",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="wall-clock seconds the whole tune may take: an encoder fine-tune stops early, "
        "at an optimiser step, to end within them, and records the steps it ran (600)",
    )
    parser.add_argument(
        "--no-time-budget",
        action="store_true",
        help="let an encoder fine-tune run every step its epochs ask for",
    )
    parser.add_argument(
        "--created", default=None, help="creation time to record (ISO 8601; default: now)"
    )
    parser.set_defaults(func=_tune)


def _collection(settings: Any, name: str) -> tuple[Any, str, int]:
    """The collection's entries (as the matcher sees them), content version and size."""
    from ..retrieval import KnowledgeBase
    from ..tuning import EntryTexts

    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        collection = kb.collection(name)
        entries = sorted(collection.store.iter_entries(), key=lambda e: e.id)
        version = collection.content_version()
    finally:
        kb.close()
    texts = EntryTexts(
        tuple(e.id for e in entries),
        tuple(e.question for e in entries),
        tuple(e.answer for e in entries),
        tuple(e.phrasings() or (e.question,) for e in entries),
    )
    return texts, version, len(entries)


def _tune(args: argparse.Namespace) -> int:
    from ..confidence import read_traffic
    from ..tuning import TuneConfig
    from .calibrate import with_answer_classes

    settings = load_settings(args.profile)
    config = TuneConfig(
        heldout_fraction=args.heldout_fraction,
        head_fraction=args.head_fraction,
        seed=args.seed,
        epochs=args.epochs,
        teach=args.teach,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_steps=args.max_steps,
        time_budget_s=None if args.no_time_budget else args.time_budget_s,
    )
    traffic = read_traffic(args.traffic)
    if args.classes is not None:
        traffic = with_answer_classes(traffic, args.classes)
    started = time.perf_counter()
    sealed, final, outcome = tune_collection(
        settings, args.collection, traffic, config, base=args.base, created=args.created
    )
    before, after = outcome.metrics["before"], outcome.metrics["after"]
    taught = outcome.metrics.get("teaching")
    if taught:
        print(
            f"taught {taught['links']} phrasings to {taught['entries']} entries in "
            f"{taught['seconds']:.0f} s (KB version {taught['kb_version']}; not taught: "
            f"{taught['skipped']})"
        )
    encoder = outcome.metrics.get("encoder")
    if encoder:
        cut = " (stopped by the time budget)" if encoder["stopped_by_time_budget"] else ""
        print(
            f"encoder fine-tune: {encoder['steps']} of {encoder['planned_steps']} optimiser "
            f"steps{cut}"
        )
    print(
        f"held-out ({outcome.metrics['heldout_queries']} queries, "
        f"{outcome.metrics['heldout_pairs']} pairs): AUROC {before['auroc']:.3f} -> "
        f"{after['auroc']:.3f}; top-1 {before['top1_accuracy']:.3f} -> "
        f"{after['top1_accuracy']:.3f}"
    )
    print(
        f"wrote {final} ({sealed.version}; current for collection {args.collection!r}) in "
        f"{time.perf_counter() - started:.0f} s. Certify it on the held-out part: "
        f"`tribunal calibrate --collection {args.collection} --traffic {args.traffic}`"
    )
    if args.retrieval:
        from ._kb_reembed import reembed_collection

        reembed_collection(settings, args.collection, "tuned")
    return 0


@contextlib.contextmanager
def _entry_vectors(
    settings: Settings, dimensions: dict[str, int]
) -> Iterator[dict[str, VectorStore]]:
    """The KB's stored entry vectors (``data_dir/vectors``) of each model named in
    ``dimensions`` (the served model's and the base model's; one store when they are one)."""
    from ..embedding import VectorStore

    stores = {
        name: VectorStore.for_model(settings.data_dir, model=name, dimension=dimension)
        for name, dimension in dimensions.items()
    }
    try:
        yield stores
    finally:
        for store in stores.values():
            store.close()


def tune_collection(
    settings: Settings,
    collection: str,
    traffic: Traffic,
    config: TuneConfig,
    *,
    base: str | None = None,
    created: str | None = None,
) -> tuple[TunedMatcher, Path, TuneOutcome]:
    """What ``tribunal tune`` does once its inputs are read: tune, seal, write
    ``DATA_DIR/tuned/<collection>/<version>/`` and make it current; the sealed matcher,
    its directory and the outcome. ``config.time_budget_s`` counts from this call."""
    from datetime import UTC, datetime

    from ..core import load_embedder
    from ..embedding import load_profile_embedder
    from ..embedding._embedding import SentenceTransformerEmbedder
    from ..ensemble import MatchFeaturesArtifact
    from ..ensemble._feature_artifact import features_path
    from ..tuning import (
        TunedMatcher,
        check_enough,
        config_record,
        plan_teaching,
        split_for_tuning,
        tune_matcher,
        tuned_root,
    )
    from ._teaching import rejected_links, tune_actor, write_teaching

    budget = config.time_budget_s
    deadline = None if budget is None else time.monotonic() + budget
    entries, content_version, size = _collection(settings, collection)
    served = MatchFeaturesArtifact.load(features_path(settings))
    base_key = base or served.embedder.model_key
    spec = settings.models.get(base_key)
    if spec is None or spec.kind != "embedder":
        raise InvalidArgumentError(
            f"--base {base_key!r} is not an embedder of profile {settings.profile!r} "
            f"(embedders: {', '.join(settings.model_keys('embedder'))})",
            field="base",
        )
    base_name = spec.artifact or spec.hf_id or base_key
    root = tuned_root(settings.data_dir, collection)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{base_name}+tuned:{collection}"

    def wrap(model: Any) -> SentenceTransformerEmbedder:
        return SentenceTransformerEmbedder(
            model, name=name, batch_size=settings.retrieval.embed_batch_size
        )

    served_embedder = load_profile_embedder(settings, served.embedder.model_key)
    base_model = load_embedder(settings, base_key)
    dimensions = {
        served_embedder.name: served_embedder.dimension,
        base_name: wrap(base_model).dimension,
    }
    split = split_for_tuning(
        traffic.queries,
        heldout_fraction=config.heldout_share,
        head_fraction=config.head_share,
        seed=config.seed,
    )
    check_enough(traffic, split, entries, config)
    plan = None
    teaching: dict[str, Any] = {"phrasings_added": 0}
    if config.teach:
        plan = plan_teaching(
            traffic,
            split,
            entries,
            max_question_chars=settings.retrieval.max_question_chars,
            max_questions_per_item=settings.retrieval.max_questions_per_item,
            embed=served_embedder.embed,
            rejected=rejected_links(settings, collection),
        )
    with tempfile.TemporaryDirectory(dir=root, prefix=".work-") as work_dir:
        work = Path(work_dir)
        with _entry_vectors(settings, dimensions) as stores:
            outcome = tune_matcher(
                traffic,
                entries,
                base_model=base_model,
                base_embedder=wrap(base_model),
                served_head=served,
                served_embedder=served_embedder,
                config=config,
                work=work / "trainer",
                wrap=wrap,
                split=split,
                taught=plan.taught(entries) if plan is not None else None,
                served_vectors=stores[served_embedder.name],
                base_vectors=stores[base_name],
                deadline=deadline,
            )
        if plan is not None:
            # Written only once the tune succeeded; the binding below is the taught KB's.
            written = write_teaching(settings, collection, plan, actor=tune_actor())
            teaching = {**plan.record(), **written}
            outcome.metrics["teaching"] = {
                k: v for k, v in teaching.items() if k not in {"added", "dropped"}
            }
            _, content_version, size = _collection(settings, collection)
        staged = work / "artifact"
        outcome.model.save(str(staged / "model"))
        outcome.head.save(staged / "match-features.json")
        manifest = {
            "binding": {
                "collection": collection,
                "collection_version": content_version,
                "entries": size,
            },
            "base": {"model_key": base_key, "name": base_name},
            "traffic": {
                "source": traffic.source,
                "sha256": traffic.sha256,
                "queries": len(traffic),
                "answerable": traffic.answerable,
            },
            "split": outcome.split.record(traffic.queries),
            "config": config_record(config),
            "examples": outcome.examples,
            "teaching": teaching,
            "metrics": outcome.metrics,
            "seconds": round(outcome.seconds, 1),
            "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        }
        sealed = TunedMatcher.seal(staged, manifest)
        final = root / sealed.version
        if final.exists():
            shutil.rmtree(final)
        staged.rename(final)
    (root / "current").write_text(sealed.version + "\n", encoding="utf-8")
    return sealed, final, outcome
