"""RAL2M's query-adaptive latent ensemble (the form of the authors' implementation).

Inputs: judge votes s ∈ {0,1}^K and the query embedding e. A query-conditioned
diagonal Gaussian prior over K latent competences z: μ(e) from an MLP (hidden 512,
LayerNorm, GELU, dropout 0.3), σ(e) = softplus(MLP(e)) + 1e-3. Gates g = sigmoid(MLP(e)).
Mean-field fixed point from m = s; each iteration

    ctx = f_int(m ⊙ g)                       (f_int: MLP K → 2K → 1)
    q_y = softmax(ctx · θ_λ / T)             (θ_λ initialised to (−2, 2))
    λ   = Σ_y q_y θ_λ,y
    m_new = (μ/σ + θ_φ + W_φ s + g λ) / (1/σ + 1)
    m ← 0.8 m_new + 0.2 m                    (damping)

10 iterations in training, 60 at inference; v = 1/(1/σ + 1). Prediction: z = m + √v ε,
p = mean over M samples of softmax(f_int(z ⊙ g) θ_λ)[1] (M = 256 training, 1024
inference). Loss: focal BCE (γ = 2) with label smoothing 0.1 + 0.1 · KL(N(m, v) ‖ prior),
the KL weight warmed up linearly over 40 epochs; AdamW lr 1e-3, weight decay 3e-2,
batch 512; the epoch is selected on validation loss. W_φ is a full K×K matrix (the
paper writes its diagonal; the full matrix lets one judge's vote move another's
competence). Inference samples ε from a generator seeded with ``seed``: the same
fitted model gives the same P(match) every time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ._base import (
    InputKind,
)
from ._torch_fit import TorchAggregator, focal_bce, mlp

if TYPE_CHECKING:
    import torch

__all__ = ["LatentEnsemble"]


def _network(
    n_judges: int, dimension: int, hidden: int, dropout: float, temperature: float
) -> torch.nn.Module:
    import torch
    from torch import nn
    from torch.nn import functional

    k = n_judges

    class LatentNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.prior_mean = mlp(dimension, hidden, k, dropout)
            self.prior_scale = mlp(dimension, hidden, k, dropout)
            self.gate = mlp(dimension, hidden, k, dropout)
            self.interaction = nn.Sequential(nn.Linear(k, 2 * k), nn.GELU(), nn.Linear(2 * k, 1))
            self.theta_lambda = nn.Parameter(torch.tensor([-2.0, 2.0]))
            self.theta_phi = nn.Parameter(torch.zeros(k))
            self.w_phi = nn.Linear(k, k, bias=False)

        def posterior(
            self, s: torch.Tensor, e: torch.Tensor, iterations: int
        ) -> tuple[torch.Tensor, ...]:
            mu = self.prior_mean(e)
            sigma = functional.softplus(self.prior_scale(e)) + 1e-3
            g = torch.sigmoid(self.gate(e))
            evidence = mu / sigma + self.theta_phi + self.w_phi(s)
            precision = 1.0 / sigma + 1.0
            m = s
            for _ in range(iterations):
                ctx = self.interaction(m * g)  # (n, 1)
                q = torch.softmax(ctx * self.theta_lambda / temperature, dim=-1)  # (n, 2)
                lam = (q * self.theta_lambda).sum(-1, keepdim=True)
                m_new = (evidence + g * lam) / precision
                m = 0.8 * m_new + 0.2 * m
            return m, 1.0 / precision, mu, sigma, g

        def forward(
            self,
            s: torch.Tensor,
            e: torch.Tensor,
            iterations: int,
            samples: int,
            generator: torch.Generator | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            m, v, mu, sigma, g = self.posterior(s, e, iterations)
            eps = torch.randn((samples, *m.shape), generator=generator)
            z = m + v.sqrt() * eps  # (samples, n, k)
            logits = self.interaction(z * g) * self.theta_lambda  # (samples, n, 2)
            p = torch.softmax(logits, dim=-1)[..., 1].mean(0)
            # KL(N(m, v) || N(mu, sigma)) per row, diagonal (sigma is the prior variance).
            kl = 0.5 * (torch.log(sigma / v) + (v + (m - mu) ** 2) / sigma - 1.0).sum(-1)
            return p, kl

    return LatentNet()


class LatentEnsemble(TorchAggregator):
    """RAL2M's query-adaptive latent ensemble (see the module docstring for the model)."""

    name: ClassVar[str] = "latent"

    def __init__(
        self,
        *,
        inputs: InputKind = "votes",
        hidden: int = 512,
        dropout: float = 0.3,
        temperature: float = 1.0,
        train_iterations: int = 10,
        eval_iterations: int = 60,
        train_samples: int = 256,
        eval_samples: int = 1024,
        focal_gamma: float = 2.0,
        label_smoothing: float = 0.1,
        kl_weight: float = 0.1,
        kl_warmup_epochs: int = 40,
        lr: float = 1e-3,
        weight_decay: float = 3e-2,
        batch_size: int = 64,
        max_epochs: int = 400,
        patience: int = 40,
        seed: int = 0,
    ) -> None:
        self.inputs: InputKind = inputs
        """Per-judge input s: ``votes`` (RAL2M) or ``probabilities`` (P(yes))."""
        self.hidden = hidden
        """Width of the prior, scale and gate MLPs."""
        self.dropout = dropout
        self.temperature = temperature
        """T of q_y = softmax(ctx · θ_λ / T)."""
        self.train_iterations = train_iterations
        """Fixed-point iterations while training."""
        self.eval_iterations = eval_iterations
        """Fixed-point iterations at inference."""
        self.train_samples = train_samples
        """Monte Carlo samples of z while training."""
        self.eval_samples = eval_samples
        """Monte Carlo samples of z at inference."""
        self.focal_gamma = focal_gamma
        self.label_smoothing = label_smoothing
        self.kl_weight = kl_weight
        """Weight of the KL to the query-conditioned prior (after warm-up)."""
        self.kl_warmup_epochs = kl_warmup_epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        """Most epochs; the one with the lowest validation loss is kept."""
        self.patience = patience
        self.seed = seed
        """Seeds the initial weights, the minibatch order, training noise and inference noise."""
        self.dimension_: int = 0
        self.net_: Any = None

    def _build(self, n_judges: int, dimension: int) -> Any:
        return _network(n_judges, dimension, self.hidden, self.dropout, self.temperature)

    def _batch_loss(
        self, net: Any, s: torch.Tensor, e: torch.Tensor, y: torch.Tensor, epoch: int
    ) -> torch.Tensor:
        p, kl = net(s, e, self.train_iterations, self.train_samples)
        warm = min(1.0, (epoch + 1) / max(self.kl_warmup_epochs, 1))
        fit = focal_bce(p, y, gamma=self.focal_gamma, smoothing=self.label_smoothing)
        loss: torch.Tensor = fit + self.kl_weight * warm * kl.mean()
        return loss

    def _probabilities(self, net: Any, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        import torch

        # Seeded noise: the same rows get the same P in validation and at inference.
        generator = torch.Generator().manual_seed(self.seed)
        p: torch.Tensor = net(s, e, self.eval_iterations, self.eval_samples, generator)[0]
        return p

    def get_config(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "hidden": self.hidden,
            "dropout": self.dropout,
            "temperature": self.temperature,
            "train_iterations": self.train_iterations,
            "eval_iterations": self.eval_iterations,
            "train_samples": self.train_samples,
            "eval_samples": self.eval_samples,
            "focal_gamma": self.focal_gamma,
            "label_smoothing": self.label_smoothing,
            "kl_weight": self.kl_weight,
            "kl_warmup_epochs": self.kl_warmup_epochs,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "batch_size": self.batch_size,
            "max_epochs": self.max_epochs,
            "patience": self.patience,
            "seed": self.seed,
        }
