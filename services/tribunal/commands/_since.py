"""``--since`` / ``--audit-since``: a duration ago or a timestamp, for every audit reader."""

from __future__ import annotations

import datetime as dt
import re

from ..core import InvalidArgumentError

__all__ = ["parse_since"]

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(value: str) -> dt.datetime:
    """``30m``, ``2h``, ``7d`` ago, or an ISO-8601 timestamp (UTC if no zone)."""
    match = _DURATION.match(value.strip())
    if match:
        delta = dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return dt.datetime.now(dt.UTC) - delta
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgumentError(
            f"--since {value!r}: use a duration like 30m, 2h, 7d or an ISO timestamp",
            field="since",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
