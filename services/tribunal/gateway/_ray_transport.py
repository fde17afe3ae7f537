"""Stages as Ray Serve applications, called through ``DeploymentHandle``s.

Every stage's Serve deployment exposes the proto-named methods (``Search``,
``BatchMatch``, ``Check``, ``BatchScore``, ``Assess``) taking and returning the
proto messages, as Serve's gRPC proxy requires; so this transport sends the
same messages as the gRPC one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..core import DeadlineExceededError, InternalError, TribunalError, UnavailableError
from ..deploy import STAGES

__all__ = ["RayServeTransport"]


class RayServeTransport:
    """Handles by application name (default: the stage name), fetched lazily."""

    def __init__(self, apps: Mapping[str, str]) -> None:
        self.apps = {stage: apps.get(stage, stage) for stage in STAGES}
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _handle(self, stage: str) -> Any:
        from ray import serve

        with self._lock:
            if stage not in self._handles:
                try:
                    self._handles[stage] = serve.get_app_handle(self.apps[stage])
                except Exception as exc:  # Serve raises plain exceptions for missing apps
                    raise UnavailableError(
                        f"Serve application {self.apps[stage]!r} for stage {stage!r} is not "
                        f"running: {exc}"
                    ) from exc
            return self._handles[stage]

    def call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any:
        from ray import exceptions as ray_exceptions
        from ray.serve import exceptions as serve_exceptions

        handle = self._handle(stage)
        response = getattr(handle, method).remote(request)
        try:
            return response.result(timeout_s=timeout_s)
        except TimeoutError as exc:
            # The caller gave up: drop the request from the stage's queue rather than let
            # it take model time from requests still waiting (measured under load).
            response.cancel()
            raise DeadlineExceededError(f"{stage}.{method} took over {timeout_s:.2f}s") from exc
        except (
            serve_exceptions.BackPressureError,
            serve_exceptions.DeploymentUnavailableError,
            # The replica died or was stopped under the call (a lost node, a restart):
            # ActorDiedError, ActorUnavailableError and their kin; the call is retried.
            ray_exceptions.RayActorError,
        ) as exc:
            raise UnavailableError(f"{stage}.{method}: {exc}") from exc
        except ray_exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, TribunalError):
                raise cause from exc
            raise InternalError(f"{stage}.{method} failed: {cause!r}") from exc

    def close(self) -> None:
        with self._lock:
            self._handles.clear()
