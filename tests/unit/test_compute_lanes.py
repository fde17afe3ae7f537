"""The process's cores handed to forward passes: a lone pass gets every core, passes
under load one core each and side by side, a long call waits for every core and the
passes behind it wait for it; two lanes on the real MiniLM give every caller the vectors
the model gives each text alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.embedding._batching import MicroBatchingEmbedder
from tribunal.embedding._lanes import ComputeLanes

from tests.integration._retrieval import CountingEmbedder, minilm


@contextmanager
def _hold(lanes: ComputeLanes, *, whole: bool, lone: bool) -> Iterator[int]:
    """Lanes held as a pass's worker holds them; yields the pass's threads."""
    lanes.take_one()
    held = lanes.widen(whole=whole, lone=lone)
    try:
        yield lanes.threads(held)
    finally:
        lanes.give(held)


def _held(lanes: ComputeLanes, taken: list[int], *, whole: bool, lone: bool) -> threading.Event:
    """Hold cores on a thread until the returned event is set; ``taken`` gets the count."""
    release = threading.Event()
    holding = threading.Event()

    def hold() -> None:
        with _hold(lanes, whole=whole, lone=lone) as cores:
            taken.append(cores)
            holding.set()
            assert release.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(30)
    return release


def test_a_lone_pass_takes_every_free_core_and_a_batch_one() -> None:
    lanes = ComputeLanes(2)
    with _hold(lanes, whole=False, lone=True) as cores:
        assert cores == 2
    with _hold(lanes, whole=False, lone=False) as cores:
        assert cores == 1
    taken: list[int] = []
    release = _held(lanes, taken, whole=False, lone=False)
    with _hold(lanes, whole=False, lone=True) as cores:  # one core is busy: a lone pass gets one
        assert cores == 1
    release.set()
    assert taken == [1]


def test_fewer_lanes_than_cores_give_each_pass_a_share() -> None:
    one_at_a_time = ComputeLanes(2, lanes=1)
    with _hold(one_at_a_time, whole=False, lone=False) as threads:
        assert threads == 2  # the only lane: every core
    halves = ComputeLanes(4, lanes=2)
    with _hold(halves, whole=False, lone=False) as threads:
        assert threads == 2
        with _hold(halves, whole=False, lone=True) as other:
            assert other == 2  # a lane is busy: a lone pass gets its own share only
    with _hold(halves, whole=False, lone=True) as threads:
        assert threads == 4
    assert ComputeLanes(2, lanes=8).lanes == 2  # never more lanes than cores


def test_a_long_call_waits_for_every_core_and_later_passes_wait_behind_it() -> None:
    lanes = ComputeLanes(2)
    order: list[str] = []
    taken: list[int] = []
    release_first = _held(lanes, taken, whole=False, lone=False)

    def run(name: str, *, whole: bool) -> None:
        with _hold(lanes, whole=whole, lone=False) as cores:
            order.append(f"{name}:{cores}")

    long_call = threading.Thread(target=run, args=("long",), kwargs={"whole": True})
    long_call.start()
    time.sleep(0.2)  # the long call is waiting for the busy core
    later = threading.Thread(target=run, args=("later",), kwargs={"whole": False})
    later.start()
    time.sleep(0.2)
    assert order == []  # a free core, but the pass waits behind the long call
    release_first.set()
    long_call.join(30)
    later.join(30)
    assert order == ["long:2", "later:1"]
    with pytest.raises(ValueError, match="cores >= 1 and lanes >= 1"):
        ComputeLanes(0)


class ThreadRecordingEmbedder(CountingEmbedder):
    """Records torch's thread count in each pass; ``meet``: passes wait until that many
    are inside the model at once (proof that they ran side by side)."""

    def __init__(self, meet: int = 1) -> None:
        super().__init__(minilm())
        self.threads: list[int] = []
        self.barrier = threading.Barrier(meet, timeout=30)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> NDArray[np.float32]:
        import torch

        self.threads.append(torch.get_num_threads())
        self.barrier.wait()
        return super().embed(texts, progress=progress)


@pytest.mark.models
def test_batches_under_load_run_side_by_side_on_one_thread_each() -> None:
    recording = ThreadRecordingEmbedder(meet=2)
    batcher = MicroBatchingEmbedder(recording, max_batch_texts=2, lanes=ComputeLanes(2))
    texts = ["Wash your hands.", "Is there a vaccine?", "Can my dog catch it?", "Masks?"]
    # Four calls queued before any worker looks (the queue's lock is reentrant): each
    # worker takes a batch of two.
    with batcher._ready:
        futures = [batcher._submit([text], False) for text in texts]
    vectors = np.concatenate([future.result(timeout=60) for future in futures])
    assert recording.threads == [1, 1]  # two passes at once (the barrier), one thread each
    assert recording.calls == [texts[:2], texts[2:]] or recording.calls == [texts[2:], texts[:2]]
    np.testing.assert_allclose(vectors, minilm().embed(texts), atol=1e-5)


@pytest.mark.models
def test_a_lone_call_gets_every_core() -> None:
    recording = ThreadRecordingEmbedder()
    batcher = MicroBatchingEmbedder(recording, lanes=ComputeLanes(2))
    batcher.embed(["Wash your hands."])
    batcher.embed(["Is there a vaccine?", "Can my dog catch it?"])  # one call: lone too
    assert recording.threads == [2, 2]


@pytest.mark.models
def test_a_long_call_gets_every_core_even_from_a_busy_start() -> None:
    recording = ThreadRecordingEmbedder()
    lanes = ComputeLanes(2)
    batcher = MicroBatchingEmbedder(recording, max_batch_texts=2, lanes=lanes)
    taken: list[int] = []
    release = _held(lanes, taken, whole=False, lone=False)  # one core busy elsewhere
    texts = ["Wash your hands.", "Is there a vaccine?", "Can my dog catch it?"]
    result: dict[str, NDArray[np.float32]] = {}
    caller = threading.Thread(target=lambda: result.update(v=batcher.embed(texts)))
    caller.start()
    time.sleep(0.3)
    assert recording.calls == []  # longer than a batch: it waits for both cores
    release.set()
    caller.join(30)
    assert recording.threads == [2]
    np.testing.assert_allclose(result["v"], minilm().embed(texts), atol=1e-5)


@pytest.mark.models
def test_many_callers_on_two_lanes_get_the_vectors_of_each_text_alone() -> None:
    counting = CountingEmbedder(minilm())
    batcher = MicroBatchingEmbedder(counting, max_batch_texts=4, lanes=ComputeLanes(2))
    texts = [f"How long does the virus live on surface number {i}?" for i in range(48)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        got = list(pool.map(lambda text: batcher.embed([text])[0], texts))
    alone = minilm().embed(texts)
    np.testing.assert_allclose(np.stack(got), alone, atol=1e-5)
    assert batcher.calls_ == 48
    assert batcher.texts_ == 48
    assert batcher.passes_ < 48  # calls shared passes
    assert max(len(call) for call in counting.calls) <= 4
