"""A real multi-node Ray cluster on this machine, the chart's Serve config applied to it.

:class:`LocalCluster` starts a head node (no CPUs for replicas: the GCS, the dashboard
and Serve's controller, as the chart's head) and worker nodes in groups, each node
carrying the chart's custom resource of its group (``tribunal_group_cpu``,
``tribunal_group_gpu``): the "GPU" nodes are marked by that resource alone, there being
no GPU here. Every node is a separate raylet with its own worker processes
(``ray.cluster_utils.Cluster``), so removing one kills exactly the replicas on it, as
losing a pod does. Start it inside :func:`ray_token_auth` (the chart's ``rayAuth.mode:
token``): the dashboard's REST API is then called with the token, as KubeRay does.

:func:`render_chart` renders ``charts/tribunal`` with Helm (helm-python-sdk): the
RayService's ``serveConfigV2`` (what :meth:`LocalCluster.apply` PUTs to the dashboard's
Serve REST API, the call KubeRay makes), the settings ConfigMap and the ConfigMap of the
KB writer's public keys (``kbTrustedKeys``); :func:`mount_trusted_keys` writes the latter
into a folder as kubelet mounts it and points the gateway's setting there.

:class:`AnswerLoad` sends ``Answer`` calls through the gRPC proxy from a few client
threads at a bounded rate, recording each outcome with its time. Its clients dial as
Tribunal's own clients do (``tribunal ask``: ``open_channel`` with ``Answer`` retried on
UNAVAILABLE within the deadline), or, with ``retried=False``, as a bare gRPC client.
"""

from __future__ import annotations

import copy
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from tribunal.core.server import RETRIED_READS, open_channel, token_sha256
from tribunal.deploy._local import set_ray_auth
from tribunal.ops import ServeRestClient
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

from tests.conftest import REPO

GROUP_RESOURCE = "tribunal_group_{}"
MODEL_APPS = ("retrieval", "entailment", "ensemble", "debate")
"""The applications that run models: on "GPU" nodes only."""
CPU_APPS = ("confidence", "gateway")


@contextmanager
def ray_token_auth(root: Path) -> Iterator[None]:
    """Ray's token auth for the clusters started inside (``RAY_AUTH_MODE=token``, the
    token in a file under ``root``), in this process too; restored after.

    Ray reads its auth settings into caches when it is first imported, which another test
    of the session may have done: they are refreshed, as Ray's own test helpers do.
    """
    from ray._raylet import AuthenticationTokenLoader, Config

    saved = {key: os.environ.get(key) for key in _AUTH_VARIABLES}
    for key in _AUTH_VARIABLES:
        os.environ.pop(key, None)
    set_ray_auth("token", root)
    # A shared machine under load starts a node's agents slowly: the raylet waits for
    # them longer than Ray's default before it gives up.
    os.environ["RAY_agent_register_timeout_ms"] = "180000"  # noqa: SIM112 (Ray's own name)
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


_AUTH_VARIABLES = (
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN",
    "RAY_AUTH_TOKEN_PATH",
    "RAY_agent_register_timeout_ms",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Rendered:
    """What ``helm template charts/tribunal`` made of a run's values."""

    serve_config: dict[str, Any]
    """The RayService's ``serveConfigV2``."""
    settings: dict[str, str]
    """The settings ConfigMap's data: the pods' environment."""
    trusted_keys: dict[str, str]
    """The KB writer's public keys ConfigMap's data (file name -> PEM); empty without."""
    trusted_keys_mount: str
    """Where the gateway's pods mount those files (the RayService's volume mount)."""


def render_chart(values: Mapping[str, Any]) -> Rendered:
    from tribunal_lab.k8s_checks import render_chart as helm_template

    docs = helm_template(dict(values))
    (service,) = [doc for doc in docs if doc["kind"] == "RayService"]
    maps = {
        doc["metadata"]["name"]: doc.get("data") or {} for doc in docs if doc["kind"] == "ConfigMap"
    }
    (settings,) = [data for name, data in maps.items() if name.endswith("-settings")]
    keys = [data for name, data in maps.items() if name.endswith("-kb-trusted-keys")]
    mounts = {
        mount["name"]: mount["mountPath"]
        for group in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        for container in group["template"]["spec"]["containers"]
        for mount in container.get("volumeMounts") or []
    }
    return Rendered(
        yaml.safe_load(service["spec"]["serveConfigV2"]),
        dict(settings),
        dict(keys[0]) if keys else {},
        mounts.get("kb-trusted-keys", ""),
    )


def mount_trusted_keys(rendered: Rendered, folder: Path) -> dict[str, str]:
    """Write the trusted-keys ConfigMap's files into ``folder`` as kubelet mounts them, and
    return the environment the replicas read instead of the ConfigMap's path (the same
    setting, this machine's folder)."""
    name = "TRIBUNAL_GATEWAY__KB_TRUSTED_KEYS"
    assert rendered.trusted_keys, "the chart made no ConfigMap of trusted KB keys"
    assert rendered.settings.get(name) == rendered.trusted_keys_mount, rendered.settings
    folder.mkdir(parents=True, exist_ok=True)
    for file, pem in rendered.trusted_keys.items():
        (folder / file).write_text(pem)
    return {name: str(folder)}


def local_values(
    *,
    grpc_port: int,
    http_port: int,
    model_dir: Path,
    data_dir: Path,
    replicas: Mapping[str, int] | None = None,
    kb_public_keys: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Values for a local run of the chart: the tiny profile, no real GPUs (the gpu group's
    nodes are marked by its resource), every model application on the gpu group, fixed
    replica counts, every application routed, this machine's paths for the volumes, and
    the KB writer's public keys (key id -> PEM) the gateway trusts."""
    counts = dict.fromkeys((*MODEL_APPS, *CPU_APPS), 1)
    counts.update(replicas or {})
    applications = {
        app: {
            "workerGroup": "gpu" if app in MODEL_APPS else "cpu",
            "replicas": counts[app],
            "numCpus": 0.25,
            "numGpus": 0,
        }
        for app in counts
    }
    return {
        "profile": "tiny",
        "serve": {
            "grpcPort": grpc_port,
            "httpPort": http_port,
            "exposeStages": True,
            "modelDir": str(model_dir),
            "dataDir": str(data_dir),
            "applications": applications,
        },
        "workerGroups": {"gpu": {"gpus": 0}},
        "kbTrustedKeys": {"publicKeys": dict(kb_public_keys or {})},
    }


@dataclass(frozen=True)
class Replica:
    app: str
    replica_id: str
    actor_id: str
    node_id: str
    state: str


class LocalCluster:
    """Head + worker groups on this machine; see the module docstring.

    Args:
        root: Scratch folder (the token, logs of nothing else).
        groups: Group name -> number of worker nodes.
        cpus_per_node: CPUs each worker node offers Ray (a scheduling share).
        env: Environment of every node's processes (the replicas' ``TRIBUNAL_*``).
    """

    def __init__(
        self,
        root: Path,
        groups: Mapping[str, int],
        *,
        cpus_per_node: float = 2,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.groups = dict(groups)
        self.cpus_per_node = cpus_per_node
        self.env = dict(env or {})
        self.temp_dir = REPO / ".build" / "ray"
        self.nodes: dict[str, list[Any]] = {}
        self.node_group: dict[str, str] = {}
        self.cluster: Any = None
        self.rest: ServeRestClient | None = None
        self.dashboard = ""
        self._saved_env: dict[str, str] | None = None

    def start(self) -> None:
        from ray.cluster_utils import Cluster

        self.temp_dir.mkdir(parents=True, exist_ok=True)
        # Ray writes the cluster's address under $RAY_TMPDIR/ray (the build area).
        (Path(os.environ.get("RAY_TMPDIR", self.temp_dir)) / "ray").mkdir(exist_ok=True)
        self._saved_env = dict(os.environ)  # restored by stop()
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        # The head's GCS gets 120 s, as tribunal.deploy.start_ray_node gives it: the
        # other tests load models beside it on this machine's 2 cores.
        os.environ["RAY_gcs_server_port_wait_time_s"] = "120"  # noqa: SIM112 (Ray's own name)
        os.environ.update(self.env)
        dashboard_port = free_port()
        self.cluster = Cluster(
            initialize_head=True,
            connect=True,
            head_node_args={
                "num_cpus": 0,
                "include_dashboard": True,
                "dashboard_host": "127.0.0.1",
                "dashboard_port": dashboard_port,
                "temp_dir": str(self.temp_dir),
                "object_store_memory": 150 * 1024 * 1024,
            },
        )
        for group, count in self.groups.items():
            for _ in range(count):
                self.add_node(group)
        self.dashboard = f"http://127.0.0.1:{dashboard_port}"
        self.rest = ServeRestClient(self.dashboard, timeout_s=60)
        deadline = time.monotonic() + 120
        while True:  # the dashboard's Serve module answers a little after the head starts
            try:
                self.rest.details()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def add_node(self, group: str) -> Any:
        # Each worker node's Serve proxy binds its own ports (one machine, many nodes).
        os.environ["RAY_SERVE_WORKER_PROXY_GRPC_PORT"] = str(free_port())
        os.environ["RAY_SERVE_WORKER_PROXY_HTTP_PORT"] = str(free_port())
        node = self.cluster.add_node(
            num_cpus=self.cpus_per_node,
            resources={GROUP_RESOURCE.format(group): 1000},
            object_store_memory=100 * 1024 * 1024,
        )
        self.nodes.setdefault(group, []).append(node)
        self.node_group[node.node_id] = group
        return node

    def remove_node(self, node: Any) -> None:
        """Kill every process of ``node`` at once (no graceful drain): a lost pod."""
        self.cluster.remove_node(node, allow_graceful=False)
        for nodes in self.nodes.values():
            if node in nodes:
                nodes.remove(node)

    def stop(self) -> None:
        import ray

        if self.cluster is not None:
            ray.shutdown()
            self.cluster.shutdown()
            self.cluster = None
        if self._saved_env is not None:
            os.environ.clear()
            os.environ.update(self._saved_env)
            self._saved_env = None

    # -- Serve through the dashboard's REST API (what KubeRay calls) -----------------------

    def apply(self, config: Mapping[str, Any]) -> None:
        assert self.rest is not None
        self.rest.apply(dict(config))

    def replicas(self) -> dict[str, list[Replica]]:
        assert self.rest is not None
        details = self.rest.details()
        out: dict[str, list[Replica]] = {}
        for app, info in (details.get("applications") or {}).items():
            out[app] = [
                Replica(
                    app,
                    replica["replica_id"],
                    replica.get("actor_id") or "",
                    replica.get("node_id") or "",
                    str(replica.get("state")),
                )
                for deployment in (info.get("deployments") or {}).values()
                for replica in deployment.get("replicas") or []
            ]
        return out

    def statuses(self) -> dict[str, str]:
        assert self.rest is not None
        apps = self.rest.details().get("applications") or {}
        return {name: str(app.get("status")) for name, app in apps.items()}

    def wait_running(
        self, apps: list[str], timeout_s: float, replicas: Mapping[str, int] | None = None
    ) -> float:
        """Seconds until every app is RUNNING with ``replicas[app]`` RUNNING replicas."""
        started = time.monotonic()
        while True:
            statuses = self.statuses()
            for app in apps:
                if statuses.get(app) == "DEPLOY_FAILED":
                    assert self.rest is not None
                    message = self.rest.details()["applications"][app].get("message")
                    raise AssertionError(f"{app} failed to deploy: {message}")
            running = self.replicas()
            ready = all(statuses.get(app) == "RUNNING" for app in apps) and all(
                sum(r.state == "RUNNING" for r in running.get(app, [])) == count
                for app, count in (replicas or {}).items()
            )
            if ready:
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"not running after {timeout_s:.0f} s: {statuses}")
            time.sleep(0.5)


def token_file_credentials(path: Path, tokens: Mapping[str, tuple[str, str]]) -> Path:
    """A credentials file: name -> (role, token)."""
    path.write_text(
        yaml.safe_dump(
            {
                "credentials": [
                    {"name": name, "role": role, "token_sha256": token_sha256(token)}
                    for name, (role, token) in tokens.items()
                ]
            }
        )
    )
    return path


def with_replicas(config: Mapping[str, Any], app: str, count: int) -> dict[str, Any]:
    """``config`` with application ``app``'s replica count set (what ``ops scale`` PUTs)."""
    changed = copy.deepcopy(dict(config))
    for application in changed["applications"]:
        if application["name"] == app:
            (deployment,) = application["deployments"]
            deployment["num_replicas"] = count
            deployment["autoscaling_config"] = None  # the code's autoscaling would win
    return changed


# -- bounded load through the gRPC proxy ----------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    at: float
    """Seconds since the load started."""
    code: str
    """gRPC status name (OK for an answer of any decision)."""
    decision: str = ""
    failed_stage: str = ""
    reason: str = ""
    reply: gateway_pb2.AnswerResponse | None = None


@dataclass
class AnswerLoad:
    """``clients`` threads, each sending one ``Answer`` every ``interval_s`` at most."""

    address: str
    queries: list[str]
    token: str
    clients: int = 2
    interval_s: float = 0.25
    timeout_s: float = 20.0
    retried: bool = True
    """Dial with Tribunal's client channel (``Answer`` retried on UNAVAILABLE); False: a
    bare channel, every UNAVAILABLE reaches the caller."""
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.started = 0.0

    def _client(self, number: int) -> None:
        metadata = (("application", "gateway"), ("authorization", f"Bearer {self.token}"))
        retried = RETRIED_READS if self.retried else ()
        with open_channel(self.address, retried=retried) as channel:
            stub = gateway_pb2_grpc.GatewayServiceStub(channel)
            sent = number
            while not self._stop.is_set():
                began = time.monotonic()
                query = self.queries[sent % len(self.queries)]
                sent += self.clients
                try:
                    reply = stub.Answer(
                        gateway_pb2.AnswerRequest(query=query),
                        metadata=metadata,
                        timeout=self.timeout_s,
                    )
                    outcome = Outcome(
                        began - self.started,
                        "OK",
                        common_pb2.Decision.Name(reply.decision),
                        reply.failed_stage,
                        gateway_pb2.FallbackReason.Name(reply.fallback_reason),
                        reply,
                    )
                except grpc.RpcError as exc:
                    outcome = Outcome(began - self.started, exc.code().name)  # type: ignore[attr-defined]
                with self._lock:
                    self.outcomes.append(outcome)
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    @contextmanager
    def running(self, started: float | None = None) -> Iterator[AnswerLoad]:
        """Clients sending until the block ends; times count from ``started`` (a
        ``time.monotonic()``; default now), so loads started together share a clock."""
        self.started = time.monotonic() if started is None else started
        self._threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True)
            for n in range(self.clients)
        ]
        for thread in self._threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(timeout=self.timeout_s + 5)

    def now(self) -> float:
        return time.monotonic() - self.started

    def summary(self, since: float = 0.0, until: float = float("inf")) -> Counter[str]:
        """Counts of ``CODE`` or ``DECISION[/failed_stage]`` in a time window."""
        counts: Counter[str] = Counter()
        for outcome in self.outcomes:
            if since <= outcome.at < until:
                if outcome.code != "OK":
                    counts[outcome.code] += 1
                elif outcome.failed_stage:
                    counts[f"{outcome.decision}/{outcome.failed_stage}"] += 1
                else:
                    counts[outcome.decision] += 1
        return counts
