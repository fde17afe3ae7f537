"""The gateway: stage discovery, deadlines, the decision when unsure, labelling."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from ._base import Section
from ._choices import LabelModeName
from ._deployment import DeploymentSettings

__all__ = ["GatewaySettings"]


class GatewaySettings(Section):
    """How the gateway finds the stages, splits deadlines, and decides when unsure."""

    discovery: Literal["in-process", "grpc", "ray"] = "in-process"
    """``in-process``: every stage is loaded in the gateway's process and called directly
    (the embedded default); ``grpc``: stages at ``addresses``; ``ray``: Serve
    applications by name."""
    addresses: dict[str, str] = Field(default_factory=dict)
    """``grpc`` discovery: stage name -> ``host:port`` (retrieval, ensemble, entailment,
    confidence, debate)."""
    stage_tls_ca_file: Path | None = None
    """PEM CA bundle the stages' certificates are checked against. ``grpc`` discovery:
    when set, stages are dialled over TLS. Stages a bulk label job or ``tribunal
    calibrate`` serves itself on loopback: they serve TLS when ``server.tls_cert_file``
    is set, trusted through this bundle, or through that certificate itself when this
    is unset."""
    stage_tls_cert_file: Path | None = None
    """PEM client certificate the gateway presents to stages that require one (mutual
    TLS: their ``server.tls_client_ca_file``), with ``stage_tls_key_file``; needs
    ``stage_tls_ca_file``."""
    stage_tls_key_file: Path | None = None
    """PEM private key of ``stage_tls_cert_file``."""
    stage_tls_server_name: str = ""
    """The name the stages' certificate is checked for, when it differs from the host of
    the address dialled (stages a job serves itself on loopback are dialled at 127.0.0.1
    and checked for ``localhost`` unless this says otherwise)."""
    stage_token_file: Path | None = None
    """``grpc`` discovery: file holding the bearer token the gateway sends to the stages
    (a ``query`` credential of theirs; re-read when it changes). Unset: ``stage_token``.
    ``in-process`` stages need none (they have no port), nor do stages a job serves
    itself (it makes a fresh credential for them at every start)."""
    stage_token: SecretStr | None = None
    """``grpc`` discovery: the bearer token sent to the stages, when ``stage_token_file``
    is unset; unset too: ``server.auth_token``."""
    kb_trusted_keys: Path | None = None
    """Folder of the KB writer's public keys (``*.pub``, PEM; or one such file): the
    gateway serves only entries whose served record one of them signed (several at once
    while a key is rotated; re-read when the folder changes). null:
    ``data_dir/keys/kb-trusted``."""
    ray_apps: dict[str, str] = Field(default_factory=dict)
    """``ray`` discovery: stage name -> Serve application name (default: the stage name)."""
    collection: str = Field("default", min_length=1)
    """KB collection searched when a request names none."""
    top_k: int = Field(5, ge=1, le=100)
    """Candidates retrieved per query."""
    candidates: int = Field(2, ge=1, le=20)
    """How many of the top candidates are verified (ensemble + entailment)."""
    deadline_s: float = Field(120.0, gt=0.0, le=3600.0)
    """Budget of a request whose caller set no deadline, in seconds."""
    stage_timeout_s: dict[str, float] = Field(
        default_factory=lambda: {
            "retrieval": 10.0,
            "ensemble": 90.0,
            "entailment": 90.0,
            "confidence": 10.0,
            "debate": 300.0,
        }
    )
    """Cap on one stage call, in seconds, whatever the remaining deadline."""
    stage_share: dict[str, float] = Field(
        default_factory=lambda: {"retrieval": 0.1, "verify": 0.75, "confidence": 0.15}
    )
    """How the remaining deadline is split between the stages still to run."""
    retries: int = Field(2, ge=0, le=10)
    """Retries of a stage call that failed UNAVAILABLE (and only then)."""
    retry_backoff_s: float = Field(0.1, ge=0.0, le=10.0)
    """First retry delay, in seconds; doubles each retry."""
    fallback_answer: str = Field(
        "I can't answer that from the verified knowledge base. "
        "Please contact support or rephrase your question.",
        min_length=1,
    )
    """Returned whenever the gateway does not ACCEPT."""
    escalate_to: Literal["none", "human"] = "none"
    """Where an ESCALATE decision of ``Answer`` goes (``human``: the escalation queue)."""
    label_mode: LabelModeName = "cascade"
    """``Label`` mode when the request leaves it unspecified."""
    label_relevant_at: float | None = Field(None, ge=0.0, le=1.0)
    """Cascade: the relevance judge's P(relevant) at or above this labels RELEVANT without a
    debate; null: the relevance artifact's ``band.high`` (fitted with the judge)."""
    label_irrelevant_at: float | None = Field(None, ge=0.0, le=1.0)
    """Cascade: at or below this labels IRRELEVANT without a debate; null: the artifact's
    ``band.low``."""
    label_band_to: Literal["debate", "human"] = "debate"
    """Cascade: where an item inside the band goes — the debate, or straight to the human
    queue without one (what ``tribunal label run --plan`` sets: a label plan's band)."""
    label_max_rounds: int = Field(0, ge=0, le=5)
    """Debate rounds for ``Label``; 0: the debate service's default."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted, in characters."""
    max_chunk_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest chunk ``Label`` accepts, in characters."""
    max_items_per_request: int = Field(256, ge=1, le=100_000)
    """Most items in one ``BatchLabel``."""
    max_answers_per_item: int = Field(16, ge=1, le=10_000)
    """Most reference answers in one ``Label`` item."""
    max_answer_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest reference answer ``Label`` accepts, in characters."""
    audit: bool = True
    """Write every decision to the audit store (``database_url``)."""
    deployment: DeploymentSettings = DeploymentSettings()
    """Ray Serve options of the gateway deployment."""

    @model_validator(mode="after")
    def _consistent(self) -> GatewaySettings:
        if (
            self.label_irrelevant_at is not None
            and self.label_relevant_at is not None
            and self.label_irrelevant_at > self.label_relevant_at
        ):
            raise ValueError("gateway.label_irrelevant_at must be <= gateway.label_relevant_at")
        for name in self.stage_share:
            if name not in ("retrieval", "verify", "confidence", "debate"):
                raise ValueError(
                    f"gateway.stage_share has unknown stage {name!r} "
                    "(retrieval, verify, confidence, debate)"
                )
        return self
