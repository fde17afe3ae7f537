"""One typed settings object: a YAML model profile plus ``TRIBUNAL_*`` overrides.

Precedence, highest first: keyword overrides, environment variables
(``TRIBUNAL_SERVER__PORT=50052``; nested fields joined by ``__``), the profile
YAML (``TRIBUNAL_PROFILE``: a packaged profile name or a path), defaults.
Every failure becomes a :class:`~tribunal.core.ConfigError` naming the field.
"""

from __future__ import annotations

import contextvars
import os
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from ._errors import ConfigError
from .models._catalog import CATALOG

__all__ = [
    "ModelSpec",
    "RoleSettings",
    "ServerSettings",
    "Settings",
    "available_profiles",
    "load_settings",
    "resolve_profile_path",
]

ENV_PREFIX = "TRIBUNAL_"
_PROFILE_FILE: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "tribunal_profile_file", default=None
)


class _FieldValueError(ValueError):
    """A cross-field check's failure that still knows which field is at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """Where one model comes from: an offline catalog artifact or a hub id."""

    kind: Literal["embedder", "llm", "cross-encoder", "nli"]
    """What the model does; decides which loader reads it."""
    artifact: str | None = None
    """Offline artifact id from :data:`tribunal.core.models.CATALOG`."""
    hf_id: str | None = None
    """Hugging Face model id (needs the hub or a pre-filled HF cache)."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if (self.artifact is None) == (self.hf_id is None):
            raise ValueError("set exactly one of 'artifact' or 'hf_id'")
        if self.artifact is not None and self.artifact not in CATALOG:
            raise ValueError(
                f"unknown artifact {self.artifact!r}; known: {', '.join(sorted(CATALOG))}"
            )
        return self


class RoleSettings(_Strict):
    """Which model (a key of ``models``) plays each role."""

    embedder: str
    reranker: str
    entailment_fast: str
    entailment_strong: str
    judges: list[str] = Field(min_length=1)
    debate_agents: list[str] = Field(min_length=2, max_length=2)
    adjudicator: str

    def names(self) -> dict[str, str]:
        """Role name (``judges[1]`` for list roles) to model key."""
        out: dict[str, str] = {}
        for role, value in self.model_dump().items():
            if isinstance(value, list):
                out.update({f"{role}[{i}]": v for i, v in enumerate(value)})
            else:
                out[role] = value
        return out


class ServerSettings(_Strict):
    """The gRPC server every service runs."""

    host: str = "127.0.0.1"
    """Address to bind; ``0.0.0.0`` in containers."""
    port: int = Field(50051, ge=0, le=65535)
    """gRPC port; 0 picks a free one."""
    max_workers: int = Field(16, ge=1, le=1024)
    """Threads serving requests."""
    max_message_bytes: int = Field(16 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    """Largest request or response accepted."""
    grace_seconds: float = Field(10.0, ge=0.0, le=600.0)
    """On SIGTERM: how long in-flight calls may finish."""
    metrics_port: int | None = Field(9464, ge=0, le=65535)
    """Port of the Prometheus ``/metrics`` endpoint; null disables it, 0 picks a free one."""


class Settings(BaseSettings):
    """Everything configurable, validated. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    profile: str = "tiny"
    """Model profile name."""
    description: str = ""
    """What the profile is for."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where models run; ``auto`` takes a GPU when one is visible."""
    llm_backend: Literal["transformers", "llamacpp", "openai"] = "transformers"
    """LLM engine backend."""
    model_dir: Path = Path("~/.cache/tribunal/models")
    """Model cache (``TRIBUNAL_MODEL_DIR``)."""
    data_dir: Path = Path("~/.local/share/tribunal")
    """Indexes, the SQLite database and artifacts."""
    database_url: str = ""
    """SQLAlchemy URL; empty means SQLite in ``data_dir`` (``TRIBUNAL_DATABASE_URL``)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """Models of the profile by key."""
    roles: RoleSettings | None = None
    """Which model plays which role."""
    server: ServerSettings = ServerSettings()

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        # Settings are frozen; expand paths and derive the default URL once here.
        object.__setattr__(self, "model_dir", self.model_dir.expanduser())
        object.__setattr__(self, "data_dir", self.data_dir.expanduser())
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite:///{self.data_dir / 'tribunal.db'}")
        if self.roles is not None:
            for role, key in self.roles.names().items():
                if key not in self.models:
                    raise _FieldValueError(
                        f"roles.{role}",
                        f"roles.{role} names model {key!r}, which is not in models "
                        f"({', '.join(sorted(self.models)) or 'none'})",
                    )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        profile_file = _PROFILE_FILE.get()
        if profile_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=profile_file))
        return tuple(sources)

    def model_spec(self, key: str) -> ModelSpec:
        """The spec of model ``key``; :class:`ConfigError` if the profile lacks it."""
        try:
            return self.models[key]
        except KeyError:
            raise ConfigError(
                f"profile {self.profile!r} has no model {key!r}", field=f"models.{key}"
            ) from None


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


def _env_name(loc: tuple[int | str, ...]) -> str:
    return ENV_PREFIX + "__".join(str(p).upper() for p in loc if not isinstance(p, int))


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
    token = _PROFILE_FILE.set(path)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, _FieldValueError):
            raise ConfigError(
                f"invalid setting {cause.field}: {cause} (set it in {path.name} or "
                f"{_env_name(tuple(cause.field.split('[')[0].split('.')))})",
                field=cause.field,
            ) from exc
        dotted = ".".join(str(p) for p in loc) or "settings"
        more = len(exc.errors()) - 1
        raise ConfigError(
            f"invalid setting {dotted} = {first.get('input')!r}: {first['msg']} "
            f"(set it in {path.name} or {_env_name(loc)})"
            + (f"; and {more} more problem(s)" if more else ""),
            field=dotted,
        ) from exc
    except SettingsError as exc:
        raise ConfigError(f"cannot parse a TRIBUNAL_* variable: {exc}") from exc
    finally:
        _PROFILE_FILE.reset(token)
