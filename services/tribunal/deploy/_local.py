"""A local single-node Ray with Serve's gRPC proxy, the stack deployed from a Serve config.

Deliberate choices for a development machine (Kubernetes sets its own):

- **Auth.** Ray 2.60 turns token auth on for a new local cluster unless
  ``RAY_AUTH_MODE`` is set, writing ``~/.ray/auth_token``, which every later
  ``ray.init`` on the machine then picks up. Here it is set deliberately:
  ``auth="token"`` keeps a token file under the temp dir (``RAY_AUTH_TOKEN_PATH``),
  never in ``~/.ray``; ``disabled`` leaves Ray's own ports (which listen on every
  interface whatever the node address) open to anyone who reaches them.
- **Ray's own ports** (GCS, raylet, workers, agents, the Jobs API) listen on
  127.0.0.1 only (``ray_host``, the default): Ray binds loopback only for a node whose
  address is loopback, and it replaces a loopback ``--node-ip-address`` by the
  machine's network address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's
  single-machine mode), which is set here. Another ``ray_host`` makes it that node's
  address (every interface then: Ray has no bind option).
- **Serve's gRPC proxy** is outside Ray's auth: every application checks its
  callers' credentials itself (:class:`~tribunal.deploy.ServeApp`). Serve has no
  host or TLS option for the proxy and binds every interface in plaintext; here a
  worker setup hook (:mod:`._serve_grpc`) binds it (and the replicas' own gRPC servers)
  to ``grpc_host``, 127.0.0.1 by default, and serves mutual TLS when ``tls`` is given.
- **Temp dir.** ``.build/ray`` (logs, sockets, object spill), not ``/tmp/ray``.
- **Dashboard.** Off: nothing here needs it (the config is applied through the
  Serve controller, as ``serve run config.yaml`` does), and it costs ~300 MB.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil  # type: ignore[import-untyped]

from ..core import ConfigError, FailedPreconditionError, UnavailableError
from ..core.server import is_loopback
from ._serve_grpc import LOOPBACK_ENV, TLS_CERT_ENV, TLS_CLIENT_CA_ENV, TLS_KEY_ENV
from ._tls import LocalTls

_log = logging.getLogger(__name__)
_START_ATTEMPTS = 2
# Ray waits 30 s for a new head's GCS to publish its port; a 2-core machine busy loading
# models has run past that. RAY_gcs_server_port_wait_time_s, when set, wins.
_GCS_PORT_WAIT_S = "120"
# What Ray's bare exceptions say when a node's processes did not come up in time.
_START_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")

__all__ = [
    "SERVE_GRPC_HOOK",
    "LocalServe",
    "deploy",
    "ray_memory",
    "ray_node_address",
    "replica_counts",
    "set_ray_auth",
    "start_local",
    "start_ray_node",
    "wait_running",
]


@dataclass(frozen=True)
class LocalServe:
    """What :func:`start_local` started."""

    grpc_port: int
    http_port: int
    grpc_host: str
    temp_dir: Path
    auth: str
    ray_host: str = "127.0.0.1"
    tls: LocalTls | None = None


def set_ray_auth(auth: Literal["disabled", "token"], temp_dir: Path) -> None:
    """Set Ray's auth mode (and, for ``token``, a token file in ``temp_dir``) for this
    process and the cluster it starts; call it before Ray is imported."""
    os.environ["RAY_AUTH_MODE"] = auth
    if auth == "token" and not (
        os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
    ):
        path = temp_dir / "auth_token"
        if not path.exists():
            path.write_text(secrets.token_hex(32))
            path.chmod(0o600)
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


SERVE_GRPC_HOOK = "tribunal.deploy._serve_grpc.configure_serve_grpc"
"""The worker setup hook that binds Serve's gRPC proxy (loopback, TLS)."""


def _runtime_env(
    env_vars: Mapping[str, str] | None, grpc_host: str, tls: LocalTls | None
) -> dict[str, Any]:
    env = dict(env_vars or {})
    if is_loopback(grpc_host):
        env[LOOPBACK_ENV] = "1"
    elif grpc_host not in ("0.0.0.0", "::", "[::]"):
        raise ConfigError(
            f"Serve's gRPC proxy can listen on 127.0.0.1 or on every interface (0.0.0.0), "
            f"not on {grpc_host}",
            field="grpc_host",
        )
    if tls is not None:
        env[TLS_CERT_ENV] = str(tls.node.cert)
        env[TLS_KEY_ENV] = str(tls.node.key)
        env[TLS_CLIENT_CA_ENV] = str(tls.ca)
    return {"env_vars": env, "worker_process_setup_hook": SERVE_GRPC_HOOK}


def ray_node_address(ray_host: str) -> dict[str, Any]:
    """The ``ray.init`` keyword that places a new local node on ``ray_host``; for a
    loopback host, Ray's single-machine mode (every Ray port on 127.0.0.1), set in this
    process's environment, which the Ray processes it starts inherit."""
    from ray._private import ray_constants

    single_machine = is_loopback(ray_host)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0" if single_machine else "1"
    # Ray reads the variable when it is first imported; this process may have imported
    # it already (the Ray processes it starts read their own environment).
    ray_constants.ENABLE_RAY_CLUSTER = not single_machine
    return {} if single_machine else {"_node_ip_address": ray_host}


def start_ray_node(**init_options: Any) -> None:
    """``ray.init`` of a new node on this machine, patient with a busy machine.

    The GCS gets 120 s to come up instead of Ray's 30 (an operator's
    ``RAY_gcs_server_port_wait_time_s`` wins), and a node that still did not start in
    time is started once more: Ray's raylet waits 15 s for its agents' ports and aborts
    the node when a busy machine imports them slower; a second start finds their modules
    cached. A start that failed leaves no process behind (Ray's own shutdown does not end
    the processes of a node that never finished starting). Any other failure is raised
    as Ray raised it.
    """
    import ray

    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", _GCS_PORT_WAIT_S)
    for attempt in range(_START_ATTEMPTS):
        running_before = {child.pid for child in psutil.Process().children(recursive=True)}
        connected = ray.is_initialized()  # a caller's own Ray is left as it is
        try:
            ray.init(**init_options)
            return
        except Exception as exc:  # Ray raises bare exceptions for a node that did not start
            if not connected:
                ray.shutdown()
            _end_ray_processes_started_since(running_before)
            timed_out = any(message in str(exc) for message in _START_TIMEOUTS)
            if not timed_out or attempt + 1 == _START_ATTEMPTS:
                raise
            _log.warning("Ray's node did not start in time (%s); starting it again", exc)


def _end_ray_processes_started_since(running_before: set[int]) -> None:
    """End this process's children that a failed Ray start left: those started since
    ``running_before`` was taken that run Ray's binaries or modules."""
    import ray

    ray_package = str(Path(ray.__file__).parent)
    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in running_before and ray_package in " ".join(child.cmdline()):
                left.append(child)
        except psutil.Error:  # it ended on its own meanwhile
            continue
    for child in left:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(left, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def start_local(
    config: Mapping[str, Any],
    *,
    temp_dir: Path,
    num_cpus: float | None = None,
    auth: Literal["disabled", "token"] = "token",
    env_vars: Mapping[str, str] | None = None,
    grpc_host: str = "127.0.0.1",
    ray_host: str = "127.0.0.1",
    tls: LocalTls | None = None,
) -> LocalServe:
    """Start Ray on this machine (loopback) and Serve with the config's proxies.

    Args:
        config: A Serve config (:func:`serve_config`); its ``grpc_options``,
            ``http_options`` and ``proxy_location`` start the proxies.
        temp_dir: Ray's temp dir (logs, sockets).
        num_cpus: CPUs Ray may schedule (default: all); actors reserve from it.
        auth: Ray's token auth (see the module docstring).
        env_vars: Environment of every Ray worker (``TRIBUNAL_*`` variables).
        grpc_host: Address of Serve's gRPC proxy: a loopback address (the default), or
            ``0.0.0.0`` / ``::`` for every interface.
        ray_host: The node's address; loopback (the default) keeps every Ray port on
            127.0.0.1.
        tls: The proxy's certificate and the CA its clients' certificates must chain to
            (:func:`~tribunal.deploy.local_tls`); None serves plaintext.

    Raises:
        ConfigError: ``grpc_host`` is neither loopback nor every interface (Serve can
            bind only those).
    """
    temp_dir = temp_dir.resolve()
    temp_dir.mkdir(parents=True, exist_ok=True)
    # Before Ray is imported: its core library reads the auth mode when it loads.
    set_ray_auth(auth, temp_dir)
    from ray import serve

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    runtime_env = _runtime_env(env_vars, grpc_host, tls)
    start_ray_node(
        num_cpus=int(num_cpus) if num_cpus is not None else None,
        include_dashboard=False,
        _temp_dir=str(temp_dir),
        logging_level=logging.WARNING,
        namespace="serve",
        runtime_env=runtime_env,
        **ray_node_address(ray_host),
    )
    grpc_options = dict(config.get("grpc_options") or {})
    http_options = dict(config.get("http_options") or {})
    serve.start(
        proxy_location=config.get("proxy_location", "HeadOnly"),
        http_options=http_options,
        grpc_options=grpc_options,
        logging_config=config.get("logging_config"),
    )
    return LocalServe(
        grpc_port=int(grpc_options.get("port", 9000)),
        http_port=int(http_options.get("port", 8000)),
        grpc_host=grpc_host,
        temp_dir=temp_dir,
        auth=auth,
        ray_host=ray_host,
        tls=tls,
    )


def deploy(config: Mapping[str, Any]) -> None:
    """Apply the config: the controller builds every application from its import path.

    The same call ``serve run config.yaml`` and the REST API make (Serve's client);
    applying a changed config later updates only what changed (e.g. one deployment's
    replicas), leaving the other applications running.
    """
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    client = _get_global_client()
    if client is None:
        raise FailedPreconditionError("Serve is not running: call start_local first")
    client.deploy_apps(ServeDeploySchema.model_validate(dict(config)))


def replica_counts() -> dict[str, dict[str, int]]:
    """Application -> replica state -> count, e.g. ``{"confidence": {"RUNNING": 2}}``."""
    from ray import serve

    counts: dict[str, dict[str, int]] = {}
    for name, app in serve.status().applications.items():
        states: dict[str, int] = {}
        for deployment in app.deployments.values():
            for state, number in deployment.replica_states.items():
                states[str(getattr(state, "value", state))] = (
                    states.get(str(getattr(state, "value", state)), 0) + number
                )
        counts[name] = states
    return counts


def wait_running(apps: list[str], timeout_s: float, poll_s: float = 1.0) -> dict[str, str]:
    """Block until every application in ``apps`` is RUNNING; their statuses.

    Raises:
        FailedPreconditionError: an application failed to deploy (with Serve's message).
        UnavailableError: not all running after ``timeout_s``.
    """
    from ray import serve

    deadline = time.monotonic() + timeout_s
    statuses: dict[str, str] = {}
    while True:
        applications = serve.status().applications
        statuses = {
            name: str(applications[name].status) if name in applications else "MISSING"
            for name in apps
        }
        for name in apps:
            app = applications.get(name)
            if app is not None and "DEPLOY_FAILED" in str(app.status):
                raise FailedPreconditionError(
                    f"Serve application {name!r} failed to deploy: {app.message}"
                )
        if all(status.endswith("RUNNING") for status in statuses.values()):
            return statuses
        if time.monotonic() > deadline:
            raise UnavailableError(
                f"Serve applications not running after {timeout_s:.0f}s: {statuses}"
            )
        time.sleep(poll_s)


def ray_memory(root_pid: int | None = None) -> dict[str, Any]:
    """Resident memory of a local Ray and everything it runs, by process.

    The processes are ``root_pid``'s descendants (the driver that started the
    cluster: GCS, raylet, the Serve controller and proxy, every replica). RSS
    counts pages shared between processes (mmap'ed model files, libraries) once per
    process; PSS splits them among the sharers, so its sum is the real footprint.
    """
    root = psutil.Process(root_pid or os.getpid())
    rows = []
    for process in [root, *root.children(recursive=True)]:
        try:
            info = process.memory_full_info()
            cmdline = process.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        title = cmdline[0] if cmdline else process.name()
        rows.append(
            {
                "pid": process.pid,
                "process": title[:80],
                "rss_mib": info.rss / 2**20,
                "pss_mib": getattr(info, "pss", info.rss) / 2**20,
                "uss_mib": info.uss / 2**20,
            }
        )
    rows.sort(key=lambda row: -row["pss_mib"])
    return {
        "processes": rows,
        "total_rss_mib": sum(row["rss_mib"] for row in rows),
        "total_pss_mib": sum(row["pss_mib"] for row in rows),
        "total_uss_mib": sum(row["uss_mib"] for row in rows),
        "machine_total_mib": psutil.virtual_memory().total / 2**20,
    }
