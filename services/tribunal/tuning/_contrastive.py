"""The contrastive fine-tune of a collection's matching model: the training triples
drawn from the train queries and the KB's phrasings, and the library's trainer."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import NDArray

from ..confidence import Traffic
from ._budget import TrainingDeadline
from ._pair_features import EntryTexts
from ._split import TuneSplit

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ..embedding import Embedder

__all__ = ["TrainingSettings", "answer_matrix", "contrastive_examples", "train_encoder"]


class TrainingSettings(Protocol):
    """What the trainer reads of a tune's configuration (:class:`~._tune.TuneConfig`)."""

    @property
    def seed(self) -> int: ...
    @property
    def epochs(self) -> float: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def warmup_ratio(self) -> float: ...
    @property
    def max_steps(self) -> int: ...


def answer_matrix(traffic: Traffic, rows: Sequence[int], entries: EntryTexts) -> NDArray[np.bool_]:
    """Query row by entry: whether the entry answers the query (its labelled answers)."""
    column = {entry_id: j for j, entry_id in enumerate(entries.ids)}
    right = np.zeros((len(rows), len(entries.ids)), dtype=bool)
    for i, row in enumerate(rows):
        for entry_id in traffic.queries[row].answers:
            if entry_id in column:
                right[i, column[entry_id]] = True
    return right


def contrastive_examples(
    traffic: Traffic, split: TuneSplit, entries: EntryTexts, base: Embedder, seed: int
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """(anchor, positive, negative) triples for the contrastive loss.

    Each train query is an anchor once per right entry: its positive is one of that
    entry's phrasings (seeded), its negative the phrasing of the wrong entry closest to
    it under the base model — the confusion the tune must undo. Each entry's phrasings
    are positives of each other (consecutive pairs), with the closest phrasing of
    another entry as negative; so are entries named together in a train query's answers.
    """
    rng = np.random.default_rng(seed)
    phrasings = entries.all_phrasings()
    owner = np.asarray([j for j, texts in enumerate(phrasings) for _ in texts], dtype=np.int64)
    flat = [text for texts in phrasings for text in texts]
    flat_vectors = base.embed(flat).astype(np.float64)

    def closest_other(vector: NDArray[np.float64], right: NDArray[np.bool_]) -> str:
        """The phrasing of a wrong entry (``right`` False) closest to ``vector``."""
        similarity = flat_vectors @ vector
        similarity[right[owner]] = -np.inf
        return flat[int(np.argmax(similarity))]

    rows = [i for i in split.train if traffic.queries[i].answers]
    right = answer_matrix(traffic, rows, entries)
    keep: NDArray[np.bool_] = np.asarray(right.any(axis=1), dtype=bool)
    rows = [r for r, k in zip(rows, keep.tolist(), strict=True) if k]
    right = right[keep]
    queries = [traffic.queries[r].query for r in rows]
    query_vectors = base.embed(queries).astype(np.float64) if queries else np.zeros((0, 1))
    anchor: list[str] = []
    positive: list[str] = []
    negative: list[str] = []
    for i, query in enumerate(queries):
        hard = closest_other(query_vectors[i], right[i])
        for column in np.flatnonzero(right[i]):
            texts = phrasings[int(column)]
            anchor.append(query)
            positive.append(texts[int(rng.integers(len(texts)))])
            negative.append(hard)
    query_triples = len(anchor)
    alone = np.eye(len(phrasings), dtype=bool)
    for entry, texts in enumerate(phrasings):
        for first, second in itertools.pairwise(texts):
            anchor.append(first)
            positive.append(second)
            negative.append(closest_other(flat_vectors[flat.index(first)], alone[entry]))
    phrasing_pairs = len(anchor) - query_triples
    # Entries that answer alike (named together in one train query's answers) are
    # positives of each other; their hard negative is the first query's.
    seen: set[tuple[int, int]] = set()
    for i in range(len(rows)):
        columns = [int(j) for j in np.flatnonzero(right[i])]
        for a in columns:
            for b in columns:
                if a < b and (a, b) not in seen:
                    seen.add((a, b))
                    anchor.append(entries.questions[a])
                    positive.append(entries.questions[b])
                    negative.append(closest_other(query_vectors[i], right[i]))
    counts = {
        "query_triples": query_triples,
        "phrasing_pairs": phrasing_pairs,
        "answer_pairs": len(anchor) - query_triples - phrasing_pairs,
    }
    return {"anchor": anchor, "positive": positive, "negative": negative}, counts


def train_encoder(
    model: SentenceTransformer,
    columns: dict[str, list[str]],
    config: TrainingSettings,
    work: Path,
    deadline: TrainingDeadline,
) -> None:
    """Contrastive fine-tune with the library's trainer (no hand-written loop)."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    dataset = Dataset.from_dict(columns)
    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(work),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        warmup_ratio=config.warmup_ratio,
        # In-batch negatives: a batch must not hold one text twice (a false negative).
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        seed=config.seed,
        data_seed=config.seed,
        save_strategy="no",
        report_to="none",
        logging_steps=max(1, math.ceil(len(dataset) / config.batch_size / 10)),
        disable_tqdm=False,
        use_cpu=True,
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=arguments,
        train_dataset=dataset,
        loss=MultipleNegativesRankingLoss(model),
        callbacks=[deadline.callback()],
    )
    trainer.train()
