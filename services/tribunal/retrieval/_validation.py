"""Request checks; every message says what to change and names the field."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core import InvalidArgumentError, ResourceExhaustedError, RetrievalSettings
from ._types import ANSWER_UNIT_ID, QUESTION_UNIT_ID, KbEntry, SearchQuery

__all__ = [
    "check_batch",
    "check_collection_name",
    "check_delete_ids",
    "check_entries",
    "check_query",
]

_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_collection_name(name: str, *, field: str = "collection") -> None:
    if not name:
        raise InvalidArgumentError("collection is empty; name the collection to use", field=field)
    if not _COLLECTION_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"collection name {name!r} is not valid: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit",
            field=field,
        )


def check_query(query: SearchQuery, settings: RetrievalSettings, *, prefix: str = "") -> None:
    """Text non-empty and short enough, top_k in range, collection name well-formed."""
    check_collection_name(query.collection, field=f"{prefix}collection")
    if not query.text.strip():
        raise InvalidArgumentError(
            "query is empty; send the text to search for", field=f"{prefix}query"
        )
    if len(query.text) > settings.query_max_chars:
        raise InvalidArgumentError(
            f"query is {len(query.text)} characters long; the limit is "
            f"{settings.query_max_chars} (shorten it, or raise "
            "TRIBUNAL_RETRIEVAL__QUERY_MAX_CHARS)",
            field=f"{prefix}query",
        )
    if not 1 <= query.top_k <= settings.top_k_max:
        raise InvalidArgumentError(
            f"top_k is {query.top_k}; it must be between 1 and {settings.top_k_max}",
            field=f"{prefix}top_k",
        )


def check_batch(queries: Sequence[SearchQuery], settings: RetrievalSettings) -> None:
    if not queries:
        raise InvalidArgumentError("searches is empty; send at least one search", field="searches")
    if len(queries) > settings.batch_max_searches:
        raise ResourceExhaustedError(
            f"{len(queries)} searches in one batch; the limit is {settings.batch_max_searches} "
            "(split the batch)",
            field="searches",
        )
    for i, query in enumerate(queries):
        check_query(query, settings, prefix=f"searches[{i}].")


def _duplicates(ids: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for item in ids:
        if item in seen:
            repeated[item] = None
        seen.add(item)
    return list(repeated)


def check_entries(entries: Sequence[KbEntry], settings: RetrievalSettings) -> None:
    """Non-empty, within the size limit, ids present and unique, each entry searchable."""
    if not entries:
        raise InvalidArgumentError("entries is empty; send at least one entry", field="entries")
    if len(entries) > settings.upsert_max_entries:
        raise ResourceExhaustedError(
            f"{len(entries)} entries in one upsert; the limit is {settings.upsert_max_entries} "
            "(split the request)",
            field="entries",
        )
    for i, entry in enumerate(entries):
        if not entry.id.strip():
            raise InvalidArgumentError(
                f"entries[{i}].id is empty; every entry needs a non-empty id",
                field=f"entries[{i}].id",
            )
        if not entry.search_units():
            raise InvalidArgumentError(
                f"entry {entry.id!r} has no question, answer or chunk text to search; "
                "fill at least one",
                field=f"entries[{i}]",
            )
        chunk_ids = [chunk.id for chunk in entry.chunks]
        for j, chunk_id in enumerate(chunk_ids):
            if not chunk_id.strip() or chunk_id in (QUESTION_UNIT_ID, ANSWER_UNIT_ID):
                raise InvalidArgumentError(
                    f"entries[{i}].chunks[{j}].id is {chunk_id!r}; chunk ids must be non-empty "
                    f"and not {QUESTION_UNIT_ID!r} or {ANSWER_UNIT_ID!r}",
                    field=f"entries[{i}].chunks[{j}].id",
                )
        repeated_chunks = _duplicates(chunk_ids)
        if repeated_chunks:
            raise InvalidArgumentError(
                f"entry {entry.id!r} repeats chunk id(s) {repeated_chunks}; "
                "chunk ids must be unique within an entry",
                field=f"entries[{i}].chunks",
            )
    repeated = _duplicates([entry.id for entry in entries])
    if repeated:
        raise InvalidArgumentError(
            f"duplicate entry id(s) in the request: {repeated[:10]}; send each id once",
            field="entries",
        )


def check_delete_ids(ids: Sequence[str]) -> None:
    if not ids:
        raise InvalidArgumentError("ids is empty; send the ids to delete", field="ids")
    for i, entry_id in enumerate(ids):
        if not entry_id.strip():
            raise InvalidArgumentError(f"ids[{i}] is empty; send non-empty ids", field=f"ids[{i}]")
    repeated = _duplicates(ids)
    if repeated:
        raise InvalidArgumentError(
            f"duplicate id(s) in the request: {repeated[:10]}; send each id once", field="ids"
        )
