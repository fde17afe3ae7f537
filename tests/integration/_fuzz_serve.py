"""The fuzzer's services behind Serve's gRPC proxy on a local Ray (``test_fuzz_serve.py``).

:class:`ServeStack` deploys the same services, with the same settings, as the fuzzer's
in-process :class:`~tests.integration._fuzz.Stack` (``stack_overrides``), as Serve
applications from ``tribunal serve config``; every call goes to the one proxy port with
the ``application`` metadata naming its service. The debate runs its real agents on the
135M model here (a Serve replica cannot take the in-process test double), so the
debate's own RPCs are not fuzzed through the proxy (each valid call would take seconds
of LLM time); the gateway's label cascade still reaches it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
from tribunal.core import Settings, load_settings
from tribunal.deploy import deploy, serve_config, start_local, wait_running
from tribunal.retrieval.servicer import entry_to_proto
from tribunal.v1 import retrieval_pb2

from tests.conftest import REPO
from tests.integration._cluster import free_port, ray_token_auth
from tests.integration._fuzz import RPCS, SERVICE_OF, TIMEOUT_S, Rpc, call, stack_overrides
from tests.integration._retrieval import ENTRIES

SERVE_RPCS = [rpc for rpc in RPCS if rpc.service != "DebateService"]
"""What is fuzzed through the proxy (see the module docstring)."""

_DEBATE_ON_THE_TINY_MODEL = {
    "roles": {"debate_agents": ["llm_tiny", "llm_tiny"], "adjudicator": "llm_tiny"},
    "debate": {"max_new_tokens": 48, "max_rounds": 1},
}


class ServeStack:
    """Every service as a Serve application behind one gRPC proxy on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        overrides: dict[str, Any] = {**stack_overrides(root), **_DEBATE_ON_THE_TINY_MODEL}
        self.overrides = overrides
        self.settings: Settings = load_settings("tiny", **overrides)
        self.root = root
        self.channel: grpc.Channel | None = None
        self.apps: list[str] = []
        self._auth: Any = None

    def start(self) -> float:
        """Start Ray and Serve, deploy every application; seconds until all run."""
        started = time.monotonic()
        config = serve_config(
            self.settings, grpc_port=free_port(), http_port=free_port(), overrides=self.overrides
        )
        self._auth = ray_token_auth(self.root)
        self._auth.__enter__()
        start_local(config, temp_dir=REPO / ".build" / "ray", auth="token", num_cpus=2)
        deploy(config)
        self.apps = [app["name"] for app in config["applications"]]
        wait_running(self.apps, timeout_s=900)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{config['grpc_options']['port']}")
        return time.monotonic() - started

    def stop(self) -> None:
        import ray
        from ray import serve

        if self.channel is not None:
            self.channel.close()
        serve.shutdown()
        ray.shutdown()
        if self._auth is not None:
            self._auth.__exit__(None, None, None)
            self._auth = None

    def channel_for(self, rpc: Rpc) -> grpc.Channel:
        assert self.channel is not None
        return self.channel

    def metadata_for(self, rpc: Rpc) -> tuple[tuple[str, str], ...]:
        name = next(k for k, v in SERVICE_OF.items() if v == rpc.service)
        return (("application", name),)

    def seed_knowledge_base(self) -> None:
        assert self.channel is not None
        upsert = self.channel.unary_unary(
            "/tribunal.v1.RetrievalService/Upsert",
            request_serializer=retrieval_pb2.UpsertRequest.SerializeToString,
            response_deserializer=retrieval_pb2.UpsertResponse.FromString,
        )
        upsert(
            retrieval_pb2.UpsertRequest(
                collection="default",
                entries=[entry_to_proto(e) for e in ENTRIES],
                create_collection=True,
                self_evidenced=True,
            ),
            metadata=(("application", "retrieval"),),
            timeout=300,
        )

    def health(self) -> dict[str, dict[str, Any]]:
        """Each application: its Serve status and the codes its valid requests get now."""
        from ray import serve

        statuses = serve.status().applications
        out: dict[str, dict[str, Any]] = {}
        for name in self.apps:
            if name == "debate":
                continue
            probes = [
                r for r in SERVE_RPCS if r.service == SERVICE_OF[name] and r.method != "Delete"
            ]
            out[name] = {
                "status": str(statuses[name].status),
                "valid_requests": {
                    rpc.method: call(
                        self.channel_for(rpc), rpc, rpc.request, TIMEOUT_S, self.metadata_for(rpc)
                    )[0]
                    for rpc in probes
                },
            }
        return out
