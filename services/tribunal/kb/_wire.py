"""Entries to and from their ``tribunal.v1`` message, shared by every service's adapter."""

from __future__ import annotations

from ..v1 import common_pb2
from ._entry import Chunk, KbEntry

__all__ = ["entry_from_proto", "entry_to_proto"]


def entry_from_proto(message: common_pb2.KbEntry) -> KbEntry:
    return KbEntry(
        id=message.id,
        question=message.question,
        answer=message.answer,
        metadata=dict(message.metadata),
        chunks=tuple(Chunk(c.id, c.text, c.title) for c in message.chunks),
    )


def entry_to_proto(entry: KbEntry) -> common_pb2.KbEntry:
    return common_pb2.KbEntry(
        id=entry.id,
        question=entry.question,
        answer=entry.answer,
        metadata=dict(entry.metadata),
        chunks=[common_pb2.Chunk(id=c.id, text=c.text, title=c.title) for c in entry.chunks],
    )
