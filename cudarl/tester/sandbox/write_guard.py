"""Confining a child's writes to the folders it owns, with Landlock.

Why: a build runs the candidate's code (its Python at import, the static initializers of the
extension it builds), and static rules over source text can be dodged (a macro that pastes
``sys`` and ``tem`` together). Landlock (Linux 5.13+, unprivileged) makes the kernel refuse
every write outside the folders named here, for this thread and everything it starts: no file
created, changed, truncated, renamed or removed elsewhere. Devices stay openable for writing (a
GPU is opened read-write), but no file can be made under ``/dev``.

Covered: the compile child and the runner (its build folder, the candidate's folder, a private
temporary folder; ``sandbox.restrict_writes``; ``confine_to``). Not covered: threads that were already running when the
restriction was applied (Landlock confines the calling thread and its later descendants; the
child applies it on its main thread before it imports the candidate), and reads (everything
stays readable). Without Landlock (an older kernel, or one built without it) writes stay
unrestricted and the note says so.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, regular, sock, fifo, block, symlink
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2 and 3


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *arguments) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(number, *arguments)
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def restrict_writes(writable: list[str], devices: str = "/dev") -> str:
    """Refuse writes outside ``writable`` (and, under ``devices``, anything but writing to
    existing files) for this thread and its future descendants; returns a note for the verdict."""
    abi = landlock_abi()
    if abi < 1:
        return "writes unrestricted: this kernel has no Landlock"
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | (_REFER if abi >= 2 else 0) \
        | (_TRUNCATE if abi >= 3 else 0)
    attributes = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr, first field only
    ruleset = _syscall(_CREATE_RULESET, ctypes.byref(attributes), ctypes.c_size_t(8), ctypes.c_uint32(0))
    try:
        rules = [(path, handled) for path in writable] + [(devices, _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0))]
        for path, access in rules:
            descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(access, descriptor)
                _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(descriptor)
        ctypes.CDLL(None).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return f"writes confined to {', '.join(writable)} (Landlock ABI {abi})"


def confine_to(folder: Path, build_root: Path) -> str:
    """What a compile child and a runner do before any candidate code runs: writes only into the
    candidate's ``folder`` (with a private temporary folder in it, which ``TMPDIR`` and Python's
    own temporary files follow) and its ``build_root``; returns the note."""
    from cudarl import env

    private_tmp = folder / "tmp"
    private_tmp.mkdir(parents=True, exist_ok=True)
    build_root.mkdir(parents=True, exist_ok=True)
    env.set_for_children(env.TMPDIR, str(private_tmp))
    tempfile.tempdir = None
    return restrict_writes([str(build_root), str(folder)])
