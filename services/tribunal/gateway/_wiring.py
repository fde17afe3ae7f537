"""How the gateway is put together: the audit store, the stages, the pipelines.

The one wiring every entry point shares: ``tribunal serve gateway``
(:func:`servicer.build_host`), the gateway's Serve deployment (``app.py``) and bulk
labelling in this process (``jobs``' ``PipelineLabeller``). Stages are found by
``gateway.discovery``: ``in-process`` loads the stages' servicers in this process and
calls them directly (:class:`LocalTransport`: their own thread pool, so gateway calls
waiting on stages can never starve them; no port, so nothing else can call them);
``grpc`` dials ``gateway.addresses``; ``ray`` calls Serve applications through handles.

:func:`serve_stages` puts stages on a loopback gRPC server instead, for a caller that
wants them behind a real server (bulk label jobs, calibration, tests that sit a proxy
in between). Calls to stages behind a server carry a credential and match the stages'
TLS: such a host accepts only a fresh ``query`` credential made at each start (so no
other process on the machine can call it, Upsert included), and serves TLS when the
gateway does; remote stages get ``gateway.stage_token_file`` (or ``stage_token``) over
TLS checked with ``gateway.stage_tls_ca_file``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

from ..core import ConfigError, FailedPreconditionError, Settings
from ..core.server import (
    CredentialStore,
    RequestLimits,
    Role,
    ServiceHost,
    credentials_from,
    new_token,
)
from ..core.storage import Database
from ..deploy import SERVICES, STAGES
from ._answer import ANSWER_STAGES, AnswerPipeline
from ._checks import AnswerPolicy
from ._grpc_transport import GrpcTransport, TokenFile
from ._label import LabelPipeline
from ._live_audit import LiveAudit
from ._local_transport import LocalTransport
from ._stages import StageTransport

__all__ = [
    "build_pipelines",
    "build_stage_host",
    "connect_stages",
    "open_audit_store",
    "serve_stages",
    "stage_token",
]


def open_audit_store(settings: Settings) -> Database | None:
    """The audit store, schema created, when ``gateway.audit`` is on; else None."""
    if not settings.gateway.audit:
        return None
    store = Database(settings.database_url)
    store.create_schema()
    return store


def build_pipelines(
    settings: Settings,
    transport: StageTransport,
    *,
    executor: Executor,
    store: Database | None,
) -> tuple[AnswerPipeline, LabelPipeline]:
    """``Answer``'s and ``Label``'s pipelines over ``transport``.

    Args:
        executor: Runs the per-request stage fan-out (ensemble ‖ entailment).
        store: Where decisions and escalations are written (None: not audited).
    """
    answer = AnswerPipeline(
        settings.gateway,
        transport,
        store=store,
        policy=AnswerPolicy.from_settings(settings),
        max_id_chars=settings.server.max_id_chars,
        audit=LiveAudit(settings.audit, store) if store is not None else None,
    )
    return answer, LabelPipeline(settings.gateway, transport, store=store)


def build_stage_host(
    settings: Settings,
    stages: Sequence[str] = STAGES,
    *,
    name: str = "stages",
    host_options: Mapping[str, Mapping[str, Any]] | None = None,
    credentials: CredentialStore | None = None,
) -> ServiceHost:
    """The stages' servicers (default: every stage) on one loopback server on a free port,
    models loaded in turn; ``host_options[stage]`` are keyword arguments of that stage's
    host factory. The server checks ``credentials`` (None: no credential; only a caller
    that dials it itself, such as a test, passes None) and serves TLS when
    ``server.tls_cert_file`` is set, without asking for client certificates: the
    credential identifies its one caller."""
    options = host_options or {}
    hosts = [SERVICES[stage].build_host(settings, **options.get(stage, {})) for stage in stages]

    def load_all() -> None:
        for host in hosts:
            if host.loader is not None:
                host.loader()

    server = settings.server.model_copy(
        update={
            "host": "127.0.0.1",
            "port": 0,
            "metrics_port": None,
            "max_ongoing_requests": _stage_slots(settings),
            "max_queued_requests": 8 * settings.server.max_ongoing_requests,
            "tls_client_ca_file": None,
            "credentials_file": None,
            "auth_token": None,
        }
    )
    return ServiceHost(
        server,
        name=name,
        bindings=[binding for host in hosts for binding in host.bindings],
        loader=load_all,
        request_limits=RequestLimits.from_settings(settings),
        credentials=credentials,
    )


def _stage_slots(settings: Settings) -> int:
    """Stage calls in-process stages run at once. Their one caller, the gateway in this
    process, bounds its own calls (``server.max_*``): the stages admit all of them
    (several stage calls per gateway call)."""
    server = settings.server
    return max(server.max_workers, 4 * server.max_ongoing_requests)


def _stage_roots(settings: Settings) -> bytes | None:
    """The PEM the in-process stages' TLS certificate is checked against (None: no TLS)."""
    server, gateway = settings.server, settings.gateway
    if server.tls_cert_file is None:
        return None
    trusted = gateway.stage_tls_ca_file or server.tls_cert_file
    return trusted.read_bytes()


def serve_stages(
    settings: Settings,
    stages: Sequence[str] = STAGES,
    *,
    name: str = "stages",
    load_timeout_s: float | None = None,
    host_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[GrpcTransport, ServiceHost]:
    """The named stages served in this process, loaded, and a transport that calls them
    (``host_options`` as in :func:`build_stage_host`).

    Raises:
        FailedPreconditionError: a stage failed to load (or took over ``load_timeout_s``).
    """
    # A credential made for this start only: the loopback port answers nobody else.
    token = new_token()
    credentials = CredentialStore(fixed=credentials_from([("gateway", Role.QUERY, token)]))
    host = build_stage_host(
        settings, stages, name=name, host_options=host_options, credentials=credentials
    )
    port = host.start()
    if not host.wait_until_ready(load_timeout_s):
        host.stop(0)
        raise FailedPreconditionError(f"the in-process stages failed to load: {host.load_error}")
    roots = _stage_roots(settings)
    server_name = settings.gateway.stage_tls_server_name or "localhost"
    transport = GrpcTransport(
        dict.fromkeys(stages, f"127.0.0.1:{port}"),
        max_message_bytes=settings.server.max_message_bytes,
        token=token,
        root_certificates=roots,
        server_name=server_name if roots is not None else "",
    )
    if roots is not None and not transport.reachable(stages[0], timeout_s=10.0):
        transport.close()
        host.stop(0)
        raise ConfigError(
            "the in-process stages serve TLS with server.tls_cert_file, but the gateway cannot "
            f"verify it for the name {server_name!r}: set gateway.stage_tls_server_name to a "
            "name the certificate is issued for, and gateway.stage_tls_ca_file to its CA when "
            "it is not self-signed",
            field="gateway.stage_tls_server_name",
        )
    return transport, host


def stage_token(settings: Settings) -> str | TokenFile | None:
    """The credential the gateway (or a KB writer checking entries) sends to remote
    stages: ``gateway.stage_token_file``, else ``stage_token``, else ``server.auth_token``."""
    gateway = settings.gateway
    if gateway.stage_token_file is not None:
        return TokenFile(gateway.stage_token_file)
    secret = gateway.stage_token or settings.server.auth_token
    return secret.get_secret_value() if secret is not None else None


def _stage_client_certificate(settings: Settings) -> tuple[bytes, bytes] | None:
    """The certificate the gateway presents to mutual-TLS stages (None: none)."""
    gateway = settings.gateway
    cert, key = gateway.stage_tls_cert_file, gateway.stage_tls_key_file
    if cert is None and key is None:
        return None
    if cert is None or key is None or gateway.stage_tls_ca_file is None:
        raise ConfigError(
            "gateway.stage_tls_cert_file and stage_tls_key_file go together, with "
            "stage_tls_ca_file (the stages' CA)",
            field="gateway.stage_tls_cert_file",
        )
    return cert.read_bytes(), key.read_bytes()


def connect_stages(settings: Settings) -> tuple[StageTransport, ServiceHost | None]:
    """The transport ``gateway.discovery`` names, and a stage host to stop after closing
    the transport, if any (none: in-process stages close with their transport)."""
    gateway = settings.gateway
    if gateway.discovery == "grpc":
        missing = [stage for stage in STAGES if stage not in gateway.addresses]
        if missing:
            raise FailedPreconditionError(
                f"gateway.discovery is grpc but gateway.addresses lacks {missing}",
                field="gateway.addresses",
            )
        ca_file = gateway.stage_tls_ca_file
        return GrpcTransport(
            gateway.addresses,
            max_message_bytes=settings.server.max_message_bytes,
            token=stage_token(settings),
            root_certificates=ca_file.read_bytes() if ca_file is not None else None,
            server_name=gateway.stage_tls_server_name,
            client_certificate=_stage_client_certificate(settings),
        ), None
    if gateway.discovery == "ray":
        from ._ray_transport import RayServeTransport

        return RayServeTransport(gateway.ray_apps), None
    # Answer's stages load now (ready means answering); the others at their first call.
    transport = LocalTransport(
        settings, STAGES, max_workers=_stage_slots(settings), preload=ANSWER_STAGES
    )
    return transport, None
