"""A wall-clock budget for a tune: the encoder fine-tune stops early to leave room for the rest.

An encoder fine-tune's optimiser steps are the one part of a tune whose length the user
does not see coming (minutes per epoch on 2 cores), and what follows it cannot be cut:
the fine-tuned model must embed every entry text and the head and held-out queries
afresh. So the budget is spent backwards: before training, a small timed sample of those
texts, embedded by the base model, prices what follows (:func:`price_after_training`);
during training, :class:`TrainingDeadline` stops the trainer before a step that would
end past the deadline less that price. The steps run and why it stopped are recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MARGIN_SHARE", "TrainingDeadline", "price_after_training"]

SAMPLE_TEXTS = 8
"""Texts of each kind timed to price the embedding that follows training."""
MARGIN_SHARE = 0.05
"""Share of the budget kept back for writing the taught phrasings and the artifact."""


def price_after_training(
    embed: Callable[[list[str]], Any],
    *,
    long_texts: Sequence[str],
    short_texts: Sequence[str],
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Seconds the embedding after training should take: each kind's per-text time on
    an evenly spread sample of :data:`SAMPLE_TEXTS` (after one warm-up call), times its
    count. ``long_texts``: answers and phrasing + answer; ``short_texts``: phrasings and
    queries."""
    total = 0.0
    warmed = False
    for texts in (long_texts, short_texts):
        if not texts:
            continue
        stride = max(1, len(texts) // SAMPLE_TEXTS)
        sample = list(texts[::stride][:SAMPLE_TEXTS])
        if not warmed:
            embed(sample[:1])
            warmed = True
        started = clock()
        embed(sample)
        total += (clock() - started) / len(sample) * len(texts)
    return total


@dataclass
class TrainingDeadline:
    """When the encoder fine-tune must stop, and what it did.

    ``deadline`` is a :func:`time.monotonic` instant (None: no budget); ``reserve`` the
    seconds kept for what follows training. A step starts only if, at the pace of the
    steps so far, it ends by ``deadline - reserve``.
    """

    deadline: float | None
    reserve: float
    steps_: int = 0
    planned_steps_: int = 0
    stopped_early_: bool = False
    step_seconds_: list[float] = field(default_factory=list)

    def room(self) -> float:
        """Seconds left for training (infinite without a budget)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - self.reserve - time.monotonic()

    def next_step_fits(self) -> bool:
        pace = max(self.step_seconds_[-3:]) if self.step_seconds_ else 0.0
        return self.room() >= pace

    def record(self) -> dict[str, Any]:
        return {
            "steps": self.steps_,
            "planned_steps": self.planned_steps_,
            "stopped_by_time_budget": self.stopped_early_,
            "seconds_after_training_priced": round(self.reserve, 1),
        }

    def callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that keeps this deadline."""
        from transformers import TrainerCallback

        deadline = self

        class _Keep(TrainerCallback):  # type: ignore[misc]
            def __init__(self) -> None:
                self.step_started = time.monotonic()

            def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                deadline.planned_steps_ = int(state.max_steps)
                return control

            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                self.step_started = time.monotonic()
                return control

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                deadline.step_seconds_.append(time.monotonic() - self.step_started)
                deadline.steps_ = int(state.global_step)
                if state.global_step < state.max_steps and not deadline.next_step_fits():
                    deadline.stopped_early_ = True
                    control.should_training_stop = True
                return control

        return _Keep()
