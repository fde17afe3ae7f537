"""Support checkers: score whether a premise chunk entails a hypothesis.

Two backends share one protocol: an NLI cross-encoder (any Hugging Face
sequence-classification NLI model) and the LLM yes/no checker (see
``_llm_checker``). The cascade never cares which one it holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core import MODEL_LOAD_LOCK, ConfigError

__all__ = ["LexicalOverlapChecker", "NliCrossEncoderChecker", "SupportChecker", "SupportScore"]


@dataclass(frozen=True)
class SupportScore:
    """One (premise chunk, hypothesis) score."""

    p_entail: float
    """P(the chunk entails the hypothesis)."""
    p_contradict: float | None = None
    """P(contradiction), when the backend models it."""
    prompt_tokens: int = 0
    """Tokens the model read for this score (0 when not counted)."""


class SupportChecker(Protocol):
    """Anything that scores (premise, hypothesis) pairs in batches."""

    model_id: str

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[SupportScore]:
        """One score per (premise, hypothesis) pair, in order."""
        ...


def _label_index(id2label: dict[int, str], prefix: str) -> int | None:
    found = [i for i, label in id2label.items() if str(label).lower().startswith(prefix)]
    return int(found[0]) if len(found) == 1 else None


class NliCrossEncoderChecker:
    """A Hugging Face NLI cross-encoder; label order read from the model config.

    Args:
        model: A local folder or hub id of an ``AutoModelForSequenceClassification``
            whose ``id2label`` names an entailment label (and optionally a
            contradiction label): e.g. ``ENTAILMENT``/``NEUTRAL``/``CONTRADICTION``.
        device: Torch device.
        batch_size: Pairs per forward pass.
        max_length: Token limit of premise + hypothesis; the premise is truncated
            first (the cascade chunks long premises before they get here).
    """

    def __init__(
        self, model: str, *, device: str = "cpu", batch_size: int = 16, max_length: int = 512
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.model_id = model
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._torch = torch
        with MODEL_LOAD_LOCK:
            self._tokenizer: Any = AutoTokenizer.from_pretrained(model)
            self._model: Any = AutoModelForSequenceClassification.from_pretrained(model).to(device)
        self._model.eval()
        id2label = {int(k): v for k, v in self._model.config.id2label.items()}
        entail = _label_index(id2label, "entail")
        if entail is None:
            raise ConfigError(
                f"NLI model {model} has no single entailment label in id2label {id2label}; "
                "expected a label starting with 'entail'",
                field="models",
            )
        self.entail_index_ = entail
        self.contradict_index_ = _label_index(id2label, "contradict")

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[SupportScore]:
        torch = self._torch
        scores: list[SupportScore] = []
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start : start + self.batch_size]
            encoded = self._tokenizer(
                [p for p, _ in batch],
                [h for _, h in batch],
                truncation="only_first",
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                probs = torch.softmax(self._model(**encoded).logits.float(), dim=-1).cpu()
            lengths = encoded["attention_mask"].sum(dim=1).tolist()
            for row, length in zip(probs.tolist(), lengths, strict=True):
                contradict = (
                    row[self.contradict_index_] if self.contradict_index_ is not None else None
                )
                scores.append(SupportScore(row[self.entail_index_], contradict, int(length)))
        return scores


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    {"a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with", "and", "or", "but",
     "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these",
     "those", "as", "from", "than", "then", "so", "such", "not", "no", "do", "does", "did",
     "has", "have", "had", "can", "could", "will", "would", "should", "may", "might"}
)  # fmt: skip


class LexicalOverlapChecker:
    """A model-free support score: the share of the hypothesis's content words found in
    the premise. Cheap enough to run on everything; blind to negation and paraphrase,
    so it is a prefilter stage, never the strong checker."""

    model_id = "lexical-overlap"

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[SupportScore]:
        scores = []
        for premise, hypothesis in pairs:
            words = {w for w in _WORD.findall(hypothesis.casefold()) if w not in _STOPWORDS}
            present = set(_WORD.findall(premise.casefold()))
            share = len(words & present) / len(words) if words else 0.0
            scores.append(SupportScore(share))
        return scores
