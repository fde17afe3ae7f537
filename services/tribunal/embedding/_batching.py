"""Concurrent embedding calls gathered into one forward pass; one embedder per model
per process.

A service answering many small requests at once (one query each) would otherwise run
one forward pass per request, each from its own server thread: the passes compete
for the same cores, and torch's intra-op threads oversubscribe them. Here each model's
calls queue for its workers (one per core), and the process's cores are handed out per
pass (:mod:`._lanes`): under load, passes of any model run side by side on one core
each, and the calls arriving meanwhile go into the next pass together. A lone call
waits for nobody and gets every core (a worker waits for more only under load, when
its last pass gathered several calls): batching costs a single request no latency.

On the CPU a pass under load also takes no more than its lane's part of the work in
flight (``spread``): the texts queued or in a pass, at their most over the last
gatherings, split evenly over the lanes. Then no lane's pass holds most callers while
another lane has nothing to run, and passes stay as large as the load allows (each pass
reads the model's weights once: a small pass costs more per text). ``bench/gateway.py``
measures spread passes against passes not spread side by side. On a GPU, where a larger
pass is cheaper per text still, passes are not spread.

:func:`shared_profile_embedder` gives every service in a process the same
:class:`MicroBatchingEmbedder` per model, with a small memory of recent short
requests: where retrieval and the feature matcher (or the relevance judge) use one
model, a query is embedded once and shared, and concurrent requests of all of them
batch together.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ._embedding import Embedder, WrappingEmbedder, load_profile_embedder
from ._lanes import ComputeLanes, process_lanes
from ._vectors import Vectors

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "MicroBatchingEmbedder",
    "prefetch_query_vectors",
    "shared_embedder",
    "shared_profile_embedder",
]


@dataclass
class _Pending:
    texts: list[str]
    progress: bool
    future: Future[Vectors] = field(default_factory=Future)


class MicroBatchingEmbedder(WrappingEmbedder):
    """Runs every ``embed`` call on a worker thread, concurrent calls in one pass.

    Thread-safe. Results are the inner embedder's for the same texts (a text's vector
    does not depend on what it was batched with beyond float rounding: padding is
    masked out).

    Args:
        inner: The model.
        max_batch_texts: Most texts gathered into one pass; a single call with more
            runs alone (the inner embedder splits it into its own batches).
        max_wait_s: How long a pass waits for more calls when it is not full, under load
            only (the previous pass gathered several calls): a lone call never waits. 0:
            never — the calls that arrived while the previous pass ran are the batch.
        recent_texts: Vectors of this many recent texts from short calls (at most
            ``max_batch_texts`` texts: queries, KB entries being matched) kept and
            served without the model; 0 keeps none. Long calls (ingestion) bypass it.
        lanes: The lanes passes run in, shared with other models (default: the
            process's, one per torch thread); one worker per lane.
        spread: A pass takes at most its lane's part of the texts in flight (see the
            module docstring; for CPU lanes; on one lane a pass still takes every queued
            call, and waits for more only up to the most recently in flight). Off: a
            pass takes every queued call up to ``max_batch_texts``.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        max_batch_texts: int = 64,
        max_wait_s: float = 0.0,
        recent_texts: int = 0,
        lanes: ComputeLanes | None = None,
        spread: bool = False,
    ) -> None:
        if max_batch_texts < 1 or max_wait_s < 0 or recent_texts < 0:
            raise ValueError("max_batch_texts >= 1, max_wait_s >= 0 and recent_texts >= 0")
        self.inner = inner
        self.max_batch_texts = max_batch_texts
        self.max_wait_s = max_wait_s
        self.recent_texts = recent_texts
        self._queue: deque[_Pending] = deque()
        self._ready = threading.Condition()
        self._lanes = lanes
        self.spread = spread
        self._running_texts = 0
        self._in_flight_seen: deque[int] = deque(maxlen=_IN_FLIGHT_WINDOW)
        self._workers: list[threading.Thread] = []
        # One worker at a time waits for calls and a lane: the others would hold lanes
        # with nothing to run (and a lone pass would not find every lane free).
        self._gathering = threading.Lock()
        self._counted = threading.Lock()
        self._recent: OrderedDict[str, Vectors] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._inflight: dict[str, tuple[Future[Vectors], int]] = {}
        self._last_calls = 0
        self.passes_ = 0
        """Forward passes run (each over one or more calls)."""
        self.calls_ = 0
        """Calls that reached the model."""
        self.texts_ = 0
        """Texts embedded by the passes."""
        self.busy_s_ = 0.0
        """Seconds spent in forward passes (summed over passes that ran at once)."""

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        if not (self.recent_texts > 0 and len(texts) <= self.max_batch_texts):
            return self._submit(list(texts), progress).result()
        with self._recent_lock:
            known = {t: self._recent[t] for t in texts if t in self._recent}
            for text in known:
                self._recent.move_to_end(text)
            # Texts a prefetch already sent to the model: wait for that pass, not another.
            coming = {t: self._inflight[t] for t in texts if t not in known and t in self._inflight}
        if len(known) == len(set(texts)):
            return np.stack([known[t] for t in texts])
        missing = list(dict.fromkeys(t for t in texts if t not in known and t not in coming))
        fresh = self._submit(missing, progress) if missing else None
        vectors = dict(known)
        for text, (future, row) in coming.items():
            vectors[text] = future.result()[row]
        if fresh is not None:
            vectors.update(zip(missing, fresh.result(), strict=True))
            self._remember(missing, vectors)
        return np.stack([vectors[t] for t in texts])

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start embedding ``texts`` without waiting: a later ``embed`` of them takes the
        vectors from that pass (or from the memory of recent texts, where they go).
        Does nothing without that memory or for a call too long to keep."""
        if not (self.recent_texts > 0 and 0 < len(texts) <= self.max_batch_texts):
            return
        with self._recent_lock:
            missing = [
                t for t in dict.fromkeys(texts) if t not in self._recent and t not in self._inflight
            ]
            if not missing:
                return
            future = self._submit(missing, False)
            for row, text in enumerate(missing):
                self._inflight[text] = (future, row)

        def settle(done: Future[Vectors]) -> None:
            with self._recent_lock:
                for text in missing:
                    self._inflight.pop(text, None)
            if done.exception() is None:  # a failed pass reaches whoever waits on it
                self._remember(missing, dict(zip(missing, done.result(), strict=True)))

        future.add_done_callback(settle)

    def forget_recent(self) -> None:
        """Drop the memory of recent texts (a benchmark round then starts as cold as the
        last one)."""
        with self._recent_lock:
            self._recent.clear()

    def _remember(self, texts: Sequence[str], vectors: dict[str, Vectors]) -> None:
        with self._recent_lock:
            for text in texts:
                self._recent[text] = vectors[text]
            while len(self._recent) > self.recent_texts:
                self._recent.popitem(last=False)

    def _submit(self, texts: list[str], progress: bool) -> Future[Vectors]:
        pending = _Pending(texts, progress)
        with self._ready:
            self._queue.append(pending)
            if not self._workers:
                if self._lanes is None:
                    self._lanes = process_lanes()
                for number in range(self._lanes.lanes):
                    worker = threading.Thread(
                        target=self._run, name=f"embed-{self.name}-{number}", daemon=True
                    )
                    worker.start()
                    self._workers.append(worker)
            self._ready.notify()
        return pending.future

    def _wait_for_calls(self) -> None:
        with self._ready:
            while not self._queue:
                self._ready.wait()

    def _pass_share(self) -> int:
        """Most texts the pass being gathered takes (hold ``_ready``): with ``spread``,
        the most texts in flight (queued or in a pass) over the last gatherings, split
        evenly over the lanes."""
        if not self.spread or self._lanes is None:
            return self.max_batch_texts
        queued = sum(len(pending.texts) for pending in self._queue)
        self._in_flight_seen.append(queued + self._running_texts)
        # An even split, not a smaller one: a third of the work per pass on two lanes
        # (one pass's worth kept queued) kept the cores no busier and made more, smaller
        # passes, each reading the weights again (bench/pass_share.py, 2 cores).
        return max(1, -(-max(self._in_flight_seen) // self._lanes.lanes))

    def _next_batch(self) -> tuple[list[_Pending], bool]:
        """The next pass's calls (the gathering worker saw the queue non-empty, and only
        it takes calls), and whether nothing else is queued behind them."""
        with self._ready:
            share = min(self.max_batch_texts, self._pass_share())
            batch = [self._queue.popleft()]
            size = len(batch[0].texts)
            # Under load (the last pass gathered several calls) a short wait fills the
            # pass; a lone caller never waits.
            wait = self.max_wait_s if self._last_calls > 1 else 0.0
            deadline = time.monotonic() + wait
            while size < share and not batch[0].progress:
                if not self._queue:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._ready.wait(left) or not self._queue:
                        break
                head = self._queue[0]
                if head.progress or size + len(head.texts) > self.max_batch_texts:
                    break
                batch.append(self._queue.popleft())
                size += len(head.texts)
            self._running_texts += size
            return batch, not self._queue

    def _run(self) -> None:
        from ..core import use_torch_threads

        lanes = self._lanes
        assert lanes is not None
        while True:
            # A core first, then the batch: the calls arriving while every core is busy
            # join the pass that gets the next free one.
            with self._gathering:
                self._wait_for_calls()
                lanes.take_one()
                batch, alone = self._next_batch()
            texts = [text for pending in batch for text in pending.texts]
            held = lanes.widen(
                whole=len(texts) > self.max_batch_texts or batch[0].progress,
                lone=len(batch) == 1 and alone,
            )
            try:
                use_torch_threads(lanes.threads(held))
                started = time.perf_counter()
                vectors = self.inner.embed(texts, progress=batch[0].progress)
                busy = time.perf_counter() - started
            except BaseException as exc:  # every waiting caller gets the model's error
                for pending in batch:
                    pending.future.set_exception(exc)
                continue
            finally:
                lanes.give(held)
                with self._ready:
                    self._running_texts -= len(texts)
            with self._counted:
                self.busy_s_ += busy
                self.passes_ += 1
                self.calls_ += len(batch)
                self.texts_ += len(texts)
                self._last_calls = len(batch)
            start = 0
            for pending in batch:
                stop = start + len(pending.texts)
                pending.future.set_result(vectors[start:stop])
                start = stop


_IN_FLIGHT_WINDOW = 16
"""Gatherings over which a spread pass's share is taken from the most texts in flight:
long enough that a moment when most callers are between passes does not shrink the
next ones, short enough that the share follows a drop in load after 16 passes."""

_Stack = tuple[str, int, int, int, float, int, int | None, bool]
"""A shared embedder's settings apart from its model (device, batching, memory): the
embedders made from one ``Settings`` (one service stack) share it."""
_SHARED: dict[tuple[str, _Stack], MicroBatchingEmbedder] = {}
"""By (model, stack)."""
_SHARED_LOCK = threading.Lock()
_QUERY_MODELS: dict[_Stack, list[tuple[str | None, MicroBatchingEmbedder]]] = {}
"""Per stack, the embedders that embed search queries after retrieval (the feature
matcher's), each with the one collection whose queries it embeds (None: any):
:func:`prefetch_query_vectors` sends them the queries retrieval embeds."""


def prefetch_query_vectors(
    texts: Sequence[str], *, besides: Embedder, collection: str | None = None
) -> None:
    """Start embedding search queries of ``collection`` on the other query models of
    ``besides``'s stack (same settings, same process) that embed that collection's
    queries, so a matcher's pass for them runs while retrieval works instead of after it.
    Where ``besides`` is the matcher's model itself, the matcher finds the vectors in its
    memory of recent texts and nothing is sent."""
    while isinstance(besides, WrappingEmbedder) and not isinstance(besides, MicroBatchingEmbedder):
        besides = besides.inner  # a renamed view of a shared embedder
    with _SHARED_LOCK:
        stacks = [stack for (_, stack), shared in _SHARED.items() if shared is besides]
        models = [
            model
            for stack in stacks
            for scope, model in _QUERY_MODELS.get(stack, [])
            if model is not besides and scope in (None, collection)
        ]
    for model in models:
        model.prefetch(texts)


def shared_profile_embedder(
    settings: Settings, key: str | None = None, *, query_model: bool = False
) -> MicroBatchingEmbedder:
    """This process's one micro-batching embedder for model ``key`` of the profile
    (default: the embedder role), loaded on first use.

    Every service of the process asking for the same model (same weights, device and
    batch size) gets the same object, so their concurrent calls share forward passes
    and their recent short texts (``retrieval.shared_recent_texts``). ``query_model``:
    the caller embeds search queries after retrieval (the feature matcher); with
    ``retrieval.prefetch_query_vectors`` retrieval starts those embeddings itself.
    """
    from ..core import model_path

    if key is None:
        assert settings.roles is not None, "the profile defines no roles"
        key = settings.roles.embedder
    spec = settings.model_spec(key)
    where = str(model_path(settings, key)) if spec.artifact is not None else str(spec.hf_id)
    chosen = key
    return shared_embedder(
        settings, where, lambda: load_profile_embedder(settings, chosen), query_model=query_model
    )


def shared_embedder(
    settings: Settings,
    where: str,
    load: Callable[[], Embedder],
    *,
    query_model: bool = False,
    collection: str | None = None,
) -> MicroBatchingEmbedder:
    """This process's one micro-batching embedder of the model at ``where`` (its
    directory or hub id), made with ``load`` on first use; see
    :func:`shared_profile_embedder`. ``collection``: a query model for that collection's
    queries only (a tuned matcher's)."""
    from ..core import apply_thread_policy, resolve_device

    options = settings.retrieval
    device = resolve_device(settings)
    stack: _Stack = (
        device,
        options.embed_batch_size,
        options.embed_batch_tokens,
        options.micro_batch_texts,
        options.micro_batch_wait_s,
        options.shared_recent_texts,
        options.embed_lanes,
        options.micro_batch_spread,
    )
    with _SHARED_LOCK:
        embedder = _SHARED.get((where, stack))
        if embedder is None:
            apply_thread_policy(settings.server.compute_threads)
            embedder = MicroBatchingEmbedder(
                load(),
                max_batch_texts=options.micro_batch_texts,
                max_wait_s=options.micro_batch_wait_s,
                recent_texts=options.shared_recent_texts,
                lanes=process_lanes(options.embed_lanes),
                spread=options.micro_batch_spread and device == "cpu",
            )
            _SHARED[(where, stack)] = embedder
        peers = _QUERY_MODELS.setdefault(stack, [])
        peer = (collection, embedder)
        if query_model and options.prefetch_query_vectors and peer not in peers:
            peers.append(peer)
        return embedder
