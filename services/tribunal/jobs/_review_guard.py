"""The review page's request guards: a strict ``Host`` parser, the same-origin check, and
a limit on wrong annotator keys.

- ``Host`` is ``name[:port]`` and nothing else: a DNS name (letters, digits, ``-``,
  ``.``), an IPv4 address, or a bracketed IPv6 address, and an optional decimal port.
  ``localhost:1@evil.example``, a user-info part, a path, spaces or an empty name are
  refused (a lenient split would read ``localhost`` out of the first).
- ``Origin`` must be the page's own origin: the same host *and port* as the request's
  ``Host`` (a page on another port of the same machine is another origin), over http or
  https.
- Wrong keys: each client address may get :attr:`KeyAttempts.per_client` wrong keys per
  :attr:`KeyAttempts.window_s`, and all clients together :attr:`KeyAttempts.overall`;
  beyond that every sign-in attempt is answered 429 until the window passes, so keys
  cannot be guessed at line rate. Right keys are never limited.
"""

from __future__ import annotations

import ipaddress
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["KeyAttempts", "parse_host", "same_origin"]

_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")


def parse_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` header value (name lower-case, IPv6 unbracketed),
    or None when it is not exactly ``name[:port]``."""
    value = value.strip().lower()
    port_text: str | None = None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, sep, port_text_or_empty = value.partition(":")
        if sep:
            port_text = port_text_or_empty
        labels = name.rstrip(".").split(".") if name else []
        if not labels or not all(_LABEL.fullmatch(label) for label in labels):
            return None
    if port_text is None:
        return name, None
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def same_origin(origin: str, host: str, scheme: str) -> bool:
    """True when ``origin`` is the origin of a page served under ``host`` over
    ``scheme``: same scheme family (http/https), same host name, same port."""
    parts = urlsplit(origin)
    if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or parts.username:
        return False
    origin_host = parse_host(parts.netloc)
    page_host = parse_host(host)
    if origin_host is None or page_host is None:
        return False
    origin_port = origin_host[1] or _DEFAULT_PORTS[parts.scheme]
    page_port = page_host[1] or _DEFAULT_PORTS.get(scheme, 80)
    return origin_host[0] == page_host[0] and origin_port == page_port


@dataclass
class KeyAttempts:
    """Counts wrong keys per client address and overall in a sliding window."""

    per_client: int = 10
    overall: int = 100
    window_s: float = 60.0
    _clients: dict[str, deque[float]] = field(default_factory=dict)
    _all: deque[float] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _trim(self, times: deque[float], now: float) -> None:
        while times and now - times[0] >= self.window_s:
            times.popleft()

    def blocked_for(self, client: str) -> float:
        """Seconds until ``client`` may try a key again (0: now)."""
        now = time.monotonic()
        with self._lock:
            self._trim(self._all, now)
            mine = self._clients.get(client)
            if mine is not None:
                self._trim(mine, now)
                if not mine:
                    del self._clients[client]
            waits = []
            if mine is not None and len(mine) >= self.per_client:
                waits.append(self.window_s - (now - mine[0]))
            if len(self._all) >= self.overall:
                waits.append(self.window_s - (now - self._all[0]))
            return max(waits, default=0.0)

    def failed(self, client: str) -> None:
        """Record one wrong key from ``client``."""
        now = time.monotonic()
        with self._lock:
            self._clients.setdefault(client, deque()).append(now)
            self._all.append(now)
            if len(self._clients) > 10_000:  # bounded: forget the quietest clients
                for stale in [c for c, t in self._clients.items() if len(t) <= 1][:5_000]:
                    del self._clients[stale]
