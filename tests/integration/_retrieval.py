"""Shared pieces of the retrieval tests: the real MiniLM once per process, a small KB.

``python -m tests.integration._retrieval ROOT`` writes to a collection under
ROOT, prints ``ACK`` once the writes are acknowledged, and then waits to be
killed (the restart test kills it with SIGKILL: no close, no snapshot).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tribunal.core import RetrievalSettings, load_settings
from tribunal.embedding import load_profile_embedder
from tribunal.embedding._embedding import SentenceTransformerEmbedder, WrappingEmbedder
from tribunal.kb import Chunk, KbEntry
from tribunal.retrieval import KnowledgeBase

COLLECTION = "faq"

ENTRIES = [
    KbEntry(
        "spread",
        "How does the coronavirus spread?",
        "Mainly through respiratory droplets between people in close contact.",
        {"source": "test"},
        (Chunk("c0", "Droplets from coughs and sneezes carry the virus.", "Transmission"),),
    ),
    KbEntry(
        "masks",
        "Should I wear a face mask in public?",
        "Wear a mask where distancing is not possible.",
        {"source": "test"},
    ),
    KbEntry(
        "incubation",
        "How long is the incubation period?",
        "Between 2 and 14 days after exposure.",
    ),
    KbEntry(
        "pets",
        "Can my dog or cat catch COVID-19?",
        "A few animals have been infected; the risk from pets is low.",
    ),
    KbEntry(
        "handwashing",
        "How long should I wash my hands?",
        "Wash with soap and water for at least 20 seconds.",
    ),
]


@functools.cache
def minilm() -> SentenceTransformerEmbedder:
    """The tiny profile's embedder (all-MiniLM-L6-v2), loaded once per process."""
    return load_profile_embedder(load_settings("tiny"))


class CountingEmbedder(WrappingEmbedder):
    """The real embedder, counting the texts it embeds (to prove reloads do not embed) and
    noting which texts each call asked for."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.texts = 0
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        self.texts += len(texts)
        self.calls.append(list(texts))
        return self.inner.embed(texts, progress=progress)


def open_kb(root: Path, **settings: object) -> KnowledgeBase:
    return KnowledgeBase(root, minilm(), RetrievalSettings(**settings))  # type: ignore[arg-type]


if __name__ == "__main__":
    kb = open_kb(Path(sys.argv[1]), snapshot_every_changes=1_000_000)
    kb.upsert(COLLECTION, ENTRIES, create=True)
    kb.delete(COLLECTION, ["masks"])
    kb.upsert(COLLECTION, [KbEntry("masks-v2", "Do masks protect me?", "Yes, partly.")])
    print("ACK", flush=True)
    time.sleep(600)
