"""The relevance judge: does a chunk answer a search query? A logistic regression over
cheap features, read from a fitted JSON artifact (``tribunal.relevance/1``).

Features: ``llm_p_yes`` (an LLM's P(yes) under a relevance prompt, entering the formula
as logit(clip(P, 1e-6, 1 - 1e-6))) and ``cosine`` (the query-chunk cosine of a profile
embedder's normalised vectors, raw, in [-1, 1])::

    p_relevant = sigmoid(intercept + sum(coef_i * x_i))

The artifact also carries the decision points fitted with it: ``threshold`` (judge
only: relevant when p >= threshold) and ``band`` (cascade: relevant when p >= high,
irrelevant when p <= low, the debate in between). Framework-free: the gRPC adapter
is :mod:`.servicer`, the Ray Serve application :mod:`.app`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..core import (
    ConfigError,
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
    TribunalError,
)
from ..core.llm import Prompt, Usage
from ._relevance_artifact import (
    RELEVANCE_FORMAT,
    RelevanceArtifact,
    RelevanceFeature,
    relevance_artifact_path,
)

if TYPE_CHECKING:
    from ..core import Settings
    from ..core.llm import LLMEngine
    from ..embedding import Embedder

__all__ = [
    "RELEVANCE_FORMAT",
    "RelevanceArtifact",
    "RelevanceFeature",
    "RelevanceItem",
    "RelevanceJudge",
    "RelevanceJudgeSlot",
    "RelevanceVerdict",
    "relevance_artifact_path",
]

_FIELD = "ensemble.relevance_artifact"


@dataclass(frozen=True)
class RelevanceItem:
    """One item to judge; ``answers`` travel with it but no feature reads them."""

    query: str
    chunk: str
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelevanceVerdict:
    p_relevant: float
    relevant: bool
    """``p_relevant >= threshold``."""
    features: tuple[tuple[str, float], ...]
    """(name, raw value) per feature, in the artifact's order."""
    prompt_tokens: int
    """Prompt tokens the LLM features spent on this item."""


class RelevanceJudge:
    """The artifact's features on loaded models; thread-safe (the engines lock per batch).

    Args:
        artifact: The fitted regression.
        engines: Per ``llm_p_yes`` model key, its engine.
        embedders: Per ``cosine`` model key, its embedder (normalised vectors).
        max_query_chars / max_chunk_chars / max_items_per_request: Request limits.
    """

    def __init__(
        self,
        artifact: RelevanceArtifact,
        engines: Mapping[str, LLMEngine[Any]],
        embedders: Mapping[str, Embedder],
        *,
        max_query_chars: int = 2_000,
        max_chunk_chars: int = 20_000,
        max_items_per_request: int = 64,
    ) -> None:
        for feature in artifact.features:
            pool: Mapping[str, Any] = engines if feature.kind == "llm_p_yes" else embedders
            if feature.model_key not in pool:
                raise ConfigError(
                    f"feature {feature.name!r} needs model {feature.model_key!r}, not given",
                    field=_FIELD,
                )
        self.artifact = artifact
        self.engines = dict(engines)
        self.embedders = dict(embedders)
        self.max_query_chars = max_query_chars
        self.max_chunk_chars = max_chunk_chars
        self.max_items_per_request = max_items_per_request

    @classmethod
    def from_settings(
        cls, settings: Settings, artifact: RelevanceArtifact | None = None
    ) -> RelevanceJudge:
        """Load the artifact (default: :func:`relevance_artifact_path`) and its models.

        Raises:
            ConfigError: no artifact file, or one that is invalid or does not fit the profile.
        """
        from ..core.llm import shared_engine
        from ..embedding import shared_profile_embedder

        if artifact is None:
            artifact = RelevanceArtifact.load(relevance_artifact_path(settings))
        artifact.check_profile(settings)
        engines: dict[str, LLMEngine[Any]] = {}
        embedders: dict[str, Embedder] = {}
        for feature in artifact.features:
            key = feature.model_key
            if feature.kind == "llm_p_yes" and key not in engines:
                engines[key] = shared_engine(settings, key, backend=artifact.backend)
            elif feature.kind == "cosine" and key not in embedders:
                embedders[key] = shared_profile_embedder(settings, key)
        options = settings.ensemble
        return cls(
            artifact,
            engines,
            embedders,
            max_query_chars=options.max_query_chars,
            max_chunk_chars=options.max_chunk_chars,
            max_items_per_request=options.max_items_per_request,
        )

    def validate(self, items: Sequence[RelevanceItem]) -> None:
        """Check a request before any model runs (raises the caller-facing error)."""
        if not items:
            raise InvalidArgumentError("items must not be empty", field="items")
        if len(items) > self.max_items_per_request:
            raise ResourceExhaustedError(
                f"at most {self.max_items_per_request} items per call "
                f"(ensemble.max_items_per_request), got {len(items)}: split the batch",
                field="items",
            )
        for index, item in enumerate(items):
            where = f"items[{index}]." if len(items) > 1 else ""
            if not item.query.strip():
                raise InvalidArgumentError("query must be non-empty", field=f"{where}query")
            if not item.chunk.strip():
                raise InvalidArgumentError(
                    "chunk must be non-empty: send the passage to judge", field=f"{where}chunk"
                )
            if len(item.query) > self.max_query_chars:
                raise InvalidArgumentError(
                    f"query is longer than {self.max_query_chars} characters "
                    "(ensemble.max_query_chars)",
                    field=f"{where}query",
                )
            if len(item.chunk) > self.max_chunk_chars:
                raise InvalidArgumentError(
                    f"chunk has {len(item.chunk)} characters; the limit is "
                    f"{self.max_chunk_chars} (ensemble.max_chunk_chars)",
                    field=f"{where}chunk",
                )
            for i, answer in enumerate(item.answers):
                if not answer.strip():
                    raise InvalidArgumentError(
                        "answers must be non-empty", field=f"{where}answers[{i}]"
                    )

    def _llm_columns(
        self,
        key: str,
        columns: list[int],
        items: Sequence[RelevanceItem],
        values: list[list[float]],
    ) -> tuple[Usage, list[int]]:
        """One engine call for every prompt of model ``key`` (identical prompts once)."""
        from ..prompts import get_prompt

        engine = self.engines[key]
        unique: dict[Prompt, int] = {}
        where: list[tuple[int, int, int]] = []  # (row, column, unique index)
        for row, item in enumerate(items):
            for column in columns:
                template = get_prompt(cast(str, self.artifact.features[column].prompt_id))
                prompt = template.render(engine, query=item.query, passage=item.chunk)
                where.append((row, column, unique.setdefault(prompt, len(unique))))
        batch = engine.judge(list(unique))
        tokens = [0] * len(items)
        owner: dict[int, int] = {}
        for row, column, index in where:
            values[row][column] = float(batch.p_yes[index])
            owner.setdefault(index, row)
        for index, prompt in enumerate(unique):
            tokens[owner[index]] += engine.count_tokens(prompt)
        return batch.usage, tokens

    def judge(self, items: Sequence[RelevanceItem]) -> list[RelevanceVerdict]:
        """P(relevant) and every feature's value for each item, in request order.

        LLM features of one model run as one batched engine call; the models run one
        after the other (a relevance artifact has one or two; the engines batch within).
        """
        self.validate(items)
        features = self.artifact.features
        values = [[0.0] * len(features) for _ in items]
        tokens = [0] * len(items)
        by_model: dict[tuple[str, str], list[int]] = {}
        for column, feature in enumerate(features):
            by_model.setdefault((feature.kind, feature.model_key), []).append(column)
        for (kind, key), columns in by_model.items():
            if kind == "llm_p_yes":
                _, spent = self._llm_columns(key, columns, items, values)
                tokens = [a + b for a, b in zip(tokens, spent, strict=True)]
            else:
                vectors = self.embedders[key].embed(
                    [item.query for item in items] + [item.chunk for item in items]
                )
                queries, chunks = vectors[: len(items)], vectors[len(items) :]
                cosines = np.einsum("ij,ij->i", queries, chunks).astype(np.float64)
                for row in range(len(items)):
                    for column in columns:
                        values[row][column] = float(np.clip(cosines[row], -1.0, 1.0))
        verdicts = []
        for row in range(len(items)):
            p = self.artifact.p_relevant(values[row])
            verdicts.append(
                RelevanceVerdict(
                    p_relevant=p,
                    relevant=p >= self.artifact.threshold,
                    features=tuple((f.name, v) for f, v in zip(features, values[row], strict=True)),
                    prompt_tokens=tokens[row],
                )
            )
        return verdicts


class RelevanceJudgeSlot:
    """The service's relevance judge, loaded on first use; thread-safe.

    Lazy by default: a Match-only deployment never loads the judge's models (an LLM
    under the artifact's backend, which may differ from the matching judges', and an
    embedder). ``preload`` (at start, for label jobs' stage hosts) loads it when
    an artifact exists, so the first ``JudgeRelevance`` does not pay the load (a first
    transformers load converts GGUF weights, which can outlast the gateway's stage
    timeout). With no artifact, or a bad one, the service still starts and serves
    Match; ``get`` tries again on each call, so an artifact created (or fixed) later
    is picked up without a restart.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._judge: RelevanceJudge | None = None
        self._lock = threading.Lock()
        self.load_error: str | None = None

    def preload(self) -> None:
        if relevance_artifact_path(self.settings).is_file():
            # A failure is kept in load_error; JudgeRelevance reports it.
            with contextlib.suppress(TribunalError):
                self.get()

    def get(self) -> RelevanceJudge:
        """The judge, loading it first if needed.

        Raises:
            ConfigError: no artifact, or one that cannot serve (the message says what to
                fix; a caller is told only that the server is misconfigured).
        """
        with self._lock:
            if self._judge is None:
                try:
                    self._judge = RelevanceJudge.from_settings(self.settings)
                except FailedPreconditionError as exc:
                    self.load_error = str(exc)
                    raise
                self.load_error = None
            return self._judge
