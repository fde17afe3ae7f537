"""RAL2M's "neural model" baseline: query-adaptive gates, no latent dependencies.

P(match) = sigmoid(Linear(s ⊙ gate(e))), gate(e) = sigmoid(MLP(e)): each judge's input
is weighted by a gate computed from the query embedding, then linearly combined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ._base import (
    InputKind,
)
from ._torch_fit import TorchAggregator, mlp

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


class NeuralGating(TorchAggregator):
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

    def _batch_loss(
        self, net: Any, s: torch.Tensor, e: torch.Tensor, y: torch.Tensor, epoch: int
    ) -> torch.Tensor:
        from torch.nn import functional

        return functional.binary_cross_entropy(net(s, e).clamp(1e-6, 1 - 1e-6), y)

    def _probabilities(self, net: Any, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        p: torch.Tensor = net(s, e)
        return p

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
