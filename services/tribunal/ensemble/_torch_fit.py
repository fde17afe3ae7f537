"""What the torch aggregators share: the training loop (AdamW, seeded minibatches, and
epoch selection on validation loss: the best epoch's weights are kept), and
:class:`TorchAggregator`, which fits, predicts with and saves a network over the judges'
inputs and the query embedding."""

from __future__ import annotations

import abc
import copy
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Self

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

if TYPE_CHECKING:
    import torch

__all__ = [
    "TorchAggregator",
    "fit_module",
    "focal_bce",
    "log_loss",
    "mlp",
    "module_from_state",
    "module_state",
]


def mlp(inputs: int, hidden: int, outputs: int, dropout: float) -> torch.nn.Module:
    """Linear → LayerNorm → GELU → Dropout → Linear (RAL2M's prior, gate and gating nets)."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(inputs, hidden),
        nn.LayerNorm(hidden),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, outputs),
    )


def fit_module(
    module: torch.nn.Module,
    *,
    rows: int,
    batch_loss: Callable[[torch.Tensor, int], torch.Tensor],
    validation_loss: Callable[[], float] | None,
    max_epochs: int,
    patience: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    seed: int,
) -> dict[str, Any]:
    """Train ``module`` in place; return what the selection found.

    ``batch_loss(index, epoch)`` is the training loss of the rows at ``index``;
    ``validation_loss()`` (in eval mode) decides the epoch kept: the one with the lowest
    validation loss, training stopping ``patience`` epochs after it. Without validation
    every epoch runs and the last is kept.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay)
    best_loss, best_epoch = math.inf, -1
    best_state: dict[str, Any] | None = None
    epoch = 0
    for epoch in range(max_epochs):
        module.train()
        order = torch.randperm(rows, generator=generator)
        for start in range(0, rows, batch_size):
            optimiser.zero_grad()
            loss = batch_loss(order[start : start + batch_size], epoch)
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
        if validation_loss is None:
            continue
        module.eval()
        with torch.no_grad():
            current = validation_loss()
        if current < best_loss - 1e-6:
            best_loss, best_epoch = current, epoch
            best_state = copy.deepcopy(module.state_dict())
        elif epoch - best_epoch >= patience:
            break
    if best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    return {
        "epochs_run": epoch + 1,
        "selected_epoch": best_epoch + 1 if best_state is not None else epoch + 1,
        "validation_loss": None if best_state is None else best_loss,
    }


def module_state(module: torch.nn.Module, prefix: str = "") -> dict[str, NDArray[Any]]:
    """The module's weights as float arrays (artifact form)."""
    return {
        prefix + key: value.detach().cpu().numpy().copy()
        for key, value in module.state_dict().items()
    }


def module_from_state(
    module: torch.nn.Module, state: Mapping[str, NDArray[Any]], prefix: str = ""
) -> torch.nn.Module:
    import torch

    module.load_state_dict(
        {
            key[len(prefix) :]: torch.from_numpy(np.asarray(value).copy())
            for key, value in state.items()
            if key.startswith(prefix)
        }
    )
    module.eval()
    return module


def focal_bce(
    p: torch.Tensor, labels: torch.Tensor, *, gamma: float, smoothing: float
) -> torch.Tensor:
    """Focal binary cross-entropy with label smoothing (RAL2M's training loss)."""
    import torch

    p = p.clamp(1e-6, 1 - 1e-6)
    target = labels * (1 - smoothing) + smoothing / 2
    loss = -(target * (1 - p) ** gamma * torch.log(p) + (1 - target) * p**gamma * torch.log(1 - p))
    return loss.mean()


def log_loss(p: torch.Tensor, labels: torch.Tensor) -> float:
    import torch

    p = p.clamp(1e-7, 1 - 1e-7)
    return float(-(labels * torch.log(p) + (1 - labels) * torch.log(1 - p)).mean())


class TorchAggregator(Aggregator):
    """A network over each row's judge inputs ``s`` and query embedding ``e``, trained by
    :func:`fit_module` (epochs chosen on validation), saved as its weights.

    A subclass sets the hyperparameters below in ``__init__`` and says how to build its
    network, the training loss of a minibatch, and P(match) in eval mode.
    """

    inputs: InputKind
    """Per-judge input: ``votes`` (RAL2M) or ``probabilities`` (P(yes))."""
    lr: float
    weight_decay: float
    batch_size: int
    max_epochs: int
    patience: int
    seed: int
    dimension_: int
    net_: Any

    @abc.abstractmethod
    def _build(self, n_judges: int, dimension: int) -> Any:
        """An untrained network for ``n_judges`` judges and embeddings of ``dimension``."""

    @abc.abstractmethod
    def _batch_loss(
        self, net: Any, s: torch.Tensor, e: torch.Tensor, y: torch.Tensor, epoch: int
    ) -> torch.Tensor:
        """The training loss of one minibatch in ``epoch``."""

    @abc.abstractmethod
    def _probabilities(self, net: Any, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """P(match) per row, in eval mode (deterministic: the validation loss and the
        predictions)."""

    def _tensors(self, inputs: EnsembleInputs) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        return torch.from_numpy(inputs.judge_inputs(self.inputs)), torch.from_numpy(
            inputs.embeddings
        )

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
            s, e = self._tensors(inputs)
            y = torch.from_numpy(labels.astype(np.float32))

            def batch_loss(index: torch.Tensor, epoch: int) -> torch.Tensor:
                return self._batch_loss(net, s[index], e[index], y[index], epoch)

            validation_loss: Callable[[], float] | None = None
            if validation is not None:
                vs, ve = self._tensors(validation[0])
                vy = torch.from_numpy(validation[1].astype(np.float32))

                def score_validation() -> float:
                    return log_loss(self._probabilities(net, vs, ve), vy)

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
        s, e = self._tensors(inputs)
        with torch.no_grad():
            p = self._probabilities(self.net_, s, e)
        return np.asarray(p.double().numpy(), dtype=np.float64)

    def get_info(self) -> dict[str, Any]:
        return {**super().get_info(), "dimension": self.dimension_}

    def get_state(self) -> dict[str, NDArray[Any]]:
        return module_state(self.net_)

    def _set_state(self, state: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        self.dimension_ = int(info["dimension"])
        self.net_ = module_from_state(self._build(self.n_judges_, self.dimension_), state)
