"""Tune a collection's matcher on the fit part of its labelled traffic.

1. :func:`~._split.split_for_tuning` cuts the traffic (seeded, recorded): train /
   head / held-out.
2. Refuse data too small to help (:class:`TooLittleDataError`, with the numbers).
3. Teaching (:mod:`._teach`, written to the KB by ``tribunal tune``): the train
   queries become phrasings of their right entries; everything below matches
   against the taught KB.
4. Optional (``epochs`` > 0, :mod:`._contrastive`): contrastive fine-tune of the
   matcher's bi-encoder with sentence-transformers' ``MultipleNegativesRankingLoss`` on
   (query, right entry's question, hardest wrong entry's question) triples from the
   train queries, plus (phrasing, phrasing) pairs of entries that answer alike (two
   entries named together in one train query's answers). The hard negative is the
   wrong entry the base model ranks highest: the confusion the tune must undo. The
   library's trainer runs the loop (progress with rate and ETA).
5. The matching head — the feature matcher's logistic regression over the tuned
   model's cosines and token-set ratio — is refitted on the pairs (each query with its
   right entries and the tuned model's top wrong ones) of the train queries, each
   with its own taught phrasing left out; with an encoder fine-tune, of the head
   queries kept apart instead.
6. AUROC and top-1 accuracy before (the matcher served now, on the KB before
   teaching) and after, on the held-out queries, which nothing above touched.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..confidence import Traffic
from ..core import InvalidArgumentError
from ._budget import MARGIN_SHARE, TrainingDeadline, price_after_training
from ._contrastive import answer_matrix, contrastive_examples, train_encoder
from ._pair_features import EntryTexts, PairFeatures, pair_features
from ._split import TuneSplit, split_for_tuning

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ..embedding import Embedder, VectorStore
    from ..ensemble import MatchFeaturesArtifact

__all__ = ["TooLittleDataError", "TuneConfig", "TuneOutcome", "check_enough", "tune_matcher"]


_ENTRY_TEXTS = 200_000
"""Entry texts kept in memory during a tune (every phrasing, answer and phrasing + answer
of a large KB: ~600 MB of 768-d vectors at most)."""


class TooLittleDataError(InvalidArgumentError):
    """The traffic is too small for a tune to help (the message has the numbers)."""


@dataclass(frozen=True)
class TuneConfig:
    """How to tune (recorded in the artifact)."""

    heldout_fraction: float | None = None
    """Share of the queries never fitted on: the AUROC report, then what ``tribunal
    calibrate`` certifies on. None: 0.5 without an encoder fine-tune, 0.3 with one (whose
    head part takes a quarter of the rest): the train part is about half either way."""
    head_fraction: float | None = None
    """Share of the fit queries kept apart to fit the matching head. None: 0 without an
    encoder fine-tune — the head is fitted on the train queries, each with its own taught
    phrasing left out, so it sees the scores of a query the KB was not taught — and 0.25
    with one (a fine-tuned encoder knows its train queries)."""
    seed: int = 0
    """Seed of the split and of the trainer."""
    epochs: float = 0.0
    """Epochs of the encoder's contrastive fine-tune; 0 skips it (the served embedder
    stays as it is, the head is refitted on the taught KB)."""
    teach: bool = True
    """Add the train queries to their entries' phrasings (:mod:`._teach`)."""
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    max_steps: int = -1
    """Stop after this many optimiser steps (-1: the epochs decide)."""
    time_budget_s: float | None = 600.0
    """Wall-clock seconds the whole tune may take. The encoder fine-tune stops at the
    last optimiser step that leaves room for what follows it (priced before training,
    :mod:`._budget`); the steps run are recorded. None: no budget. Without a fine-tune
    nothing is cut."""
    min_train_answerable: int = 40
    """Fewest answerable train queries worth a tune."""
    min_heldout: int = 30
    """Fewest held-out queries to report an AUROC on (and leave for calibration)."""
    negatives_per_query: int = 5
    """Wrong entries per query in the head's fit pairs and the AUROC pairs."""

    @property
    def heldout_share(self) -> float:
        """:attr:`heldout_fraction` with its default resolved."""
        if self.heldout_fraction is not None:
            return self.heldout_fraction
        return 0.3 if self.epochs > 0 else 0.5

    @property
    def head_share(self) -> float:
        """:attr:`head_fraction` with its default resolved."""
        if self.head_fraction is not None:
            return self.head_fraction
        return 0.25 if self.epochs > 0 else 0.0

    def __post_init__(self) -> None:
        if self.heldout_fraction is not None and not 0.0 < self.heldout_fraction < 1.0:
            raise InvalidArgumentError(
                f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}",
                field="heldout_fraction",
            )
        if self.head_fraction is not None and not 0.0 <= self.head_fraction < 1.0:
            raise InvalidArgumentError(
                f"head_fraction must be in [0, 1), got {self.head_fraction}",
                field="head_fraction",
            )
        if self.epochs > 0 and self.head_fraction == 0.0:
            raise InvalidArgumentError(
                "an encoder fine-tune needs a head part (the fine-tuned encoder knows its "
                "train queries, so the head cannot be fitted on them): give head_fraction > 0 "
                "or leave it unset (0.25)",
                field="head_fraction",
            )
        if self.time_budget_s is not None and not (
            math.isfinite(self.time_budget_s) and self.time_budget_s > 0
        ):
            raise InvalidArgumentError(
                "time_budget_s must be a number of seconds > 0 (no budget: None, or "
                f"`tribunal tune --no-time-budget`), got {self.time_budget_s}",
                field="time_budget_s",
            )
        if not (self.epochs >= 0 and self.batch_size >= 2 and self.learning_rate > 0):
            raise InvalidArgumentError(
                "epochs must be >= 0 (0: no encoder fine-tune), learning rate > 0 and "
                "batch size >= 2",
                field="tune",
            )


@dataclass(frozen=True)
class TuneOutcome:
    """What the tune wrote and measured."""

    model: SentenceTransformer
    head: MatchFeaturesArtifact
    split: TuneSplit
    metrics: dict[str, Any]
    examples: dict[str, int]
    seconds: float


def check_enough(
    traffic: Traffic, split: TuneSplit, entries: EntryTexts, config: TuneConfig
) -> None:
    """Refuse traffic too small to help.

    Raises:
        TooLittleDataError: too few answerable train queries or held-out queries; the
            message gives the counts, the minimums and what to do.
    """
    known = set(entries.ids)
    answerable = sum(1 for i in split.train if traffic.queries[i].answers & known)
    problems = []
    if answerable < config.min_train_answerable:
        problems.append(
            f"{answerable} answerable queries to train on (need >= {config.min_train_answerable})"
        )
    if len(split.heldout) < config.min_heldout:
        problems.append(
            f"{len(split.heldout)} held-out queries (need >= {config.min_heldout} to measure "
            "the tune and leave queries to certify on)"
        )
    if problems:
        raise TooLittleDataError(
            f"{traffic.source}: {len(traffic)} labelled queries ({traffic.answerable} "
            f"answerable) split into {len(split.train)} train / {len(split.head)} head / "
            f"{len(split.heldout)} held-out leave {'; '.join(problems)}. A tune on this "
            "little would not measurably help: label more traffic",
            field="traffic",
        )


def _deadline(
    traffic: Traffic,
    split: TuneSplit,
    entries: EntryTexts,
    base: Embedder,
    *,
    config: TuneConfig,
    deadline: float | None,
) -> TrainingDeadline:
    """The fine-tune's deadline, less the price of what follows it: the fine-tuned model
    embedding every entry text (no stored vector is its) and the head and held-out
    queries, priced on a sample embedded by the base model, plus a margin for writing."""
    if deadline is None:
        return TrainingDeadline(None, 0.0)
    phrasings = entries.all_phrasings()
    flat = [text for texts in phrasings for text in texts]
    both = [f"{text} {entries.answers[j]}" for j, texts in enumerate(phrasings) for text in texts]
    rows = itertools.chain(split.head or split.train, split.heldout)
    reserve = price_after_training(
        base.embed,
        long_texts=[*entries.answers, *both],
        short_texts=[*flat, *(traffic.queries[i].query for i in rows)],
    )
    assert config.time_budget_s is not None  # a deadline comes from a budget
    return TrainingDeadline(deadline, reserve + MARGIN_SHARE * config.time_budget_s)


def _pairs(
    right: NDArray[np.bool_], ranking: NDArray[np.float64], negatives: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(row, column, label) of each query's right entries and its top wrong ones."""
    rows: list[int] = []
    cols: list[int] = []
    labels: list[int] = []
    for i in range(right.shape[0]):
        wrong_rank = np.where(right[i], -np.inf, ranking[i])
        top = np.argsort(-wrong_rank, kind="stable")[:negatives]
        for j in np.flatnonzero(right[i]):
            rows.append(i)
            cols.append(int(j))
            labels.append(1)
        for j in top:
            rows.append(i)
            cols.append(int(j))
            labels.append(0)
    return np.asarray(rows, np.int64), np.asarray(cols, np.int64), np.asarray(labels, np.int64)


def _fit_head(
    features: PairFeatures,
    right: NDArray[np.bool_],
    name: str,
    config: TuneConfig,
    fitted_on: dict[str, Any],
) -> MatchFeaturesArtifact:
    from sklearn.linear_model import LogisticRegression

    from ..ensemble import MATCH_FEATURES, FeatureEmbedder, MatchFeaturesArtifact

    rows, cols, labels = _pairs(right, features.values["cos_question"], config.negatives_per_query)
    x = np.column_stack([features.rows(rows, cols)[f] for f in MATCH_FEATURES])
    if labels.min() == labels.max():
        raise TooLittleDataError("the head queries have only one kind of pair", field="traffic")
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    model = LogisticRegression(C=1.0, max_iter=1000).fit((x - mean) / std, labels)
    return MatchFeaturesArtifact(
        embedder=FeatureEmbedder(model_key="tuned", name=name),
        features=MATCH_FEATURES,
        mean=tuple(float(v) for v in mean),
        std=tuple(float(v) for v in std),
        coef=tuple(float(v) for v in model.coef_[0]),
        intercept=float(model.intercept_[0]),
        threshold=0.5,
        fitted_on={**fitted_on, "pairs": int(labels.size), "right_pairs": int(labels.sum())},
    ).sealed()


def _measure(
    head: MatchFeaturesArtifact,
    features: PairFeatures,
    right: NDArray[np.bool_],
    pair_set: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
) -> dict[str, float]:
    """AUROC on the fixed held-out pairs; top-1: the best entry over the whole KB is right."""
    from sklearn.metrics import roc_auc_score

    rows, cols, labels = pair_set
    p_pairs = head.p_match(features.rows(rows, cols))
    full = head.p_match({n: m.ravel() for n, m in features.values.items()}).reshape(right.shape)
    answerable = right.any(axis=1)
    best = np.argmax(full, axis=1)
    top1 = right[np.arange(right.shape[0]), best][answerable]
    return {
        "auroc": float(roc_auc_score(labels, p_pairs)),
        "top1_accuracy": float(top1.mean()) if top1.size else float("nan"),
    }


def tune_matcher(
    traffic: Traffic,
    entries: EntryTexts,
    *,
    base_model: SentenceTransformer,
    base_embedder: Embedder,
    served_head: MatchFeaturesArtifact,
    served_embedder: Embedder,
    config: TuneConfig,
    work: Path,
    wrap: Any,
    split: TuneSplit | None = None,
    taught: EntryTexts | None = None,
    served_vectors: VectorStore | None = None,
    base_vectors: VectorStore | None = None,
    deadline: float | None = None,
) -> TuneOutcome:
    """Split, check, train, fit the head, measure (see the module docstring).

    ``base_model`` is trained in place; ``wrap(model)`` turns it into an
    :class:`~tribunal.retrieval.Embedder`. ``served_head`` with ``served_embedder``
    is the matcher served now, the "before" of the report (on ``entries``). ``split``:
    the split already made (default: made here); ``taught``: the entries once the
    teaching plan is written (default: ``entries``), which the encoder, the head and
    the "after" see. ``served_vectors`` and ``base_vectors``: the KB's stored entry
    vectors of the served model and of the base model (``data_dir/vectors``). The
    entries' texts are looked up there before a model embeds them and what is embedded
    is kept there — the base model's only while its weights stay as they are (no
    fine-tune) — so that neither this tune nor the matcher it leaves embeds an entry
    text twice: with answers of a few hundred words, those passes are most of a tune.
    ``deadline``: the :func:`time.monotonic` instant the whole tune must end by (default:
    ``config.time_budget_s`` from now); the encoder fine-tune stops early to meet it.

    Raises:
        TooLittleDataError: see :func:`check_enough`.
    """
    started = time.perf_counter()
    if deadline is None and config.time_budget_s is not None:
        deadline = time.monotonic() + config.time_budget_s
    if split is None:
        split = split_for_tuning(
            traffic.queries,
            heldout_fraction=config.heldout_share,
            head_fraction=config.head_share,
            seed=config.seed,
        )
    check_enough(traffic, split, entries, config)
    heldout_queries = [traffic.queries[i].query for i in split.heldout]
    heldout_right = answer_matrix(traffic, split.heldout, entries)
    from ..embedding import CachingEmbedder

    served_entries = CachingEmbedder(served_embedder, max_texts=_ENTRY_TEXTS, store=served_vectors)
    before_features = pair_features(
        heldout_queries, entries, served_embedder, entry_embedder=served_entries
    )
    entries = taught or entries
    examples = {"query_triples": 0, "phrasing_pairs": 0, "answer_pairs": 0}
    encoder: dict[str, Any] | None = None
    if config.epochs > 0:
        columns, examples = contrastive_examples(
            traffic, split, entries, base_embedder, config.seed
        )
        print(
            f"tune: {len(split.train)} train / {len(split.head)} head / {len(split.heldout)} "
            f"held-out queries; {examples['query_triples']} query triples + "
            f"{examples['phrasing_pairs']} phrasing pairs + {examples['answer_pairs']} answer "
            "pairs",
            flush=True,
        )
        budget = _deadline(
            traffic, split, taught or entries, base_embedder, config=config, deadline=deadline
        )
        if budget.room() > 0:
            train_encoder(base_model, columns, config, work, budget)
        else:
            budget.stopped_early_ = True
        if budget.stopped_early_:
            print(
                f"tune: the encoder fine-tune stopped after {budget.steps_} optimiser steps "
                f"to end within the time budget ({config.time_budget_s:.0f} s for the whole "
                f"tune; {budget.reserve:.0f} s kept for what follows)",
                flush=True,
            )
        encoder = budget.record()
        trained = time.perf_counter()
    else:
        print(
            f"tune: {len(split.train)} train / {len(split.head)} head / {len(split.heldout)} "
            "held-out queries; no encoder fine-tune (epochs 0): refitting the head",
            flush=True,
        )
    # The head's and the "after" features embed the same entry texts: once is enough.
    tuned = wrap(base_model)
    tuned_entries = CachingEmbedder(
        tuned,
        max_texts=_ENTRY_TEXTS,
        store=base_vectors if config.epochs <= 0 else None,  # fine-tuned: not the base's
    )

    # No head part: the head fits on the train queries as new queries would look, each
    # without the phrasing it taught (the encoder was not trained on them).
    head_rows, part = (split.head, "head") if split.head else (split.train, "train, left out")
    head_features = pair_features(
        [traffic.queries[i].query for i in head_rows],
        entries,
        tuned,
        entry_embedder=tuned_entries,
        leave_out_own=not split.head,
    )
    head = _fit_head(
        head_features,
        answer_matrix(traffic, head_rows, entries),
        tuned.name,
        config,
        {"traffic_sha256": traffic.sha256, "part": part, "queries": len(head_rows)},
    )
    after_features = pair_features(heldout_queries, entries, tuned, entry_embedder=tuned_entries)
    # One fixed set of held-out pairs for both: the right entries and the top wrong
    # ones of either model, so neither is measured on pairs it picked.
    ranking = np.maximum(
        before_features.values["cos_question"], after_features.values["cos_question"]
    )
    pair_set = _pairs(heldout_right, ranking, config.negatives_per_query)
    metrics = {
        "heldout_queries": len(split.heldout),
        "heldout_answerable": int(heldout_right.any(axis=1).sum()),
        "heldout_pairs": int(pair_set[2].size),
        "before": {
            "matcher": served_head.version,
            **_measure(served_head, before_features, heldout_right, pair_set),
        },
        "after": _measure(head, after_features, heldout_right, pair_set),
    }
    if encoder is not None:
        # Beside the price: how long the embedding after training took (the writing after
        # this function comes out of the margin).
        encoder["seconds_after_training"] = round(time.perf_counter() - trained, 1)
        metrics["encoder"] = encoder
    return TuneOutcome(base_model, head, split, metrics, examples, time.perf_counter() - started)


def config_record(config: TuneConfig) -> dict[str, Any]:
    return asdict(config)
