"""A size limit on every string, bytes and repeated field of every Tribunal request.

One table, :data:`REQUEST_LIMITS`, maps each field of each request message (and of the
messages they contain) to the setting that bounds it: ``max_<field>_chars`` for the
length of a text, ``max_<things>_per_request`` / ``_per_item`` for the entries of a
repeated field or map, ``server.max_id_chars`` for ids, names and map keys. A repeated
string field has two rows: ``"answers"`` (how many) and ``"answers[]"`` (how long each).
The gRPC runtime checks every request against it before any work starts; a unit test
walks the protos' descriptors and fails when a field has no row.

Too long a text, or too many entries in one item (``_per_item``), is INVALID_ARGUMENT;
too big a batch (``_per_request``) RESOURCE_EXHAUSTED. Each names the field
(``entries[3].chunks[0].text``), the limit and the setting that raises it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .._errors import InvalidArgumentError, ResourceExhaustedError

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["REQUEST_LIMITS", "RequestLimits"]

ID = "server.max_id_chars"

REQUEST_LIMITS: dict[str, dict[str, str]] = {
    # -- common.proto -------------------------------------------------------------------
    "tribunal.v1.KbEntry": {
        "id": ID,
        "question": "retrieval.max_question_chars",
        "questions": "retrieval.max_questions_per_item",
        "questions[]": "retrieval.max_question_chars",
        "answer": "retrieval.max_answer_chars",
        "metadata": "retrieval.max_metadata_per_item",
        "chunks": "retrieval.max_chunks_per_item",
    },
    "tribunal.v1.KbEntry.MetadataEntry": {
        "key": ID,
        "value": "retrieval.max_metadata_value_chars",
    },
    "tribunal.v1.Chunk": {
        "id": ID,
        "text": "retrieval.max_chunk_chars",
        "title": "retrieval.max_title_chars",
    },
    # -- retrieval.proto ----------------------------------------------------------------
    "tribunal.v1.SearchRequest": {
        "collection": ID,
        "query": "retrieval.max_query_chars",
        "request_id": ID,
    },
    "tribunal.v1.BatchSearchRequest": {"searches": "retrieval.max_searches_per_request"},
    "tribunal.v1.UpsertRequest": {
        "collection": ID,
        "entries": "retrieval.max_entries_per_request",
    },
    "tribunal.v1.DeleteRequest": {
        "collection": ID,
        "ids": "retrieval.max_entries_per_request",
        "ids[]": ID,
    },
    "tribunal.v1.StatsRequest": {"collection": ID},
    "tribunal.v1.SignRequest": {
        "collection": ID,
        "records": "retrieval.max_signed_records_per_request",
    },
    "tribunal.v1.SignedRecord": {
        "record": "retrieval.max_signed_record_bytes",
        "key_id": ID,
        "signature": ID,
    },
    # -- entailment.proto ---------------------------------------------------------------
    "tribunal.v1.CheckRequest": {"pairs": "entailment.max_pairs_per_request"},
    "tribunal.v1.EntailmentPair": {
        "premise": "entailment.max_premise_chars",
        "hypothesis": "entailment.max_hypothesis_chars",
        "quote": "entailment.max_quote_chars",
    },
    "tribunal.v1.CheckQuotesRequest": {"quotes": "entailment.max_quotes_per_request"},
    "tribunal.v1.QuoteQuery": {
        "premise": "entailment.max_premise_chars",
        "quote": "entailment.max_quote_chars",
    },
    # -- ensemble.proto -----------------------------------------------------------------
    "tribunal.v1.MatchRequest": {"query": "ensemble.max_query_chars", "item_id": ID},
    "tribunal.v1.BatchMatchRequest": {
        "items": "ensemble.max_items_per_request",
        "request_id": ID,
    },
    "tribunal.v1.JudgeRelevanceRequest": {
        "query": "ensemble.max_query_chars",
        "chunk": "ensemble.max_chunk_chars",
        "answers": "ensemble.max_answers_per_item",
        "answers[]": "ensemble.max_answer_chars",
        "item_id": ID,
    },
    # -- confidence.proto ---------------------------------------------------------------
    "tribunal.v1.ScoreRequest": {
        "item_id": ID,
        "kb_content_version": ID,
        "matcher_version": ID,
        "retrieval_model": ID,
    },
    "tribunal.v1.Signals": {
        "judge_p_yes": "confidence.max_signals_per_item",
        "extra": "confidence.max_signals_per_item",
    },
    "tribunal.v1.Signals.JudgePYesEntry": {"key": ID},
    "tribunal.v1.Signals.ExtraEntry": {"key": ID},
    "tribunal.v1.BatchScoreRequest": {
        "items": "confidence.max_items_per_request",
        "request_id": ID,
    },
    # -- debate.proto -------------------------------------------------------------------
    "tribunal.v1.AssessRequest": {
        "query": "debate.max_query_chars",
        "chunk": "debate.max_chunk_chars",
        "answers": "debate.max_answers_per_item",
        "answers[]": "debate.max_answer_chars",
        "item_id": ID,
    },
    "tribunal.v1.BatchAssessRequest": {"items": "debate.max_items_per_request"},
    # -- gateway.proto ------------------------------------------------------------------
    "tribunal.v1.AnswerRequest": {
        "query": "gateway.max_query_chars",
        "collection": ID,
        "request_id": ID,
    },
    "tribunal.v1.LabelRequest": {
        "query": "gateway.max_query_chars",
        "chunk": "gateway.max_chunk_chars",
        "answers": "gateway.max_answers_per_item",
        "answers[]": "gateway.max_answer_chars",
        "item_id": ID,
    },
    "tribunal.v1.BatchLabelRequest": {"items": "gateway.max_items_per_request"},
}
"""Message full name -> field name (``name[]``: each element) -> bounding setting."""

_TEXT_TYPES = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)


def _is_repeated(field: FieldDescriptor) -> bool:
    # ``is_repeated`` replaces the deprecated ``label`` in newer protobuf releases.
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED)


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


class RequestLimits:
    """:data:`REQUEST_LIMITS` resolved against one :class:`Settings`.

    Args:
        limits: Message name -> field -> (setting name, its value).
    """

    def __init__(self, limits: Mapping[str, Mapping[str, tuple[str, int]]]) -> None:
        self._limits = {name: dict(fields) for name, fields in limits.items()}

    @classmethod
    def from_settings(cls, settings: Settings) -> RequestLimits:
        return cls(
            {
                message: {name: (path, _setting(settings, path)) for name, path in fields.items()}
                for message, fields in REQUEST_LIMITS.items()
            }
        )

    def limit(self, message: str, field: str) -> tuple[str, int] | None:
        """(setting, value) bounding ``field`` of ``message``; None when unbounded."""
        return self._limits.get(message, {}).get(field)

    def check(self, message: Message, prefix: str = "") -> None:
        """Raise on the first field over its limit (fields in declaration order)."""
        table = self._limits.get(message.DESCRIPTOR.full_name, {})
        for field, value in message.ListFields():
            where = f"{prefix}{field.name}"
            if _is_repeated(field):
                self._check_count(table.get(field.name), len(value), where)
                if _is_map(field):
                    self._check_map(field, value, where)
                elif field.type == FieldDescriptor.TYPE_MESSAGE:
                    for index, item in enumerate(value):
                        self.check(item, f"{where}[{index}].")
                elif field.type in _TEXT_TYPES:
                    bound = table.get(f"{field.name}[]")
                    for index, item in enumerate(value):
                        _check_text(bound, item, f"{where}[{index}]")
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                self.check(value, f"{where}.")
            elif field.type in _TEXT_TYPES:
                _check_text(table.get(field.name), value, where)

    def _check_count(self, bound: tuple[str, int] | None, count: int, where: str) -> None:
        if bound is None or count <= bound[1]:
            return
        setting, limit = bound
        if setting.endswith("_per_request"):  # a batch too big: the caller splits it
            raise ResourceExhaustedError(
                f"{where} has {count} entries; the limit is {limit} ({setting}): split the request",
                field=where,
            )
        raise InvalidArgumentError(  # one item carries too much
            f"{where} has {count} entries; the limit is {limit} ({setting})", field=where
        )

    def _check_map(self, field: FieldDescriptor, value: Any, where: str) -> None:
        entry = field.message_type
        assert entry is not None  # a map field's entries are messages
        table = self._limits.get(entry.full_name, {})
        value_field = entry.fields_by_name["value"]
        for key, item in value.items():
            if isinstance(key, str):
                _check_text(table.get("key"), key, f"{where} key {key[:40]!r}")
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                self.check(item, f"{where}[{key!r}].")
            elif value_field.type in _TEXT_TYPES:
                _check_text(table.get("value"), item, f"{where}[{key!r}]")


def _check_text(bound: tuple[str, int] | None, text: str | bytes, where: str) -> None:
    if bound is not None and len(text) > bound[1]:
        setting, limit = bound
        unit = "bytes" if isinstance(text, bytes) else "characters"
        raise InvalidArgumentError(
            f"{where} has {len(text)} {unit}; the limit is {limit} ({setting}): shorten it",
            field=where,
        )


def _setting(settings: Settings, path: str) -> int:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{path} is not an integer limit")
    return value
