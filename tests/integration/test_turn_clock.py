"""The sandbox's clock and GPU turns (``ChildLimits.turn_wait_s``): time a judge says (signed) it
spent waiting for its turn on the GPU does not count against its time limit, up to a limit of
its own; past that the child is stopped as ``turn_wait_exceeded`` (the tester's verdict is then a
harness error, not the candidate's timeout); an unsigned "waiting" message stops no clock.

Real child processes through ``run_child``; the child is tests/fixtures/turn_child.py. The judge's
own turns need a GPU (tests/gpu/test_tester_gpu.py).
"""

from __future__ import annotations

import secrets

import pytest

from cudarl.tester.sandbox.parent import ChildLimits, run_child

pytestmark = pytest.mark.slow


def run(wait_s: float, work_s: float, timeout_s: float, turn_wait_s: float, signed: bool = True):
    limits = ChildLimits(timeout_s=timeout_s, memory_limit_mb=2048, isolate_network=False, isolate_pids=False,
                         turn_wait_s=turn_wait_s)
    job = {"wait_s": wait_s, "work_s": work_s, "sign_turn": signed}
    return run_child("tests.fixtures.turn_child", job, limits, key=secrets.token_bytes(32))


def test_waiting_for_a_turn_does_not_count_against_the_time_limit():
    child = run(wait_s=4.0, work_s=0.5, timeout_s=3.0, turn_wait_s=30.0)
    assert not child.timed_out and not child.turn_wait_exceeded, child.stderr
    assert child.last("result")["outcome"] == "passed"
    assert child.wall_s > 4.0  # longer than timeout_s: the wait was not counted


def test_work_after_the_turn_still_counts():
    child = run(wait_s=0.5, work_s=30.0, timeout_s=3.0, turn_wait_s=30.0)
    assert child.timed_out and not child.turn_wait_exceeded
    assert child.wall_s < 10.0


def test_waiting_past_the_turn_limit_stops_the_child():
    child = run(wait_s=30.0, work_s=0.0, timeout_s=60.0, turn_wait_s=2.0)
    assert child.turn_wait_exceeded and not child.timed_out
    assert child.last("result") is None and child.wall_s < 10.0


def test_an_unsigned_waiting_message_stops_no_clock():
    child = run(wait_s=30.0, work_s=0.0, timeout_s=3.0, turn_wait_s=60.0, signed=False)
    assert child.timed_out and not child.turn_wait_exceeded
    assert child.forged_messages >= 1 and child.wall_s < 10.0
