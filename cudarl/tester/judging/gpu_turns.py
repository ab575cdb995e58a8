"""Turns on one GPU between the judges of a machine: shared for work that only needs to be
correct, exclusive for timing.

Several judges may share a GPU (bench slots, GPU fractions). Their correctness trials can overlap
(most of that time is host work: generating inputs, moving outputs through pipes), but a timed
run must have the GPU to itself, or one candidate's trials slow another's clock. This is a
readers-writer lock between processes, built from two ``flock`` files next to each other:

- ``<path>``: held shared by judges during a step of their correctness phase (loading, one
  trial; given up in between), exclusively by a judge that times;
- ``<path>.gate``: a turnstile every judge passes on its way in, so a judge waiting to time
  stops new shared holders from entering and is not starved by a stream of them.

The kernel drops a process's locks when it exits, however it ends, so a crashed judge never
blocks the GPU. Descriptors are opened non-inheritable and after the runner has started: the
candidate's process never inherits them. The files are named per host (a cache folder shared
between machines must not make their GPUs wait on each other).

Not covered: candidate code of other judges is loaded while one judge times: work it keeps
running on the GPU (a thread, a child process, a kernel outliving its trial) overlaps that
exclusive turn. A candidate can also open the lock files itself (same user) and hold the gate:
judges then wait up to ``timing.gpu_turn_wait_s`` and get ``harness_error``, never a verdict
against their candidate. ``timing.gpu_turns = "whole"`` keeps the GPU exclusive from the first
turn to the judge's exit (no other candidate code is loaded meanwhile) when that matters.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable


class GpuTurns:
    """One judge's hold on one GPU: ``shared()``, ``exclusive()``, ``release()``. Each call first
    gives up what the judge held (flock cannot convert a lock atomically, and two shared holders
    both asking for exclusive would otherwise wait on each other forever)."""

    def __init__(self, path: str, mode: str = "timing") -> None:
        self.whole = mode == "whole"  # the first turn is exclusive and kept to the judge's exit
        flags = os.O_RDWR | os.O_CREAT
        self._lock = os.open(path, flags, 0o600)
        self._gate = os.open(path + ".gate", flags, 0o600)
        self.held: str | None = None
        self.waited_s = 0.0  # total time spent waiting for turns

    def take(self, exclusive: bool, before_waiting: Callable[[], None] = lambda: None) -> bool:
        """The turn a step needs (exclusive to time, shared otherwise; under ``whole`` always the
        first, exclusive one); ``before_waiting`` runs only when the turn cannot be had at once.
        True when it had to wait (so the caller can say the wait is over)."""
        wanted = "exclusive" if exclusive or self.whole else "shared"
        if self.held == wanted or (self.whole and self.held):
            return False
        waited = False

        def announce() -> None:
            nonlocal waited
            waited = True
            before_waiting()

        self._take(fcntl.LOCK_EX if wanted == "exclusive" else fcntl.LOCK_SH, wanted, announce)
        return waited

    def pause(self) -> None:
        """Give up the turn between steps (trials; a timing once its runs are over), so a judge
        waiting to time waits for one step of each other judge, not for their whole correctness
        phase, and nobody waits while outputs cross the pipe. Under ``whole`` nothing is given up."""
        if self.held is not None and not self.whole:
            self.release()

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

    def _take(self, operation: int, name: str, before_waiting: Callable[[], None] = lambda: None) -> float:
        if self.held == name:
            return 0.0
        self.release()
        started = time.monotonic()
        if not _try(self._gate, fcntl.LOCK_EX):
            before_waiting()
            fcntl.flock(self._gate, fcntl.LOCK_EX)
            before_waiting = _nothing
        try:
            if not _try(self._lock, operation):
                before_waiting()
                fcntl.flock(self._lock, operation)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.held = name
        waited = time.monotonic() - started
        self.waited_s += waited
        return waited


def _nothing() -> None:
    pass


def _try(fd: int, operation: int) -> bool:
    """Take a flock without waiting; False when someone else holds it."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
