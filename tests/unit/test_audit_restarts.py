"""Restarted live bounds on seeded synthetic Bernoulli streams.

Beside the cumulative sequence (δ/2), sequences restarted at stopping times (δ_k =
(δ/2)·6/(π²k²)) each cover the running rate since their start; together they cover at
every time in at least 1 − δ of the streams, and a fail-safe on *any* lower end trips in
at most δ of them when no answer's rate exceeds α — even when the starts are chosen from
the verdicts seen so far. After a step change, a restart shows the violation that the
cumulative bound, diluted by the answers before the change, is slow to show.
500 streams with ``-m extended``; 100 in ``make test``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.audit import RateConfidenceSequence, cumulative_delta, restart_delta
from tribunal.core import InvalidArgumentError

DELTA = 0.05
SIZES = [100, pytest.param(500, marks=pytest.mark.extended)]


def _stream(
    rng: np.random.Generator, rate: NDArray[np.float64], share: float
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per (stream, time): Σ Y_i so far (inverse-probability weighted wrong), audited."""
    wrong = rng.random(rate.shape) < rate
    audited = rng.random(rate.shape) < share
    return np.cumsum(np.where(wrong & audited, 1.0 / share, 0.0), axis=1), audited


def _segment(
    cumulative: NDArray[np.float64], starts: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """The restarted stream of each row from its start (answers start+1, ...): Σ Y since
    the start, answers since the start, and where the sequence is running."""
    streams, horizon = cumulative.shape
    t = np.arange(1, horizon + 1)
    at_start = np.where(
        starts > 0, cumulative[np.arange(streams), np.clip(starts - 1, 0, None)], 0.0
    )
    running = t[None, :] > starts[:, None]
    y = np.where(running, cumulative - at_start[:, None], 0.0)
    n = np.where(running, t[None, :] - starts[:, None], 1)
    return y, n.astype(np.float64), running


def _first_time(condition: NDArray[np.bool_], after: int = 0) -> NDArray[np.int64]:
    """Per row, the number of answers served when ``condition`` first held (past
    ``after``); the horizon when it never did (no restart)."""
    masked = condition.copy()
    masked[:, :after] = False
    hit = masked.any(axis=1)
    return np.where(hit, np.argmax(masked, axis=1) + 1, condition.shape[1]).astype(np.int64)


def _adaptive_starts(
    cumulative: NDArray[np.float64], window: int, level: float, count: int
) -> list[NDArray[np.int64]]:
    """Restart after the first time the *verdicts so far* look bad: the weighted estimate
    over the last ``window`` answers is above ``level`` — a stopping time that reads the
    past labels (never the ones after the start). Then again ``window`` answers later
    under the same rule, ``count`` times."""
    horizon = cumulative.shape[1]
    padded = np.concatenate([np.zeros((cumulative.shape[0], window)), cumulative], axis=1)
    recent = (padded[:, window:] - padded[:, :horizon]) / window
    looks_bad = recent > level
    looks_bad[:, :window] = False
    starts, after = [], np.zeros(cumulative.shape[0], dtype=np.int64)
    for _ in range(count):
        masked = looks_bad & (np.arange(1, horizon + 1)[None, :] > after[:, None] + window)
        start = _first_time(masked)
        starts.append(start)
        after = start
    return starts


def test_the_spending_sequence_sums_to_half_of_delta() -> None:
    assert cumulative_delta(0.05) == pytest.approx(0.025)
    assert restart_delta(0.05, 1) == pytest.approx(0.025 * 6 / math.pi**2)
    total = sum(restart_delta(0.05, k) for k in range(1, 200_000))
    assert total == pytest.approx(0.025, rel=1e-5)
    assert total < 0.025
    with pytest.raises(InvalidArgumentError, match="from 1"):
        restart_delta(0.05, 0)


@pytest.mark.parametrize("streams", SIZES)
def test_every_sequence_covers_its_running_rate_with_adaptive_restarts(streams: int) -> None:
    # The rate climbs 0.05 -> 0.15 -> 0.30; up to three restarts, each when the last 300
    # verdicts looked above 0.12. Each sequence's target is the running mean of the
    # per-answer rates since its own start.
    rng = np.random.default_rng(21)
    horizon = 3000
    per_answer = np.select(
        [np.arange(horizon) < 1000, np.arange(horizon) < 2000], [0.05, 0.15], 0.30
    )
    rate = np.broadcast_to(per_answer, (streams, horizon))
    cumulative, _ = _stream(rng, rate, 0.2)
    prefix = np.concatenate([[0.0], np.cumsum(per_answer)])
    t = np.arange(1, horizon + 1)
    whole = RateConfidenceSequence(delta=cumulative_delta(DELTA), min_inclusion=0.2)
    truth = np.broadcast_to(prefix[1:] / t, rate.shape)
    missed = whole.excludes_at_or_below(cumulative, t, truth) | whole.excludes_at_or_above(
        cumulative, t, truth
    )
    missed = missed.any(axis=1)
    starts = _adaptive_starts(cumulative, window=300, level=0.12, count=3)
    for k, start in enumerate(starts, start=1):
        y, n, running = _segment(cumulative, start)
        target = (prefix[1:][None, :] - prefix[start][:, None]) / n
        sequence = RateConfidenceSequence(delta=restart_delta(DELTA, k), min_inclusion=0.2)
        wrong_side = sequence.excludes_at_or_below(y, n, target) | sequence.excludes_at_or_above(
            y, n, target
        )
        missed |= (wrong_side & running).any(axis=1)
    assert (starts[0] < horizon).mean() > 0.9  # the rule did restart, mostly after the change
    assert (~missed).sum() >= (1 - DELTA) * streams
    assert int((~missed).sum()) == {100: 100, 500: 500}[streams]


@pytest.mark.parametrize("streams", SIZES)
def test_the_fail_safe_on_any_sequence_trips_in_at_most_delta_of_streams(streams: int) -> None:
    # No violation, worst case: every answer wrong with probability exactly alpha = 0.1,
    # 10% audited, and up to five restarts at the moments the recent verdicts look worst
    # (the last 200 answers' estimate above 0.15): the adversary's stopping times.
    rng = np.random.default_rng(22)
    horizon, alpha = 3000, 0.1
    cumulative, _ = _stream(rng, np.full((streams, horizon), alpha), 0.1)
    t = np.arange(1, horizon + 1)
    whole = RateConfidenceSequence(delta=cumulative_delta(DELTA), min_inclusion=0.1)
    tripped = whole.excludes_at_or_below(cumulative, t, alpha).any(axis=1)
    starts = _adaptive_starts(cumulative, window=200, level=0.15, count=5)
    for k, start in enumerate(starts, start=1):
        y, n, running = _segment(cumulative, start)
        sequence = RateConfidenceSequence(delta=restart_delta(DELTA, k), min_inclusion=0.1)
        tripped |= (sequence.excludes_at_or_below(y, n, alpha) & running).any(axis=1)
    assert (starts[0] < horizon).mean() > 0.5  # the adversary did restart
    assert tripped.sum() <= DELTA * streams
    assert int(tripped.sum()) == {100: 0, 500: 3}[streams]


def test_a_restart_at_a_step_change_trips_within_a_bounded_number_of_audits() -> None:
    # 3000 answers at 0.05, then 0.30 against alpha = 0.1, 20% audited; the shift
    # warning starts a fresh sequence 100 answers after the change (the warning reads
    # the signals, not the verdicts). One seeded stream: exact counts.
    rng = np.random.default_rng(23)
    per_answer = np.where(np.arange(6000) < 3000, 0.05, 0.30)[None, :]
    cumulative, audited = _stream(rng, per_answer, 0.2)
    t = np.arange(1, 6001)
    audits = np.cumsum(audited[0])
    whole = RateConfidenceSequence(delta=cumulative_delta(DELTA), min_inclusion=0.2)
    cumulative_trip = _first_time(whole.excludes_at_or_below(cumulative, t, 0.1))[0]
    start = np.array([3100])
    y, n, running = _segment(cumulative, start)
    restarted = RateConfidenceSequence(delta=restart_delta(DELTA, 1), min_inclusion=0.2)
    restart_trip = _first_time(restarted.excludes_at_or_below(y, n, 0.1) & running)[0]
    audits_after_change = audits[restart_trip - 1] - audits[2999]
    audits_since_restart = audits[restart_trip - 1] - audits[start[0] - 1]
    cumulative_after_change = audits[cumulative_trip - 1] - audits[2999]
    assert (audits_since_restart, audits_after_change, cumulative_after_change) == (63, 85, 437)
    # The restarted bound needs a fifth of the audits after the change that the cumulative
    # one, diluted by 3000 answers at 0.05, needs.
    assert audits_after_change * 5 < cumulative_after_change
