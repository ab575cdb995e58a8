"""GPU turns between judges (cudarl.tester.gpu_turns) with real processes holding real flocks.

Covered: shared turns overlap, an exclusive turn waits for shared ones and keeps later ones out,
a waiting exclusive turn is not starved by shared turns arriving after it, a killed holder frees
the GPU, and the bench worker's memory share. Not covered here: judges on a GPU (tests/gpu).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cudarl.config import CudarlConfig
from cudarl.tester.gpu_turns import GpuTurns
from cudarl.tester.stages import bench_config

_HOLDER = """
import json, sys, time
from cudarl.tester.gpu_turns import GpuTurns
path, kind, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
turns = GpuTurns(path)
asked = time.monotonic()
getattr(turns, kind)()
got = time.monotonic()
print(json.dumps({"asked": asked, "got": got}), flush=True)
time.sleep(hold)
print(json.dumps({"released": time.monotonic()}), flush=True)
"""


def holder(path: Path, kind: str, hold_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), kind, str(hold_s)],
                            stdout=subprocess.PIPE, text=True)


def times(process: subprocess.Popen) -> dict:
    out, _ = process.communicate(timeout=30)
    merged: dict = {}
    for line in out.splitlines():
        merged.update(json.loads(line))
    return merged


def wait_until_holding(process: subprocess.Popen) -> dict:
    return json.loads(process.stdout.readline())


def test_shared_turns_overlap(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    first = holder(lock, "shared", 1.5)
    wait_until_holding(first)
    second = times(holder(lock, "shared", 0.0))
    assert second["got"] - second["asked"] < 1.0, "a shared turn waited for another shared one"
    first.wait(timeout=30)


def test_exclusive_waits_for_shared_and_keeps_others_out(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    reader = holder(lock, "shared", 1.0)
    wait_until_holding(reader)
    writer = holder(lock, "exclusive", 1.0)
    writer_got = wait_until_holding(writer)
    reader_done = times(reader)
    assert writer_got["got"] >= reader_done["released"], "the exclusive turn overlapped a shared one"
    late = times(holder(lock, "shared", 0.0))
    writer_done = times(writer)
    assert late["got"] >= writer_done["released"], "a shared turn entered during an exclusive one"


def test_waiting_exclusive_turn_is_not_starved(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    reader = holder(lock, "shared", 1.5)
    wait_until_holding(reader)
    writer = holder(lock, "exclusive", 0.5)
    time.sleep(0.5)  # the writer is now waiting at the gate
    late_reader = holder(lock, "shared", 0.0)
    writer_times, late_times = times(writer), times(late_reader)
    times(reader)
    assert late_times["got"] >= writer_times["released"], \
        "a shared turn asked for after a waiting exclusive one went first"


def test_killed_holder_frees_the_gpu(tmp_path: Path) -> None:
    lock = tmp_path / "gpu-0.lock"
    stuck = holder(lock, "exclusive", 600.0)
    wait_until_holding(stuck)
    stuck.send_signal(signal.SIGKILL)
    stuck.wait(timeout=30)
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

    thread = threading.Thread(target=second_times)
    thread.start()
    time.sleep(0.3)  # second is waiting for first's shared turn
    first.exclusive()
    done.append("first")
    first.release()
    thread.join(timeout=30)
    assert done == ["second", "first"]


@pytest.mark.parametrize("turns, slots, share, expected", [
    ("timing", 2, 1.0, 0.25), ("timing", 1, 1.0, 0.5), ("timing", 2, 0.5, 0.125), ("whole", 3, 1.0, 0.5)])
def test_bench_memory_share(turns: str, slots: int, share: float, expected: float) -> None:
    config = CudarlConfig.model_validate({"tester": {"timing": {"gpu_turns": turns},
                                                     "sandbox": {"gpu_memory_fraction": 0.5}}}).tester
    assert bench_config(config, slots, share).sandbox.gpu_memory_fraction == pytest.approx(expected)
