"""Roles, credentials and the safe defaults, without a server: the tables and the checks.

The role table lists every RPC the protos declare (and nothing else); every Serve
application wraps every RPC of its service in the credential check; credentials load
from a file or a mounted Secret folder, rotate without a restart, and a broken file
keeps the valid ones; a service refuses to listen beyond loopback without credentials.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from tribunal.cli import main
from tribunal.core import ConfigError, PermissionDeniedError, UnauthenticatedError
from tribunal.core.server import (
    CredentialStore,
    Role,
    authorize,
    check_exposure,
    install_reload_signal,
    is_loopback,
    token_sha256,
)
from tribunal.core.server._roles import METHOD_ROLES
from tribunal.deploy import SERVICES, ServeApp
from tribunal.deploy._grpc import GUARD_MARK, proto_methods
from tribunal.deploy._serve_grpc import loopback_address

pytestmark = pytest.mark.security

QUERY_TOKEN = "query-token-0123456789"
ADMIN_TOKEN = "admin-token-0123456789"
UPSERT = "/tribunal.v1.RetrievalService/Upsert"
SEARCH = "/tribunal.v1.RetrievalService/Search"


def _bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def _write(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"credentials": list(entries)}), encoding="utf-8")
    return path


def _entry(name: str, role: str, token: str) -> dict[str, str]:
    return {"name": name, "role": role, "token_sha256": token_sha256(token)}


def _every_proto_method() -> set[str]:
    methods = set()
    for spec in SERVICES.values():
        module = importlib.import_module(f"tribunal.v1.{spec.proto}_pb2")
        for service in module.DESCRIPTOR.services_by_name.values():
            methods |= {f"/{service.full_name}/{method.name}" for method in service.methods}
    return methods


def test_the_role_table_lists_exactly_the_methods_of_the_protos() -> None:
    assert set(METHOD_ROLES) == _every_proto_method()
    # The KB is changed only by admins; everything else asks.
    admin = {method for method, role in METHOD_ROLES.items() if role is Role.ADMIN}
    assert admin == {
        UPSERT,
        "/tribunal.v1.RetrievalService/Delete",
        "/tribunal.v1.RetrievalService/Sign",
    }


def test_every_serve_application_wraps_every_rpc_of_its_service() -> None:
    from tribunal.core import load_settings

    settings = load_settings("tiny")
    for name, spec in SERVICES.items():
        # The class each application deploys, as the Serve config builds it (no Ray needed).
        cls = spec.build_app(settings)._bound_deployment.func_or_class
        assert issubclass(cls, ServeApp), f"{name}: {cls} is not a ServeApp"
        assert cls.proto_service == spec.full_proto_service
        for method in proto_methods(name):
            wrapped = getattr(cls, method)
            assert getattr(wrapped, GUARD_MARK, None) == f"/{spec.full_proto_service}/{method}"


def test_a_serve_application_must_implement_every_rpc_and_be_async() -> None:
    with pytest.raises(TypeError, match=r"does not implement .*'Upsert'"):

        class Partial(ServeApp, service="retrieval"):
            async def Search(self, request: Any, grpc_context: Any = None) -> Any: ...
            async def BatchSearch(self, request: Any, grpc_context: Any = None) -> Any: ...
            async def Delete(self, request: Any, grpc_context: Any = None) -> Any: ...
            async def Stats(self, request: Any, grpc_context: Any = None) -> Any: ...

    with pytest.raises(TypeError, match="must be async"):

        class Blocking(ServeApp, service="confidence"):
            def Score(self, request: Any, grpc_context: Any = None) -> Any: ...
            async def BatchScore(self, request: Any, grpc_context: Any = None) -> Any: ...


def test_authorize_needs_a_credential_and_the_right_role(tmp_path: Path) -> None:
    store = CredentialStore(
        _write(
            tmp_path / "c.yaml",
            _entry("reader", "query", QUERY_TOKEN),
            {"name": "editor", "role": "admin", "token": ADMIN_TOKEN},  # plain token accepted
        )
    )
    with pytest.raises(UnauthenticatedError, match="requires a credential"):
        authorize(store, SEARCH, [])
    with pytest.raises(UnauthenticatedError, match="not a valid credential"):
        authorize(store, SEARCH, _bearer("wrong-token-0123456789"))
    assert authorize(store, SEARCH, _bearer(QUERY_TOKEN)).name == "reader"
    with pytest.raises(PermissionDeniedError, match="'reader' has the query role; Upsert needs"):
        authorize(store, UPSERT, _bearer(QUERY_TOKEN))
    caller = authorize(store, UPSERT, _bearer(ADMIN_TOKEN))
    assert (caller.name, caller.role) == ("editor", Role.ADMIN)
    # A method the table does not know needs admin (fail closed).
    with pytest.raises(PermissionDeniedError):
        authorize(store, "/tribunal.v1.RetrievalService/Drop", _bearer(QUERY_TOKEN))
    # No credentials configured: asking is open (loopback development); changing the KB
    # always needs an admin credential.
    assert authorize(None, SEARCH, []).role is Role.QUERY
    for method in (
        UPSERT,
        "/tribunal.v1.RetrievalService/Delete",
        "/tribunal.v1.RetrievalService/Sign",
    ):
        with pytest.raises(UnauthenticatedError, match="always needs an admin credential"):
            authorize(None, method, [])


def test_a_local_admin_store_lets_anyone_ask_and_only_its_token_write(tmp_path: Path) -> None:
    """Loopback development (``server.local_admin_file``): asking without a token, KB
    changes only with the local admin's token."""
    path = tmp_path / "local-admin.yaml"
    path.write_text(
        yaml.safe_dump(
            {"credentials": [{"name": "local-admin", "role": "admin", "token": ADMIN_TOKEN}]}
        )
    )
    store = CredentialStore(path, anonymous=Role.QUERY)
    assert authorize(store, SEARCH, []).role is Role.QUERY
    with pytest.raises(UnauthenticatedError):
        authorize(store, UPSERT, [])
    with pytest.raises(UnauthenticatedError):
        authorize(store, UPSERT, _bearer("wrong-token-0123456789"))
    assert authorize(store, UPSERT, _bearer(ADMIN_TOKEN)).name == "local-admin"


def test_credential_files_are_checked(tmp_path: Path) -> None:
    bad = [
        ({"credentials": [{"name": "a", "role": "root", "token": ADMIN_TOKEN}]}, "role"),
        ({"credentials": [{"name": "a", "role": "query", "token": "short"}]}, "token"),
        ({"credentials": [{"name": "a", "role": "query"}]}, "exactly one of"),
        ({"credentials": [{"name": "two words", "role": "query", "token": ADMIN_TOKEN}]}, "name"),
        ({"credentials": []}, "no credentials"),
    ]
    for data, message in bad:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ConfigError, match=message):
            CredentialStore(path)
    twice = _write(
        tmp_path / "twice.yaml",
        _entry("a", "query", QUERY_TOKEN),
        _entry("a", "admin", ADMIN_TOKEN),
    )
    with pytest.raises(ConfigError, match="appears twice"):
        CredentialStore(twice)
    with pytest.raises(ConfigError, match="does not exist"):
        CredentialStore(tmp_path / "missing.yaml")


def _touch_later(path: Path) -> None:
    """Make the next reload notice the file (mtime resolution, the 1 s check interval)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def test_rotation_old_and_new_both_valid_then_old_removed(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.yaml", _entry("gateway-1", "query", "old-token-0123456789"))
    store = CredentialStore(path)
    assert store.authenticate("old-token-0123456789").name == "gateway-1"  # type: ignore[union-attr]
    # Rotation, step 1: the new credential joins; both are valid.
    _write(
        path,
        _entry("gateway-1", "query", "old-token-0123456789"),
        _entry("gateway-2", "query", "new-token-0123456789"),
    )
    _touch_later(path)
    store._checked = 0.0  # skip the 1 s throttle rather than sleep
    assert store.authenticate("new-token-0123456789").name == "gateway-2"  # type: ignore[union-attr]
    assert store.authenticate("old-token-0123456789").name == "gateway-1"  # type: ignore[union-attr]
    # Step 2: the old one is removed.
    _write(path, _entry("gateway-2", "query", "new-token-0123456789"))
    _touch_later(path)
    store._checked = 0.0
    assert store.authenticate("old-token-0123456789") is None
    assert store.names == ["gateway-2"]
    # A broken edit keeps the credentials in force.
    path.write_text("credentials: [{name: x")
    _touch_later(path)
    store._checked = 0.0
    assert store.authenticate("new-token-0123456789").name == "gateway-2"  # type: ignore[union-attr]


def test_a_mounted_secret_folder_and_sighup(tmp_path: Path) -> None:
    # The layout kubelet writes: data in a hidden timestamped folder, linked by ..data.
    secret = tmp_path / "secret"
    first = secret / "..2026_12_01_00_00_00.1"
    first.mkdir(parents=True)
    _write(first / "credentials.yaml", _entry("gateway", "query", QUERY_TOKEN))
    (secret / "..data").symlink_to(first.name)
    (secret / "credentials.yaml").symlink_to("..data/credentials.yaml")
    store = CredentialStore(secret)
    assert store.names == ["gateway"]
    # kubelet swaps ..data to a new folder atomically.
    second = secret / "..2026_12_01_00_10_00.2"
    second.mkdir()
    _write(
        second / "credentials.yaml",
        _entry("gateway", "query", QUERY_TOKEN),
        _entry("ops", "admin", ADMIN_TOKEN),
    )
    (secret / "..data_tmp").symlink_to(second.name)
    os.replace(secret / "..data_tmp", secret / "..data")
    assert install_reload_signal()
    os.kill(os.getpid(), __import__("signal").SIGHUP)
    deadline = time.monotonic() + 5
    while store.names != ["gateway", "ops"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.names == ["gateway", "ops"]


def test_serving_beyond_loopback_needs_credentials(caplog: pytest.LogCaptureFixture) -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("tribunal.example")
    check_exposure("127.0.0.1", has_credentials=False, insecure=False, what="x")
    check_exposure("0.0.0.0", has_credentials=True, insecure=False, what="x")
    with pytest.raises(ConfigError, match="without credentials"):
        check_exposure("0.0.0.0", has_credentials=False, insecure=False, what="x")
    with caplog.at_level(logging.WARNING):
        check_exposure("0.0.0.0", has_credentials=False, insecure=True, what="x")
    assert "--insecure" in caplog.text


def test_tribunal_serve_refuses_a_public_address_without_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Refused before any model loads or any port is bound.
    assert main(["serve", "confidence", "--profile", "tiny", "--host", "0.0.0.0"]) == 2
    assert "without credentials" in capsys.readouterr().err


def test_short_auth_tokens_are_refused() -> None:
    from tribunal.core import ServerSettings

    with pytest.raises(ConfigError, match="at least 16"):
        CredentialStore.from_settings(ServerSettings(auth_token="s3cret"))  # type: ignore[arg-type]
    store = CredentialStore.from_settings(ServerSettings(auth_token=ADMIN_TOKEN))  # type: ignore[arg-type]
    assert store is not None
    assert store.authenticate(ADMIN_TOKEN).role is Role.ADMIN


def test_the_serve_config_can_route_only_the_gateway() -> None:
    from tribunal.core import load_settings
    from tribunal.deploy import serve_config, validate_serve_config

    config = serve_config(load_settings("tiny"), expose_stages=False)
    validate_serve_config(config)
    routes = {app["name"]: app["route_prefix"] for app in config["applications"]}
    assert routes == {name: ("/gateway" if name == "gateway" else None) for name in SERVICES}
    assert loopback_address("[::]:9000") == "127.0.0.1:9000"
    assert loopback_address("10.0.0.1:9000") == "10.0.0.1:9000"


def test_serve_makes_a_local_admin_credential_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tribunal.commands.serve import _with_local_admin
    from tribunal.core import load_settings

    settings = load_settings("tiny", data_dir=str(tmp_path))
    first = _with_local_admin(settings)
    path = tmp_path / "credentials" / "local-admin.yaml"
    assert first.server.local_admin_file == path
    assert path.stat().st_mode & 0o777 == 0o600
    assert f"created a local admin credential: {path} (0600)" in capsys.readouterr().err
    token = yaml.safe_load(path.read_text())["credentials"][0]["token"]
    store = CredentialStore.from_settings(first.server)
    assert store is not None
    assert authorize(store, UPSERT, _bearer(token)).role is Role.ADMIN
    assert authorize(store, SEARCH, []).role is Role.QUERY
    again = _with_local_admin(settings)  # reused, not remade
    assert yaml.safe_load(path.read_text())["credentials"][0]["token"] == token
    assert "created" not in capsys.readouterr().err
    assert again.server.local_admin_file == path
