"""The tune's time budget: what follows training is priced from a timed sample, and the
encoder fine-tune (the library's real trainer, real MiniLM) stops at the step that
leaves room for it, recording the steps it ran."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from tribunal.core import InvalidArgumentError, load_embedder, load_settings
from tribunal.tuning import TuneConfig
from tribunal.tuning._budget import SAMPLE_TEXTS, TrainingDeadline, price_after_training
from tribunal.tuning._contrastive import train_encoder


class CharacterClock:
    """A clock that embedding moves on by one second per character embedded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> None:
        self.calls.append(texts)
        self.now += sum(len(t) for t in texts)

    def __call__(self) -> float:
        return self.now


def test_the_price_is_each_kinds_sampled_seconds_per_text_times_its_count() -> None:
    clock = CharacterClock()
    long_texts = ["a" * 100] * 20 + ["b" * 300] * 20  # sampled evenly: half of each
    short_texts = ["q" * 10] * 50
    price = price_after_training(
        clock.embed, long_texts=long_texts, short_texts=short_texts, clock=clock
    )
    # Long: the sample (every 5th text) is 4 of 100 and 4 of 300 characters, 200 s a text
    # on average, times 40; short: 10 s a text times 50. The warm-up call is not timed.
    assert price == pytest.approx(200.0 * 40 + 10.0 * 50)
    assert [len(c) for c in clock.calls] == [1, SAMPLE_TEXTS, SAMPLE_TEXTS]


def test_no_texts_cost_nothing_and_embed_nothing() -> None:
    clock = CharacterClock()
    assert price_after_training(clock.embed, long_texts=[], short_texts=[], clock=clock) == 0.0
    assert clock.calls == []


def test_without_a_deadline_every_step_fits() -> None:
    deadline = TrainingDeadline(None, reserve=1e9)
    assert deadline.room() == math.inf
    assert deadline.next_step_fits()


def test_a_step_fits_only_if_it_ends_before_the_reserve_at_the_pace_so_far() -> None:
    deadline = TrainingDeadline(time.monotonic() + 100.0, reserve=40.0)
    deadline.step_seconds_ += [1.0, 2.0, 70.0]
    assert not deadline.next_step_fits()  # the slowest of the last 3 steps, 70 s: > 60 s left
    deadline.step_seconds_ += [1.0, 1.0, 1.0]
    assert deadline.next_step_fits()


@pytest.mark.parametrize("budget", [0.0, -5.0, math.nan, math.inf])
def test_a_budget_must_be_a_positive_number_of_seconds(budget: float) -> None:
    with pytest.raises(InvalidArgumentError, match="time_budget_s"):
        TuneConfig(time_budget_s=budget)


def test_no_budget_is_allowed_and_the_default_is_ten_minutes() -> None:
    assert TuneConfig(time_budget_s=None).time_budget_s is None
    assert TuneConfig().time_budget_s == 600.0


def _train_minilm(tmp_path: Path, *, triples: int, epochs: float, room: float) -> TrainingDeadline:
    """MiniLM fine-tuned on ``triples`` triples in batches of 2 with ``room`` seconds for
    training (a 60 s reserve); the deadline it kept."""
    model = load_embedder(load_settings("tiny", data_dir=str(tmp_path)), "embedder")
    columns = {
        "anchor": [f"how do I do thing number {i}?" for i in range(triples)],
        "positive": [f"doing thing {i}" for i in range(triples)],
        "negative": [f"an unrelated matter {i}" for i in range(triples)],
    }
    config = TuneConfig(epochs=epochs, batch_size=2)
    deadline = TrainingDeadline(time.monotonic() + 60.0 + room, reserve=60.0)
    train_encoder(model, columns, config, tmp_path / "trainer", deadline)
    return deadline


@pytest.mark.models
def test_the_fine_tune_stops_at_the_step_that_leaves_room_for_the_rest(tmp_path: Path) -> None:
    # 50 epochs of 8 triples in batches of 2: 200 steps planned; about 3 s left for them.
    deadline = _train_minilm(tmp_path, triples=8, epochs=50.0, room=3.0)
    assert deadline.planned_steps_ == 200
    assert 1 <= deadline.steps_ < 200
    assert deadline.record() == {
        "steps": deadline.steps_,
        "planned_steps": 200,
        "stopped_by_time_budget": True,
        "seconds_after_training_priced": 60.0,
    }


@pytest.mark.models
def test_with_room_to_spare_every_planned_step_runs(tmp_path: Path) -> None:
    deadline = _train_minilm(tmp_path, triples=6, epochs=1.0, room=600.0)
    assert (deadline.steps_, deadline.planned_steps_, deadline.stopped_early_) == (3, 3, False)
