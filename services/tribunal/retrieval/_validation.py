"""Request checks; every message says what to change and names the field."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core import InvalidArgumentError, ResourceExhaustedError, RetrievalSettings
from ..kb import ANSWER_UNIT_ID, QUESTION_UNIT_ID, KbEntry, phrasing_index, phrasing_key
from ._sparse import searchable_terms
from ._types import SearchQuery

__all__ = [
    "check_batch",
    "check_collection_name",
    "check_delete_ids",
    "check_entries",
    "check_entry",
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
    if len(query.text) > settings.max_query_chars:
        raise InvalidArgumentError(
            f"query is {len(query.text)} characters long; the limit is "
            f"{settings.max_query_chars} (shorten it, or raise "
            "TRIBUNAL_RETRIEVAL__MAX_QUERY_CHARS)",
            field=f"{prefix}query",
        )
    if not 1 <= query.top_k <= settings.max_top_k:
        raise InvalidArgumentError(
            f"top_k is {query.top_k}; it must be between 1 and {settings.max_top_k}",
            field=f"{prefix}top_k",
        )


def check_batch(queries: Sequence[SearchQuery], settings: RetrievalSettings) -> None:
    if not queries:
        raise InvalidArgumentError("searches is empty; send at least one search", field="searches")
    if len(queries) > settings.max_searches_per_request:
        raise ResourceExhaustedError(
            f"{len(queries)} searches in one batch; the limit is "
            f"{settings.max_searches_per_request} (split the batch)",
            field="searches",
        )
    for i, query in enumerate(queries):
        check_query(query, settings, prefix=f"searches[{i}].")
    reranked = sum(1 for query in queries if query.rerank)
    passages = reranked * settings.rerank_head
    if passages > settings.max_rerank_passages_per_request:
        # Reranking is the slow part (an LLM judges every passage): bounded per request so
        # that one caller cannot hold the reranker for minutes.
        most = settings.max_rerank_passages_per_request // settings.rerank_head
        raise ResourceExhaustedError(
            f"{reranked} searches ask for rerank ({passages} passages to rerank); one "
            f"request may rerank at most {settings.max_rerank_passages_per_request} "
            f"(retrieval.max_rerank_passages_per_request): send at most {most} reranked "
            "searches per request",
            field="searches",
        )


def _duplicates(ids: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for item in ids:
        if item in seen:
            repeated[item] = None
        seen.add(item)
    return list(repeated)


def _check_length(text: str, limit: int, setting: str, where: str) -> None:
    if len(text) > limit:
        raise InvalidArgumentError(
            f"{where} has {len(text)} characters; the limit is {limit} "
            f"(retrieval.{setting}): shorten it",
            field=where,
        )


def _check_sizes(entry: KbEntry, settings: RetrievalSettings, where: str) -> None:
    """The retrieval section's limits on one entry (the gRPC layer checks them too;
    ingest from files and Ray Serve callers reach only this)."""
    _check_length(
        entry.question, settings.max_question_chars, "max_question_chars", f"{where}.question"
    )
    _check_phrasings(entry, settings, where)
    _check_length(entry.answer, settings.max_answer_chars, "max_answer_chars", f"{where}.answer")
    if len(entry.chunks) > settings.max_chunks_per_item:
        raise InvalidArgumentError(
            f"{where}.chunks has {len(entry.chunks)} entries; the limit is "
            f"{settings.max_chunks_per_item} (retrieval.max_chunks_per_item): split the entry",
            field=f"{where}.chunks",
        )
    if len(entry.metadata) > settings.max_metadata_per_item:
        raise InvalidArgumentError(
            f"{where}.metadata has {len(entry.metadata)} keys; the limit is "
            f"{settings.max_metadata_per_item} (retrieval.max_metadata_per_item)",
            field=f"{where}.metadata",
        )
    for key, value in entry.metadata.items():
        _check_length(
            value,
            settings.max_metadata_value_chars,
            "max_metadata_value_chars",
            f"{where}.metadata[{key[:40]!r}]",
        )
    for j, chunk in enumerate(entry.chunks):
        _check_length(
            chunk.text, settings.max_chunk_chars, "max_chunk_chars", f"{where}.chunks[{j}].text"
        )
        _check_length(
            chunk.title, settings.max_title_chars, "max_title_chars", f"{where}.chunks[{j}].title"
        )


def _check_phrasings(entry: KbEntry, settings: RetrievalSettings, where: str) -> None:
    """``questions``: within the count limit, each non-empty, within the question length
    limit, none repeating the question or another phrasing; only beside a question."""
    if not entry.questions:
        return
    field = f"{where}.questions"
    if len(entry.questions) > settings.max_questions_per_item:
        raise InvalidArgumentError(
            f"{field} has {len(entry.questions)} phrasings; the limit is "
            f"{settings.max_questions_per_item} (retrieval.max_questions_per_item): keep the "
            "most distinct ones",
            field=field,
        )
    if not entry.question.strip():
        raise InvalidArgumentError(
            f"{field} is set but {where}.question is empty: put the canonical phrasing in "
            "'question' and the others in 'questions'",
            field=f"{where}.question",
        )
    seen = {phrasing_key(entry.question): f"{where}.question"}
    for j, text in enumerate(entry.questions):
        here = f"{field}[{j}]"
        if not text.strip():
            raise InvalidArgumentError(
                f"{here} is empty; drop it or write the phrasing", field=here
            )
        _check_length(text, settings.max_question_chars, "max_question_chars", here)
        key = phrasing_key(text)
        if key in seen:
            raise InvalidArgumentError(
                f"{here} ({text[:40]!r}) repeats {seen[key]} (case and spaces aside); "
                "send each phrasing once",
                field=here,
            )
        seen[key] = here


def _check_searchable(entry: KbEntry, where: str) -> None:
    """Every text the indexes take in has BM25 terms: a unit without any (only stopwords,
    symbols, emoji, NUL characters) could never be found by keywords."""
    units = entry.search_units()
    if not units:
        raise InvalidArgumentError(
            f"entry {entry.id!r} has no question, answer or chunk text to search; "
            "fill at least one",
            field=where,
        )
    chunk_index = {chunk.id: j for j, chunk in enumerate(entry.chunks)}
    for (unit_id, text), terms in zip(units, searchable_terms([t for _, t in units]), strict=True):
        if terms:
            continue
        phrasing = phrasing_index(unit_id)
        if phrasing == 0:
            field = f"{where}.question"
        elif phrasing is not None:
            field = f"{where}.questions[{phrasing - 1}]"
        elif unit_id == ANSWER_UNIT_ID:
            field = f"{where}.answer"
        else:
            field = f"{where}.chunks[{chunk_index[unit_id]}].text"
        raise InvalidArgumentError(
            f"{field} ({text[:40]!r}) has no searchable words: only stopwords, symbols, "
            "emoji or control characters, which keyword search drops; write it in words "
            "of two or more letters or digits",
            field=field,
        )


def check_entry(entry: KbEntry, settings: RetrievalSettings, where: str) -> None:
    """One entry: id present, within the size limits, chunk ids unique, searchable
    (``where`` names it in messages: ``entries[3]``, ``kb.jsonl:12``)."""
    if not entry.id.strip():
        raise InvalidArgumentError(
            f"{where}.id is empty; every entry needs a non-empty id", field=f"{where}.id"
        )
    _check_sizes(entry, settings, where)
    chunk_ids = [chunk.id for chunk in entry.chunks]
    for j, chunk_id in enumerate(chunk_ids):
        reserved = chunk_id == ANSWER_UNIT_ID or phrasing_index(chunk_id) is not None
        if not chunk_id.strip() or reserved:
            raise InvalidArgumentError(
                f"{where}.chunks[{j}].id is {chunk_id!r}; chunk ids must be non-empty "
                f"and not {QUESTION_UNIT_ID!r}, '{QUESTION_UNIT_ID}:<n>' or "
                f"{ANSWER_UNIT_ID!r}",
                field=f"{where}.chunks[{j}].id",
            )
    repeated_chunks = _duplicates(chunk_ids)
    if repeated_chunks:
        raise InvalidArgumentError(
            f"entry {entry.id!r} repeats chunk id(s) {repeated_chunks}; "
            "chunk ids must be unique within an entry",
            field=f"{where}.chunks",
        )
    _check_searchable(entry, where)


def check_entries(entries: Sequence[KbEntry], settings: RetrievalSettings) -> None:
    """Non-empty, within the size limits, ids present and unique, each entry searchable
    (every indexed text has keyword-search terms)."""
    if not entries:
        raise InvalidArgumentError("entries is empty; send at least one entry", field="entries")
    if len(entries) > settings.max_entries_per_request:
        raise ResourceExhaustedError(
            f"{len(entries)} entries in one upsert; the limit is "
            f"{settings.max_entries_per_request} (split the request)",
            field="entries",
        )
    for i, entry in enumerate(entries):
        check_entry(entry, settings, f"entries[{i}]")
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
