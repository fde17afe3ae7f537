"""Credentials: who may call, with which role, read from a file that can change under us.

A credential is a name, a role and the sha256 of its bearer token. The file (YAML or
JSON) lists them::

    credentials:
      - name: gateway          # shows up in logs and in the KB change audit
        role: query            # query: ask (Answer, Search, Match, ...)
        token_sha256: 9f86d0…  # sha256 (hex) of the token; or `token:` in plain text
      - name: kb-editor
        role: admin            # admin: also Upsert / Delete, KB and review administration
        token_sha256: 60303a…

``credentials_file`` may also name a directory (a Kubernetes Secret mounted as files):
every ``*.yaml``, ``*.yml`` and ``*.json`` in it is read and the lists are joined. The
store re-reads the files when they change (checked at most once a second, on the next
call) and on SIGHUP, so during a rotation the old and the new token are both valid
until the old one is removed from the file. A file that no longer parses is refused
and the credentials already loaded stay in force (logged as an error).

Tokens are compared by their sha256 with :func:`hmac.compare_digest` against every
credential, so the time taken says nothing about which one (or whether one) matched.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import logging
import re
import secrets
import signal
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._errors import ConfigError

__all__ = [
    "Credential",
    "CredentialStore",
    "Role",
    "credential_from_entry",
    "credentials_from",
    "install_reload_signal",
    "new_token",
    "read_credentials_file",
    "token_sha256",
]

log = logging.getLogger(__name__)

_CHECK_EVERY_S = 1.0
_SUFFIXES = (".yaml", ".yml", ".json")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,63}$")
_MIN_TOKEN_CHARS = 16


class Role(enum.StrEnum):
    """What a credential may do. ``admin`` may do everything ``query`` may."""

    QUERY = "query"
    """Ask: Answer, Label, Search, Match, Check, Score, Assess, Stats."""
    ADMIN = "admin"
    """Also change: Upsert and Delete, KB verification, calibration, review administration."""

    def allows(self, needed: Role) -> bool:
        return self is Role.ADMIN or needed is Role.QUERY


@dataclass(frozen=True)
class Credential:
    """One valid credential: its name, its role and the sha256 of its token."""

    name: str
    role: Role
    token_sha256: bytes
    """The 32-byte digest (not hex)."""


def token_sha256(token: str) -> str:
    """The hex sha256 of a token, as the credentials file stores it."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    role: Role
    token_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    token: str | None = Field(default=None, min_length=_MIN_TOKEN_CHARS)

    @model_validator(mode="after")
    def _one_token(self) -> _Entry:
        if (self.token is None) == (self.token_sha256 is None):
            raise ValueError("give exactly one of token_sha256 (preferred) and token")
        if not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r}: 1..64 letters, digits or . _ @ : - (a letter or digit first)"
            )
        return self

    def credential(self) -> Credential:
        digest = (
            bytes.fromhex(self.token_sha256)
            if self.token_sha256 is not None
            else hashlib.sha256((self.token or "").encode()).digest()
        )
        return Credential(self.name, self.role, digest)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    credentials: list[_Entry] = Field(default_factory=list)


def credential_from_entry(entry: Mapping[str, Any]) -> Credential:
    """One ``{name, role, token_sha256 | token}`` entry of a credentials file, checked.

    Raises:
        ValueError: a field is missing, unknown or malformed (the message names it).
    """
    return _Entry.model_validate(entry).credential()


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        # A mounted Secret keeps its data under hidden ``..data`` folders and links each
        # key into the folder: the links are the files.
        return sorted(p for p in source.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    return [source]


def read_credentials_file(path: Path) -> list[Credential]:
    """The credentials of one file.

    Raises:
        ConfigError: the file cannot be read or is not a credentials file (the message
            says what the file must hold).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the credentials file {path}: {exc.strerror}",
            field="server.credentials_file",
        ) from None
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        parsed = _File.model_validate(data if data is not None else {})
    except (ValueError, yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(
            f"{path} is not a credentials file ({{credentials: [{{name, role: query|admin, "
            f"token_sha256}}]}}): {exc}",
            field="server.credentials_file",
        ) from None
    return [entry.credential() for entry in parsed.credentials]


def _check_unique(credentials: Sequence[Credential]) -> None:
    seen: dict[str, Credential] = {}
    hashes: set[bytes] = set()
    for credential in credentials:
        if credential.name in seen:
            raise ConfigError(
                f"credential name {credential.name!r} appears twice: names identify callers "
                "in logs and in the KB audit, so each must be unique",
                field="server.credentials_file",
            )
        if credential.token_sha256 in hashes:
            raise ConfigError(
                f"credential {credential.name!r} has the token of another credential",
                field="server.credentials_file",
            )
        seen[credential.name] = credential
        hashes.add(credential.token_sha256)


class CredentialStore:
    """The credentials valid now; reloads its source when the files change.

    Args:
        source: A credentials file or a directory of them (None: only ``fixed``).
        fixed: Credentials that do not come from the files (``server.auth_token``, the
            gateway's credential for its in-process stages).
    """

    def __init__(self, source: Path | None = None, fixed: Sequence[Credential] = ()) -> None:
        self.source = source
        self._fixed = tuple(fixed)
        self._lock = threading.Lock()
        self._credentials: tuple[Credential, ...] = ()
        self._signature: tuple[Any, ...] = ()
        self._checked = 0.0
        self.reload()
        if not self._credentials:
            where = f" in {source}" if source is not None else ""
            raise ConfigError(
                f"no credentials{where}: an empty list would refuse every call",
                field="server.credentials_file",
            )
        _STORES.add(self)

    @classmethod
    def from_settings(cls, server: Any) -> CredentialStore | None:
        """The store ``server.credentials_file`` and ``server.auth_token`` describe; None
        when neither is set (the service then checks no credential)."""
        fixed = []
        if server.auth_token is not None:
            token = server.auth_token.get_secret_value()
            if len(token) < _MIN_TOKEN_CHARS:
                raise ConfigError(
                    f"server.auth_token has {len(token)} characters; use at least "
                    f"{_MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32`)",
                    field="server.auth_token",
                )
            fixed.append(
                Credential("auth_token", Role.ADMIN, hashlib.sha256(token.encode()).digest())
            )
        if server.credentials_file is None and not fixed:
            return None
        return cls(server.credentials_file, fixed)

    # -- loading --------------------------------------------------------------------------
    def _current_signature(self) -> tuple[Any, ...]:
        if self.source is None:
            return ()
        try:
            files = _files(self.source)
            stats = [(str(p), p.stat()) for p in files]
        except OSError:
            return ("missing",)
        return tuple((name, s.st_mtime_ns, s.st_size, s.st_ino) for name, s in stats)

    def reload(self) -> None:
        """Read the files again now.

        Raises:
            ConfigError: the files cannot be read or parsed, or names repeat (the
                credentials loaded before stay in force).
        """
        signature = self._current_signature()
        loaded: list[Credential] = list(self._fixed)
        if self.source is not None:
            if not self.source.exists():
                raise ConfigError(
                    f"server.credentials_file {self.source} does not exist",
                    field="server.credentials_file",
                )
            for path in _files(self.source):
                loaded.extend(read_credentials_file(path))
        _check_unique(loaded)
        with self._lock:
            changed = {c.name for c in loaded} != {c.name for c in self._credentials}
            self._credentials = tuple(loaded)
            self._signature = signature
            self._checked = time.monotonic()
        if changed or not signature:
            log.info(
                "credentials loaded",
                extra={"credentials": sorted(c.name for c in loaded), "source": str(self.source)},
            )

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if self.source is None or now - self._checked < _CHECK_EVERY_S:
            return
        self._checked = now
        if self._current_signature() == self._signature:
            return
        try:
            self.reload()
        except ConfigError as exc:
            # Keep serving with what was valid; an operator mid-edit must not lock everyone out.
            self._signature = self._current_signature()
            log.error("credentials not reloaded; the previous ones stay valid: %s", exc.message)

    # -- checking -------------------------------------------------------------------------
    def authenticate(self, token: str | None) -> Credential | None:
        """The credential whose token this is, or None. Constant time in which one matched."""
        self._maybe_reload()
        if not token:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        found: Credential | None = None
        for credential in self._credentials:
            if hmac.compare_digest(digest, credential.token_sha256):
                found = credential
        return found

    @property
    def names(self) -> list[str]:
        return sorted(c.name for c in self._credentials)

    def __len__(self) -> int:
        return len(self._credentials)


_STORES: weakref.WeakSet[CredentialStore] = weakref.WeakSet()
_SIGNAL_INSTALLED = False


def install_reload_signal() -> bool:
    """Reload every credential store of this process on SIGHUP. Only the main thread can
    install a signal handler: elsewhere this does nothing and returns False (the stores
    still notice changed files by themselves)."""
    global _SIGNAL_INSTALLED
    if _SIGNAL_INSTALLED:
        return True
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGHUP"):
        return False

    def on_hangup(_signum: int, _frame: object) -> None:
        for store in list(_STORES):
            try:
                store.reload()
            except ConfigError as exc:
                log.error("credentials not reloaded on SIGHUP: %s", exc.message)

    signal.signal(signal.SIGHUP, on_hangup)
    _SIGNAL_INSTALLED = True
    return True


def credentials_from(entries: Iterable[tuple[str, Role, str]]) -> list[Credential]:
    """Credentials from (name, role, token) triples (tests, in-process wiring)."""
    return [
        Credential(name, role, hashlib.sha256(token.encode()).digest())
        for name, role, token in entries
    ]
