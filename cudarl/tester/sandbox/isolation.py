"""Child-side limits, applied by the child to itself before any candidate code runs.

Why in the child and not in ``preexec_fn``: the parent may be a threaded Ray actor, where
``preexec_fn`` is unsafe. The limits bind the candidate all the same, since it runs after them.

- Network: a fresh network namespace (no interfaces but a down loopback). As root that is one
  ``unshare(CLONE_NEWNET)``; otherwise a user namespace first, mapping our uid to itself.
- Files: RLIMIT_FSIZE; core dumps off.
- CPU: build children may lower their priority (``compile.nice``, off by default), so judges come first.
- Processes: the trusted process is a child subreaper, so whatever the candidate starts (also
  with setsid or a double fork) stays below it and is killed when the evaluation ends. Why not a
  PID namespace: with one (unshare, /proc not remounted) the candidate's process saw no CUDA
  device on the H200 machine, and remounting /proc needs a mount namespace and privileges. Root is exempt from
  RLIMIT_NPROC, so the tester's watchdog counts processes instead.
- Memory and descriptors of the trusted process: it makes itself non-dumpable.
- Address-space limits are not used: CUDA reserves terabytes of virtual address space, so the
  parent's resident-memory watchdog and torch's GPU memory fraction bound memory instead.
"""

from __future__ import annotations

import ctypes
import os
import resource

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _unshare(flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        return ctypes.get_errno()
    return 0


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def isolate_network() -> tuple[bool, str]:
    """Move this process into a network namespace of its own; (isolated, how or why not)."""
    uid, gid = os.getuid(), os.getgid()
    error = _unshare(_CLONE_NEWNET)
    if error == 0:
        return True, "network namespace"
    error = _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
    if error == 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError:
            pass
        return True, "user and network namespace"
    return False, f"unshare refused ({os.strerror(error)}); network not isolated"


def apply_limits(limits: dict) -> dict:
    """Apply every child-side limit (``sandbox.child_limits``: file size, network, nice); returns
    what was applied, for the hello message."""
    size = limits["file_size_limit_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    applied = lower_priority(limits["nice"]) if limits["nice"] > 0 else {}
    isolated, how = isolate_network() if limits["isolate_network"] else (False, "isolation disabled by config")
    return {"network_isolated": isolated, "network": how, "nice": os.getpriority(os.PRIO_PROCESS, 0), **applied}


def lower_priority(nice: int) -> dict:
    """Lower this process's CPU priority to ``nice`` (absolute: applying it twice does not lower
    it twice; never raised). The child leads a session of its own, and where the kernel groups
    sessions for scheduling (``sched_autogroup``), a process's nice only ranks it within its
    session: the session's group is niced too (``/proc/self/autogroup``), which is what ranks
    it against other judges. Returns the group's nice when it was set."""
    if nice > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        with open("/proc/self/autogroup", "r+") as group:
            current = int(group.read().split("nice")[-1])
            if nice > current:
                group.seek(0)
                group.write(str(nice))
        return {"group_nice": max(nice, current)}
    except (OSError, ValueError):
        return {}  # no autogroups (disabled, or the process is in a cgroup of its own): nice alone ranks it


def become_subreaper() -> bool:
    """Adopt every orphaned descendant (a process that left with setsid or a double fork is
    re-parented here instead of to init), so ``kill_descendants`` can still find it."""
    return ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def kill_descendants() -> int:
    """SIGKILL every process below this one; returns how many were killed."""
    import psutil

    killed = 0
    for _ in range(3):  # a process may fork while its siblings are being killed
        try:
            below = psutil.Process().children(recursive=True)
        except psutil.Error:
            return killed
        if not below:
            break
        for process in below:
            try:
                process.kill()
                killed += 1
            except psutil.Error:
                pass
        psutil.wait_procs(below, timeout=1)
    return killed


def make_undumpable() -> bool:
    """Make this process non-dumpable: processes of the same user without capabilities can no
    longer open its /proc files (memory, file descriptors) or attach to it."""
    return ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
