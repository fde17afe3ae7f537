"""CPU-bound sections take turns: one thread at a time, nested turns of one thread
allowed, released on an exception, and all at once when turns are off."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from tribunal.core import python_turn, take_python_turns


@pytest.fixture(autouse=True)
def _turns_restored() -> Iterator[None]:
    previous = take_python_turns(True)
    yield
    take_python_turns(previous)


def _second_thread_enters(timeout_s: float) -> tuple[bool, threading.Thread, threading.Event]:
    """Start a thread that takes a turn; whether it got in within ``timeout_s``."""
    inside = threading.Event()

    def enter() -> None:
        with python_turn():
            inside.set()

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    return inside.wait(timeout_s), thread, inside


def test_a_second_thread_waits_for_the_turn_and_gets_it_after() -> None:
    with python_turn():
        entered, thread, inside = _second_thread_enters(0.3)
        assert not entered
    assert inside.wait(10)
    thread.join(10)
    assert not thread.is_alive()


def test_turns_nest_within_one_thread() -> None:
    with python_turn(), python_turn():
        entered, thread, inside = _second_thread_enters(0.2)
        assert not entered
    assert inside.wait(10)
    thread.join(10)


def test_an_exception_gives_the_turn_back() -> None:
    with pytest.raises(RuntimeError, match="inside"), python_turn():
        raise RuntimeError("inside")
    entered, thread, _ = _second_thread_enters(10)
    assert entered
    thread.join(10)


def test_with_turns_off_threads_run_at_once() -> None:
    assert take_python_turns(False) is True
    with python_turn():
        entered, thread, _ = _second_thread_enters(10)
        assert entered
    thread.join(10)
    assert take_python_turns(True) is False
