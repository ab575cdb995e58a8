"""Child-side limits, applied by the child to itself before any candidate code runs.

Why in the child and not in ``preexec_fn``: the parent may be a threaded Ray actor, where
``preexec_fn`` is unsafe. The limits bind the candidate all the same, since it runs after them.

- Network: a fresh network namespace (no interfaces but a down loopback). As root that is one
  ``unshare(CLONE_NEWNET)``; otherwise a user namespace first, mapping our uid to itself.
- Files: RLIMIT_FSIZE; core dumps off.
- Processes: the candidate's process is the first in a new PID namespace, so when it dies
  every process it started dies with it (also those that left the process group with setsid).
  Root is exempt from RLIMIT_NPROC, so the tester's watchdog counts processes instead.
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
_CLONE_NEWPID = 0x20000000
_PR_SET_DUMPABLE = 4


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


def apply_limits(file_size_limit_mb: int, isolate: bool) -> dict:
    """Apply every child-side limit; returns what was applied, for the hello message."""
    size = file_size_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    isolated, how = isolate_network() if isolate else (False, "isolation disabled by config")
    return {"network_isolated": isolated, "network": how}


def new_pid_namespace() -> tuple[bool, str]:
    """Put this process's next child first in a new PID namespace; (done, how or why not)."""
    error = _unshare(_CLONE_NEWPID)
    if error == 0:
        return True, "own PID namespace"
    error = _unshare(_CLONE_NEWUSER | _CLONE_NEWPID)
    if error == 0:
        return True, "own user and PID namespace"
    return False, f"unshare refused ({os.strerror(error)}); leftover processes are killed by process group only"


def fork_into_pid_namespace(close_in_parent: tuple[int, ...] = ()) -> tuple[bool, str]:
    """Continue as the first process of a new PID namespace (a forked child); the original
    process closes ``close_in_parent``, waits, and exits with the child's status (128 + signal
    when killed). Why fork: after unshare(CLONE_NEWPID) the caller itself can no longer create
    threads (EINVAL), its next child can. Call before any threads exist."""
    done, how = new_pid_namespace()
    if not done:
        return done, how
    pid = os.fork()
    if pid == 0:
        return True, how
    for fd in close_in_parent:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def make_undumpable() -> bool:
    """Make this process non-dumpable: processes of the same user without capabilities can no
    longer open its /proc files (memory, file descriptors) or attach to it."""
    return ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
