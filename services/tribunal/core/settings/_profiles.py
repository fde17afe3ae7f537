"""Loading settings: a YAML profile plus ``TRIBUNAL_*`` overrides, every failure a
:class:`~tribunal.core.ConfigError` naming the field and where to set it.

Precedence, highest first: keyword overrides, environment variables
(``TRIBUNAL_SERVER__PORT=50052``; nested fields joined by ``__``), the profile
YAML (``TRIBUNAL_PROFILE``: a packaged profile name or a path), defaults.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings.exceptions import SettingsError

from .._errors import ConfigError
from ._base import ENV_PREFIX, FieldValueError, env_name
from ._root import PROFILE_FILE, Settings

__all__ = ["RENAMED_SETTINGS", "available_profiles", "load_settings", "resolve_profile_path"]

RENAMED_SETTINGS: dict[str, str] = {
    "retrieval.top_k_max": "retrieval.max_top_k",
    "retrieval.query_max_chars": "retrieval.max_query_chars",
    "retrieval.batch_max_searches": "retrieval.max_searches_per_request",
    "retrieval.upsert_max_entries": "retrieval.max_entries_per_request",
    "retrieval.chunk_max_chars": "retrieval.chunk_size_chars",
    "entailment.chunk_chars": "entailment.chunk_size_chars",
    "entailment.max_pairs": "entailment.max_pairs_per_request",
    "debate.max_items": "debate.max_items_per_request",
    "debate.max_answers": "debate.max_answers_per_item",
    "ensemble.answer_max_chars": "ensemble.truncate_answer_chars",
    "ensemble.chunk_max_chars": "ensemble.truncate_chunk_chars",
    "ensemble.max_items": "ensemble.max_items_per_request",
    "confidence.batch_max_items": "confidence.max_items_per_request",
    "gateway.batch_max_items": "gateway.max_items_per_request",
}
"""Former setting names and their current ones, so an old profile or variable gets told."""


def available_profiles() -> list[str]:
    """Names of the profiles shipped with the package."""
    folder = resources.files("tribunal") / "profiles"
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def resolve_profile_path(name_or_path: str) -> Path:
    """A packaged profile by name, or a YAML file by path."""
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ConfigError(f"profile file {path} does not exist", field="profile")
        return path
    candidate = Path(str(resources.files("tribunal") / "profiles" / f"{name_or_path}.yaml"))
    if not candidate.is_file():
        raise ConfigError(
            f"unknown profile {name_or_path!r}; choose one of {', '.join(available_profiles())} "
            "or give a path to a YAML file",
            field="profile",
        )
    return candidate


def load_settings(profile: str | None = None, **overrides: Any) -> Settings:
    """Load the profile, apply ``TRIBUNAL_*`` variables and ``overrides``, validate.

    Raises:
        ConfigError: naming the first invalid field, its value and where to set it.
    """
    name = profile or os.environ.get(f"{ENV_PREFIX}PROFILE") or "tiny"
    path = resolve_profile_path(name)
    try:
        declared = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"profile {path} is not valid YAML: {exc}", field="profile") from exc
    if not isinstance(declared, dict):
        raise ConfigError(f"profile {path} must be a mapping at the top level", field="profile")
    # The profile a file is loaded as is the name asked for, whatever the file says.
    overrides.setdefault("profile", declared.get("profile") or path.stem)
    token = PROFILE_FILE.set(path)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, FieldValueError):
            raise ConfigError(
                f"invalid setting {cause.field}: {cause} (set it in {path.name} or "
                f"{env_name(tuple(cause.field.split('[')[0].split('.')))})",
                field=cause.field,
            ) from exc
        dotted = ".".join(str(p) for p in loc) or "settings"
        more = len(exc.errors()) - 1
        renamed = RENAMED_SETTINGS.get(dotted)
        if renamed:
            hint = f"it is now {renamed}, {env_name(tuple(renamed.split('.')))}"
        elif first["type"] == "extra_forbidden":
            hint = f"no such setting: remove it from {path.name} or unset {env_name(loc)}"
        else:
            hint = f"set it in {path.name} or {env_name(loc)}"
        raise ConfigError(
            f"invalid setting {dotted} = {first.get('input')!r}: {first['msg']} ({hint})"
            + (f"; and {more} more problem(s)" if more else ""),
            field=dotted,
        ) from exc
    except SettingsError as exc:
        raise ConfigError(f"cannot parse a TRIBUNAL_* variable: {exc}") from exc
    finally:
        PROFILE_FILE.reset(token)
