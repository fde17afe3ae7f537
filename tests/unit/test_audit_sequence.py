"""The live confidence sequence on seeded synthetic Bernoulli streams.

500 streams each (``-m extended``; 100 in ``make test``): the sequence covers the true
running rate at *every* time in at least 1 − δ of them (uniform, stratified and drifting
audits), and a fail-safe on its lower end trips in at most δ of them when the rate never
exceeds α. Vectorised over streams and times.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.audit import RateConfidenceSequence
from tribunal.core import InvalidArgumentError

DELTA = 0.05
# 100 streams in make test; the 500 of the acceptance criterion with -m extended.
SIZES = [100, pytest.param(500, marks=pytest.mark.extended)]


def _stream(
    rng: np.random.Generator, rate: NDArray[np.float64], inclusion: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    """Cumulative weighted wrong counts Σ Y_i per (stream, time); who was audited, wrong."""
    wrong = rng.random(rate.shape) < rate
    audited = rng.random(rate.shape) < inclusion
    y = np.where(wrong & audited, 1.0 / inclusion, 0.0)
    return np.cumsum(y, axis=1), audited, wrong


def _covered_everywhere(
    sequence: RateConfidenceSequence, cumulative: NDArray[np.float64], truth: NDArray[np.float64]
) -> NDArray[np.bool_]:
    t = np.arange(1, cumulative.shape[1] + 1)
    below = sequence.excludes_at_or_below(cumulative, t, truth)  # lower bound above the truth
    above = sequence.excludes_at_or_above(cumulative, t, truth)  # upper bound below it
    return np.asarray(~(below | above).any(axis=1))


@pytest.mark.parametrize("streams", SIZES)
def test_covers_the_rate_at_every_time_under_uniform_audits(streams: int) -> None:
    rng = np.random.default_rng(11)
    rate = np.full((streams, 2000), 0.15)
    inclusion = np.full_like(rate, 0.1)
    cumulative, _, _ = _stream(rng, rate, inclusion)
    sequence = RateConfidenceSequence(delta=DELTA, min_inclusion=0.1)
    covered = _covered_everywhere(sequence, cumulative, np.full_like(rate, 0.15))
    assert covered.sum() >= (1 - DELTA) * streams
    assert covered.sum() == {100: 99, 500: 499}[streams]


@pytest.mark.parametrize("streams", SIZES)
def test_covers_the_rate_under_stratified_audits(streams: int) -> None:
    # Low-confidence answers (30% of them, wrong 40% of the time) audited at 30%, the
    # rest (wrong 5%) at 5%: the weighted stream still estimates the overall rate 0.155.
    rng = np.random.default_rng(12)
    low = rng.random((streams, 2000)) < 0.3
    rate = np.where(low, 0.4, 0.05)
    inclusion = np.where(low, 0.3, 0.05)
    cumulative, _, _ = _stream(rng, rate, inclusion)
    sequence = RateConfidenceSequence(delta=DELTA, min_inclusion=0.05)
    covered = _covered_everywhere(sequence, cumulative, np.full(rate.shape, 0.155))
    assert covered.sum() >= (1 - DELTA) * streams
    assert covered.sum() == {100: 100, 500: 500}[streams]


@pytest.mark.parametrize("streams", SIZES)
def test_covers_a_drifting_running_rate(streams: int) -> None:
    # The rate jumps from 0.05 to 0.30 halfway: the target is the running mean of the
    # per-answer rates, which no exchangeability assumption could give.
    rng = np.random.default_rng(13)
    per_answer = np.where(np.arange(2000) < 1000, 0.05, 0.30)
    rate = np.broadcast_to(per_answer, (streams, 2000))
    inclusion = np.full(rate.shape, 0.2)
    cumulative, _, _ = _stream(rng, rate, inclusion)
    truth = np.cumsum(per_answer) / np.arange(1, 2001)
    sequence = RateConfidenceSequence(delta=DELTA, min_inclusion=0.2)
    covered = _covered_everywhere(sequence, cumulative, np.broadcast_to(truth, rate.shape))
    assert covered.sum() >= (1 - DELTA) * streams
    assert covered.sum() == {100: 100, 500: 496}[streams]


@pytest.mark.parametrize("streams", SIZES)
def test_the_fail_safe_trips_in_at_most_delta_of_streams_without_a_violation(streams: int) -> None:
    # The worst case of no violation: the rate exactly at alpha = 0.1, for 3000 accepted
    # answers audited at 10%. (Only the lower end trips it: at most delta / 2.)
    rate = 0.1
    rng = np.random.default_rng(14)
    cumulative, _, _ = _stream(rng, np.full((streams, 3000), rate), np.full((streams, 3000), 0.1))
    sequence = RateConfidenceSequence(delta=DELTA, min_inclusion=0.1)
    t = np.arange(1, 3001)
    tripped = sequence.excludes_at_or_below(cumulative, t, 0.1).any(axis=1)
    assert tripped.sum() <= DELTA * streams
    assert tripped.sum() == {100: 0, 500: 5}[streams]


@pytest.mark.parametrize("streams", SIZES)
def test_the_fail_safe_trips_on_a_real_violation_after_few_audits(streams: int) -> None:
    # Rate 0.25 against alpha = 0.1, 10% audited: nearly every stream trips, and the
    # audits needed are what an operator pays for the alarm.
    rng = np.random.default_rng(15)
    cumulative, audited, _ = _stream(
        rng, np.full((streams, 2000), 0.25), np.full((streams, 2000), 0.1)
    )
    sequence = RateConfidenceSequence(delta=DELTA, min_inclusion=0.1)
    tripped = sequence.excludes_at_or_below(cumulative, np.arange(1, 2001), 0.1)
    first = np.argmax(tripped, axis=1)
    assert tripped.any(axis=1).sum() == {100: 98, 500: 493}[streams]
    audits_until = np.cumsum(audited, axis=1)[np.arange(streams), first]
    assert int(np.median(audits_until)) == {100: 68, 500: 63}[streams]


def test_running_bound_matches_the_vectorised_tests() -> None:
    rng = np.random.default_rng(16)
    inclusion = np.where(rng.random(400) < 0.5, 0.1, 0.4)
    audited = rng.random(400) < inclusion
    wrong = (rng.random(400) < 0.3) & audited
    sequence = RateConfidenceSequence(delta=0.1, min_inclusion=0.1)
    bound = sequence.running(wrong, audited, inclusion)
    assert (bound.accepted, bound.audited, bound.wrong) == (
        400,
        int(audited.sum()),
        int(wrong.sum()),
    )
    assert 0.0 < bound.lower < bound.estimate < bound.upper < 1.0
    # Every time's own interval contains the intersection; the last one is among them.
    y = np.cumsum(np.where(wrong, 1.0 / inclusion, 0.0))
    last = sequence.bounds(float(y[-1]), 400)
    assert last[0] <= bound.lower + 1e-9
    assert bound.upper <= last[1] + 1e-9
    assert sequence.excludes_at_or_below(y[-1], 400, last[0] - 1e-6)
    assert not sequence.excludes_at_or_below(y[-1], 400, last[0] + 1e-6)
    assert sequence.excludes_at_or_above(y[-1], 400, last[1] + 1e-6)
    assert not sequence.excludes_at_or_above(y[-1], 400, last[1] - 1e-6)


def test_an_empty_stream_bounds_nothing() -> None:
    bound = RateConfidenceSequence(min_inclusion=0.5).running([], [], [])
    assert (bound.accepted, bound.lower, bound.upper) == (0, 0.0, 1.0)


@pytest.mark.parametrize(
    "kwargs", [{"delta": 0.0}, {"delta": 1.0}, {"min_inclusion": 0.0}, {"grid_size": 1}]
)
def test_bad_hyperparameters_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidArgumentError):
        RateConfidenceSequence(**kwargs)  # type: ignore[arg-type]


def test_an_inclusion_below_the_declared_minimum_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="inclusion"):
        RateConfidenceSequence(min_inclusion=0.2).running([True], [True], [0.1])
