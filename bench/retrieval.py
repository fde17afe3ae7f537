"""Retrieval speed, as ratios measured side by side in one run.

Part 1 — HNSW vs exact search on >= 100k vectors: queries/s of the service's
``IndexHNSWFlat`` (built by :class:`DenseIndex` with the settings' M,
efConstruction, efSearch) against exact ``IndexFlatIP``, and HNSW's
recall@10 against the exact top 10. Vectors: the real all-MiniLM-L6-v2
embeddings of the SciFact chunks (read from the index ``tribunal-lab eval
retrieval`` builds; without it, of the first 1,000 abstracts), topped up to
``--vectors`` with perturbed copies of them (Gaussian noise, renormalised; a
copy sits at cosine ~0.75 from its source) so the set keeps the real one's
cluster structure. Queries: the MiniLM
embeddings of the 300 SciFact test claims. One query at a time, as a
service sees them.

Part 2 — service vs raw FAISS: queries/s of a search through the real gRPC
servicer on loopback (``RetrievalService.Search``, dense and hybrid) against
the same collection's FAISS index searched directly with a precomputed
query vector, and the in-process domain calls between the two, all relative
to raw FAISS. The service embeds each query; raw FAISS does not.

    .venv/bin/tribunal-lab eval retrieval          # once: builds the full SciFact index
    .venv/bin/python bench/retrieval.py [--vectors 100000] [--queries 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import faiss
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
from tribunal.core import Settings, load_settings
from tribunal.embedding import load_profile_embedder as load_embedder
from tribunal.kb import read_entries
from tribunal.retrieval import DenseIndex, KnowledgeBase, SearchMode, SearchQuery
from tribunal.retrieval.servicer import RetrievalServicer, _RetrievalHost
from tribunal.v1 import retrieval_pb2, retrieval_pb2_grpc
from tribunal_lab.evaluation.retrieval import COLLECTION

Vectors = NDArray[np.float32]


def _rate(calls: int, call: Callable[[int], object]) -> float:
    """Sequential calls per second (call(i) for i in range(calls)) after one warm-up."""
    call(0)
    started = time.perf_counter()
    for i in range(calls):
        call(i)
    return calls / (time.perf_counter() - started)


def _vectors(real: Vectors, total: int, seed: int = 0) -> Vectors:
    """The real vectors, then perturbed copies of them up to ``total`` rows."""
    rng = np.random.default_rng(seed)
    extra = total - len(real)
    if extra <= 0:
        return real[:total]
    sources = real[rng.integers(0, len(real), extra)]
    # Per-coordinate noise of 0.045 on 384-d unit vectors puts a copy at cosine ~0.75.
    noisy = sources + rng.normal(0.0, 0.045, sources.shape).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    return np.vstack([real, noisy]).astype(np.float32)


def hnsw_vs_exact(kb: KnowledgeBase, queries: Vectors, total: int) -> None:
    real = kb.collection(COLLECTION).store.all_units()[4]
    vectors = _vectors(real, total)
    print(f"== HNSW vs exact: {len(vectors):,} vectors ({len(real):,} real MiniLM SciFact chunks")
    print(f"   + {len(vectors) - len(real):,} perturbed copies), {len(queries)} real queries")
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    settings = kb.settings.model_copy(update={"flat_max_vectors": 0, "large_index": "hnsw"})
    started = time.perf_counter()
    hnsw = DenseIndex(vectors.shape[1], settings)
    hnsw.build([str(i) for i in range(len(vectors))], ["u"] * len(vectors), vectors)
    build = time.perf_counter() - started
    print(f"   HNSW build (M={settings.hnsw_m}, efConstruction={settings.hnsw_ef_construction}): ")
    print(f"   {build:.0f} s for {len(vectors):,} vectors ({hnsw.index_type})")
    _, truth = exact.search(queries, 10)
    exact_qps = _rate(len(queries), lambda i: exact.search(queries[i : i + 1], 10))
    for ef in sorted({64, settings.hnsw_ef_search, 256}):
        params = faiss.SearchParametersHNSW(efSearch=ef)
        index = hnsw._index  # the FAISS object the service searches
        _, found = index.search(queries, 10, params=params)
        recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
        qps = _rate(
            len(queries),
            lambda i, p=params, x=index: x.search(queries[i : i + 1], 10, params=p),
        )
        print(
            f"   efSearch={ef:>3}: recall@10 {recall:.3f}   HNSW/exact queries/s "
            f"{qps / exact_qps:5.1f}x   ({qps:,.0f} vs {exact_qps:,.0f} q/s)"
        )


def service_vs_faiss(kb: KnowledgeBase, texts: list[str], vectors: Vectors, rounds: int) -> None:
    collection = kb.collection(COLLECTION)
    stats = collection.stats()
    print(f"== service vs raw FAISS: collection of {stats.entries:,} entries, {stats.chunks:,}")
    print(f"   vectors ({stats.index_type}), {len(texts)} queries, top_k 10, one client;")
    print(f"   median of {rounds} rounds, the order of the paths rotating each round")
    index = collection.dense._index
    settings = load_settings(server={"port": 0, "metrics_port": None})
    host = _RetrievalHost(settings, RetrievalServicer(lambda: kb))
    port = host.start()
    host.wait_until_ready(60)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)

    def grpc_search(mode: int) -> Callable[[int], object]:
        requests = [
            retrieval_pb2.SearchRequest(collection=COLLECTION, query=t, top_k=10, mode=mode)
            for t in texts
        ]
        return lambda i: stub.Search(requests[i], timeout=60)

    def domain_search(mode: SearchMode) -> Callable[[int], object]:
        return lambda i: kb.search(SearchQuery(COLLECTION, texts[i], 10, mode))

    paths: dict[str, Callable[[int], object]] = {
        "raw FAISS (vector in, 10 rows out)": lambda i: index.search(vectors[i : i + 1], 10),
        "domain dense search, vector given": lambda i: collection.search_dense(
            vectors[i : i + 1], 100
        ),
        "KnowledgeBase.search dense (embeds)": domain_search(SearchMode.DENSE),
        "KnowledgeBase.search hybrid (embeds)": domain_search(SearchMode.HYBRID),
        "gRPC Search dense (loopback)": grpc_search(2),
        "gRPC Search hybrid (loopback)": grpc_search(1),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    # In-process paths run on a worker thread, as the gRPC server's handlers do: on a
    # busy 2-core machine torch in the main thread is several times slower (OpenMP
    # threads spin-waiting for cores), which would flatter the gRPC side.
    with ThreadPoolExecutor(1) as worker:
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                rate = worker.submit(_rate, len(texts), paths[name]).result()
                samples[name].append(rate)
    channel.close()
    host.stop(0)
    rates = {name: statistics.median(values) for name, values in samples.items()}
    base = rates["raw FAISS (vector in, 10 rows out)"]
    for name, rate in rates.items():
        print(f"   {name:<40} {rate:9,.0f} q/s   {rate / base:8.4f} of raw FAISS")
    for mode in ("dense", "hybrid"):
        ratio = (
            rates[f"gRPC Search {mode} (loopback)"] / rates[f"KnowledgeBase.search {mode} (embeds)"]
        )
        print(f"   gRPC service / in-process KnowledgeBase.search, {mode}: {ratio:.2f}")


def _open_kb(settings: Settings, data: Path) -> KnowledgeBase:
    """The SciFact collection ``tribunal-lab eval retrieval`` built, else a fresh smaller one."""
    root = settings.data_dir / "retrieval-eval"
    if (root / COLLECTION / "entries.sqlite3").is_file():
        return KnowledgeBase(root, load_embedder(settings), settings.retrieval)
    # Embedding all of SciFact takes ~15 min on 2 cores; a bench run embeds 1,000 abstracts.
    print(f"(no SciFact index in {root}: run `tribunal-lab eval retrieval` for the full corpus;")
    print(" embedding the first 1,000 abstracts into a scratch collection instead)")
    scratch = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    kb = KnowledgeBase(scratch, load_embedder(settings), settings.retrieval)
    entries = list(read_entries(data / "corpus.jsonl", max_chars=1000, limit=1000))
    kb.upsert(COLLECTION, entries, create=True, progress=True)
    return kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--service-queries", type=int, default=100, help="queries per round")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/scifact"))
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)  # one query at a time, as in the service; no spin-waits
    settings = load_settings()
    kb = _open_kb(settings, args.data)
    with (args.data / "beir_queries_test.jsonl").open() as lines:
        texts = [json.loads(line)["text"] for line in lines][: args.queries]
    query_vectors = kb.embed_queries(texts)
    hnsw_vs_exact(kb, query_vectors, args.vectors)
    service_vs_faiss(kb, texts[: args.service_queries], query_vectors, args.rounds)
    kb.close()


if __name__ == "__main__":
    main()
