"""The gRPC server every service runs, with its security (token, TLS, mTLS)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from ._base import Section

__all__ = ["ServerSettings"]


class ServerSettings(Section):
    """The gRPC server every service runs."""

    host: str = "127.0.0.1"
    """Address to bind; ``0.0.0.0`` in containers."""
    port: int = Field(50051, ge=0, le=65535)
    """gRPC port; 0 picks a free one."""
    max_workers: int = Field(16, ge=1, le=1024)
    """Threads receiving calls (at least ``max_ongoing_requests + max_queued_requests``
    + 4 are started, so that health checks and refusals always find one); the work of a
    call runs on a separate pool of ``max_ongoing_requests`` threads."""
    max_ongoing_requests: int = Field(8, ge=1, le=1024)
    """Calls worked on at once; more wait in the queue."""
    max_queued_requests: int = Field(8, ge=0, le=100_000)
    """Calls waiting for a free slot; a call beyond them is refused at once with
    RESOURCE_EXHAUSTED, and a queued call whose deadline passes is never started."""
    compute_threads: int | None = Field(None, ge=1, le=1024)
    """Threads torch and FAISS may use inside one operation, set once per process when
    its first embedder loads. None: ``OMP_NUM_THREADS`` where set (Ray sets it to a
    replica's ``num_cpus``), else the CPUs the process may run on. Embedding passes under
    load share them (``retrieval.embed_lanes``). Lower it when several services share a
    machine's cores: pools larger than the free cores spin against each other."""
    max_message_bytes: int = Field(16 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    """Largest request or response accepted, in bytes."""
    max_id_chars: int = Field(128, ge=1, le=10_000)
    """Longest id or name accepted in any request field (``item_id``, ``request_id``,
    collection names, entry and chunk ids, map keys), in characters; ids are stored in
    columns of this width."""
    grace_seconds: float = Field(10.0, ge=0.0, le=600.0)
    """On SIGTERM: how long in-flight calls may finish."""
    metrics_port: int | None = Field(9464, ge=0, le=65535)
    """Port of the Prometheus ``/metrics`` endpoint; null disables it, 0 picks a free one."""
    credentials_file: Path | None = None
    """YAML or JSON file of the credentials calls may carry (``authorization: Bearer
    <token>``), each with a name and a role (``query`` asks, ``admin`` also changes the
    KB): ``{credentials: [{name, role, token_sha256}]}``. A directory reads every
    ``*.yaml``/``*.yml``/``*.json`` in it (a mounted Kubernetes Secret). Re-read when it
    changes and on SIGHUP, so old and new tokens can overlap during a rotation. Health and
    reflection stay open."""
    local_admin_file: Path | None = None
    """Loopback development with neither ``credentials_file`` nor ``auth_token``: a
    credentials file with one ``admin`` credential (its token in plain text, mode 0600).
    Asking methods stay open without a token; KB changes need that token. ``tribunal
    serve`` makes ``data_dir/credentials/local-admin.yaml`` at the first such start and
    says where."""
    auth_token: SecretStr | None = None
    """One more credential, named ``auth_token``, with the ``admin`` role: a shorthand
    for a single-operator setup (prefer ``credentials_file``, which has roles)."""
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
