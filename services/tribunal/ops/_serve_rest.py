"""The local side of `tribunal ops`: Serve's REST API on the Ray dashboard (:8265).

``GET /api/serve/applications/`` describes every application with its deployed
config and replicas; ``PUT`` of a whole Serve config applies it declaratively
(applications whose config is unchanged are left alone, a replica change is a
lightweight update). Ray 2.60 clusters with token auth want the token as a bearer
header: ``--token``, ``RAY_AUTH_TOKEN`` or ``~/.ray/auth_token``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import requests

from ..core import FailedPreconditionError, InvalidArgumentError, UnavailableError

__all__ = ["ServeRestClient", "config_from_details"]

_APPS = "/api/serve/applications/"


def _default_token() -> str | None:
    token = os.environ.get("RAY_AUTH_TOKEN")
    if token:
        return token.strip()
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token")).expanduser()
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def config_from_details(details: dict[str, Any]) -> dict[str, Any]:
    """The declarative config (ServeDeploySchema) that reproduces what runs now."""
    config: dict[str, Any] = {
        key: details[key]
        for key in ("proxy_location", "http_options", "grpc_options", "target_capacity")
        if details.get(key) is not None
    }
    config["applications"] = [
        app["deployed_app_config"]
        for _, app in sorted((details.get("applications") or {}).items())
        if app.get("deployed_app_config")
    ]
    return config


class ServeRestClient:
    """A thin client of the dashboard's Serve endpoints."""

    def __init__(self, address: str, *, token: str | None = None, timeout_s: float = 10.0) -> None:
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s
        token = token or _default_token()
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def _request(self, method: str, json_body: dict[str, Any] | None = None) -> Any:
        url = self.address + _APPS
        try:
            response = requests.request(
                method, url, json=json_body, headers=self._headers, timeout=self.timeout_s
            )
        except requests.RequestException as exc:
            raise UnavailableError(
                f"cannot reach Ray Serve's REST API at {self.address} ({exc.__class__.__name__}); "
                "is Ray running with its dashboard (ray start --head, port 8265)?"
            ) from exc
        if response.status_code in (401, 403):
            raise FailedPreconditionError(
                f"Ray refused the call ({response.status_code}): the cluster uses token auth; "
                "pass --token or set RAY_AUTH_TOKEN"
            )
        if response.status_code == 400:
            raise InvalidArgumentError(
                f"Ray Serve rejected the config: {response.text[:2000]}", field="serve_config"
            )
        if response.status_code >= 300:
            raise UnavailableError(
                f"{method} {url} failed: {response.status_code} {response.text[:500]}"
            )
        return response.json() if response.content else None

    def details(self) -> dict[str, Any]:
        found = self._request("GET")
        if not isinstance(found, dict):
            raise UnavailableError(f"{self.address}{_APPS} did not return Serve's details")
        return found

    def apply(self, config: dict[str, Any]) -> None:
        self._request("PUT", config)
