"""The session-end plugin (``tests/fixtures/leftovers.py``) on a real pytest child: a thread that
is not a daemon and never ends is named at session end, and the exit it blocks is forced after the
grace with pytest's own exit status (here 1: the inner test fails on purpose, so a forced exit
that lost the status would show as 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STALLING = '''
import threading

import tests.fixtures.leftovers as leftovers

leftovers.EXIT_GRACE_S = 3.0


def test_leaves_a_thread_that_never_ends():
    threading.Thread(target=threading.Event().wait, name="never-ends").start()
    assert False, "fails on purpose: the exit status must survive the forced exit"
'''


def test_a_stalled_exit_is_named_and_then_forced_with_the_sessions_status(tmp_path):
    (tmp_path / "test_stalls.py").write_text(STALLING)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.fixtures.leftovers", "-p", "no:cacheprovider",
               str(tmp_path / "test_stalls.py")]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-3000:]
    assert "leftovers: thread 'never-ends' (not a daemon) is still running" in output, output[-3000:]
    assert "has not exited 3 s after its session ended" in output, output[-3000:]
    assert "Thread 0x" in output  # faulthandler's stacks of every thread
