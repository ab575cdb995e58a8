"""Run a cudarl child entry point in a process that can be killed, with limits, and collect
what it reports.

The parent side only: start the child in a new session (so its whole process group, compilers
included, dies together), hand it a job over stdin (never argv or the environment, which the
candidate could read back), watch wall time and resident memory, keep bounded heads of stdout and
stderr, and read JSON-line messages from a private pipe. The child side applies its own limits
(``cudarl.tester.sandbox.isolation``) before any candidate code runs.

When a ``key`` is given, every message must carry a valid HMAC under it (``channel.verify``);
others are dropped and counted in ``forged_messages``. The watchdog also counts the group's
processes (root is exempt from RLIMIT_NPROC) and kills it above ``max_processes``. Processes
that left the group (setsid) are found by walking the tree (the child is their subreaper).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from cudarl import env
from cudarl.tester.sandbox import channel

_POLL_S = 0.05
# Stage messages (their ``model``) that start a wait on other judges, not on the candidate:
# a GPU turn, and the task's reference timing a judge waits for before loading its candidate.
HARNESS_WAITS = ("gpu turn", "reference timing wait")
_MAX_MESSAGE_BYTES = 8 << 20


@dataclass
class ChildLimits:
    """Limits for one child; the child enforces the file-size and network ones itself."""

    timeout_s: float
    memory_limit_mb: int
    file_size_limit_mb: int = 64
    output_limit_bytes: int = 16 << 10
    isolate_network: bool = True
    isolate_pids: bool = True
    max_processes: int = 64
    nice: int = 0
    """CPU priority (``nice``) the child lowers itself to, inherited by what it starts (builds)."""
    backend: str = "namespace"
    """"docker": the caller runs the child in a container (``docker_backend.run_in_container``)."""
    turn_wait_s: float = 0.0
    """Most seconds the child may spend waiting on other judges (signed ``stage`` messages whose
    ``model`` is in ``HARNESS_WAITS``: GPU turns, the task's reference timing) without them
    counting against ``timeout_s``: a judge queued behind its neighbours is not the candidate's
    fault. Past it: ``turn_wait_exceeded``."""

    @classmethod
    def from_config(cls, sandbox) -> ChildLimits:
        """The limits a ``SandboxConfig`` sets for one child."""
        return cls(timeout_s=sandbox.timeout_s, memory_limit_mb=sandbox.memory_limit_mb,
                   file_size_limit_mb=sandbox.file_size_limit_mb, output_limit_bytes=sandbox.output_limit_kb << 10,
                   isolate_network=sandbox.isolate_network, isolate_pids=sandbox.isolate_pids,
                   max_processes=sandbox.max_processes)


@dataclass
class ChildOutcome:
    exit_code: int | None
    signal_name: str | None
    timed_out: bool
    memory_exceeded: bool
    wall_s: float
    stdout: str
    stderr: str
    output_truncated: bool
    messages: list[dict] = field(default_factory=list)
    forged_messages: int = 0
    processes_exceeded: bool = False
    turn_wait_exceeded: bool = False  # waited longer than ChildLimits.turn_wait_s for GPU turns

    def last(self, event: str) -> dict | None:
        """The last message of one kind (e.g. ``result``), if the child sent it."""
        for message in reversed(self.messages):
            if message.get("event") == event:
                return message
        return None

    @property
    def network_isolated(self) -> bool:
        hello = self.last("hello")
        return bool(hello and hello.get("network_isolated"))


class _BoundedReader(threading.Thread):
    """Drains a pipe so the child never blocks on a full pipe, keeping only the first bytes."""

    def __init__(self, stream, limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        try:
            while chunk := self.stream.read1(65536):
                room = self.limit - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        body = self.kept.decode(errors="replace")
        return body + (f"\n[... {self.dropped} more bytes dropped]" if self.dropped else "")


class _MessageReader(threading.Thread):
    def __init__(self, fd: int, key: bytes | None) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.key = key
        self.messages: list[dict] = []
        self.forged = 0
        self._turn_waited = 0.0
        self._turn_since: float | None = None

    def turn_wait_s(self) -> float:
        """Seconds the child has said (signed) it spent waiting for a GPU turn, so far."""
        since = self._turn_since
        return self._turn_waited + (time.monotonic() - since if since is not None else 0.0)

    def run(self) -> None:
        total = 0
        with os.fdopen(self.fd, "rb") as stream:
            for line in stream:
                total += len(line)
                if total > _MAX_MESSAGE_BYTES:
                    continue  # keep draining; ignore the flood
                try:
                    message = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if not isinstance(message, dict):
                    continue
                if self.key is not None and not channel.verify(message, self.key):
                    self.forged += 1
                    continue
                self.messages.append(message)
                now = time.monotonic()
                if self._turn_since is not None:
                    self._turn_waited += now - self._turn_since
                    self._turn_since = None
                if self.key is not None and message.get("event") == "stage" and message.get("model") in HARNESS_WAITS:
                    self._turn_since = now


def _proportional_bytes(process: psutil.Process) -> int:
    """The process's proportional set size (shared pages split among sharers), so forked
    processes are not charged the same pages many times; resident size where PSS is unreadable."""
    try:
        with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return process.memory_info().rss


def _group_processes(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _group_memory(processes: list[psutil.Process]) -> int:
    """Proportional memory of a process group (shared pages split among sharers)."""
    total = 0
    for process in processes:
        try:
            total += _proportional_bytes(process)
        except psutil.Error:
            pass
    return total


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the child's process group and every descendant (also those in other sessions)."""
    try:
        below = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        below = []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for descendant in below:
        try:
            descendant.kill()
        except psutil.Error:
            pass


def _package_root() -> str:
    """The folder holding the ``cudarl`` package: first on the child's path, so its modules (and
    a test's fixture modules) are found before any same-named package in site-packages (verl's
    wheel installs a top-level ``tests``)."""
    return str(Path(__file__).resolve().parents[3])


@dataclass
class StartedChild:
    """A child process started before its job exists (see ``WarmChildren``)."""

    process: subprocess.Popen
    read_fd: int
    readers: list
    started: float
    discarded: bool = False


def start_child(module: str, limits: ChildLimits, cwd: Path | None = None, warm: bool = False,
                warm_args: tuple[str, ...] = ()) -> StartedChild:
    """Start ``python -P -m module`` in a new session; it waits for its job on stdin. ``warm``
    asks the child to apply its limits and import its heavy modules first (``--warm``, plus
    ``warm_args``: what else the entry point may prepare, e.g. the judge's ``--warm-profiler``). ``-P``:
    the working folder is not put on ``sys.path`` (a candidate could write modules there)."""
    read_fd, write_fd = os.pipe()
    pythonpath = os.pathsep.join(p for p in (_package_root(), env.get(env.PYTHONPATH)) if p)
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", module, "--result-fd", str(write_fd),
             *(["--warm", json.dumps(child_limits(limits)), *warm_args] if warm else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(write_fd,), start_new_session=True, cwd=cwd,
            env=env.child_environment({env.PYTHONPATH: pythonpath}),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    readers = [_BoundedReader(process.stdout, limits.output_limit_bytes),
               _BoundedReader(process.stderr, limits.output_limit_bytes)]
    for thread in readers:
        thread.start()
    return StartedChild(process, read_fd, readers, time.monotonic())


def discard_child(child: StartedChild) -> None:
    """Stop a started child that will get no job (once; later calls do nothing)."""
    if child.discarded:
        return
    child.discarded = True
    _kill_group(child.process)
    child.process.wait()
    os.close(child.read_fd)
    for thread in child.readers:
        thread.join(timeout=5)


def child_limits(limits: ChildLimits) -> dict:
    """The limits the child applies itself (sent in its job, or on argv to a warm child)."""
    return {"file_size_limit_mb": limits.file_size_limit_mb, "isolate_network": limits.isolate_network,
            "isolate_pids": limits.isolate_pids, "nice": limits.nice}


def time_exceeded(messages: _MessageReader, limits: ChildLimits, started_at: float) -> str | None:
    """"turn_wait" or "timeout" once the child is past one of its time limits (time spent waiting
    on other judges counts against ``turn_wait_s``, not ``timeout_s``), else None."""
    waited = messages.turn_wait_s()
    if waited > limits.turn_wait_s:
        return "turn_wait"
    return "timeout" if time.monotonic() - started_at - waited > limits.timeout_s else None


def run_child(module: str, job: dict, limits: ChildLimits, cwd: Path | None = None,
              key: bytes | None = None, started: StartedChild | None = None) -> ChildOutcome:
    """Run ``python -m module`` with ``job`` on its stdin; never raises for the child's faults.
    With ``key``, the child gets it on stdin and only messages signed with it are believed.
    ``started``: a child already running (``start_child``), which moves to ``cwd`` itself; its
    time limit counts from now."""
    job = {**job, "limits": child_limits(limits)}
    if key is not None:
        job["key"] = key.hex()
    if started is not None and started.process.poll() is None:
        child = started
        job["cwd"] = str(cwd) if cwd is not None else None
    else:
        if started is not None:
            discard_child(started)
        child = start_child(module, limits, cwd)
    process, readers = child.process, child.readers
    started_at = time.monotonic()
    messages = _MessageReader(child.read_fd, key)
    messages.start()
    try:
        process.stdin.write(json.dumps(job).encode())
        process.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child died before reading its job; its exit status tells why

    timed_out = memory_exceeded = processes_exceeded = turn_wait_exceeded = False
    polls = 0
    watched = psutil.Process(process.pid)
    limit_bytes = limits.memory_limit_mb << 20
    while process.poll() is None:
        late = time_exceeded(messages, limits, started_at)
        if late:
            turn_wait_exceeded, timed_out = late == "turn_wait", late == "timeout"
            break
        processes = _group_processes(watched)
        polls += 1
        if len(processes) > limits.max_processes:
            processes_exceeded = True
            break
        # Reading PSS costs about a millisecond per process: with many, read it less often.
        if (len(processes) <= 16 or polls % 10 == 0) and _group_memory(processes) > limit_bytes:
            memory_exceeded = True
            break
        time.sleep(_POLL_S)
    _kill_group(process)  # also reaps compilers or helpers the child left behind
    process.wait()
    wall = time.monotonic() - started_at
    for thread in (*readers, messages):
        thread.join(timeout=5)
    code = process.returncode
    signal_name = signal.Signals(-code).name if code is not None and code < 0 else None
    if timed_out or memory_exceeded or processes_exceeded or turn_wait_exceeded:
        signal_name = "SIGKILL"
    return ChildOutcome(
        exit_code=None if code is None or code < 0 else code,
        signal_name=signal_name,
        timed_out=timed_out,
        memory_exceeded=memory_exceeded,
        wall_s=wall,
        stdout=readers[0].text(),
        stderr=readers[1].text(),
        output_truncated=any(r.dropped for r in readers),
        messages=list(messages.messages),
        forged_messages=messages.forged,
        processes_exceeded=processes_exceeded,
        turn_wait_exceeded=turn_wait_exceeded,
    )


class WarmChildren:
    """Children of one entry point started ahead of their jobs with ``--warm``, so that a job
    does not wait for the child to import torch (seconds, the largest fixed cost of an inline
    build after the compilers). ``take`` hands one over and starts its replacement at once;
    with none ready (many jobs at a time) the caller starts a cold child as before. Every limit
    applies from the job on: the child sets its own limits after reading the job, the time limit
    counts from the job, and the watchdog watches the whole group. A child carries the
    environment of the moment it started."""

    def __init__(self, module: str, limits: ChildLimits, cwd: Path, size: int = 1,
                 warm_args: tuple[str, ...] = ()) -> None:
        self.module, self.limits, self.cwd, self.size, self.warm_args = module, limits, cwd, size, warm_args
        self._ready: list[StartedChild] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def _top_up(self) -> None:
        try:
            self.cwd.mkdir(parents=True, exist_ok=True)
            while len(self._ready) < self.size:
                self._ready.append(start_child(self.module, self.limits, self.cwd, warm=True, warm_args=self.warm_args))
        except OSError:
            pass  # no spare process now: jobs start cold children, as without the pool

    def prime(self) -> None:
        """Start the first children now (before the first job)."""
        with self._lock:
            self._top_up()

    def take(self) -> StartedChild | None:
        with self._lock:
            alive = {id(c): c.process.poll() is None for c in self._ready}  # one poll per child
            ready = [c for c in self._ready if alive[id(c)]]
            for dead in (c for c in self._ready if not alive[id(c)]):
                discard_child(dead)
            child = ready.pop(0) if ready else None
            self._ready = ready
            self._top_up()
            return child

    def close(self) -> None:
        with self._lock:
            for child in self._ready:
                discard_child(child)
            self._ready = []
            self.size = 0
