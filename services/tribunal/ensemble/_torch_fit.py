"""The training loop the torch aggregators share: AdamW, seeded minibatches, and
epoch selection on validation loss (the best epoch's weights are kept)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import torch

__all__ = ["fit_module", "mlp", "module_from_state", "module_state"]


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
