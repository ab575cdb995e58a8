"""Warm compile children (started with torch imported before their job): a job run in one gets
its verdict like a cold child's, in the folder it names, with its time limit counted from the
job; a dead warm child is replaced by a cold one; closing the pool stops the waiting ones; build
children run at the lower CPU priority the compile settings give, warm or cold."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import psutil

from cudarl.config import CudarlConfig
from cudarl.tester.build import compile_child
from cudarl.tester.build.compile import compile_limits
from cudarl.tester.sandbox.parent import ChildLimits, WarmChildren, run_child

COMPILE_CHILD = compile_child.__name__
LIMITS = ChildLimits(timeout_s=60.0, memory_limit_mb=8192, isolate_network=False, isolate_pids=False)


def test_a_job_in_a_warm_child_gets_its_verdict(tmp_path):
    pool = WarmChildren(COMPILE_CHILD, LIMITS, tmp_path / "scratch")
    try:
        pool.prime()
        time.sleep(1.0)
        child = pool.take()
        assert child is not None and child.process.poll() is None
        assert len(pool._ready) == 1  # its replacement started at once
        workdir = tmp_path / "job"
        workdir.mkdir()
        started = time.monotonic()
        outcome = run_child(COMPILE_CHILD, {"kind": "unknown"}, LIMITS, cwd=workdir, started=child)
        assert outcome.last("hello")["pid"] == child.process.pid
        result = outcome.last("result")
        assert result["outcome"] == "harness_error" and "unknown job kind" in result["reasons"][0]
        assert outcome.wall_s <= time.monotonic() - started + 0.01  # counted from the job
    finally:
        pool.close()
    assert all(c.process.poll() is not None for c in [child])


def wait_until_idle(pid: int, timeout_s: float = 120.0) -> None:
    """Until the process has used no CPU for a second (a warm child waiting for its job), so a
    slow machine's torch import is not mistaken for the job's time."""
    process, deadline = psutil.Process(pid), time.monotonic() + timeout_s
    used = sum(process.cpu_times()[:2])
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sum(process.cpu_times()[:2])
        if now - used < 0.01:
            return
        used = now
    raise AssertionError(f"the warm child was still busy after {timeout_s:.0f} s")


def test_the_time_limit_counts_from_the_job_not_the_start(tmp_path):
    short = ChildLimits(timeout_s=3.0, memory_limit_mb=8192, isolate_network=False, isolate_pids=False)
    pool = WarmChildren(COMPILE_CHILD, short, tmp_path)
    try:
        pool.prime()
        time.sleep(4.0)  # longer than the limit, before any job
        child = pool.take()
        wait_until_idle(child.process.pid)  # its imports done: what remains is the job's own time
        outcome = run_child(COMPILE_CHILD, {"kind": "unknown"}, short, cwd=tmp_path, started=child)
        assert not outcome.timed_out and outcome.last("result")["outcome"] == "harness_error"
    finally:
        pool.close()


def test_a_dead_warm_child_is_replaced_by_a_cold_one(tmp_path):
    pool = WarmChildren(COMPILE_CHILD, LIMITS, tmp_path)
    try:
        pool.prime()
        child = pool.take()
        child.process.kill()
        child.process.wait()
        outcome = run_child(COMPILE_CHILD, {"kind": "unknown"}, LIMITS, cwd=tmp_path, started=child)
        assert outcome.last("hello")["pid"] != child.process.pid
        assert outcome.last("result")["outcome"] == "harness_error"
        waiting = list(pool._ready)
    finally:
        pool.close()
    for item in waiting:
        assert item.process.poll() is not None, "close() left a warm child running"


def cold_and_warm(limits: ChildLimits, cwd):
    """The same job (an unknown kind: hello, then a harness_error) in a cold child and a warm one."""
    cold = run_child(COMPILE_CHILD, {"kind": "unknown"}, limits, cwd=cwd)
    pool = WarmChildren(COMPILE_CHILD, limits, cwd)
    try:
        pool.prime()
        child = pool.take()
        # A niced child on a busy machine may still be importing torch; the job's time limit
        # counts from the job, so wait for the warm-up to end before sending it.
        wait_until_idle(child.process.pid, timeout_s=300.0)
        warm = run_child(COMPILE_CHILD, {"kind": "unknown"}, limits, cwd=cwd, started=child)
    finally:
        pool.close()
    return cold, warm


def test_a_warm_child_is_isolated_like_a_cold_one_and_ignores_planted_modules(tmp_path):
    """Limits are applied before torch's import (unsharing the network needs one thread), and
    the child's folder is not on sys.path (a candidate could have written modules there)."""
    isolated = ChildLimits(timeout_s=60.0, memory_limit_mb=8192, isolate_network=True, isolate_pids=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "argparse.py").write_text("raise SystemExit('planted module imported')\n")
    cold, warm = cold_and_warm(isolated, scratch)
    for outcome in (cold, warm):
        assert outcome.last("result")["outcome"] == "harness_error", outcome.stderr
    assert warm.last("hello")["network_isolated"] == cold.last("hello")["network_isolated"]
    assert warm.last("hello")["network"] == cold.last("hello")["network"]


def _autogroups() -> bool:
    try:
        return open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1" and \
            "nice" in open("/proc/self/autogroup").read()
    except OSError:
        return False


def test_build_children_run_at_the_compile_priority_warm_or_cold(tmp_path):
    """Builds can yield the CPU to judges (``compile.nice``, off by default); a warm child applies
    it once, at its start, and the job's own limits do not lower it a second time."""
    tester = CudarlConfig.model_validate({"tester": {"compile": {"nice": 7}}}).tester
    assert compile_limits(tester.compile, tester.sandbox).nice == 7
    assert compile_limits(CudarlConfig().tester.compile, tester.sandbox).nice == 0  # off by default
    niced = replace(LIMITS, nice=7)
    expected = max(7, os.getpriority(os.PRIO_PROCESS, 0))  # never raised above what the tester has
    cold, warm = cold_and_warm(niced, tmp_path)
    assert cold.last("hello")["nice"] == warm.last("hello")["nice"] == expected
    if _autogroups():  # sessions are scheduled as groups: the build's session is niced too
        assert cold.last("hello")["group_nice"] == warm.last("hello")["group_nice"] == 7
    plain = run_child(COMPILE_CHILD, {"kind": "unknown"}, LIMITS, cwd=tmp_path)
    assert plain.last("hello")["nice"] == os.getpriority(os.PRIO_PROCESS, 0)
