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
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
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
    "ConfidenceSettings",
    "DebateSettings",
    "DeploymentSettings",
    "EnsembleSettings",
    "EntailmentSettings",
    "LLMSettings",
    "ModelSpec",
    "RetrievalSettings",
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
    auth_token: SecretStr | None = None
    """Bearer token every call must carry (``authorization: Bearer …``); health and
    reflection stay open. The gateway sends it to remote stages too
    (``TRIBUNAL_SERVER__AUTH_TOKEN``, from a Kubernetes Secret)."""
    tls_cert_file: Path | None = None
    """PEM certificate chain: serve TLS instead of plaintext (with ``tls_key_file``)."""
    tls_key_file: Path | None = None
    """PEM private key of ``tls_cert_file``."""
    tls_client_ca_file: Path | None = None
    """PEM CA bundle: when set, clients must present a certificate it signed (mTLS)."""

    @model_validator(mode="after")
    def _tls_complete(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("server.tls_cert_file and server.tls_key_file go together")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("server.tls_client_ca_file needs tls_cert_file and tls_key_file")
        return self


class DeploymentSettings(_Strict):
    """How one service's Ray Serve deployment runs and scales (each service has its own)."""

    min_replicas: int = Field(1, ge=0, le=1000)
    """Autoscaling floor (0 lets the service scale to zero)."""
    max_replicas: int = Field(1, ge=1, le=1000)
    """Autoscaling ceiling."""
    target_ongoing_requests: float = Field(8.0, gt=0.0, le=10_000.0)
    """Autoscaler target of in-flight requests per replica."""
    num_cpus: float = Field(1.0, ge=0.0, le=512.0)
    """CPUs reserved per replica (``ray_actor_options``)."""
    num_gpus: float = Field(0.0, ge=0.0, le=16.0)
    """GPUs reserved per replica; > 0 puts the embedder and FAISS on a GPU."""
    max_batch_size: int = Field(16, ge=1, le=1024)
    """Queries ``@serve.batch`` embeds together."""
    batch_wait_timeout_s: float = Field(0.005, ge=0.0, le=10.0)
    """How long a batch waits to fill before it runs anyway."""
    max_ongoing_requests: int = Field(64, ge=1, le=100_000)
    """Requests a replica accepts at once; must be >= max_batch_size or batches never fill."""

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
            "ray_actor_options": {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus},
            "autoscaling_config": {
                "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests,
            },
        }


class RetrievalSettings(_Strict):
    """Knobs of the retrieval service: index choice, limits, fusion, reranking."""

    flat_max_vectors: int = Field(50_000, ge=0, le=1_000_000_000)
    """Collections with fewer indexed vectors than this use exact ``IndexFlatIP``."""
    large_index: Literal["hnsw", "ivfpq"] = "hnsw"
    """Approximate index above ``flat_max_vectors``: ``IndexHNSWFlat`` or ``IndexIVFPQ``."""
    hnsw_m: int = Field(32, ge=4, le=256)
    """HNSW graph degree (links per node); higher = better recall, more memory."""
    hnsw_ef_construction: int = Field(80, ge=8, le=4096)
    """HNSW candidate list size while building."""
    hnsw_ef_search: int = Field(128, ge=8, le=4096)
    """HNSW candidate list size while searching (raised to the depth when smaller)."""
    ivf_nlist: int | None = Field(None, ge=1, le=1_000_000)
    """IVF cells; None picks 4·sqrt(vectors)."""
    ivf_nprobe: int = Field(16, ge=1, le=65_536)
    """IVF cells visited per query."""
    pq_subquantizers: int = Field(48, ge=1, le=512)
    """Product-quantizer sub-vectors (must divide the embedding dimension)."""
    use_gpu: bool = True
    """Put the dense index on the GPU(s) when ``faiss.get_num_gpus() > 0``."""
    top_k_max: int = Field(100, ge=1, le=10_000)
    """Largest ``top_k`` a search may ask for."""
    query_max_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted, in characters."""
    batch_max_searches: int = Field(64, ge=1, le=100_000)
    """Most searches in one ``BatchSearch``."""
    upsert_max_entries: int = Field(1_000, ge=1, le=1_000_000)
    """Most entries in one ``Upsert`` (a bigger ingest is split by the client)."""
    candidate_depth: int = Field(100, ge=1, le=100_000)
    """Entries each retriever contributes to fusion (at least ``top_k``)."""
    rrf_k: int = Field(60, ge=1, le=10_000)
    """Reciprocal rank fusion constant: score = Σ 1 / (k + rank)."""
    bm25_k1: float = Field(1.5, ge=0.0, le=10.0)
    """BM25 term-frequency saturation."""
    bm25_b: float = Field(0.75, ge=0.0, le=1.0)
    """BM25 length normalisation."""
    rerank_head: int = Field(20, ge=1, le=1_000)
    """How many fused hits the reranker re-orders when a search asks for it."""
    rerank_enabled: bool = True
    """Serve ``rerank=true`` searches with the profile's reranker (loaded on first use)."""
    chunk_max_chars: int = Field(1_000, ge=50, le=100_000)
    """Longest chunk made by ingest chunking (sentence-aligned, title not counted)."""
    embed_batch_size: int = Field(32, ge=1, le=4_096)
    """Texts per embedder forward pass."""
    compact_dead_fraction: float = Field(0.25, gt=0.0, le=1.0)
    """Rebuild the dense index when this share of its rows are deleted or replaced."""
    snapshot_every_changes: int = Field(1_000, ge=1, le=10_000_000)
    """Write index snapshots after this many logged changes (and on close)."""
    deployment: DeploymentSettings = DeploymentSettings()
    """Ray Serve deployment options."""


class EntailmentSettings(_Strict):
    """Knobs of the entailment cascade (quote check, fast and strong checkers)."""

    two_stage: bool = True
    """Run the strong checker (role ``entailment_strong``) on uncertain pairs."""
    fast_backend: Literal["model", "lexical"] = "model"
    """Stage 1: the ``entailment_fast`` model, or the model-free lexical-overlap prefilter."""
    uncertain_low: float = Field(0.2, ge=0.0, le=1.0)
    """Stage-1 P(entail) at or above which a pair is uncertain (goes to stage 2); below
    it the fast checker says "not entailed"..."""
    uncertain_high: float = Field(0.8, ge=0.0, le=1.0)
    """...and at or below which it still is; above it the fast checker says "entailed".
    Choose the band on data (``tribunal eval entailment`` selects one on a selection split):
    a small model's P(yes) is compressed, so a symmetric band around 0.5 routes nearly all."""
    entail_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(entail) at or above which a pair is labelled entailed."""
    contradict_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(contradict) at or above which a non-entailed pair is labelled contradicted."""
    chunk_chars: int = Field(2000, ge=50, le=100_000)
    """Premises are cut into sentence-aligned chunks of at most this many characters
    (~450 tokens, MiniCheck's chunk size); the pair's support is the max over chunks."""
    quote_min_ratio: float = Field(90.0, gt=0.0, le=100.0)
    """rapidfuzz partial ratio at or above which a quote counts as found."""
    quote_min_chars: int = Field(12, ge=1, le=10_000)
    """Shorter quotes (after normalisation) must match exactly."""
    max_pairs: int = Field(256, ge=1, le=100_000)
    """Most pairs in one ``Check``."""
    max_premise_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest premise accepted."""
    max_hypothesis_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest hypothesis accepted."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single pairs are batched up to ``max_batch_size``)."""

    @model_validator(mode="after")
    def _band_is_ordered(self) -> EntailmentSettings:
        if self.uncertain_low > self.uncertain_high:
            raise ValueError("uncertain_low must be <= uncertain_high")
        return self


class DebateSettings(_Strict):
    """Knobs of the DREAM debate service (two agents, R rounds, escalation)."""

    max_rounds: int = Field(2, ge=1, le=5)
    """Rounds without agreement before a debate escalates (DREAM's R; requests may ask 1..5)."""
    adjudicate: bool = False
    """After R rounds without agreement, let the LLM adjudicator (role ``adjudicator``)
    decide instead of escalating to humans; a request may override it."""
    swap_stance_order: bool = False
    """Default speaking order: B (irrelevant) first and the models of A and B swapped."""
    require_answers: bool = False
    """Refuse items without reference answers; otherwise the query is its own answer set."""
    max_new_tokens: int = Field(160, ge=8, le=4096)
    """Bound on one turn's JSON (~50 tokens when the agent keeps to the asked lengths); at
    96 the 0.5B model's verbose turns were cut off, and a cut turn costs a retry."""
    json_retries: int = Field(2, ge=0, le=10)
    """Retries of a malformed turn before it is recorded as a failure (never as a label)."""
    max_items: int = Field(64, ge=1, le=100_000)
    """Most items in one ``BatchAssess``."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted."""
    max_chunk_chars: int = Field(8_000, ge=1, le=10_000_000)
    """Longest chunk accepted (the prompt template cuts what does not fit the model)."""
    max_answers: int = Field(16, ge=1, le=10_000)
    """Most reference answers per item."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single items are batched up to ``max_batch_size``)."""


class EnsembleSettings(_Strict):
    """Knobs of the ensemble matching service (LLM judges + a trained aggregator)."""

    prompts: tuple[str, ...] = Field(
        ("matching/ral2m@1", "matching/ral2m-augmented@1"), min_length=1
    )
    """Judge prompt ids; every ``roles.judges`` model runs each (judge ``model/prompt``)."""
    judges: tuple[str, ...] | None = None
    """Only these judge names (``llm_tiny/ral2m``, ...); None: every model x prompt. A
    trained artifact overrides this with the judges it was trained on."""
    artifact_path: Path | None = None
    """Trained aggregator artifact (a folder); None: ``data_dir/ensemble/artifact`` when it
    exists, else the one shipped for the profile (not when ``judges`` names a panel)."""
    matcher: Literal["judges", "features"] = "judges"
    """What answers ``Match``: ``judges`` (the LLM judge panel and ``aggregator``) or
    ``features`` (no LLM: a logistic regression over embedding cosines and a fuzzy
    ratio, from ``features_artifact``; docs/results.md compares them)."""
    features_artifact: Path | None = None
    """``matcher: features``: its ``tribunal.match-features/1`` JSON file; None:
    ``data_dir/ensemble/match-features.json`` when it exists, else the one shipped for
    the profile (``artifacts/<profile>/ensemble/match-features.json``)."""
    aggregator: Literal["majority", "weighted", "neural", "latent"] = "majority"
    """Aggregator the service answers with; ``majority`` also runs without an artifact (at
    ``vote_threshold``; with one, at its fitted per-judge thresholds). The trained ones
    need the artifact; see docs/results.md for which one wins on how much data."""
    vote_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(yes) at or above which a judge votes yes when no artifact sets its threshold."""
    answer_max_chars: int = Field(600, ge=50, le=1_000_000)
    """KB answers are cut to this many characters before judging (bounds the prompt cost)."""
    chunk_max_chars: int = Field(300, ge=50, le=1_000_000)
    """The supporting chunk the augmented judges see is cut to this many characters."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted."""
    max_items: int = Field(64, ge=1, le=100_000)
    """Most pairs in one ``BatchMatch``."""
    relevance_artifact: Path | None = None
    """Relevance judge artifact (a ``tribunal.relevance/1`` JSON file) that
    ``JudgeRelevance`` serves; None: ``data_dir/ensemble/relevance.json`` when it exists,
    else the one shipped for the profile (``artifacts/<profile>/relevance/artifact.json``)."""
    relevance_preload: bool = False
    """Load the relevance judge when the service starts (if its artifact exists) instead of
    on the first ``JudgeRelevance``. Label jobs' stage hosts turn it on, so no item waits
    for the load; off, a Match-only service never loads the judge's models."""
    serve_match: bool = True
    """Load the matcher and serve ``Match``/``BatchMatch`` (gRPC service and Ray app alike).
    Label jobs' stage hosts turn it off: they call only ``JudgeRelevance``, and the matcher
    (a judge panel of three LLMs, or MPNet) is a load for nothing (FAILED_PRECONDITION on
    ``Match`` then)."""
    max_chunk_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest chunk ``JudgeRelevance`` accepts (the prompt cuts the passage to fit the
    model; this bounds the work before that)."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single pairs are batched up to ``max_batch_size``)."""


class LLMSettings(_Strict):
    """The LLM engine (:mod:`tribunal.core.llm`): limits, batching, caches, backends."""

    max_prompt_tokens: int = Field(4096, ge=64, le=1_000_000)
    """Longest prompt accepted, in tokens after the chat template; prompt templates cut their
    truncatable field to fit, and a prompt that still does not fit is refused."""
    max_new_tokens: int = Field(256, ge=1, le=32_768)
    """Default bound on generated tokens (JSON and free text)."""
    batch_size: int = Field(8, ge=1, le=1024)
    """Most prompts in one forward pass; longer lists are split."""
    n_threads: int | None = Field(None, ge=1, le=1024)
    """CPU threads for llama.cpp and torch; None keeps the libraries' defaults."""
    prefix_cache: bool = True
    """Reuse the KV cache of the prompt prefix shared with the previous prompts."""
    response_cache: Path | None = None
    """SQLite file of answers reused across calls, processes and runs (decoding is greedy,
    so an answer is a function of model and prompt): for evaluations, sweeps and bulk
    jobs; None (the default, and for serving): off. A reused answer carries the cost of
    the run that computed it."""
    json_retries: int = Field(2, ge=0, le=10)
    """Extra attempts when generated JSON is invalid, each told what was wrong."""
    json_grammar: Literal["never", "retry", "always"] = "retry"
    """When to constrain JSON decoding by the schema's grammar (llama.cpp, OpenAI servers):
    grammar decoding is ~2x slower on CPU, so by default only retries use it."""
    torch_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """transformers weights dtype; ``auto`` is bfloat16 (fast on GPUs and on CPUs with
    AMX or AVX512-BF16; choose float32 on older CPUs)."""
    converted_dir: Path | None = None
    """Where GGUF files converted for transformers are kept; None: ``model_dir/converted``."""
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    """OpenAI-compatible server (vLLM, llama.cpp server), up to and including ``/v1``."""
    openai_api_key: str = ""
    """Bearer token for the server; empty sends none."""
    openai_model: str = ""
    """Model name the server knows; empty: the profile's ``hf_id`` or artifact id."""
    openai_timeout_s: float = Field(120.0, gt=0.0, le=3600.0)
    """Per-request timeout."""
    openai_concurrency: int = Field(8, ge=1, le=1024)
    """Requests in flight at once (the server batches them)."""
    openai_top_logprobs: int = Field(20, ge=1, le=20)
    """Alternatives asked per token to read P(yes) from."""
    openai_response_format: Literal["json_schema", "json_object"] = "json_schema"
    """How a grammar-constrained JSON request is phrased: OpenAI's ``json_schema`` (vLLM),
    or ``json_object`` with a ``schema`` (llama-cpp-python's server)."""


class ConfidenceSettings(_Strict):
    """Knobs of the confidence service: its calibrator artifact, the guarantee, decisions."""

    artifact_path: Path | None = None
    """Calibrator artifact the service loads; None: ``data_dir/confidence/calibrator.json``
    when it exists, else the one shipped for the profile and its ``ensemble.matcher``
    (``tribunal/artifacts/<profile>/confidence/<matcher>-calibrator.json``)."""
    calibrator: Literal["platt", "isotonic", "temperature"] = "platt"
    """Calibrator ``tribunal confidence fit`` fits unless told otherwise."""
    score_signal: str = Field("ensemble_p_match", min_length=1)
    """Feature the isotonic/temperature calibrators read, and the raw score reports compare
    against (a Signals field, ``judge_p_yes.<judge>`` or ``extra.<name>``)."""
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    """Target hallucination rate P(wrong | accepted) the service enforces by default; the
    artifact must hold a threshold selected for it."""
    alphas: tuple[float, ...] = Field((0.01, 0.05, 0.10), min_length=1)
    """Rates ``fit`` selects thresholds for (a request may pick any of them)."""
    delta: float = Field(0.1, gt=0.0, lt=1.0)
    """The guarantee holds with probability >= 1 - delta over the calibration data."""
    escalate_band: float = Field(0.0, ge=0.0, le=1.0)
    """Confidences this far below the threshold are ESCALATE instead of FALLBACK; 0: never."""
    plain_threshold: float | None = Field(None, ge=0.0, le=1.0)
    """Accept at this fixed confidence instead (no guarantee; responses report alpha 0)."""
    holdout_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    """Share of the labelled rows ``fit`` keeps out for evaluation."""
    risk_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    """Share of the remaining rows that select thresholds; the rest fit the calibrator."""
    seed: int = Field(0, ge=0)
    """Seed of the stratified split."""
    batch_max_items: int = Field(1_000, ge=1, le=1_000_000)
    """Most items in one ``BatchScore``."""
    deployment: DeploymentSettings = DeploymentSettings(num_cpus=0.25)
    """Ray Serve deployment options (arithmetic on a loaded artifact: a fraction of a CPU)."""


class GatewaySettings(_Strict):
    """How the gateway finds the stages, splits deadlines, and decides when unsure."""

    discovery: Literal["in-process", "grpc", "ray"] = "in-process"
    """``in-process``: every stage is served inside the gateway's process (the embedded
    default); ``grpc``: stages at ``addresses``; ``ray``: Serve applications by name."""
    addresses: dict[str, str] = Field(default_factory=dict)
    """``grpc`` discovery: stage name -> ``host:port`` (retrieval, ensemble, entailment,
    confidence, debate)."""
    stage_tls_ca_file: Path | None = None
    """``grpc`` discovery: PEM CA bundle; when set, stages are dialled over TLS. The
    bearer token sent to them is ``server.auth_token``."""
    ray_apps: dict[str, str] = Field(default_factory=dict)
    """``ray`` discovery: stage name -> Serve application name (default: the stage name)."""
    collection: str = Field("default", min_length=1)
    """KB collection searched when a request names none."""
    top_k: int = Field(5, ge=1, le=100)
    """Candidates retrieved per query."""
    candidates: int = Field(2, ge=1, le=20)
    """How many of the top candidates are verified (ensemble + entailment)."""
    deadline_s: float = Field(120.0, gt=0.0, le=3600.0)
    """Budget of a request whose caller set no deadline."""
    stage_timeout_s: dict[str, float] = Field(
        default_factory=lambda: {
            "retrieval": 10.0,
            "ensemble": 90.0,
            "entailment": 90.0,
            "confidence": 10.0,
            "debate": 300.0,
        }
    )
    """Cap on one stage call, whatever the remaining deadline."""
    stage_share: dict[str, float] = Field(
        default_factory=lambda: {"retrieval": 0.1, "verify": 0.75, "confidence": 0.15}
    )
    """How the remaining deadline is split between the stages still to run."""
    retries: int = Field(2, ge=0, le=10)
    """Retries of a stage call that failed UNAVAILABLE (and only then)."""
    retry_backoff_s: float = Field(0.1, ge=0.0, le=10.0)
    """First retry delay; doubles each retry."""
    fallback_answer: str = Field(
        "I can't answer that from the verified knowledge base. "
        "Please contact support or rephrase your question.",
        min_length=1,
    )
    """Returned whenever the gateway does not ACCEPT."""
    escalate_to: Literal["none", "human"] = "none"
    """Where an ESCALATE decision of ``Answer`` goes (``human``: the escalation queue)."""
    label_mode: Literal["cascade", "debate", "judge"] = "cascade"
    """``Label`` mode when the request leaves it unspecified."""
    label_relevant_at: float | None = Field(None, ge=0.0, le=1.0)
    """Cascade: the relevance judge's P(relevant) at or above this labels RELEVANT without a
    debate; None: the relevance artifact's ``band.high`` (fitted with the judge)."""
    label_irrelevant_at: float | None = Field(None, ge=0.0, le=1.0)
    """Cascade: at or below this labels IRRELEVANT without a debate; None: the artifact's
    ``band.low``."""
    label_max_rounds: int = Field(0, ge=0, le=5)
    """Debate rounds for ``Label``; 0: the debate service's default."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted."""
    max_chunk_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest chunk ``Label`` accepts."""
    batch_max_items: int = Field(256, ge=1, le=100_000)
    """Most items in one ``BatchLabel``."""
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
    llm: LLMSettings = LLMSettings()
    """LLM engine knobs (``TRIBUNAL_LLM__BATCH_SIZE=4``)."""
    retrieval: RetrievalSettings = RetrievalSettings()
    """Retrieval service knobs (``TRIBUNAL_RETRIEVAL__TOP_K_MAX=50``)."""
    confidence: ConfidenceSettings = ConfidenceSettings()
    """Confidence service knobs (``TRIBUNAL_CONFIDENCE__ALPHA=0.01``)."""
    entailment: EntailmentSettings = EntailmentSettings()
    """Entailment cascade knobs (``TRIBUNAL_ENTAILMENT__UNCERTAIN_LOW=0.3``)."""
    gateway: GatewaySettings = GatewaySettings()
    """Gateway knobs (``TRIBUNAL_GATEWAY__DISCOVERY=grpc``)."""
    debate: DebateSettings = DebateSettings()
    """Debate service knobs (``TRIBUNAL_DEBATE__MAX_ROUNDS=3``)."""
    ensemble: EnsembleSettings = EnsembleSettings()
    """Ensemble matching knobs (``TRIBUNAL_ENSEMBLE__AGGREGATOR=majority``)."""

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

    def model_keys(self, kind: str) -> list[str]:
        """Keys of the profile's models of ``kind`` (``embedder``, ``llm``), in order."""
        return [key for key, spec in self.models.items() if spec.kind == kind]


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
