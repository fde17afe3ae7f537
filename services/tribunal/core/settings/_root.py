"""The root settings object: the profile's models and roles, paths, logging, and one
field per section (each section in its own module)."""

from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from .._errors import ConfigError
from ._audit import AuditSettings
from ._base import ENV_PREFIX, FieldValueError
from ._confidence import ConfidenceSettings
from ._debate import DebateSettings
from ._ensemble import EnsembleSettings
from ._entailment import EntailmentSettings
from ._gateway import GatewaySettings
from ._llm import LLMSettings
from ._models import ModelSpec, RoleSettings
from ._retrieval import RetrievalSettings
from ._server import ServerSettings

__all__ = ["PROFILE_FILE", "Settings"]

PROFILE_FILE: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "tribunal_profile_file", default=None
)
"""The profile YAML that :func:`load_settings` is reading (a source of ``Settings``)."""


class Settings(BaseSettings):
    """Everything configurable, validated. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )

    profile: str = "tiny"
    """Model profile: a shipped profile's name (``tiny``, ``standard``) or a YAML path."""
    description: str = ""
    """What the profile is for."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where models run; ``auto`` takes a GPU when one is visible."""
    llm_backend: Literal["transformers", "llamacpp", "openai"] = "transformers"
    """LLM engine backend: in-process transformers or llama.cpp, or an OpenAI-compatible
    server (``llm.openai_*``)."""
    model_dir: Path = Path("~/.cache/tribunal/models")
    """Model cache (``tribunal models install`` fills it)."""
    data_dir: Path = Path("~/.local/share/tribunal")
    """Indexes, the SQLite database and trained artifacts."""
    database_url: str = ""
    """SQLAlchemy URL of the audit trail, escalations and label jobs (SQLite or
    PostgreSQL); empty means SQLite in ``data_dir``."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Lowest level of log record written."""
    log_format: Literal["json", "text"] = "json"
    """``json``: one JSON object per line (for log collectors); ``text``: for people."""
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """Models of the profile by key: each a ``kind`` and one of ``artifact`` or ``hf_id``
    (as a variable, the whole map is one JSON object)."""
    roles: RoleSettings | None = None
    """Which model (a key of ``models``) plays each role; a profile that sets ``roles``
    sets every one of them."""
    server: ServerSettings = ServerSettings()
    """The gRPC server every service runs, and its security (bearer token, TLS, mTLS)."""
    llm: LLMSettings = LLMSettings()
    """The LLM engine: prompt limits, batching, caches and the backends' options."""
    retrieval: RetrievalSettings = RetrievalSettings()
    """The retrieval service: index choice, request limits, fusion, reranking, ingest."""
    entailment: EntailmentSettings = EntailmentSettings()
    """The entailment service: the quote check and the fast and strong checkers."""
    ensemble: EnsembleSettings = EnsembleSettings()
    """The ensemble service: the matcher (LLM judges or features) and the relevance judge."""
    confidence: ConfidenceSettings = ConfidenceSettings()
    """The confidence service: its calibrator artifact, the guarantee, the decisions."""
    audit: AuditSettings = AuditSettings()
    """Live audits: the reviewed share of decisions, the live bound, the fail-safe."""
    debate: DebateSettings = DebateSettings()
    """The DREAM debate service: two agents, R rounds, escalation."""
    gateway: GatewaySettings = GatewaySettings()
    """The gateway: stage discovery, deadlines, the decision when unsure, labelling."""

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
                    raise FieldValueError(
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
        profile_file = PROFILE_FILE.get()
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

    def model_keys(self, kind: str) -> list[str]:
        """Keys of the profile's models of ``kind`` (``embedder``, ``llm``), in order."""
        return [key for key, spec in self.models.items() if spec.kind == kind]
