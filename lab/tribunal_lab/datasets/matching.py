"""Builds the labelled matching set ``tribunal ensemble train`` reads.

The folder format is the product's (:mod:`tribunal.ensemble`, ``load_matching_data``);
this module fills it from the development data and has every judge judge every item:

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

Verdicts are appended to ``judgments/<judge>.jsonl`` as they come: a rerun skips what
is there.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tribunal.core import NotFoundError
from tribunal.ensemble import MatchItem, judgment_path, read_items, read_judgments
from tribunal.kb import KbEntry

from .._io import read_jsonl

if TYPE_CHECKING:
    from tribunal.core import Settings
    from tribunal.ensemble import JudgePanel

__all__ = ["SOURCES", "build_items", "judge_items"]

SOURCES = ("covid-qa", "covid-qa-heldout", "stsb")
"""The item sources of the matching set, in build order."""


def _normalise(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def _covid_items(
    settings: Settings, data: Path, heldout_share: float, seed: int, workdir: Path
) -> list[MatchItem]:
    from tribunal.embedding import load_profile_embedder
    from tribunal.kb import read_entries
    from tribunal.retrieval import KnowledgeBase, SearchQuery

    folder = data / "covid-qa"
    entries = read_entries(
        folder / "faq_kb_en.jsonl",
        record_format="faq",
        max_chars=settings.retrieval.chunk_size_chars,
    )
    unique: dict[str, KbEntry] = {}
    for entry in entries:
        unique[entry.id] = entry
    kb = KnowledgeBase(workdir / "retrieval", load_profile_embedder(settings), settings.retrieval)
    try:
        kb.upsert("faq", list(unique.values()), create=True)
        by_answer = {_normalise(e.answer)[:300]: e for e in unique.values()}
        source_of: dict[str, KbEntry] = {}
        for row in read_jsonl(folder / "question_similarity_en.jsonl"):
            if int(row["label"]) != 1:
                continue
            found = by_answer.get(_normalise(row["q1_faq_answer"])[:300])
            if found is not None and _normalise(found.question) == _normalise(row["question_1"]):
                source_of.setdefault(row["question_2"], found)
        queries = sorted(
            {r["question_2"] for r in read_jsonl(folder / "question_similarity_en.jsonl")}
        )
        heldout = set(random.Random(seed).sample(queries, round(heldout_share * len(queries))))
        step = settings.retrieval.max_searches_per_request
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
    rows = list(read_jsonl(data / "stsb" / "dev.jsonl"))
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
    from tribunal.embedding import load_profile_embedder

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
    files = {j.name: judgment_path(out, j.name) for j in panel.judges}
    done = {name: read_judgments(path) for name, path in files.items()}
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
