"""Structured logging: one JSON object per line on stderr (or plain text).

Use the standard :mod:`logging` API; pass fields with ``extra={...}`` and they
appear as top-level keys of the JSON record.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from typing import Any, Literal

__all__ = ["JsonFormatter", "configure_logging", "quiet_third_party"]

_THIRD_PARTY_LOGGERS = ("transformers", "sentence_transformers", "huggingface_hub", "accelerate")
"""Libraries whose warnings are about their own internals (a config key they ignore,
weights they tie) and say nothing a Tribunal user can act on."""

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


def quiet_third_party() -> None:
    """Silence the model libraries' warnings and progress bars ("Loading weights",
    ``loss_type=None``, tqdm bars of their downloads and batches) in this process and
    the processes it starts; errors still show. ``tribunal --verbose`` skips this."""
    # Read by the libraries when they first configure themselves (and by child processes).
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in _THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for module in _THIRD_PARTY_LOGGERS:
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")
    if "transformers" in sys.modules:  # already imported: its bars were configured
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
