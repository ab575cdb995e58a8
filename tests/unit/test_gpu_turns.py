"""GPU turns between judges (cudarl.tester.judging.gpu_turns) with real processes holding real flocks.

Covered: shared turns overlap, an exclusive turn waits for shared ones and keeps later ones out,
a waiting exclusive turn is not starved by shared turns arriving after it, a killed holder frees
the GPU, and the bench worker's memory share. Not covered here: judges on a GPU (tests/gpu).
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cudarl.config import CudarlConfig
from cudarl.pool.records import bench_config
from cudarl.tester.judging.gpu_turns import GpuTurns

_HOLDER = """
import json, sys, time
from cudarl.tester.judging.gpu_turns import GpuTurns
turns = GpuTurns(sys.argv[1])
print(json.dumps({"asking": time.monotonic()}), flush=True)
getattr(turns, sys.argv[2])()
print(json.dumps({"got": time.monotonic()}), flush=True)
sys.stdin.readline()  # hold the turn until the test says so
print(json.dumps({"released": time.monotonic()}), flush=True)
"""


class Holder:
    """A process that takes a turn and keeps it until ``release()``."""

    def __init__(self, path: Path, kind: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), kind],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.times: dict = {}
        # One reader for the process's lines, so a wait with a timeout never loses a line.
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self._lines.put(line) for line in self.process.stdout],
                         daemon=True).start()
        self._read()  # "asking": started, about to ask

    def _read(self, timeout_s: float = 120.0) -> None:
        self.times.update(json.loads(self._lines.get(timeout=timeout_s)))

    def got_turn_within(self, seconds: float) -> bool:
        """Whether the turn came within ``seconds`` (without blocking past them)."""
        try:
            self._read(seconds)
        except queue.Empty:
            pass
        return "got" in self.times

    def wait_for_turn(self) -> float:
        self._read()
        return self.times["got"]

    def release(self) -> float:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        self._read()
        self.process.wait(timeout=30)
        return self.times["released"]


def is_free(path: Path, operation: int) -> bool:
    """Whether ``flock(operation)`` on ``path`` could be had at once (and is given back)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)
    return True


def gate_is_held(lock: Path) -> bool:
    """Whether some judge holds the gate (one waiting for an exclusive turn does)."""
    return not is_free(Path(f"{lock}.gate"), fcntl.LOCK_EX)


def wait_until(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def reader_and_waiting_writer(lock: Path) -> tuple[Holder, Holder]:
    """A holder of a shared turn, and one waiting (at the gate) for an exclusive turn."""
    reader = Holder(lock, "shared")
    reader.wait_for_turn()
    writer = Holder(lock, "exclusive")
    wait_until(lambda: gate_is_held(lock), "the exclusive turn waits at the gate")
    return reader, writer


def test_shared_turns_overlap(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    first = Holder(lock, "shared")
    first.wait_for_turn()
    second = Holder(lock, "shared")
    got = second.wait_for_turn()  # would block forever (test timeout) if shared turns excluded
    assert got < first.release()
    second.release()


def test_exclusive_waits_for_shared_and_keeps_others_out(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    reader, writer = reader_and_waiting_writer(lock)
    time.sleep(0.3)
    released = reader.release()
    assert writer.wait_for_turn() >= released, "the exclusive turn overlapped a shared one"
    late = Holder(lock, "shared")
    wait_until(lambda: gate_is_held(lock), "the late shared turn waits")
    writer_released = writer.release()
    assert late.wait_for_turn() >= writer_released, "a shared turn entered during an exclusive one"
    late.release()


def test_waiting_exclusive_turn_is_not_starved(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    reader, writer = reader_and_waiting_writer(lock)
    late_reader = Holder(lock, "shared")  # asks after the writer: must not go first
    time.sleep(0.5)
    reader.release()
    writer.wait_for_turn()
    writer_released = writer.release()
    assert late_reader.wait_for_turn() >= writer_released, \
        "a shared turn asked for after a waiting exclusive one went first"
    late_reader.release()


def test_killed_holder_frees_the_gpu(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    stuck = Holder(lock, "exclusive")
    stuck.wait_for_turn()
    stuck.process.send_signal(signal.SIGKILL)
    stuck.process.wait(timeout=30)
    turns = GpuTurns(str(lock))
    assert turns.exclusive() < 5.0
    assert turns.held == "exclusive"
    turns.release()
    assert turns.held is None


def test_two_shared_holders_moving_to_exclusive_both_get_it(tmp_path: Path) -> None:
    """Two judges in correctness both moving to timing: each gives up its shared turn before
    waiting, so neither waits on the other forever."""
    lock = str(tmp_path / "gpu-0.lock")
    first, second = GpuTurns(lock), GpuTurns(lock)
    first.shared()
    second.shared()
    done: list[str] = []

    def second_times() -> None:
        second.exclusive()
        time.sleep(0.3)
        done.append("second")
        second.release()

    thread = threading.Thread(target=second_times, daemon=True)
    thread.start()
    wait_until(lambda: gate_is_held(Path(lock)), "second waits for first's shared turn")
    first.exclusive()
    done.append("first")
    first.release()
    thread.join(timeout=30)
    assert not thread.is_alive(), "second never got its exclusive turn"
    assert done == ["second", "first"]  # second held the gate: it goes first


@pytest.mark.parametrize("turns, slots, share, expected", [
    ("timing", 2, 1.0, 0.25), ("timing", 1, 1.0, 0.5), ("timing", 2, 0.5, 0.125), ("whole", 3, 1.0, 0.5)])
def test_bench_memory_share(turns: str, slots: int, share: float, expected: float) -> None:
    config = CudarlConfig.model_validate({"tester": {"timing": {"gpu_turns": turns},
                                                     "sandbox": {"gpu_memory_fraction": 0.5}}}).tester
    assert bench_config(config, slots, share).sandbox.gpu_memory_fraction == pytest.approx(expected)


@pytest.mark.parametrize("mode, steps, expected", [
    ("timing", [True, False, False, True], ["exclusive", "shared", "shared", "exclusive"]),
    ("whole", [False, True, False], ["exclusive", "exclusive", "exclusive"])])
def test_take_gives_each_step_its_turn(tmp_path: Path, mode: str, steps: list[bool], expected: list[str]) -> None:
    turns = GpuTurns(str(tmp_path / "gpu-0.lock"), mode)
    waits: list[str] = []
    held = []
    for exclusive in steps:
        turns.take(exclusive, lambda: waits.append("wait"))
        held.append(turns.held)
    assert held == expected
    assert waits == []  # nobody else held the GPU: no waiting was announced


@pytest.mark.parametrize("mode, after_pause", [("timing", None), ("whole", "exclusive")])
def test_waits_are_announced_only_when_real_and_pause_frees_a_shared_turn(tmp_path: Path, mode: str,
                                                                          after_pause: str | None) -> None:
    lock = tmp_path / "gpu-0.lock"
    other = Holder(lock, "exclusive")
    other.wait_for_turn()
    turns, waits = GpuTurns(str(lock), mode), []
    thread = threading.Thread(target=turns.take, args=(False, lambda: waits.append(time.monotonic())))
    thread.start()
    wait_until(lambda: waits, "the judge announced its wait")
    released = other.release()
    thread.join(timeout=30)
    assert len(waits) == 1 and waits[0] < released
    turns.pause()
    assert turns.held == after_pause
    late = Holder(lock, "exclusive")
    if after_pause is None:  # the shared turn is free again: an exclusive holder gets it at once
        assert late.got_turn_within(30.0)
    else:  # under "whole" the judge keeps its exclusive turn through the pause
        assert not late.got_turn_within(1.0)
        turns.release()
        assert late.got_turn_within(30.0)
    late.release()


def test_pause_also_ends_a_timing_turn_once_its_runs_are_over(tmp_path: Path) -> None:
    """After the timed runs (the runner's reply header), the judge's exclusive turn ends, so the
    others' trials go on while the outputs cross the pipe; under ``whole`` it is kept."""
    lock = tmp_path / "gpu-0.lock"
    timing, whole = GpuTurns(str(lock), "timing"), GpuTurns(str(tmp_path / "gpu-1.lock"), "whole")
    for turns in (timing, whole):
        turns.take(True)
        turns.pause()
    assert timing.held is None and whole.held == "exclusive"
    assert is_free(lock, fcntl.LOCK_SH), "the timing turn was not given up"
    assert not is_free(tmp_path / "gpu-1.lock", fcntl.LOCK_SH), "a shared turn was had under whole"
    whole.release()
