"""A COVID FAQ knowledge base whose entries carry real supporting documents.

The FAQ's answers are their own source; to exercise verification, each entry
here answers with the *leading sentences* of the FAQ answer (at most
``answer_chars``) and keeps the *whole* FAQ answer as its supporting document
(chunked, titled with the question): its chunks must entail its answer, claim by
claim. An entry whose FAQ answer is one sentence has no document beyond its
answer (NO_EVIDENCE). ``mismatched`` entries get another entry's document instead:
their verification fails, so they are kept but never served.

The scenarios verify with the model-free lexical checker
(:data:`LEXICAL_CHECKER`: the cascade's ``lexical`` fast stage, one stage), so
building the KB costs no model time; the real cascade is what the service uses
by default.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tribunal.core import split_sentences
from tribunal.kb import KbEntry, chunk_text, entry_from_record

__all__ = ["LEXICAL_CHECKER", "verified_faq_entries"]

LEXICAL_CHECKER: dict[str, Any] = {"fast_backend": "lexical", "two_stage": False}
"""``entailment`` settings of the scenarios' checker (give them to every process)."""


def _leading(answer: str, answer_chars: int) -> str:
    sentences = split_sentences(answer)
    kept = [sentences[0]]
    for sentence in sentences[1:]:
        if len(" ".join([*kept, sentence])) > answer_chars:
            break
        kept.append(sentence)
    return " ".join(kept)


def verified_faq_entries(
    faq: Path,
    *,
    chunk_chars: int,
    answer_chars: int = 300,
    mismatched: float = 0.0,
    seed: int = 0,
) -> list[KbEntry]:
    """The FAQ (``faq_kb_en.jsonl``) as entries with supporting documents.

    Args:
        chunk_chars: Chunk size of the supporting documents.
        answer_chars: Longest answer kept (at least one sentence).
        mismatched: Share of entries (seeded) given another entry's document.
    """
    records = [json.loads(line) for line in faq.read_text().splitlines() if line.strip()]
    by_id: dict[str, tuple[dict[str, Any], KbEntry]] = {}
    for record in records:
        base = entry_from_record(record, record_format="faq", max_chars=chunk_chars)
        by_id[base.id] = (record, base)  # the last of a repeated question wins
    rng = random.Random(seed)
    ids = list(by_id)
    entries = []
    for entry_id in ids:
        record, base = by_id[entry_id]
        source = base
        if mismatched and rng.random() < mismatched:
            source = by_id[rng.choice([i for i in ids if i != entry_id])][1]
        document = chunk_text(
            source.answer, title=source.question, max_chars=chunk_chars, id_prefix="doc-"
        )
        metadata = dict(base.metadata)
        if source is not base:
            metadata["document_of"] = source.id
        entries.append(
            KbEntry(
                id=entry_id,
                question=base.question,
                answer=_leading(base.answer, answer_chars),
                metadata=metadata,
                chunks=tuple(document),
            )
        )
    return entries
