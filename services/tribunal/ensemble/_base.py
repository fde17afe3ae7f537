"""What every aggregator takes and the interface it implements (crowd-kit style).

Hyperparameters are typed attributes set at construction; fitted state ends in ``_``;
``fit`` learns from training rows (and selects on validation rows only);
``predict_proba`` returns P(match) per row. ``get_config`` / ``get_state`` /
``from_saved`` make an aggregator an artifact: JSON-able hyperparameters and fitted
scalars, and named float arrays (no pickles).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError

__all__ = ["Aggregator", "EnsembleInputs", "InputKind", "single_torch_thread"]

InputKind = Literal["votes", "probabilities"]
"""What a learned aggregator reads per judge: the binary vote (RAL2M) or its P(yes)."""

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class EnsembleInputs:
    """One batch of rows: each judge's vote and P(yes), and the query embedding."""

    votes: NDArray[np.float32]
    """(rows, judges) in {0, 1}."""
    p_yes: NDArray[np.float32]
    """(rows, judges) in [0, 1]."""
    embeddings: NDArray[np.float32]
    """(rows, dimension) query vectors."""

    def __post_init__(self) -> None:
        if self.votes.ndim != 2 or self.votes.shape != self.p_yes.shape:
            raise InvalidArgumentError(
                f"votes {self.votes.shape} and p_yes {self.p_yes.shape} must be the same "
                "(rows, judges) shape",
                field="votes",
            )
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != self.votes.shape[0]:
            raise InvalidArgumentError(
                f"embeddings {self.embeddings.shape} need one row per vote row", field="embeddings"
            )

    @classmethod
    def from_p_yes(
        cls, p_yes: NDArray[Any], embeddings: NDArray[Any], thresholds: NDArray[Any]
    ) -> EnsembleInputs:
        """Votes are P(yes) >= each judge's threshold."""
        # Compared in float64: a threshold fitted between two float32 values must not
        # round onto one of them.
        cut = np.asarray(thresholds, dtype=np.float64)[None, :]
        votes = (np.asarray(p_yes, dtype=np.float64) >= cut).astype(np.float32)
        p = np.asarray(p_yes, dtype=np.float32)
        return cls(votes, p, np.asarray(embeddings, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.votes.shape[0])

    @property
    def n_judges(self) -> int:
        return int(self.votes.shape[1])

    @property
    def dimension(self) -> int:
        return int(self.embeddings.shape[1])

    def judge_inputs(self, kind: InputKind) -> NDArray[np.float32]:
        return self.votes if kind == "votes" else self.p_yes

    def take(self, index: NDArray[np.int64]) -> EnsembleInputs:
        return EnsembleInputs(self.votes[index], self.p_yes[index], self.embeddings[index])

    def columns(self, columns: list[int]) -> EnsembleInputs:
        """Only these judges."""
        return EnsembleInputs(self.votes[:, columns], self.p_yes[:, columns], self.embeddings)


Validation = tuple[EnsembleInputs, NDArray[np.int64]]


class Aggregator(abc.ABC):
    """Combines judges' outputs into P(match)."""

    name: ClassVar[str]
    """``majority``, ``weighted``, ``neural`` or ``latent``."""

    threshold_: float = 0.5
    """P(match) at or above which the aggregator says "match"."""
    n_judges_: int = 0
    """Judges it was fitted for."""
    fit_info_: dict[str, Any]
    """What fitting found (selected epoch or C, validation loss, ...)."""

    @abc.abstractmethod
    def fit(
        self,
        inputs: EnsembleInputs,
        labels: NDArray[np.int64],
        validation: Validation | None = None,
    ) -> Self:
        """Learn from ``inputs``; choose epochs/hyperparameters on ``validation`` only."""

    @abc.abstractmethod
    def predict_proba(self, inputs: EnsembleInputs) -> FloatArray:
        """P(match) per row."""

    def predict(self, inputs: EnsembleInputs) -> NDArray[np.int64]:
        return (self.predict_proba(inputs) >= self.threshold_).astype(np.int64)

    @abc.abstractmethod
    def get_config(self) -> dict[str, Any]:
        """Hyperparameters (JSON-able): ``type(self)(**config)`` rebuilds an unfitted copy."""

    def get_state(self) -> dict[str, NDArray[Any]]:
        """Fitted arrays by name."""
        return {}

    def _set_state(self, state: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        """Restore fitted arrays (``info``: the fitted scalars of :meth:`get_info`)."""
        del state, info  # aggregators without fitted arrays have nothing to restore

    def get_info(self) -> dict[str, Any]:
        """Fitted scalars (JSON-able)."""
        return {
            "threshold": self.threshold_,
            "n_judges": self.n_judges_,
            "fit": getattr(self, "fit_info_", {}),
        }

    @classmethod
    def from_saved(
        cls, config: Mapping[str, Any], info: Mapping[str, Any], state: Mapping[str, NDArray[Any]]
    ) -> Self:
        """A fitted aggregator from what :meth:`get_config`, :meth:`get_info` and
        :meth:`get_state` returned."""
        aggregator = cls(**config)
        aggregator.threshold_ = float(info["threshold"])
        aggregator.n_judges_ = int(info["n_judges"])
        aggregator.fit_info_ = dict(info.get("fit", {}))
        aggregator._set_state(state, info)
        return aggregator

    def _check(self, inputs: EnsembleInputs) -> None:
        if self.n_judges_ == 0:
            raise InvalidArgumentError(
                f"the {self.name} aggregator is not fitted", field="aggregator"
            )
        if inputs.n_judges != self.n_judges_:
            raise InvalidArgumentError(
                f"the {self.name} aggregator was fitted on {self.n_judges_} judges, got "
                f"{inputs.n_judges}",
                field="judges",
            )


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """One torch thread while training (deterministic, and polite on shared cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
