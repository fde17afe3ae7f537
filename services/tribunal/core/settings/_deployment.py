"""How one service's Ray Serve deployment runs and scales."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ._base import Section

__all__ = ["DeploymentSettings"]


class DeploymentSettings(Section):
    """How one service's Ray Serve deployment runs and scales (each service has its own)."""

    min_replicas: int = Field(1, ge=0, le=1000)
    """Autoscaling floor (0 lets the service scale to zero)."""
    max_replicas: int = Field(1, ge=1, le=1000)
    """Autoscaling ceiling."""
    target_ongoing_requests: float = Field(8.0, gt=0.0, le=10_000.0)
    """Autoscaler target of in-flight requests per replica."""
    num_cpus: float = Field(1.0, ge=0.0, le=512.0)
    """CPUs reserved per replica (Ray's scheduling share, not a thread limit)."""
    num_gpus: float = Field(0.0, ge=0.0, le=16.0)
    """GPUs reserved per replica; > 0 puts the service's models on a GPU."""
    max_batch_size: int = Field(16, ge=1, le=1024)
    """Concurrent single requests ``@serve.batch`` gathers into one model call."""
    batch_wait_timeout_s: float = Field(0.005, ge=0.0, le=10.0)
    """How long a batch waits to fill before it runs anyway."""
    max_ongoing_requests: int = Field(64, ge=1, le=100_000)
    """Requests a replica accepts at once; must be >= max_batch_size or batches never fill."""
    max_queued_requests: int = Field(256, ge=1, le=1_000_000)
    """Requests waiting for a replica; beyond them Serve refuses a call at once
    (RESOURCE_EXHAUSTED through the gRPC proxy, back-pressure to a handle caller)."""
    max_surge_percent: int = Field(100, ge=0, le=100)
    """Extra replicas a restart (a new artifact, new settings, new code) may start before
    the old ones stop, as a percentage of the replica count, rounded up. 100: every
    replacement starts and becomes ready while the old replica still serves, so a
    restart drops no request (with one replica, 0 would leave none until the new one has
    loaded). Set 0 where the cluster has no room for one more replica (a GPU each) and
    no autoscaler to add a node: the old replicas then stop first."""

    @model_validator(mode="after")
    def _batches_can_fill(self) -> DeploymentSettings:
        if self.max_ongoing_requests < self.max_batch_size:
            raise ValueError(
                f"max_ongoing_requests ({self.max_ongoing_requests}) must be >= max_batch_size "
                f"({self.max_batch_size}), or batches never fill"
            )
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must be <= max_replicas")
        return self

    def ray_options(self) -> dict[str, Any]:
        """Keyword arguments of ``Deployment.options`` (Serve's names; no ray import here)."""
        return {
            "max_ongoing_requests": self.max_ongoing_requests,
            "max_queued_requests": self.max_queued_requests,
            "max_surge_percent": self.max_surge_percent,
            "ray_actor_options": {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus},
            "autoscaling_config": {
                "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests,
            },
        }
