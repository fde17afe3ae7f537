"""The retrieval service: index choice, request limits, fusion, reranking, ingest."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ._base import Section
from ._deployment import DeploymentSettings

__all__ = ["RetrievalSettings"]


class RetrievalSettings(Section):
    """Knobs of the retrieval service: index choice, limits, fusion, reranking."""

    flat_max_vectors: int = Field(50_000, ge=0, le=1_000_000_000)
    """Collections with fewer indexed vectors than this use the exact ``IndexFlatIP``."""
    large_index: Literal["hnsw", "ivfpq"] = "hnsw"
    """Approximate index above ``flat_max_vectors``: ``IndexHNSWFlat`` or ``IndexIVFPQ``."""
    hnsw_m: int = Field(32, ge=4, le=256)
    """HNSW graph degree (links per node); higher = better recall, more memory."""
    hnsw_ef_construction: int = Field(80, ge=8, le=4096)
    """HNSW candidate list size while building."""
    hnsw_ef_search: int = Field(128, ge=8, le=4096)
    """HNSW candidate list size while searching (raised to the depth when smaller)."""
    ivf_nlist: int | None = Field(None, ge=1, le=1_000_000)
    """IVF cells; null picks 4·sqrt(vectors)."""
    ivf_nprobe: int = Field(16, ge=1, le=65_536)
    """IVF cells visited per query."""
    pq_subquantizers: int = Field(48, ge=1, le=512)
    """Product-quantizer sub-vectors (must divide the embedding dimension)."""
    use_gpu: bool = True
    """Put the dense index on the GPU(s) when FAISS sees one."""
    max_top_k: int = Field(100, ge=1, le=10_000)
    """Largest ``top_k`` a search may ask for."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted, in characters."""
    max_searches_per_request: int = Field(64, ge=1, le=100_000)
    """Most searches in one ``BatchSearch``."""
    max_entries_per_request: int = Field(1_000, ge=1, le=1_000_000)
    """Most entries in one ``Upsert``, and ids in one ``Delete`` (a bigger ingest is split
    by the client)."""
    max_question_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest KB entry question accepted, in characters."""
    max_questions_per_item: int = Field(64, ge=0, le=10_000)
    """Most extra phrasings (``questions``) of one KB entry's question; each is at most
    ``max_question_chars`` long."""
    max_answer_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest KB entry answer accepted, in characters."""
    max_chunk_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest chunk text of a KB entry accepted, in characters."""
    max_title_chars: int = Field(1_000, ge=1, le=1_000_000)
    """Longest chunk title accepted, in characters."""
    max_chunks_per_item: int = Field(256, ge=1, le=100_000)
    """Most chunks in one KB entry."""
    max_metadata_per_item: int = Field(64, ge=0, le=10_000)
    """Most metadata keys in one KB entry."""
    max_metadata_value_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest metadata value of a KB entry, in characters (keys: ``server.max_id_chars``)."""
    candidate_depth: int = Field(100, ge=1, le=100_000)
    """Entries each retriever contributes to fusion (at least ``top_k``)."""
    rrf_k: int = Field(60, ge=1, le=10_000)
    """Reciprocal rank fusion constant: score = Σ 1 / (k + rank)."""
    vote_neighbours: int = Field(10, ge=1, le=1_000)
    """Search units (phrasings, answers, chunks) the neighbour vote reads: each candidate's
    ``neighbour_vote`` is its share of the query's nearest ones (see ``vote_temperature``)."""
    vote_temperature: float = Field(0.05, gt=0.0, le=10.0)
    """Softmax temperature of the neighbour vote over cosines: a unit's weight is
    exp((cosine − best cosine) / temperature), so a unit 0.05 below the nearest counts e⁻¹
    of it."""
    bm25_k1: float = Field(1.5, ge=0.0, le=10.0)
    """BM25 term-frequency saturation."""
    bm25_b: float = Field(0.75, ge=0.0, le=1.0)
    """BM25 length normalisation."""
    rerank_head: int = Field(20, ge=1, le=1_000)
    """How many fused hits the reranker re-orders when a search asks for it."""
    rerank_enabled: bool = True
    """Serve ``rerank=true`` searches with the profile's reranker (loaded on first use)."""
    max_rerank_passages_per_request: int = Field(40, ge=1, le=100_000)
    """Most passages the reranker scores for one request (its ``rerank=true`` searches ×
    ``rerank_head``): one caller cannot hold the reranker for longer; a request over it
    is refused (RESOURCE_EXHAUSTED) before any work. Must be at least ``rerank_head``."""
    chunk_size_chars: int = Field(1_000, ge=50, le=100_000)
    """Ingest splits long documents into sentence-aligned chunks of at most this many
    characters (the title is not counted)."""
    embed_batch_size: int = Field(32, ge=1, le=4_096)
    """Most texts per embedder forward pass."""
    embed_batch_tokens: int = Field(512, ge=1, le=1_000_000)
    """Most padded tokens per embedder forward pass: texts are sorted by length and cut
    into passes of similar lengths (a longer text runs alone)."""
    traced_embedder: bool = True
    """Run the embedder's transformer as one TorchScript call per forward pass, which
    does not hold Python's GIL: a pass is not stalled by the service's other threads.
    Checked against the model's own ``encode`` at load (the model's ``encode`` stays in
    use for a model that cannot be traced, or whose trace differs)."""
    micro_batch_texts: int = Field(64, ge=1, le=4_096)
    """Concurrent embedding calls of this process (every service's, per model) are
    gathered into one forward pass of at most this many texts."""
    micro_batch_wait_s: float = Field(0.02, ge=0.0, le=1.0)
    """Under load (the previous pass gathered several calls), how long a pass that is not
    full waits for more calls before it starts; a lone call never waits. 0: never (the
    calls that arrived while the previous pass ran form the next one)."""
    micro_batch_spread: bool = True
    """On the CPU, under load, a pass takes at most its lane's part of the texts in
    flight (queued or in a pass, at their most over the last 16 passes gathered, split
    evenly over ``embed_lanes``), so that no lane's pass holds most callers while another
    lane has nothing to run. Off: a pass takes every queued call up to
    ``micro_batch_texts``. Never on a GPU, where a larger pass is cheaper per text."""
    embed_lanes: int | None = Field(None, ge=1, le=1_024)
    """Embedding passes that may run at once under load, each on an equal share of the
    process's ``server.compute_threads``. None: one per thread (single-threaded passes side
    by side). 1: one pass at a time over every thread. A lone pass and a long call
    (ingestion) always get every thread."""
    shared_recent_texts: int = Field(4_096, ge=0, le=1_000_000)
    """Vectors of this many recent short texts (queries, matched KB entries) kept per
    model and shared by the services of the process: a query embedded by retrieval is
    not embedded again by a matcher or judge on the same model. 0 keeps none."""
    prefetch_query_vectors: bool = True
    """Where the feature matcher runs in the same process on another model, a search
    query is sent to that model too when retrieval embeds it: its pass overlaps
    retrieval's own work instead of starting after it. Costs one unused embedding when
    no match follows the search (a fallback before matching, a search on its own)."""
    compact_dead_fraction: float = Field(0.25, gt=0.0, le=1.0)
    """Rebuild the dense index when this share of its rows are deleted or replaced."""
    snapshot_every_changes: int = Field(1_000, ge=1, le=10_000_000)
    """Write index snapshots after this many logged changes (and on close)."""
    verifier: Literal["local", "service", "none"] = "local"
    """Who checks, at upsert, that an entry's supporting chunks entail its answer:
    ``local`` the profile's entailment cascade in this process (loaded at the first
    upsert that needs it), ``service`` the entailment service at ``verifier_address``,
    ``none`` nobody (entries with supporting documents are stored unverified and never
    served until ``tribunal kb verify`` checks them)."""
    verifier_address: str = ""
    """``verifier: service``: the entailment service's ``host:port``."""
    verifier_tls_ca_file: Path | None = None
    """``verifier: service``: PEM CA of the entailment service's TLS certificate; set, the
    service is dialled over TLS. Unset, a credential is sent only to a loopback address."""
    verifier_token_file: Path | None = None
    """``verifier: service``: file holding the bearer token sent to the entailment service
    (a ``query`` credential of it). Unset: ``server.auth_token``."""
    verdict_cache: Path | None = None
    """SQLite file of verification verdicts by (answer, chunks, checker version), so a
    re-ingested entry is not checked again; null: ``data_dir/retrieval/verdict-cache.sqlite3``."""
    signing_key_file: Path | None = None
    """Ed25519 private key (PEM) the KB's writer signs served records with: read only by
    the admin commands (``tribunal kb ingest|delete|verify|sign``, ``tribunal demo``),
    never by a retrieval server. Created (0600) at first use, its public key written to
    ``gateway.kb_trusted_keys``; null: ``data_dir/keys/kb-signing.key``."""
    max_signed_records_per_request: int = Field(2_000, ge=2, le=1_000_001)
    """Most signed records in one ``Sign`` (an Upsert's entries and the head): at least
    ``max_entries_per_request`` + 1."""
    max_signed_record_bytes: int = Field(1_048_576, ge=1_024, le=16_777_216)
    """Longest signed record ``Sign`` takes (one entry's served record), in bytes."""
    deployment: DeploymentSettings = DeploymentSettings()
    """Ray Serve deployment options."""

    @model_validator(mode="after")
    def _rerank_fits(self) -> RetrievalSettings:
        if self.max_signed_records_per_request <= self.max_entries_per_request:
            raise ValueError(
                "retrieval.max_signed_records_per_request must be more than "
                "retrieval.max_entries_per_request (an Upsert's records and its head)"
            )
        if self.rerank_head > self.max_rerank_passages_per_request:
            raise ValueError(
                f"retrieval.rerank_head ({self.rerank_head}) is more than "
                f"retrieval.max_rerank_passages_per_request "
                f"({self.max_rerank_passages_per_request}): no reranked search would fit"
            )
        return self
