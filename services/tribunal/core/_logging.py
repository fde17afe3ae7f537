"""Structured logging: one JSON object per line on stderr (or plain text).

Use the standard :mod:`logging` API; pass fields with ``extra={...}`` and they
appear as top-level keys of the JSON record.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

__all__ = ["JsonFormatter", "configure_logging"]

# Attributes every LogRecord has; anything else came in through ``extra``.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime"}
)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line with ``ts``, ``level``, ``logger``, ``msg`` and extras."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


def configure_logging(
    level: str = "INFO", fmt: Literal["json", "text"] = "json", *, stream: Any = None
) -> None:
    """Route the root logger to ``stream`` (stderr) in the chosen format; idempotent."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_tribunal", False):
            root.removeHandler(old)
    handler._tribunal = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
