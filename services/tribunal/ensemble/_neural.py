"""RAL2M's "neural model" baseline: query-adaptive gates, no latent dependencies.

P(match) = sigmoid(Linear(s ⊙ gate(e))), gate(e) = sigmoid(MLP(e)): each judge's input
is weighted by a gate computed from the query embedding, then linearly combined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from ._base import (
    Aggregator,
    EnsembleInputs,
    FloatArray,
    InputKind,
    Validation,
    single_torch_thread,
)
from ._torch_fit import fit_module, log_loss, mlp, module_from_state, module_state

if TYPE_CHECKING:
    import torch

__all__ = ["NeuralGating"]


def _network(n_judges: int, dimension: int, hidden: int, dropout: float) -> torch.nn.Module:
    import torch
    from torch import nn

    class GatedVote(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = mlp(dimension, hidden, n_judges, dropout)
            self.combine = nn.Linear(n_judges, 1)

        def forward(self, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.combine(s * torch.sigmoid(self.gate(e)))).squeeze(-1)

    return GatedVote()


class NeuralGating(Aggregator):
    """sigmoid(Linear(s ⊙ sigmoid(MLP(e)))), trained with BCE; epochs chosen on validation."""

    name: ClassVar[str] = "neural"

    def __init__(
        self,
        *,
        inputs: InputKind = "votes",
        hidden: int = 512,
        dropout: float = 0.3,
        lr: float = 1e-3,
        weight_decay: float = 3e-2,
        batch_size: int = 64,
        max_epochs: int = 400,
        patience: int = 40,
        seed: int = 0,
    ) -> None:
        self.inputs: InputKind = inputs
        """Per-judge input: ``votes`` (RAL2M) or ``probabilities``."""
        self.hidden = hidden
        """Width of the gate MLP."""
        self.dropout = dropout
        self.lr = lr
        """AdamW learning rate."""
        self.weight_decay = weight_decay
        """AdamW weight decay."""
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        """Most epochs; the one with the lowest validation loss is kept."""
        self.patience = patience
        """Epochs without a better validation loss before training stops."""
        self.seed = seed
        """Seeds the initial weights and the minibatch order."""
        self.dimension_: int = 0
        self.net_: Any = None

    def _build(self, n_judges: int, dimension: int) -> Any:
        return _network(n_judges, dimension, self.hidden, self.dropout)

    def fit(
        self,
        inputs: EnsembleInputs,
        labels: NDArray[np.int64],
        validation: Validation | None = None,
    ) -> Self:
        import torch

        with single_torch_thread():
            torch.manual_seed(self.seed)
            net = self._build(inputs.n_judges, inputs.dimension)
            s = torch.from_numpy(inputs.judge_inputs(self.inputs))
            e = torch.from_numpy(inputs.embeddings)
            y = torch.from_numpy(labels.astype(np.float32))
            bce = torch.nn.BCELoss()

            def batch_loss(index: torch.Tensor, epoch: int) -> torch.Tensor:
                loss: torch.Tensor = bce(net(s[index], e[index]).clamp(1e-6, 1 - 1e-6), y[index])
                return loss

            validation_loss: Callable[[], float] | None = None
            if validation is not None:
                vs = torch.from_numpy(validation[0].judge_inputs(self.inputs))
                ve = torch.from_numpy(validation[0].embeddings)
                vy = torch.from_numpy(validation[1].astype(np.float32))

                def score_validation() -> float:
                    return log_loss(net(vs, ve), vy)

                validation_loss = score_validation

            self.fit_info_ = fit_module(
                net,
                rows=len(inputs),
                batch_loss=batch_loss,
                validation_loss=validation_loss,
                max_epochs=self.max_epochs,
                patience=self.patience,
                lr=self.lr,
                weight_decay=self.weight_decay,
                batch_size=self.batch_size,
                seed=self.seed,
            )
        self.net_ = net
        self.n_judges_ = inputs.n_judges
        self.dimension_ = inputs.dimension
        self.threshold_ = 0.5
        return self

    def predict_proba(self, inputs: EnsembleInputs) -> FloatArray:
        import torch

        self._check(inputs)
        with torch.no_grad():
            p = self.net_(
                torch.from_numpy(inputs.judge_inputs(self.inputs)),
                torch.from_numpy(inputs.embeddings),
            )
        return np.asarray(p.double().numpy(), dtype=np.float64)

    def get_config(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "hidden": self.hidden,
            "dropout": self.dropout,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "batch_size": self.batch_size,
            "max_epochs": self.max_epochs,
            "patience": self.patience,
            "seed": self.seed,
        }

    def get_info(self) -> dict[str, Any]:
        return {**super().get_info(), "dimension": self.dimension_}

    def get_state(self) -> dict[str, NDArray[Any]]:
        return module_state(self.net_)

    def _set_state(self, state: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        self.dimension_ = int(info["dimension"])
        self.net_ = module_from_state(self._build(self.n_judges_, self.dimension_), state)
