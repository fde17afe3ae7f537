"""Serve's gRPC proxy on a real local Ray: nothing opens by default, every application
checks credentials and roles.

Only the retrieval application is deployed (the KB is what an attacker writes), by
``tribunal serve config`` and ``tribunal serve deploy`` with its defaults, as ``make
serve`` runs them, with a credentials file:

- Ray's own token auth is on (so ``RAY_AUTH_MODE`` is set deliberately): a job submitted
  to Ray's Jobs API without the token is refused (401), with it accepted;
- every TCP port of the deployment's processes (Ray's and the proxy's) listens on
  127.0.0.1 only;
- the proxy serves mutual TLS: a plaintext client and a TLS client without the
  deployment's client certificate are cut off in the handshake.

Through the proxy (with the client certificate) an Upsert without a credential is
UNAUTHENTICATED, with a query credential PERMISSION_DENIED, with an admin credential it
is applied and audited under the credential's name.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import psutil  # type: ignore[import-untyped]
import pytest
import yaml
from tribunal.core import load_settings
from tribunal.core.server import token_sha256
from tribunal.core.storage import Database
from tribunal.retrieval._change_audit import KbChangeLog
from tribunal.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from tests.conftest import REPO

pytestmark = [pytest.mark.ray, pytest.mark.security, pytest.mark.models, pytest.mark.slow]

READER, EDITOR = "reader-token-0123456789", "editor-token-0123456789"
BLEACH = common_pb2.KbEntry(
    id="dog-covid",
    question="Can my dog catch the coronavirus?",
    answer="Wash your dog with bleach every day.",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening_sockets(root: int) -> list[tuple[str, str, int]]:
    """(process, address, port) of every listening TCP socket of ``root`` and its
    descendants (the deploy command, its Ray and every worker)."""
    rows = []
    parent = psutil.Process(root)
    for process in [parent, *parent.children(recursive=True)]:
        try:
            connections = process.net_connections(kind="tcp")
            name = process.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rows += [
            (name, c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN
        ]
    return rows


def _submit_job(port: int, token: str | None) -> int:
    """POST a job to Ray's Jobs API (the node agent's, which ``ray job submit`` reaches);
    the HTTP status."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/job_agent/jobs/",
        data=json.dumps({"entrypoint": "echo submitted", "submission_id": None}).encode(),
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _tls_channel(target: str, tls: dict[str, str], with_certificate: bool) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(tls["ca"]).read_bytes(),
        private_key=Path(tls["client_key"]).read_bytes() if with_certificate else None,
        certificate_chain=Path(tls["client_cert"]).read_bytes() if with_certificate else None,
    )
    return grpc.secure_channel(target, credentials)


def _listening_addresses(port: int) -> list[str]:
    return [
        c.laddr.ip
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def _deploy(tmp_path: Path, credentials: Path) -> tuple[subprocess.Popen[str], int, Path]:
    """``tribunal serve config`` then ``tribunal serve deploy``, as an operator runs them."""
    grpc_port, config = _free_port(), tmp_path / "serve.yaml"
    tribunal = [sys.executable, "-m", "tribunal.cli"]
    subprocess.run(
        [
            *tribunal, "serve", "config", "--profile", "tiny", "--apps", "retrieval",
            "--grpc-port", str(grpc_port), "--http-port", str(_free_port()),
            "--set", f"server.credentials_file={credentials}",
            "--set", "retrieval.deployment.num_cpus=1", "-o", str(config),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    ready = tmp_path / "ready.json"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_AUTH_MODE", None)  # the command sets it: token by default
    process = subprocess.Popen(
        [
            *tribunal, "serve", "deploy", "--config", str(config), "--num-cpus", "2",
            "--temp-dir", str(REPO / ".build" / "ray"), "--ready-file", str(ready),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while not ready.exists():
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"serve deploy exited {process.returncode}: {output[-3000:]}")
        assert time.monotonic() < deadline, "the retrieval application did not start in 600 s"
        time.sleep(1)
    return process, grpc_port, ready


def test_serve_deploy_opens_nothing_by_default_and_the_proxy_checks_credentials(
    tmp_path: Path,
) -> None:
    credentials = tmp_path / "credentials.yaml"
    credentials.write_text(
        yaml.safe_dump(
            {
                "credentials": [
                    {"name": "reader", "role": "query", "token_sha256": token_sha256(READER)},
                    {"name": "kb-editor", "role": "admin", "token_sha256": token_sha256(EDITOR)},
                ]
            }
        )
    )
    process, grpc_port, ready = _deploy(tmp_path, credentials)
    try:
        summary = json.loads(ready.read_text())
        assert summary["ray_auth"] == "token"  # Ray's own ports need its token
        assert summary["ray_host"] == "127.0.0.1"
        addresses = _listening_addresses(grpc_port)
        assert addresses, f"nothing listens on the proxy port {grpc_port}"
        assert all(_is_loopback(address) for address in addresses), addresses
        # Every port of the deployment: Ray's (GCS, raylet, workers, agents) included.
        sockets = _listening_sockets(process.pid)
        assert len(sockets) >= 5, sockets
        assert [s for s in sockets if not _is_loopback(s[1])] == []

        # Ray's Jobs API: refused without Ray's token, accepted with it.
        temp_dir = Path(summary["temp_dir"])
        [agent_port_file] = (temp_dir / "session_latest").glob("dashboard_agent_listen_port_*")
        agent_port = int(agent_port_file.read_text().strip())
        refused = (_submit_job(agent_port, None), _submit_job(agent_port, "not-the-token"))
        assert refused == (401, 403)  # no token: unauthenticated; a wrong one: forbidden
        ray_token = (temp_dir / "auth_token").read_text().strip()
        accepted = _submit_job(agent_port, ray_token)
        assert accepted == 200
        print(
            f"listening sockets: {len(sockets)} in {len({s[0] for s in sockets})} kinds of "
            f"process, non-loopback: 0; job submission: {refused} without / with a wrong "
            f"token, {accepted} with Ray's token"
        )

        # The proxy's mutual TLS: no plaintext, no client without the certificate.
        tls = summary["tls"]
        assert tls["mode"] == "mutual"
        target = f"127.0.0.1:{grpc_port}"
        search = retrieval_pb2.SearchRequest(collection="covid", query="dog", top_k=1)
        for refused in (
            grpc.insecure_channel(target),
            _tls_channel(target, tls, with_certificate=False),
        ):
            with refused, pytest.raises(grpc.RpcError) as cut_off:
                retrieval_pb2_grpc.RetrievalServiceStub(refused).Search(
                    search, metadata=(("application", "retrieval"),), timeout=30
                )
            assert cut_off.value.code() == grpc.StatusCode.UNAVAILABLE

        with _tls_channel(target, tls, with_certificate=True) as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            app = (("application", "retrieval"),)
            as_reader = (*app, ("authorization", f"Bearer {READER}"))
            plant = retrieval_pb2.UpsertRequest(
                collection="covid", entries=[BLEACH], create_collection=True, self_evidenced=True
            )
            with pytest.raises(grpc.RpcError) as anonymous:
                stub.Upsert(plant, metadata=app, timeout=120)
            assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as reader:
                stub.Upsert(plant, metadata=as_reader, timeout=120)
            assert reader.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "needs an admin credential" in reader.value.details()
            # Nothing was written: the collection does not exist.
            search = retrieval_pb2.SearchRequest(collection="covid", query="dog", top_k=1)
            with pytest.raises(grpc.RpcError) as missing:
                stub.Search(search, metadata=as_reader, timeout=120)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            # A domain method is not reachable under another name.
            lowercase = channel.unary_unary(
                "/tribunal.v1.RetrievalService/upsert",
                request_serializer=retrieval_pb2.UpsertRequest.SerializeToString,
                response_deserializer=retrieval_pb2.UpsertResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as unknown:
                lowercase(plant, metadata=as_reader, timeout=120)
            assert unknown.value.code() != grpc.StatusCode.OK
            # The admin's write is applied and audited under the credential's name.
            as_editor = (*app, ("authorization", f"Bearer {EDITOR}"))
            written = stub.Upsert(plant, metadata=as_editor, timeout=300)
            assert written.upserted == 1
            assert written.kb_version >= 1
            found = stub.Search(search, metadata=as_reader, timeout=120)
            assert found.hits[0].entry.id == "dog-covid"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    settings = load_settings("tiny")
    changes = KbChangeLog(Database(settings.database_url)).history("covid")
    upserts = [change for change in changes if change.op == "upsert"]
    assert [(c.actor, c.entry_id, c.before_sha256) for c in upserts] == [
        ("kb-editor", "dog-covid", "")
    ]
    assert upserts[0].kb_version == written.kb_version
    assert upserts[0].after_sha256 == found.hits[0].verification.entry_sha256
