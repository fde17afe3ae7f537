"""A one-line Serve application for the ops REST test (no models: only replicas matter)."""

from __future__ import annotations

from ray import serve


@serve.deployment(name="echo", ray_actor_options={"num_cpus": 0})
class Echo:
    def __call__(self, request: object) -> str:
        return "echo"


app = Echo.bind()
