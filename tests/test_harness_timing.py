"""How many times the smoke harness times a GEMM: 20 calls when a call is fast, fewer (five at
least) when one takes milliseconds, so that a slow emulation does not cost a second."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

pytest.importorskip("torch", reason="the smoke harness runs in torch's workers")

from fp4doctor.smoke import harness


def counted(seconds: float) -> tuple[list[None], Callable[[], None]]:
    calls: list[None] = []

    def call() -> None:
        calls.append(None)
        if seconds:
            time.sleep(seconds)

    return calls, call


def test_a_fast_call_is_timed_twenty_times() -> None:
    calls, call = counted(0.0)
    assert harness.median_ms(call, "cpu") >= 0
    assert len(calls) == harness.WARMUP_CALLS + 1 + harness.TIMED_CALLS


def test_a_slow_call_is_timed_as_often_as_fits_in_the_budget_and_at_least_five_times() -> None:
    calls, call = counted(0.008)  # 8 ms: two would fit in 20 ms, five are made
    median = harness.median_ms(call, "cpu")
    assert len(calls) == harness.WARMUP_CALLS + 1 + harness.MIN_TIMED_CALLS
    assert median >= 8
    calls, call = counted(0.002)  # 2 ms: about ten fit (fewer if the host is slow)
    harness.median_ms(call, "cpu")
    timed = len(calls) - harness.WARMUP_CALLS - 1
    assert harness.MIN_TIMED_CALLS <= timed <= 10
