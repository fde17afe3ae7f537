"""Readers of labelling inputs: JSONL items, a BEIR folder, TREC topics + run (+ qrels).

Every reader returns :class:`LabelItem` s in input order, each with a stable
``item_id`` (``qid:docid`` when the input names the query and the document, the row's
``item_id``/``id`` when it has one, else a hash of its text), so a resumed job finds the
same items under the same keys. A pair the input's qrels judged carries that grade as
``gold``; a pair they did not judge (``gold`` None) is a hole the job fills.

:func:`check_items` holds every item to the limits ``Gateway.Label`` enforces (query,
chunk and answer lengths, answers per item, id length), so that an item the pipeline
would refuse is recorded as failed, with the reason, when the job is created, instead of
stopping the job at every resume.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..core import InvalidArgumentError, NotFoundError, jsonl_rows

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "JSONL_FIELDS",
    "InputSpec",
    "ItemLimits",
    "LabelItem",
    "check_items",
    "detect_format",
    "read_beir",
    "read_corpus",
    "read_items",
    "read_jsonl",
    "read_qrels",
    "read_run",
    "read_topics",
    "read_trec",
]

InputFormat = Literal["jsonl", "beir", "trec"]

JSONL_FIELDS: dict[str, tuple[str, ...]] = {
    "item_id": ("item_id", "id"),
    "query": ("query", "question"),
    "chunk": ("chunk", "passage", "text", "document"),
    "answers": ("answers",),
    "query_id": ("query_id", "qid"),
    "doc_id": ("doc_id", "docid", "pid", "corpus_id"),
    "gold": ("gold", "relevance", "label"),
}
"""Item field -> the JSONL keys read for it, first present wins (TREC DL 2019's judged
pairs, ``qid, query, pid, passage, relevance``, read as they are)."""

_WORD_LABELS = {"relevant": 1, "irrelevant": 0, "true": 1, "false": 0, "yes": 1, "no": 0}


@dataclass(frozen=True)
class LabelItem:
    """One (query, chunk, answers) triple to label."""

    item_id: str
    query: str
    chunk: str
    answers: tuple[str, ...] = ()
    query_id: str = ""
    doc_id: str = ""
    gold: int | None = None
    """The input qrels' grade for the pair; None when they did not judge it (a hole)."""


@dataclass(frozen=True)
class InputSpec:
    """Where a job's items come from (stored with the job as its description)."""

    path: Path
    """JSONL file, BEIR folder, or TREC topics file."""
    format: InputFormat
    run: Path | None = None
    """TREC run of candidates (``qid Q0 docid rank score tag``): BEIR and TREC."""
    qrels: Path | None = None
    """TREC qrels: which pairs are already judged (TREC; BEIR finds its own)."""
    corpus: Path | None = None
    """Passage texts of a TREC input: ``docid<TAB>text`` TSV or BEIR-style JSONL."""
    depth: int | None = None
    """Candidates per query taken from the run (its top ``depth`` by rank); None: all."""
    split: str = "test"
    """BEIR qrels split (``qrels/<split>.tsv``)."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """JSONL: item field -> key, overriding :data:`JSONL_FIELDS`."""

    def describe(self) -> dict[str, Any]:
        """JSON-able description (the job row keeps it; a resume re-reads the same input)."""
        return {
            "path": str(self.path),
            "format": self.format,
            "run": str(self.run) if self.run else None,
            "qrels": str(self.qrels) if self.qrels else None,
            "corpus": str(self.corpus) if self.corpus else None,
            "depth": self.depth,
            "split": self.split,
            "fields": dict(self.fields),
        }

    @classmethod
    def from_description(cls, data: Mapping[str, Any]) -> InputSpec:
        def path(key: str) -> Path | None:
            return Path(data[key]) if data.get(key) else None

        return cls(
            path=Path(data["path"]),
            format=data["format"],
            run=path("run"),
            qrels=path("qrels"),
            corpus=path("corpus"),
            depth=data.get("depth"),
            split=data.get("split") or "test",
            fields=dict(data.get("fields") or {}),
        )


@dataclass(frozen=True)
class ItemLimits:
    """What ``Gateway.Label`` accepts of one item (its settings; see :func:`check_items`)."""

    max_id_chars: int = 128
    max_query_chars: int = 2_000
    max_chunk_chars: int = 20_000
    max_answers_per_item: int = 16
    max_answer_chars: int = 2_000

    @classmethod
    def from_settings(cls, settings: Settings) -> ItemLimits:
        gateway = settings.gateway
        return cls(
            max_id_chars=settings.server.max_id_chars,
            max_query_chars=gateway.max_query_chars,
            max_chunk_chars=gateway.max_chunk_chars,
            max_answers_per_item=gateway.max_answers_per_item,
            max_answer_chars=gateway.max_answer_chars,
        )

    def problem(self, item: LabelItem) -> str | None:
        """Why the pipeline would refuse ``item`` (None: it would not)."""
        texts = (
            ("item_id", item.item_id, self.max_id_chars, "server.max_id_chars"),
            ("query", item.query, self.max_query_chars, "gateway.max_query_chars"),
            ("chunk", item.chunk, self.max_chunk_chars, "gateway.max_chunk_chars"),
        )
        for name, text, limit, setting in texts:
            if name != "item_id" and not text.strip():
                return f"{name} is empty"
            if len(text) > limit:
                return f"{name} has {len(text)} characters; the limit is {limit} ({setting})"
        if len(item.answers) > self.max_answers_per_item:
            return (
                f"answers has {len(item.answers)} entries; the limit is "
                f"{self.max_answers_per_item} (gateway.max_answers_per_item)"
            )
        for i, answer in enumerate(item.answers):
            if len(answer) > self.max_answer_chars:
                return (
                    f"answers[{i}] has {len(answer)} characters; the limit is "
                    f"{self.max_answer_chars} (gateway.max_answer_chars)"
                )
        return None


def check_items(
    items: Sequence[LabelItem], limits: ItemLimits
) -> tuple[list[LabelItem], dict[str, str]]:
    """The items, and the reason each one the pipeline would refuse fails (by item id).

    An item whose id is too long to store or send is kept under a stand-in id
    (``long:`` + a hash of the id), its reason naming the original's start.
    """
    kept: list[LabelItem] = []
    failed: dict[str, str] = {}
    for original in items:
        item, reason = original, limits.problem(original)
        if reason is not None and len(original.item_id) > limits.max_id_chars:
            digest = hashlib.sha256(original.item_id.encode()).hexdigest()[:24]
            reason = f"{reason}; the item was {original.item_id[:40]!r}..."
            item = dataclasses.replace(original, item_id=f"long:{digest}")
        kept.append(item)
        if reason is not None:
            failed[item.item_id] = reason
    return kept, failed


def detect_format(path: Path) -> InputFormat:
    """A folder is BEIR, ``*.jsonl``/``*.json`` is JSONL, anything else TREC topics."""
    if path.is_dir():
        return "beir"
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    return "trec"


def read_items(spec: InputSpec) -> list[LabelItem]:
    """The items ``spec`` names, in input order, each id once.

    Raises:
        NotFoundError: a file is missing.
        InvalidArgumentError: a row is malformed or an id repeats (names the file and line).
    """
    if spec.format == "jsonl":
        items = read_jsonl(spec.path, spec.fields)
    elif spec.format == "beir":
        items = read_beir(spec.path, run=spec.run, split=spec.split, depth=spec.depth)
    elif spec.format == "trec":
        if spec.run is None or spec.corpus is None:
            raise InvalidArgumentError(
                "a TREC input needs --run (the candidates) and --corpus (their texts) "
                "beside the topics file",
                field="run" if spec.run is None else "corpus",
            )
        items = read_trec(
            spec.path, run=spec.run, corpus=spec.corpus, qrels=spec.qrels, depth=spec.depth
        )
    else:
        raise InvalidArgumentError(
            f"input format {spec.format!r} is not jsonl, beir or trec", field="format"
        )
    _check_unique(items, spec.path)
    return items


def _check_unique(items: Sequence[LabelItem], path: Path) -> None:
    seen: set[str] = set()
    for item in items:
        if item.item_id in seen:
            raise InvalidArgumentError(
                f"{path}: item id {item.item_id!r} occurs twice; every item needs its own id "
                "(the store is keyed by it)",
                field="item_id",
            )
        seen.add(item.item_id)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line.rstrip("\n")


def _grade(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    text = str(value).strip().lower()
    if text in _WORD_LABELS:
        return _WORD_LABELS[text]
    try:
        return int(float(text))
    except ValueError:
        raise InvalidArgumentError(
            f"{where}: relevance {value!r} is neither a grade (0, 1, 2, ...) nor "
            "relevant/irrelevant",
            field="gold",
        ) from None


def _content_id(query: str, chunk: str) -> str:
    digest = hashlib.sha256(json.dumps([query, chunk]).encode()).hexdigest()[:16]
    return f"h:{digest}"


def read_jsonl(path: Path, fields: Mapping[str, str] | None = None) -> list[LabelItem]:
    """One item per line: ``query``, ``chunk``, optional ``answers``, ids and gold grade.

    ``fields`` maps item fields to other keys (``{"chunk": "passage"}``); see
    :data:`JSONL_FIELDS` for the keys read by default.
    """
    overrides = dict(fields or {})
    unknown = set(overrides) - set(JSONL_FIELDS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown item field(s) {sorted(unknown)} in the field mapping; known: "
            f"{', '.join(JSONL_FIELDS)}",
            field="fields",
        )
    keys = {
        name: (overrides[name],) if name in overrides else keys
        for name, keys in JSONL_FIELDS.items()
    }
    items: list[LabelItem] = []
    for where, _, row in jsonl_rows(path, field="input"):

        def get(name: str, row: dict[str, Any] = row) -> Any:
            return next((row[key] for key in keys[name] if key in row), None)

        query, chunk = get("query"), get("chunk")
        for name, value in (("query", query), ("chunk", chunk)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgumentError(
                    f"{where}: no non-empty {name} (read from {', '.join(keys[name])}; map "
                    f"another key with --field {name}=KEY)",
                    field=name,
                )
        answers = get("answers")
        if answers is None:
            answers = []
        elif isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InvalidArgumentError(f"{where}: answers must be a list of strings")
        query_id = str(get("query_id") or "")
        doc_id = str(get("doc_id") or "")
        explicit = get("item_id")
        if explicit not in (None, ""):
            item_id = str(explicit)
        elif query_id and doc_id:
            item_id = f"{query_id}:{doc_id}"
        else:
            item_id = _content_id(query, chunk)
        items.append(
            LabelItem(
                item_id=item_id,
                query=query,
                chunk=chunk,
                answers=tuple(a for a in answers if a.strip()),
                query_id=query_id,
                doc_id=doc_id,
                gold=_grade(get("gold"), where),
            )
        )
    return items


def read_qrels(path: Path) -> dict[tuple[str, str], int]:
    """``(qid, docid) -> grade`` from TREC qrels (``qid 0 docid grade``) or a BEIR TSV
    (``query-id<TAB>corpus-id<TAB>score``, header optional), in file order."""
    qrels: dict[tuple[str, str], int] = {}
    for number, line in _lines(path):
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
        qrels[(qid, docid)] = _grade(grade, f"{path}:{number}") or 0
    return qrels


def read_run(path: Path, depth: int | None = None) -> dict[str, list[str]]:
    """``qid -> docids`` by rank from a TREC run (``qid Q0 docid rank score tag``),
    queries in file order, each cut to its top ``depth``."""
    ranked: dict[str, list[tuple[int, int, str]]] = {}
    for number, line in _lines(path):
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
    for number, line in _lines(path):
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
    for number, line in _lines(path):
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
    missing_q = sorted({qid for qid, _ in pairs if qid not in topics})
    missing_d = sorted({docid for _, docid in pairs if docid not in corpus})
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
