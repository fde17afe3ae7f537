"""The labelled matching set: (query, KB candidate, label) items with cached judge outputs.

Built by ``tribunal ensemble build-dataset`` into a folder:

- ``items.jsonl``: one item a line, ``{"id", "source", "group", "query", "candidate":
  {entry record}, "label", "retrieval": {"score", "rank", "dense_score", ...}}``,
  in a seeded shuffled order (so a partial judging run is a random subset);
- ``embeddings.npy``: the profile embedder's query vectors, rows in item order;
- ``judgments/<judge>.jsonl``: one verdict per (judge, item), appended as it comes
  (a rerun skips what is there; training never re-queries a model);
- ``manifest.json``: what was built from what (sources, sizes, seed, embedder).

Sources:

``covid-qa``
    The COVID FAQ (``faq_kb_en.jsonl``) is the verified KB (a collection searched by
    :class:`~tribunal.retrieval.KnowledgeBase`, hybrid dense+BM25). Each distinct query
    of ``question_similarity_en.jsonl`` (its ``question_2``) is searched and its top-1
    entry judged; label 1 iff that entry is the FAQ entry the query paraphrases (the
    ``question_1`` of its label-1 row; an entry with the same question text counts).
``covid-qa-heldout``
    RAL2M's negatives are topically related queries the KB cannot answer. For a seeded
    share of the queries the paraphrased entry is taken out of the KB: the candidate is
    the top-1 of the remaining entries (RRF recomputed on the shifted ranks, exactly as
    a search of the smaller KB would fuse them); label 1 only if it has the same question.
``stsb``
    STS-B dev pairs, score >= 4 a match and <= 2 not, a seeded balanced sample:
    sentence 1 is the query, sentence 2 both the candidate's question and answer (an
    STS-B pair has no answer); no chunk and no retrieval signals.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, NotFoundError
from ..retrieval import KbEntry, entry_from_record, entry_to_record

if TYPE_CHECKING:
    from ..core import Settings
    from ._judges import JudgePanel

__all__ = [
    "MatchItem",
    "MatchingData",
    "build_items",
    "judge_items",
    "load_matching_data",
    "read_items",
]

SOURCES = ("covid-qa", "covid-qa-heldout", "stsb")


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


def _normalise(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def read_items(folder: Path) -> list[MatchItem]:
    """The items of a built dataset, in their (shuffled) file order."""
    path = folder / "items.jsonl"
    if not path.is_file():
        raise NotFoundError(
            f"{path} does not exist; build it with `tribunal ensemble build-dataset`",
            field="dataset",
        )
    return [MatchItem.from_record(r) for r in _read_jsonl(path)]


def _covid_items(
    settings: Settings, data: Path, heldout_share: float, seed: int, workdir: Path
) -> list[MatchItem]:
    from ..retrieval import KnowledgeBase, SearchQuery, load_profile_embedder, read_entries

    folder = data / "covid-qa"
    entries = read_entries(
        folder / "faq_kb_en.jsonl",
        record_format="faq",
        max_chars=settings.retrieval.chunk_max_chars,
    )
    unique: dict[str, KbEntry] = {}
    for entry in entries:
        unique[entry.id] = entry
    kb = KnowledgeBase(workdir / "retrieval", load_profile_embedder(settings), settings.retrieval)
    try:
        kb.upsert("faq", list(unique.values()), create=True)
        by_answer = {_normalise(e.answer)[:300]: e for e in unique.values()}
        source_of: dict[str, KbEntry] = {}
        for row in _read_jsonl(folder / "question_similarity_en.jsonl"):
            if int(row["label"]) != 1:
                continue
            found = by_answer.get(_normalise(row["q1_faq_answer"])[:300])
            if found is not None and _normalise(found.question) == _normalise(row["question_1"]):
                source_of.setdefault(row["question_2"], found)
        queries = sorted(
            {r["question_2"] for r in _read_jsonl(folder / "question_similarity_en.jsonl")}
        )
        heldout = set(random.Random(seed).sample(queries, round(heldout_share * len(queries))))
        step = settings.retrieval.batch_max_searches
        results = []
        for start in range(0, len(queries), step):
            part = queries[start : start + step]
            results += kb.search_batch([SearchQuery("faq", q, top_k=20) for q in part])
        rrf_k = settings.retrieval.rrf_k
        items: list[MatchItem] = []
        for query, result in zip(queries, results, strict=True):
            source = source_of.get(query)
            same = _normalise(source.question) if source is not None else None
            group = "q-" + hashlib.sha256(query.encode()).hexdigest()[:12]
            top = result.hits[0]
            items.append(
                MatchItem(
                    id=f"covid-{group[2:]}",
                    source="covid-qa",
                    group=group,
                    query=query,
                    candidate=top.entry,
                    label=int(same is not None and _normalise(top.entry.question) == same),
                    retrieval=_retrieval_fields(top.score, 1, top.dense_score, top.sparse_score),
                )
            )
            if query not in heldout or source is None:
                continue
            removed = next((h for h in result.hits if h.entry.id == source.id), None)
            rescored = []
            for hit in result.hits:
                if hit.entry.id == source.id:
                    continue
                score = 0.0
                if hit.dense_rank is not None:
                    shift = removed is not None and (removed.dense_rank or 10**9) < hit.dense_rank
                    score += 1.0 / (rrf_k + hit.dense_rank - shift)
                if hit.sparse_rank is not None:
                    shift = removed is not None and (removed.sparse_rank or 10**9) < hit.sparse_rank
                    score += 1.0 / (rrf_k + hit.sparse_rank - shift)
                rescored.append((score, hit))
            score, best = max(rescored, key=lambda pair: pair[0])
            items.append(
                MatchItem(
                    id=f"covid-heldout-{group[2:]}",
                    source="covid-qa-heldout",
                    group=group,
                    query=query,
                    candidate=best.entry,
                    label=int(_normalise(best.entry.question) == same),
                    retrieval=_retrieval_fields(score, 1, best.dense_score, best.sparse_score),
                )
            )
        return items
    finally:
        kb.close()


def _retrieval_fields(
    score: float, rank: int, dense: float | None, sparse: float | None
) -> dict[str, float]:
    out = {"score": float(score), "rank": float(rank)}
    if dense is not None:
        out["dense_score"] = float(dense)
    if sparse is not None:
        out["sparse_score"] = float(sparse)
    return out


def _stsb_items(data: Path, per_label: int, seed: int) -> list[MatchItem]:
    rows = list(_read_jsonl(data / "stsb" / "dev.jsonl"))
    matches = [r for r in rows if float(r["score"]) >= 4.0]
    others = [r for r in rows if float(r["score"]) <= 2.0]
    rng = random.Random(seed)
    chosen = rng.sample(matches, min(per_label, len(matches))) + rng.sample(
        others, min(per_label, len(others))
    )
    items = []
    for row in chosen:
        key = f"{row['genre']}-{row['source']}-{row['year']}-{row['sid']}"
        sentence = str(row["sentence2"])
        items.append(
            MatchItem(
                id=f"stsb-{key}",
                source="stsb",
                group=f"stsb-{key}",
                query=str(row["sentence1"]),
                candidate=KbEntry(id=f"stsb-{key}", question=sentence, answer=sentence),
                label=int(float(row["score"]) >= 4.0),
            )
        )
    return items


def build_items(
    settings: Settings,
    data: Path,
    out: Path,
    *,
    seed: int = 13,
    heldout_share: float = 0.5,
    stsb_per_label: int = 150,
) -> list[MatchItem]:
    """Write ``items.jsonl``, ``embeddings.npy`` and ``manifest.json`` (kept if present).

    Raises:
        NotFoundError: a source file is missing.
    """
    from ..retrieval import load_profile_embedder

    if (out / "items.jsonl").is_file():
        return read_items(out)
    for path in (data / "covid-qa" / "faq_kb_en.jsonl", data / "stsb" / "dev.jsonl"):
        if not path.is_file():
            raise NotFoundError(f"{path} does not exist (pass --data)", field="data")
    out.mkdir(parents=True, exist_ok=True)
    items = _covid_items(settings, data, heldout_share, seed, out / "work")
    items += _stsb_items(data, stsb_per_label, seed)
    random.Random(seed).shuffle(items)
    embedder = load_profile_embedder(settings)
    vectors = embedder.embed([item.query for item in items])
    np.save(out / "embeddings.npy", vectors.astype(np.float32))
    tmp = out / "items.jsonl.tmp"
    tmp.write_text("".join(json.dumps(i.to_record()) + "\n" for i in items), encoding="utf-8")
    counts: dict[str, dict[str, int]] = {}
    for item in items:
        counts.setdefault(item.source, {"items": 0, "positives": 0})
        counts[item.source]["items"] += 1
        counts[item.source]["positives"] += item.label
    manifest = {
        "seed": seed,
        "heldout_share": heldout_share,
        "stsb_per_label": stsb_per_label,
        "embedder": embedder.name,
        "dimension": embedder.dimension,
        "retrieval": f"KnowledgeBase hybrid (dense + BM25, RRF k={settings.retrieval.rrf_k})",
        "sources": counts,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out / "items.jsonl")  # last: a dataset with items.jsonl is complete
    return items


def _judgment_file(out: Path, judge: str) -> Path:
    return out / "judgments" / (judge.replace("/", "__") + ".jsonl")


def _done(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    return {row["id"]: row for row in _read_jsonl(path)}


def judge_items(
    panel: JudgePanel,
    items: Sequence[MatchItem],
    out: Path,
    *,
    chunk_items: int = 1,
    progress: bool = True,
) -> None:
    """Judge every item with every judge of ``panel``, resumable.

    Items go in ``items`` order (the dataset's seeded shuffle), ``chunk_items`` at a time;
    each group is judged by every model in turn (each model keeps its own prefix cache),
    so the models advance together and a stopped run leaves a random subset judged by
    all. Each verdict is appended to ``judgments/<judge>.jsonl`` as soon as its group is
    done; a rerun skips what is there.
    """
    from tqdm import tqdm

    (out / "judgments").mkdir(parents=True, exist_ok=True)
    models: dict[str, list[Any]] = {}
    for judge in panel.judges:
        models.setdefault(judge.spec.model_key, []).append(judge)
    files = {j.name: _judgment_file(out, j.name) for j in panel.judges}
    done = {name: _done(path) for name, path in files.items()}
    todo = [i for i in items if any(i.id not in done[j.name] for j in panel.judges)]
    handles = {name: path.open("a", encoding="utf-8") for name, path in files.items()}
    try:
        with tqdm(
            total=len(items),
            initial=len(items) - len(todo),
            desc="+".join(models),
            unit="item",
            disable=not progress,
        ) as bar:
            for start in range(0, len(todo), chunk_items):
                group = todo[start : start + chunk_items]
                for judges in models.values():
                    _judge_group(panel, judges, group, done, handles)
                for handle in handles.values():
                    handle.flush()
                bar.update(len(group))
    finally:
        for handle in handles.values():
            handle.close()


def _judge_group(
    panel: JudgePanel,
    judges: list[Any],
    group: list[MatchItem],
    done: dict[str, dict[str, dict[str, Any]]],
    handles: dict[str, Any],
) -> None:
    """One model's judges on one group of items (prompts shared between judges run once)."""
    engine = judges[0].engine
    unique: dict[Any, int] = {}
    where = []
    for item in group:
        for judge in judges:
            if item.id in done[judge.name]:
                continue
            prompt, prompt_id = panel.prompts_for(judge, item.query, item.candidate)
            where.append((item, judge, prompt_id, unique.setdefault(prompt, len(unique))))
    if not unique:
        return
    result = engine.judge(list(unique))
    share = result.usage.seconds / len(unique)
    for item, judge, prompt_id, index in where:
        row = {
            "id": item.id,
            "judge": judge.name,
            "model": engine.model_name,
            "prompt": prompt_id,
            "p_yes": result.p_yes[index],
            "yes_no_mass": result.yes_no_mass[index],
            "seconds": share,
        }
        done[judge.name][item.id] = row
        handles[judge.name].write(json.dumps(row) + "\n")


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
        path = _judgment_file(folder, name)
        if not path.is_file():
            raise FailedPreconditionError(
                f"judge {name!r} has no judgments in {folder}", field="judges"
            )
        verdicts[name] = _done(path)
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
