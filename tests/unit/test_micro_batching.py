"""MicroBatchingEmbedder on the real MiniLM: concurrent calls share a forward pass and
get the vectors the model gives each alone; recent short texts are not embedded again;
a model error reaches every caller of the pass; one embedder per model per process."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.core import Settings
from tribunal.embedding import (
    NamedEmbedder,
    load_profile_embedder,
    prefetch_query_vectors,
    shared_embedder,
    shared_profile_embedder,
)
from tribunal.embedding._batching import MicroBatchingEmbedder
from tribunal.embedding._lanes import ComputeLanes

from tests.integration._retrieval import CountingEmbedder, minilm

ONE_LANE = ComputeLanes(1)
"""The queueing tests hold one pass in the model and watch the next one form: one lane."""

QUERIES = [
    "How does the virus spread?",
    "Can my dog catch it?",
    "Should I wear a mask outside?",
    "How long does it live on surfaces?",
    "Is there a vaccine?",
]


class GatedEmbedder(CountingEmbedder):
    """Holds its first call inside the model until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(minilm())
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30)
        return super().embed(texts, progress=progress)


def _queued(batcher: MicroBatchingEmbedder, count: int) -> None:
    for _ in range(600):
        with batcher._ready:
            if len(batcher._queue) == count:
                return
        time.sleep(0.01)
    raise AssertionError(f"{count} calls never queued")


@pytest.mark.models
def test_calls_arriving_during_a_pass_share_the_next_one() -> None:
    gated = GatedEmbedder()
    batcher = MicroBatchingEmbedder(gated, max_batch_texts=64, lanes=ONE_LANE)
    results: dict[int, NDArray[np.float32]] = {}

    def ask(index: int, texts: list[str]) -> None:
        results[index] = batcher.embed(texts)

    first = threading.Thread(target=ask, args=(0, ["Wash your hands."]))
    first.start()
    assert gated.entered.wait(30)
    others = []
    for index, query in enumerate(QUERIES, start=1):
        thread = threading.Thread(target=ask, args=(index, [query]))
        thread.start()
        _queued(batcher, index)  # arrival order fixes the batch's order
        others.append(thread)
    gated.release.set()
    for thread in [first, *others]:
        thread.join(30)

    assert gated.calls == [["Wash your hands."], QUERIES]
    assert (batcher.passes_, batcher.calls_, batcher.texts_) == (2, 6, 6)
    assert batcher.busy_s_ > 0
    alone = minilm().embed(QUERIES)
    for index in range(len(QUERIES)):
        np.testing.assert_allclose(results[index + 1][0], alone[index], atol=1e-5)


@pytest.mark.models
def test_a_batch_never_exceeds_its_size_and_long_calls_run_alone() -> None:
    gated = GatedEmbedder()
    batcher = MicroBatchingEmbedder(gated, max_batch_texts=3, lanes=ONE_LANE)
    threads = [threading.Thread(target=batcher.embed, args=(["Wash your hands."],))]
    threads[0].start()
    assert gated.entered.wait(30)
    calls = [QUERIES[:2], QUERIES[2:4], QUERIES]  # 2 + 2 > 3; 5 > 3 runs alone
    for count, texts in enumerate(calls, start=1):
        threads.append(threading.Thread(target=batcher.embed, args=(texts,)))
        threads[-1].start()
        _queued(batcher, count)
    gated.release.set()
    for thread in threads:
        thread.join(30)
    assert gated.calls == [["Wash your hands."], QUERIES[:2], QUERIES[2:4], QUERIES]


def _held_then_queued(
    batcher: MicroBatchingEmbedder, gated: GatedEmbedder, queries: Sequence[str] = QUERIES
) -> dict[int, Any]:
    """One call held in the model, then each of ``queries`` queued alone behind it, then
    the model released: every caller's vectors, by their index (-1: the held call)."""
    results: dict[int, Any] = {}

    def ask(index: int, text: str) -> None:
        results[index] = batcher.embed([text])[0]

    threads = [threading.Thread(target=ask, args=(-1, "Wash your hands."))]
    threads[0].start()
    assert gated.entered.wait(30)
    for index, query in enumerate(queries):
        threads.append(threading.Thread(target=ask, args=(index, query)))
        threads[-1].start()
        _queued(batcher, index + 1)
    gated.release.set()
    for thread in threads:
        thread.join(30)
    return results


HELD = ["Wash your hands.", "Stay at home."]
"""The two calls the spread tests hold in the model, one per lane."""


class HeldEmbedder(CountingEmbedder):
    """Holds each call of one of :data:`HELD` inside the model until its own release."""

    def __init__(self) -> None:
        super().__init__(minilm())
        self.entered = {text: threading.Event() for text in HELD}
        self.release = {text: threading.Event() for text in HELD}

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        if len(texts) == 1 and texts[0] in self.release:
            self.entered[texts[0]].set()
            assert self.release[texts[0]].wait(30)
        return super().embed(texts, progress=progress)


def _two_held_then_queued(
    batcher: MicroBatchingEmbedder, held: HeldEmbedder, queries: Sequence[str] = QUERIES
) -> tuple[list[list[str]], dict[int, Any]]:
    """Both lanes each holding one of :data:`HELD`, then each of ``queries`` queued alone,
    then the first lane released (the second stays held while it works through the
    queue), then the second: the model's calls between the held ones, and every query's
    vector by its index."""
    for event in (*held.entered.values(), *held.release.values()):
        event.clear()
    held.calls.clear()
    results: dict[int, Any] = {}

    def ask(index: int, text: str) -> None:
        results[index] = batcher.embed([text])[0]

    threads = [threading.Thread(target=ask, args=(-1 - n, text)) for n, text in enumerate(HELD)]
    # One pass per held call, each on one lane: the first starts while the test holds
    # the other lane (a lone pass would take both), the second once it is handed back.
    lanes = batcher._lanes
    assert lanes is not None
    assert lanes.lanes == 2
    lanes.take_one()
    threads[0].start()
    assert held.entered[HELD[0]].wait(30)
    threads[1].start()
    _queued(batcher, 1)
    lanes.give(1)
    assert held.entered[HELD[1]].wait(30)
    for index, query in enumerate(queries):
        threads.append(threading.Thread(target=ask, args=(index, query)))
        threads[-1].start()
        _queued(batcher, index + 1)
    held.release[HELD[0]].set()
    for thread in threads[len(HELD) :]:
        thread.join(30)
    held.release[HELD[1]].set()
    for thread in threads[: len(HELD)]:
        thread.join(30)
    # A held call is noted when it is released: the first lane's, its queue, the other's.
    assert [held.calls[0], held.calls[-1]] == [[text] for text in HELD]
    return held.calls[1:-1], results


@pytest.mark.models
def test_a_spread_pass_takes_its_lanes_part_of_the_texts_in_flight() -> None:
    held = HeldEmbedder()
    batcher = MicroBatchingEmbedder(held, max_batch_texts=64, lanes=ComputeLanes(2), spread=True)
    calls, results = _two_held_then_queued(batcher, held)
    # Six texts in flight (five queued, one held), two lanes: a pass takes ceil(6 / 2) = 3,
    # the next the other 2 (the most seen over the last gatherings is still 6).
    assert calls == [QUERIES[:3], QUERIES[3:]]
    assert (batcher.passes_, batcher.calls_, batcher.texts_) == (4, 7, 7)
    alone = minilm().embed(QUERIES)
    for index in range(len(QUERIES)):
        np.testing.assert_allclose(results[index], alone[index], atol=1e-5)


@pytest.mark.models
def test_a_spread_share_never_exceeds_the_batch_size_nor_splits_a_call() -> None:
    held = HeldEmbedder()
    batcher = MicroBatchingEmbedder(held, max_batch_texts=2, lanes=ComputeLanes(2), spread=True)
    calls, _ = _two_held_then_queued(batcher, held)
    assert calls == [QUERIES[:2], QUERIES[2:4], QUERIES[4:]]
    # A call of more texts than its share (ceil(5 / 2) = 3 on two lanes) runs whole.
    counting = CountingEmbedder(minilm())
    whole = MicroBatchingEmbedder(counting, max_batch_texts=64, lanes=ComputeLanes(2), spread=True)
    np.testing.assert_allclose(whole.embed(QUERIES), minilm().embed(QUERIES), atol=1e-5)
    assert counting.calls == [QUERIES]


@pytest.mark.models
def test_on_one_lane_a_spread_pass_takes_every_queued_call() -> None:
    gated = GatedEmbedder()
    batcher = MicroBatchingEmbedder(gated, max_batch_texts=64, lanes=ONE_LANE, spread=True)
    _held_then_queued(batcher, gated)
    assert gated.calls == [["Wash your hands."], QUERIES]


def _calls_after_lone_passes(
    batcher: MicroBatchingEmbedder, held: HeldEmbedder, lone: int
) -> list[list[str]]:
    """The model's calls for three queries queued behind the two held calls, after
    ``lone`` single calls, each its own pass."""
    for number in range(lone):
        batcher.embed([f"a lone question {lone} {number}"])
    return _two_held_then_queued(batcher, held, QUERIES[:3])[0]


@pytest.mark.models
def test_a_spread_share_follows_the_load_down_after_16_passes() -> None:
    held = HeldEmbedder()
    batcher = MicroBatchingEmbedder(held, max_batch_texts=64, lanes=ComputeLanes(2), spread=True)
    _two_held_then_queued(batcher, held)  # six in flight: passes of 3 and 2
    # Fewer than 16 passes later the six are still remembered: three queued go together.
    assert _calls_after_lone_passes(batcher, held, 4) == [QUERIES[:3]]
    # 16 lone passes on, the most in flight is what the load is now: ceil(4 / 2) = 2.
    assert _calls_after_lone_passes(batcher, held, 16) == [QUERIES[:2], QUERIES[2:3]]


@pytest.mark.models
def test_passes_are_spread_on_the_cpu_only(tiny_settings: Settings) -> None:
    def load() -> CountingEmbedder:
        return CountingEmbedder(minilm())

    cpu = tiny_settings.model_copy(update={"device": "cpu"})
    assert shared_embedder(cpu, "spread-cpu", load).spread
    kept = cpu.model_copy(
        update={"retrieval": cpu.retrieval.model_copy(update={"micro_batch_spread": False})}
    )
    assert not shared_embedder(kept, "spread-cpu", load).spread
    gpu = tiny_settings.model_copy(update={"device": "cuda"})
    assert not shared_embedder(gpu, "spread-gpu", load).spread  # built, never run here


@pytest.mark.models
def test_recent_short_texts_skip_the_model() -> None:
    counting = CountingEmbedder(minilm())
    batcher = MicroBatchingEmbedder(counting, max_batch_texts=4, recent_texts=3)
    first = batcher.embed(QUERIES[:2])
    again = batcher.embed([QUERIES[1], QUERIES[2], QUERIES[1]])
    assert counting.calls == [QUERIES[:2], [QUERIES[2]]]
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[2], first[1])
    batcher.embed(QUERIES)  # longer than max_batch_texts: not remembered, not looked up
    assert counting.calls[-1] == QUERIES
    batcher.embed([QUERIES[0]])  # still among the 3 most recent short texts
    assert len(counting.calls) == 3
    assert batcher.embed([]).shape == (0, counting.dimension)


class FailingEmbedder(GatedEmbedder):
    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        if not self.entered.is_set():
            return super().embed(texts, progress=progress)
        raise RuntimeError("out of memory")


@pytest.mark.models
def test_a_model_error_reaches_every_caller_of_the_pass_and_the_worker_goes_on() -> None:
    failing = FailingEmbedder()
    batcher = MicroBatchingEmbedder(failing)
    errors: list[str] = []

    def ask(text: str) -> None:
        try:
            batcher.embed([text])
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=ask, args=("first",))]
    threads[0].start()
    assert failing.entered.wait(30)
    for count, query in enumerate(QUERIES[:3], start=1):
        threads.append(threading.Thread(target=ask, args=(query,)))
        threads[-1].start()
        _queued(batcher, count)
    failing.release.set()
    for thread in threads:
        thread.join(30)
    assert errors == ["out of memory"] * 3
    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.embed(["later"])  # the worker survived the error and still answers


@pytest.mark.models
def test_one_embedder_per_model_per_process(tiny_settings: Settings) -> None:
    retrieval = shared_profile_embedder(tiny_settings)
    assert shared_profile_embedder(tiny_settings, tiny_settings.roles.embedder) is retrieval  # type: ignore[union-attr]
    assert shared_profile_embedder(tiny_settings, "embedder_large") is not retrieval
    assert retrieval.name == load_profile_embedder(tiny_settings).name
    with pytest.raises(ValueError, match="max_batch_texts"):
        MicroBatchingEmbedder(retrieval, max_batch_texts=0)


@pytest.mark.models
def test_a_prefetched_text_is_embedded_once_and_its_caller_waits_for_that_pass() -> None:
    gated = GatedEmbedder()
    batcher = MicroBatchingEmbedder(gated, max_batch_texts=8, recent_texts=16, lanes=ONE_LANE)
    batcher.prefetch(QUERIES[:2])
    assert gated.entered.wait(30)  # the prefetch's pass is running, held in the model
    batcher.prefetch(QUERIES[:2])  # already on its way: not sent again
    result: dict[str, NDArray[np.float32]] = {}
    asker = threading.Thread(target=lambda: result.update(v=batcher.embed(QUERIES[1:3])))
    asker.start()
    _queued(batcher, 1)  # only the text the prefetch did not send
    gated.release.set()
    asker.join(30)

    assert gated.calls == [QUERIES[:2], [QUERIES[2]]]
    alone = minilm().embed(QUERIES[1:3])
    np.testing.assert_allclose(result["v"], alone, atol=1e-5)
    batcher.embed([QUERIES[0]])  # remembered from the prefetch's pass
    assert len(gated.calls) == 2


@pytest.mark.models
def test_a_failed_prefetch_reaches_the_caller_that_waits_for_it() -> None:
    failing = FailingEmbedder()
    batcher = MicroBatchingEmbedder(failing, recent_texts=16)
    failing.release.set()
    batcher.embed(["first"])  # passes; later passes fail
    batcher.prefetch([QUERIES[0]])
    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.embed([QUERIES[0]])
    assert not batcher._inflight  # the failed texts are not waited for again


@pytest.mark.models
def test_retrieval_sends_its_queries_to_the_matchers_model(tiny_settings: Settings) -> None:
    retrieval = shared_profile_embedder(tiny_settings)
    matcher = shared_profile_embedder(tiny_settings, "embedder_large", query_model=True)
    other_stack = tiny_settings.model_copy(
        update={"retrieval": tiny_settings.retrieval.model_copy(update={"micro_batch_texts": 32})}
    )
    elsewhere = shared_profile_embedder(other_stack, "embedder_large", query_model=True)
    query = "Does the prefetch reach the matcher's model?"
    passes = matcher.passes_
    prefetch_query_vectors([query], besides=retrieval)
    vector = matcher.embed([query])
    assert matcher.passes_ == passes + 1  # one pass: the prefetch's
    assert elsewhere.passes_ == 0  # another stack's matcher in the process: not sent
    np.testing.assert_allclose(
        vector, load_profile_embedder(tiny_settings, "embedder_large").embed([query]), atol=1e-5
    )
    prefetch_query_vectors(["only for others"], besides=matcher)
    assert matcher.passes_ == passes + 1


@pytest.mark.models
def test_a_tuned_matchers_model_gets_only_its_collections_queries(
    tiny_settings: Settings,
) -> None:
    retrieval = shared_profile_embedder(tiny_settings)
    tuned = {
        name: shared_embedder(
            tiny_settings,
            f"test-tuned-{name}",
            lambda: CountingEmbedder(minilm()),
            query_model=True,
            collection=name,
        )
        for name in ("bank", "library")
    }
    prefetch_query_vectors(["where is my card"], besides=retrieval, collection="bank")
    tuned["bank"].embed(["where is my card"])  # the prefetch's pass, or waits for it
    assert (tuned["bank"].texts_, tuned["library"].texts_) == (1, 0)
    # Retrieval searching with the tuned model itself (a renamed view of it): the query
    # is in its memory already, so nothing is sent to it again.
    view = NamedEmbedder(tuned["bank"], "tuned:tm-000000000001")
    view.embed(["card not arrived"])
    prefetch_query_vectors(["card not arrived"], besides=view, collection="bank")
    tuned["bank"].embed(["card not arrived"])
    assert (tuned["bank"].texts_, tuned["bank"].passes_) == (2, 2)


class _SeesTheMatcher(CountingEmbedder):
    """Retrieval's model, noting for each pass whether the matcher's model had already
    been sent every text of it."""

    def __init__(self, matcher: list[MicroBatchingEmbedder]) -> None:
        super().__init__(minilm())
        self.matcher = matcher
        self.matcher_had: list[bool] = []

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        matcher = self.matcher[0]
        with matcher._recent_lock:
            self.matcher_had.append(
                all(t in matcher._inflight or t in matcher._recent for t in texts)
            )
        return super().embed(texts, progress=progress)


@pytest.mark.models
def test_the_matchers_model_gets_a_search_query_before_retrievals_pass(
    tiny_settings: Settings,
) -> None:
    from tribunal.retrieval import KnowledgeBase

    matcher: list[MicroBatchingEmbedder] = []
    seeing = _SeesTheMatcher(matcher)
    retrieval = shared_embedder(tiny_settings, "test-order-retrieval", lambda: seeing)
    matcher.append(
        shared_embedder(
            tiny_settings,
            "test-order-matcher",
            lambda: CountingEmbedder(minilm()),
            query_model=True,
            collection="faq",
        )
    )
    queries = ["Is my card on its way?", "Why was my transfer declined?"]
    # Only the explicit embedder is read: no knowledge base needs opening.
    vectors = KnowledgeBase.embed_queries(
        None,  # type: ignore[arg-type]
        queries,
        embedder=retrieval,
        collections=["faq", "faq"],
    )
    assert seeing.matcher_had == [True]  # both passes can hold the same queries
    np.testing.assert_allclose(vectors, minilm().embed(queries), atol=1e-5)
    passes = matcher[0].passes_
    np.testing.assert_allclose(matcher[0].embed(queries), vectors, atol=1e-5)
    assert matcher[0].passes_ <= passes + 1  # the prefetch's pass, not another
    assert matcher[0].texts_ == len(queries)
