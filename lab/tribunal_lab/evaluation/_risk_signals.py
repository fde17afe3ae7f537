"""Labelled traffic with the gateway's candidate signals, recorded once per domain.

Each domain is a KB collection and a pool of labelled queries. Every query goes once
through the gateway's own retrieval and matching (``tribunal calibrate``'s code, the
profile's models) and its candidates' signals are cached in chunks (a killed run resumes
at its first missing chunk); the risk-method evaluation then resamples splits of the
cached signals, so no model runs again.

- ``covid``: the COVID FAQ (210 entries, ``faq`` format) and its 240 labelled user
  questions (``tribunal-lab dataset covid-traffic``: answer-equivalence labels).
- ``banking77``: a banking FAQ of the 77 intents, five training phrasings of each as
  entries with one answer (385 entries); the pool is 900 queries of the test split
  (never a KB phrasing) and 100 out-of-scope SQuAD questions.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.core import jsonl_rows

from .._loopback_stages import loopback_stages
from ..datasets.banking77 import read_banking77

__all__ = ["DOMAINS", "RecordedDomain", "record_domain"]

DOMAINS = ("covid", "banking77")
_CHUNK = 50


@dataclass(frozen=True)
class RecordedDomain:
    """A domain's labelled traffic and each query's candidates as the gateway sends them."""

    name: str
    traffic: Any
    """``tribunal.confidence.Traffic``."""
    observed: list[Any]
    """Per query, its ``ObservedCandidate`` list."""
    binding: Any


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [row.value for row in jsonl_rows(path)]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _digest(rows: Any) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def banking77_domain(
    root: Path, *, seed: int = 0, in_scope: int = 900, out_of_scope: int = 100
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The banking FAQ (entries) and its labelled query pool."""
    rng = np.random.default_rng(seed)
    _, test, by_intent = read_banking77(root / "banking77")
    kb: list[dict[str, Any]] = []
    for intent in sorted(by_intent):
        phrasings = [by_intent[intent][i] for i in rng.permutation(len(by_intent[intent]))[:5]]
        # One entry per phrasing, one answer text per intent: the gateway's margin treats
        # entries with the same answer as one answer.
        kb.extend(
            {
                "id": f"b77-{intent}-{k}",
                "question": phrasing,
                "answer": f"{intent.replace('_', ' ').capitalize()}: see the help page.",
                "metadata": {"intent": intent},
                "chunks": [],
            }
            for k, phrasing in enumerate(phrasings)
        )
    picked = [test[i] for i in rng.permutation(len(test))[:in_scope]]
    pool = [
        {"query": r["query"], "answers": [f"b77-{r['intent']}-{k}" for k in range(5)]}
        for r in picked
    ]
    squad = _jsonl(root / "squad-v1.1-dev" / "dev_flat.jsonl")
    questions = list(dict.fromkeys(row["question"] for row in squad))
    pool += [
        {"query": questions[i], "answers": []}
        for i in rng.permutation(len(questions))[:out_of_scope]
    ]
    return kb, [pool[i] for i in rng.permutation(len(pool))]


def _ingest(work: Path, collection: str, kb_path: Path, kb_format: str) -> None:
    from tribunal.cli import main as tribunal

    marker = work / f"ingested-{collection}-{_digest(kb_path.read_text())}"
    if marker.exists():
        return
    code = tribunal(
        [
            "kb",
            "ingest",
            str(kb_path),
            "--collection",
            collection,
            "--format",
            kb_format,
            "--self-evidenced",
        ]
    )
    if code:
        raise SystemExit(f"kb ingest of {collection} failed ({code})")
    marker.touch()


def _observe_chunks(
    settings: Any,
    work: Path,
    collection: str,
    queries: list[dict[str, Any]],
    *,
    cached_only: bool = False,
) -> tuple[Any, list[Any], Any]:
    from tribunal.commands._calibration_signals import observe_traffic, read_signals, write_signals
    from tribunal.confidence import read_traffic

    observed: list[Any] = []
    bindings: set[str] = set()
    binding: Any = None
    started = time.perf_counter()
    fresh = 0
    host = None
    for first in range(0, len(queries), _CHUNK):
        chunk = queries[first : first + _CHUNK]
        path = work / "traffic" / collection / f"{_digest(chunk)}.jsonl"
        signals = path.with_suffix(".signals.jsonl")
        if cached_only and not signals.is_file():
            print(f"{collection}: {first} queries recorded; using those", flush=True)
            queries = queries[:first]
            break
        _write_jsonl(path, chunk)
        traffic = read_traffic(path)
        if signals.is_file():
            part, binding = read_signals(signals, traffic)
        else:
            if host is None:
                # The stages load once; each chunk reaches them over loopback gRPC.
                host, served = loopback_stages(settings)
            part, binding = observe_traffic(served, collection, traffic)
            write_signals(signals, traffic, part, binding)
            fresh += len(chunk)
        observed.extend(part)
        bindings.add(json.dumps(binding.to_dict(), sort_keys=True))
        done = first + len(chunk)
        elapsed = time.perf_counter() - started
        rate = fresh / elapsed if fresh else 0.0
        left = (len(queries) - done) / rate if rate else 0.0
        print(
            f"{collection}: observed {done}/{len(queries)} queries "
            f"({rate:.2f} new queries/s, ETA {left / 60:.1f} min)",
            flush=True,
        )
    if host is not None:
        host.stop(0)
    if not queries:
        raise SystemExit(f"no {collection} queries recorded yet: run without --cached-only")
    if len(bindings) != 1:
        raise SystemExit("the KB or matcher changed between chunks: clear the cache and rerun")
    path = work / f"{collection}-traffic.jsonl"
    _write_jsonl(path, queries)
    return read_traffic(path), observed, binding


def record_domain(
    name: str, root: Path, work: Path, profile: str | None, *, cached_only: bool = False
) -> RecordedDomain:
    """Ingest the domain's KB (once) and record every pool query's candidate signals.

    ``cached_only``: run no model; use the pool's first queries already recorded.
    """
    from tribunal.core import load_settings

    work.mkdir(parents=True, exist_ok=True)
    os.environ["TRIBUNAL_DATA_DIR"] = str((work / "data").resolve())
    settings = load_settings(profile)
    if name == "covid":
        from ..datasets.covid_traffic import CLASSES_PATH, build_covid_traffic

        traffic_path = work / "covid-labelled.jsonl"
        if not traffic_path.is_file():
            build_covid_traffic(
                root / "covid-qa",
                traffic_path,
                classes_path=CLASSES_PATH,
                chunk_chars=settings.retrieval.chunk_size_chars,
            )
        if not cached_only:
            _ingest(work, "covid-faq", root / "covid-qa" / "faq_kb_en.jsonl", "faq")
        queries = _jsonl(traffic_path)
        traffic, observed, binding = _observe_chunks(
            settings, work, "covid-faq", queries, cached_only=cached_only
        )
    elif name == "banking77":
        kb, queries = banking77_domain(root)
        kb_path = work / "banking77-kb.jsonl"
        _write_jsonl(kb_path, kb)
        if not cached_only:
            _ingest(work, "banking77-entries", kb_path, "entries")
        traffic, observed, binding = _observe_chunks(
            settings, work, "banking77-entries", queries, cached_only=cached_only
        )
    else:
        raise SystemExit(f"unknown domain {name!r}; choose one of {', '.join(DOMAINS)}")
    return RecordedDomain(name, traffic, observed, binding)
