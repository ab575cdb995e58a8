"""Turns on one GPU between the judges of a machine: shared for work that only needs to be
correct, exclusive for timing.

Several judges may share a GPU (bench slots, GPU fractions). Their correctness trials can overlap
(most of that time is host work: generating inputs, moving outputs through pipes), but a timed
run must have the GPU to itself, or one candidate's trials slow another's clock. This is a
readers-writer lock between processes, built from two ``flock`` files next to each other:

- ``<path>``: held shared by judges in correctness, exclusively by a judge that times;
- ``<path>.gate``: a turnstile every judge passes on its way in, so a judge waiting to time
  stops new shared holders from entering and is not starved by a stream of them.

The kernel drops a process's locks when it exits, however it ends, so a crashed judge never
blocks the GPU. Descriptors are opened non-inheritable: the candidate's process never holds them.

Not covered: work a candidate leaves running on the GPU after its judge has moved on (a kernel on
a side stream outliving its trial) still overlaps the next exclusive turn; ``timing.gpu_turns =
"whole"`` keeps the GPU exclusive from the first GPU call to the judge's exit when that matters.
"""

from __future__ import annotations

import fcntl
import os
import time


class GpuTurns:
    """One judge's hold on one GPU: ``shared()``, ``exclusive()``, ``release()``. Each call first
    gives up what the judge held (flock cannot convert a lock atomically, and two shared holders
    both asking for exclusive would otherwise wait on each other forever)."""

    def __init__(self, path: str) -> None:
        flags = os.O_RDWR | os.O_CREAT
        self._lock = os.open(path, flags, 0o600)
        self._gate = os.open(path + ".gate", flags, 0o600)
        self.held: str | None = None
        self.waited_s = 0.0  # total time spent waiting for turns

    def shared(self) -> float:
        """Take a shared turn; returns the seconds waited."""
        return self._take(fcntl.LOCK_SH, "shared")

    def exclusive(self) -> float:
        """Take the GPU for this judge alone; returns the seconds waited."""
        return self._take(fcntl.LOCK_EX, "exclusive")

    def release(self) -> None:
        if self.held is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self.held = None

    def _take(self, operation: int, name: str) -> float:
        if self.held == name:
            return 0.0
        self.release()
        started = time.monotonic()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, operation)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.held = name
        waited = time.monotonic() - started
        self.waited_s += waited
        return waited
