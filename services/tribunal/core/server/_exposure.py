"""Safe defaults: a server reachable from other machines must check credentials.

``tribunal serve`` (and ``serve deploy`` for Serve's proxy) call :func:`check_exposure`
before binding: on a loopback address anything goes (development), on any other
address a server without credentials refuses to start unless the operator says
``--insecure``, which is logged as a warning at every start.
"""

from __future__ import annotations

import ipaddress
import logging

from .._errors import ConfigError

__all__ = ["check_exposure", "is_loopback"]

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(host: str, *, has_credentials: bool, insecure: bool, what: str) -> None:
    """Refuse to serve ``what`` on non-loopback ``host`` without credentials.

    Raises:
        ConfigError: ``host`` is reachable from other machines, no credential is
            configured and ``insecure`` is False.
    """
    if has_credentials or is_loopback(host):
        return
    if insecure:
        log.warning(
            "serving without credentials on a non-loopback address (--insecure): anyone "
            "who can reach it may call every method, Upsert and Delete included",
            extra={"service": what, "host": host},
        )
        return
    raise ConfigError(
        f"{what} would listen on {host} without credentials: anyone who can reach it could "
        "change the knowledge base. Set server.credentials_file (TRIBUNAL_SERVER__"
        "CREDENTIALS_FILE; `tribunal credentials new NAME --file FILE` makes one), bind "
        "127.0.0.1, or pass --insecure to accept the risk",
        field="server.credentials_file",
    )
