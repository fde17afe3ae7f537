"""The gRPC server bootstrap every Tribunal service runs in.

A :class:`ServiceHost` binds one port for one or more servicers and adds:
``grpc.health.v1`` (NOT_SERVING until the loader has loaded the models),
server reflection, message-size limits, the metrics/error interceptor, admission
control (field size limits, bounded concurrent calls and queue, deadlines; see
:mod:`._admission`), a Prometheus ``/metrics`` endpoint, and graceful shutdown on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from types import FrameType
from typing import Any, Self

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ..settings import ServerSettings, Settings
from ._admission import Admission, AdmissionInterceptor
from ._auth import AuthInterceptor
from ._credentials import CredentialStore
from ._interceptor import ServerInterceptor
from ._limits import RequestLimits
from ._metrics import SERVICE_READY, start_metrics_server

__all__ = ["ServiceBinding", "ServiceHost"]

log = logging.getLogger(__name__)

# Threads beyond the slots and the queue: health checks and refusals always find one.
_SPARE_THREADS = 4


@dataclass(frozen=True)
class ServiceBinding:
    """A servicer to mount: its full proto name and the generated ``add_*_to_server``."""

    full_name: str
    """E.g. ``"tribunal.v1.RetrievalService"``."""
    register: Callable[[grpc.Server], None]
    """Adds the servicer to a server (a generated ``add_*Servicer_to_server`` bound to it)."""


class ServiceHost:
    """One gRPC server: health, reflection, metrics, readiness after model load.

    Args:
        settings: Port, limits, grace period, metrics port.
        name: Service name for logs and metric labels (``"retrieval"``).
        bindings: Servicers to mount.
        loader: Loads the models; runs in a background thread after the port
            is bound. Health turns SERVING only when it returns. If it raises,
            health stays NOT_SERVING and :meth:`run` exits with the error.
        on_stop: Runs after the server stopped (closes what the loader opened).
        request_limits: Size limits every request is checked against before its work
            starts (``RequestLimits.from_settings(settings)``); None checks none.
        credentials: The credentials calls must carry; default: those the settings name
            (``credentials_file``, ``auth_token``), or none checked when they name none.
    """

    def __init__(
        self,
        settings: ServerSettings,
        *,
        name: str,
        bindings: Sequence[ServiceBinding],
        loader: Callable[[], None] | None = None,
        on_stop: Callable[[], None] | None = None,
        request_limits: RequestLimits | None = None,
        credentials: CredentialStore | None = None,
    ) -> None:
        self.settings = settings
        self.request_limits = request_limits
        # The callers allowed (``server.credentials_file`` / ``auth_token`` unless given);
        # None: no credential is checked (loopback development only).
        self.credentials = (
            credentials if credentials is not None else CredentialStore.from_settings(settings)
        )
        self.on_stop = on_stop
        self.name = name
        self.bindings = tuple(bindings)
        self.loader = loader
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.load_error: BaseException | None = None
        self._ready = threading.Event()
        self._finished_loading = threading.Event()
        self._stopped = threading.Event()
        self._health = health.HealthServicer(experimental_non_blocking=True)
        self._server: grpc.Server | None = None
        self.admission = Admission(
            name, settings.max_ongoing_requests, settings.max_queued_requests
        )
        self._workers: futures.ThreadPoolExecutor | None = None

    @classmethod
    def for_servicer(
        cls,
        settings: Settings,
        *,
        name: str,
        full_name: str,
        add_servicer: Callable[[Any, grpc.Server], None],
        servicer: Any,
        loader: Callable[[], None] | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> Self:
        """The usual host of one service: ``servicer`` mounted as ``full_name`` by its
        generated ``add_*Servicer_to_server``, with the profile's server settings and
        request limits.

        Args:
            settings: The profile.
            name: Service name for logs and metric labels (``"retrieval"``).
            full_name: The proto service (``"tribunal.v1.RetrievalService"``).
            add_servicer: The generated ``add_*Servicer_to_server``.
            servicer: The servicer it mounts.
            loader: Loads the models (the host reports SERVING after it).
            on_stop: Runs once the server has stopped.
        """
        return cls(
            settings.server,
            request_limits=RequestLimits.from_settings(settings),
            name=name,
            bindings=[ServiceBinding(full_name, lambda server: add_servicer(servicer, server))],
            loader=loader,
            on_stop=on_stop,
        )

    @property
    def ready(self) -> bool:
        """True once models are loaded and health reports SERVING."""
        return self._ready.is_set()

    def start(self) -> int:
        """Bind, start serving health/reflection, start loading models; returns the port."""
        limit = self.settings.max_message_bytes
        interceptors: list[grpc.ServerInterceptor] = []  # type: ignore[type-arg]
        if self.credentials is not None:
            interceptors.append(AuthInterceptor(self.name, self.credentials))
        interceptors.append(ServerInterceptor(self.name, self._ready.is_set))
        self._workers = futures.ThreadPoolExecutor(
            max_workers=self.settings.max_ongoing_requests, thread_name_prefix=f"work-{self.name}"
        )
        interceptors.append(
            AdmissionInterceptor(self.admission, self._workers, self.request_limits)
        )
        receivers = max(
            self.settings.max_workers,
            self.settings.max_ongoing_requests + self.settings.max_queued_requests + _SPARE_THREADS,
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=receivers, thread_name_prefix=f"grpc-{self.name}"
            ),
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 0),
            ],
        )
        for binding in self.bindings:
            binding.register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        names = [b.full_name for b in self.bindings]
        reflection.enable_server_reflection(
            [
                *names,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            server,
        )
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        address = f"{self.settings.host}:{self.settings.port}"
        credentials = self._credentials()
        port = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
        if port == 0:
            raise OSError(f"cannot bind gRPC port {address}")
        server.start()
        self._server, self.port = server, port
        if self.settings.metrics_port is not None:
            self.metrics_port = start_metrics_server(self.settings.metrics_port, self.settings.host)
        log.info(
            "grpc server started",
            extra={"service": self.name, "port": port, "metrics_port": self.metrics_port},
        )
        threading.Thread(target=self._load, name=f"load-{self.name}", daemon=True).start()
        return port

    def _credentials(self) -> grpc.ServerCredentials | None:
        """TLS (or mTLS with a client CA) when the settings name a certificate."""
        settings = self.settings
        if settings.tls_cert_file is None or settings.tls_key_file is None:
            return None
        client_ca = (
            settings.tls_client_ca_file.read_bytes()
            if settings.tls_client_ca_file is not None
            else None
        )
        return grpc.ssl_server_credentials(
            [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Block until loading finished; True if the service is ready."""
        self._finished_loading.wait(timeout)
        return self.ready

    def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, let in-flight calls finish for ``grace`` seconds, stop."""
        if self._server is None or self._stopped.is_set():
            return
        self._stopped.set()
        self._ready.clear()
        SERVICE_READY.labels(self.name).set(0)
        self._health.enter_graceful_shutdown()
        grace = self.settings.grace_seconds if grace is None else grace
        self._server.stop(grace).wait()
        if self._workers is not None:
            # Work abandoned at its deadline may still be finishing: do not wait for it.
            self._workers.shutdown(wait=False, cancel_futures=True)
        if self.on_stop is not None:
            self.on_stop()
        log.info("grpc server stopped", extra={"service": self.name})

    def run(self) -> None:
        """Start, stop gracefully on SIGTERM/SIGINT, block until stopped.

        Raises:
            BaseException: the loader's error, after stopping the server.
        """
        self.start()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("shutdown signal", extra={"service": self.name, "signal": signum})
            threading.Thread(target=self.stop, daemon=True).start()

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            while not self._stopped.is_set():
                if self.load_error is not None:
                    self.stop(0)
                    raise self.load_error
                time.sleep(0.2)
            assert self._server is not None
            self._server.wait_for_termination()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            if self.loader is not None:
                self.loader()
        except BaseException as exc:  # the service must not report SERVING
            self.load_error = exc
            log.exception("model load failed", extra={"service": self.name})
        else:
            if not self._stopped.is_set():
                self._ready.set()
                SERVICE_READY.labels(self.name).set(1)
                self._set_health(health_pb2.HealthCheckResponse.SERVING)
                log.info(
                    "service ready",
                    extra={"service": self.name, "load_seconds": time.perf_counter() - started},
                )
        finally:
            self._finished_loading.set()

    def _set_health(self, status: int) -> None:
        for service in ("", *(b.full_name for b in self.bindings)):
            self._health.set(service, status)

    def set_part_health(self, part: str, serving: bool) -> None:
        """Health of one part of the service (``<first binding>/<part>``, e.g.
        ``tribunal.v1.RetrievalService/collection/faq``): a part that cannot serve is
        reported without taking the whole service out of rotation."""
        name = f"{self.bindings[0].full_name}/{part}" if self.bindings else part
        self._health.set(
            name,
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING,
        )
