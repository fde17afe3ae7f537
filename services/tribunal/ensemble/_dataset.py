"""The labelled matching set the aggregators train on: its folder format and reader.

A matching set is a folder (the lab's ``tribunal-lab dataset matching`` builds one from
COVID-QA and STS-B; any labelled set in this format trains the same way):

- ``items.jsonl``: one item a line, ``{"id", "source", "group", "query", "candidate":
  {entry record}, "label", "retrieval": {"score", "rank", "dense_score", ...}}``,
  in a seeded shuffled order (so a partial judging run is a random subset);
- ``embeddings.npy``: the profile embedder's query vectors, rows in item order;
- ``judgments/<judge>.jsonl``: one verdict per (judge, item) with its ``p_yes``
  (training never re-queries a model);
- ``manifest.json``: what was built from what (sources, sizes, seed, embedder).

Items of one ``group`` share their query: a split never separates them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, NotFoundError, jsonl_rows
from ..kb import KbEntry, entry_from_record, entry_to_record

__all__ = [
    "MatchItem",
    "MatchingData",
    "judgment_path",
    "load_matching_data",
    "read_items",
    "read_judgments",
]


@dataclass(frozen=True)
class MatchItem:
    """One labelled (query, candidate) pair."""

    id: str
    source: str
    group: str
    """Items of one group share their query: a split never separates them."""
    query: str
    candidate: KbEntry
    label: int
    retrieval: dict[str, float] = field(default_factory=dict)
    """``score`` (fused RRF), ``rank``, ``dense_score``, ``sparse_score`` when retrieved."""

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "group": self.group,
            "query": self.query,
            "candidate": entry_to_record(self.candidate),
            "label": self.label,
            "retrieval": self.retrieval,
        }

    def retrieval_signals(self) -> dict[str, float | int]:
        """The retrieval scores as confidence ``Signals`` fields (what the gateway sends for
        a retrieved candidate); empty for a pair that was never retrieved."""
        signals: dict[str, float | int] = {}
        if "score" in self.retrieval:
            signals["retrieval_score"] = self.retrieval["score"]
            signals["retrieval_rank"] = int(self.retrieval["rank"])
        for key in ("dense_score", "sparse_score"):
            if key in self.retrieval:
                signals[key] = self.retrieval[key]
        return signals

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> MatchItem:
        return cls(
            id=str(record["id"]),
            source=str(record["source"]),
            group=str(record["group"]),
            query=str(record["query"]),
            candidate=entry_from_record(record["candidate"], record_format="entries", max_chars=0),
            label=int(record["label"]),
            retrieval={k: float(v) for k, v in (record.get("retrieval") or {}).items()},
        )


def read_items(folder: Path) -> list[MatchItem]:
    """The items of a built dataset, in their (shuffled) file order."""
    path = folder / "items.jsonl"
    if not path.is_file():
        raise NotFoundError(
            f"{path} does not exist: give a matching set folder (items.jsonl, "
            "embeddings.npy, judgments/)",
            field="dataset",
        )
    return [MatchItem.from_record(row.value) for row in jsonl_rows(path, field="dataset")]


def judgment_path(folder: Path, judge: str) -> Path:
    """The verdicts file of ``judge`` (``model_key/prompt``) in a matching set folder."""
    return folder / "judgments" / (judge.replace("/", "__") + ".jsonl")


def read_judgments(path: Path) -> dict[str, dict[str, Any]]:
    """A verdicts file by item id (empty when the file does not exist yet)."""
    if not path.is_file():
        return {}
    return {row.value["id"]: row.value for row in jsonl_rows(path, field="dataset")}


@dataclass(frozen=True)
class MatchingData:
    """The complete items of a dataset as arrays: what the aggregators train on."""

    items: tuple[MatchItem, ...]
    judges: tuple[str, ...]
    p_yes: NDArray[np.float32]
    """(items, judges) P(yes)."""
    embeddings: NDArray[np.float32]
    """(items, dimension) query vectors."""
    labels: NDArray[np.int64]
    sha256: str
    """Hash of the items and judge outputs used (recorded in artifacts)."""
    skipped: int = 0
    """Items left out because some judge had not judged them yet."""

    def __len__(self) -> int:
        return len(self.items)

    def subset(self, index: NDArray[np.int64]) -> MatchingData:
        return MatchingData(
            tuple(self.items[i] for i in index),
            self.judges,
            self.p_yes[index],
            self.embeddings[index],
            self.labels[index],
            self.sha256,
        )

    def with_judges(self, names: Sequence[str]) -> MatchingData:
        """Only these judge columns, in this order."""
        columns = [self.judges.index(n) for n in names]
        return MatchingData(
            self.items,
            tuple(names),
            self.p_yes[:, columns],
            self.embeddings,
            self.labels,
            self.sha256,
            self.skipped,
        )


def load_matching_data(folder: Path, judges: Sequence[str] | None = None) -> MatchingData:
    """Items judged by every judge (all judges with a judgment file when ``judges`` is None).

    Raises:
        NotFoundError: no dataset, or no judgments yet.
        FailedPreconditionError: a named judge has no judgments.
    """
    items = read_items(folder)
    embeddings = np.load(folder / "embeddings.npy")
    if embeddings.shape[0] != len(items):
        raise FailedPreconditionError(
            f"{folder}/embeddings.npy has {embeddings.shape[0]} rows for {len(items)} items",
            field="dataset",
        )
    if judges is None:
        files = (folder / "judgments").glob("*.jsonl")
        names = sorted(p.stem.replace("__", "/") for p in files)
    else:
        names = list(judges)
    if not names:
        raise NotFoundError(f"{folder} has no judgments yet", field="dataset")
    verdicts = {}
    for name in names:
        path = judgment_path(folder, name)
        if not path.is_file():
            raise FailedPreconditionError(
                f"judge {name!r} has no judgments in {folder}", field="judges"
            )
        verdicts[name] = read_judgments(path)
    keep = [i for i, item in enumerate(items) if all(item.id in verdicts[n] for n in names)]
    if not keep:
        raise FailedPreconditionError(
            f"no item of {folder} is judged by all of {names} yet", field="dataset"
        )
    chosen = [items[i] for i in keep]
    p_yes = np.array([[verdicts[n][it.id]["p_yes"] for n in names] for it in chosen], np.float32)
    digest = hashlib.sha256()
    for item, row in zip(chosen, p_yes, strict=True):
        digest.update(f"{item.id}\t{item.label}\t".encode())
        digest.update(row.astype(np.float32).tobytes())
    return MatchingData(
        tuple(chosen),
        tuple(names),
        p_yes,
        embeddings[keep].astype(np.float32),
        np.array([it.label for it in chosen], dtype=np.int64),
        digest.hexdigest(),
        skipped=len(items) - len(chosen),
    )
