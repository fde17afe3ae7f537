"""Review votes on live-audit items: which items ask *which entry answers*, and the
checks on a vote's picked entry."""

from __future__ import annotations

from ..core import InvalidArgumentError
from ..core.storage import EscalationRow

__all__ = ["AUDIT_REASON", "is_audited_fallback", "no_entry_here", "picked_entry"]

AUDIT_REASON = "audit_sample"
"""The escalation reason of a live-audit item (``tribunal.audit``; named here, not
imported: the audit package reads this one's votes)."""


def is_audited_fallback(row: EscalationRow) -> bool:
    """An audited FALLBACK: its review asks which entry, if any, answers the query."""
    history = row.history if isinstance(row.history, dict) else {}
    return row.reason == AUDIT_REASON and history.get("decision") == "FALLBACK"


def picked_entry(entry_id: str | None, label: str) -> str | None:
    """A vote's ``entry_id``, validated: a non-empty id, with the label ``relevant``."""
    if entry_id is None:
        return None
    entry_id = entry_id.strip()
    if not entry_id or len(entry_id) > 256:
        raise InvalidArgumentError(
            "entry_id must be a non-empty entry id of at most 256 characters", field="entry_id"
        )
    if label != "relevant":
        raise InvalidArgumentError(
            "an entry_id goes with the label relevant (it answers the query); say none "
            "with irrelevant and no entry_id",
            field="entry_id",
        )
    return entry_id


def no_entry_here(entry_id: str | None, *, unless: bool = False) -> None:
    """Refuse a picked entry on an item that does not ask for one (``unless`` it does)."""
    if entry_id is not None and not unless:
        raise InvalidArgumentError(
            "entry_id is for audited fallbacks only (which entry, if any, answers the "
            "query); vote relevant or irrelevant here",
            field="entry_id",
        )
