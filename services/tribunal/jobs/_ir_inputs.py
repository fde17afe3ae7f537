"""Readers of IR evaluation inputs: TREC topics, runs and qrels, and BEIR folders.

A candidate pair is a query id and a document id; its item id is ``qid:docid``, and it
carries the qrels' grade as ``gold`` when the qrels judged it (a hole when not).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core import InvalidArgumentError, NotFoundError, jsonl_rows
from ._items import LabelItem, parse_grade, read_lines, unknown_ids

__all__ = ["read_beir", "read_corpus", "read_qrels", "read_run", "read_topics", "read_trec"]


def read_qrels(path: Path) -> dict[tuple[str, str], int]:
    """``(qid, docid) -> grade`` from TREC qrels (``qid 0 docid grade``) or a BEIR TSV
    (``query-id<TAB>corpus-id<TAB>score``, header optional), in file order."""
    qrels: dict[tuple[str, str], int] = {}
    for number, line in read_lines(path):
        parts = line.split()
        if len(parts) == 4:
            qid, _, docid, grade = parts
        elif len(parts) == 3:
            qid, docid, grade = parts
        else:
            raise InvalidArgumentError(
                f"{path}:{number}: a qrels line is `qid 0 docid grade` or "
                "`query-id<TAB>corpus-id<TAB>score`"
            )
        if number == 1 and not re.fullmatch(r"-?\d+(\.\d+)?", grade):
            continue  # the BEIR header
        qrels[(qid, docid)] = parse_grade(grade, f"{path}:{number}") or 0
    return qrels


def read_run(path: Path, depth: int | None = None) -> dict[str, list[str]]:
    """``qid -> docids`` by rank from a TREC run (``qid Q0 docid rank score tag``),
    queries in file order, each cut to its top ``depth``."""
    ranked: dict[str, list[tuple[int, int, str]]] = {}
    for number, line in read_lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise InvalidArgumentError(
                f"{path}:{number}: a run line is `qid Q0 docid rank score tag` (6 columns)"
            )
        qid, _, docid, rank, _score, _tag = parts
        try:
            position = int(rank)
        except ValueError:
            raise InvalidArgumentError(
                f"{path}:{number}: rank {rank!r} is not an integer"
            ) from None
        ranked.setdefault(qid, []).append((position, number, docid))
    run: dict[str, list[str]] = {}
    for qid, rows in ranked.items():
        docids: list[str] = []
        for _, _, docid in sorted(rows):
            if docid not in docids:
                docids.append(docid)
        run[qid] = docids[:depth] if depth is not None else docids
    return run


def read_topics(path: Path) -> dict[str, str]:
    """``qid -> query`` from TSV (``qid<TAB>query``, as MS MARCO / TREC DL ship them),
    classic TREC ``<top><num> Number: N <title> ...`` topics, or BEIR JSONL queries."""
    if path.suffix in (".jsonl", ".json"):
        return {str(row["_id"]): str(row["text"]) for _, _, row in jsonl_rows(path, field="input")}
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    text = path.read_text(encoding="utf-8")
    if "<top>" in text:
        topics: dict[str, str] = {}
        for block in re.findall(r"<top>(.*?)</top>", text, flags=re.S):
            num = re.search(r"<num>\s*(?:Number:)?\s*(\S+)", block)
            title = re.search(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<|$)", block, flags=re.S)
            if num is None or title is None or not title.group(1).strip():
                raise InvalidArgumentError(f"{path}: a <top> block lacks <num> or <title>")
            topics[num.group(1)] = " ".join(title.group(1).split())
        return topics
    topics = {}
    for number, line in read_lines(path):
        qid, tab, query = line.partition("\t")
        if not tab or not query.strip():
            raise InvalidArgumentError(f"{path}:{number}: a topics line is `qid<TAB>query`")
        topics[qid.strip()] = query.strip()
    return topics


def read_corpus(path: Path, wanted: set[str] | None = None) -> dict[str, str]:
    """``docid -> text`` (BEIR JSONL ``_id, title, text``: title and text joined; or TSV
    ``docid<TAB>text``), only the ``wanted`` ids when given (corpora are large)."""
    corpus: dict[str, str] = {}
    if path.suffix in (".jsonl", ".json"):
        for _, _, row in jsonl_rows(path, field="input"):
            docid = str(row["_id"])
            if wanted is None or docid in wanted:
                title, body = str(row.get("title") or "").strip(), str(row.get("text") or "")
                corpus[docid] = f"{title}\n{body}" if title else body
        return corpus
    for number, line in read_lines(path):
        docid, tab, body = line.partition("\t")
        if not tab:
            raise InvalidArgumentError(f"{path}:{number}: a corpus line is `docid<TAB>text`")
        if wanted is None or docid in wanted:
            corpus[docid] = body
    return corpus


def _pairs_to_items(
    pairs: Sequence[tuple[str, str]],
    topics: Mapping[str, str],
    corpus: Mapping[str, str],
    qrels: Mapping[tuple[str, str], int],
    where: Path,
) -> list[LabelItem]:
    missing_q, missing_d = unknown_ids(pairs, topics, corpus)
    if missing_q or missing_d:
        raise InvalidArgumentError(
            f"{where}: candidates name {len(missing_q)} unknown query id(s) {missing_q[:5]} and "
            f"{len(missing_d)} document id(s) missing from the corpus {missing_d[:5]}"
        )
    empty = [docid for _, docid in pairs if not corpus[docid].strip()]
    if empty:
        raise InvalidArgumentError(
            f"{where}: {len(empty)} candidate document(s) have no text in the corpus "
            f"{empty[:5]}; drop them from the run"
        )
    items = []
    for qid, docid in pairs:
        items.append(
            LabelItem(
                item_id=f"{qid}:{docid}",
                query=topics[qid],
                chunk=corpus[docid],
                query_id=qid,
                doc_id=docid,
                gold=qrels.get((qid, docid)),
            )
        )
    return items


def _run_pairs(run: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    return [(qid, docid) for qid, docids in run.items() for docid in docids]


def _find(folder: Path, names: Sequence[str], pattern: str, what: str) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    found = sorted(folder.glob(pattern))
    if len(found) == 1:
        return found[0]
    raise NotFoundError(
        f"{folder}: no {what} ({' or '.join(names)}"
        + (f"; several match {pattern}: {[p.name for p in found]}" if found else "")
        + ")"
    )


def read_beir(
    folder: Path, *, run: Path | None = None, split: str = "test", depth: int | None = None
) -> list[LabelItem]:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

    The candidates are the ``run``'s top ``depth`` per query (pairs the qrels did not
    judge are holes); without a run, the judged pairs themselves (to re-label them).
    """
    if not folder.is_dir():
        raise NotFoundError(f"{folder} is not a BEIR folder")
    corpus_path = _find(folder, ["corpus.jsonl"], "*corpus*.jsonl", "corpus")
    queries_path = _find(folder, ["queries.jsonl"], "*queries*.jsonl", "queries")
    qrels_path = _find(folder, [f"qrels/{split}.tsv"], f"*qrels*{split}*.tsv", f"{split} qrels")
    qrels = read_qrels(qrels_path)
    pairs = _run_pairs(read_run(run, depth)) if run is not None else list(qrels)
    topics = read_topics(queries_path)
    corpus = read_corpus(corpus_path, {docid for _, docid in pairs})
    return _pairs_to_items(pairs, topics, corpus, qrels, run or qrels_path)


def read_trec(
    topics: Path,
    *,
    run: Path,
    corpus: Path,
    qrels: Path | None = None,
    depth: int | None = None,
) -> list[LabelItem]:
    """TREC topics + a run of candidates (+ the qrels that judged some of them)."""
    pairs = _run_pairs(read_run(run, depth))
    judged = read_qrels(qrels) if qrels is not None else {}
    texts = read_corpus(corpus, {docid for _, docid in pairs})
    return _pairs_to_items(pairs, read_topics(topics), texts, judged, run)
