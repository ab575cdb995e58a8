"""Stage 3 on a machine without a GPU: hostile or broken candidates run in the real sandboxed
processes (judge and runner, real limits) and each gets its verdict within its timeout, while the
caller carries on. Candidates compile (kernel mode) first, as in production. The static rules are
off here, so that what is shown is the sandbox, not the guard's refusal."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from cudarl.tasks import Task
from cudarl.tester import Candidate, Outcome, Tester
from tests.conftest import make_tester_config
from tests.fixtures.tiny import TASK, candidate

TIMEOUT_S = 60.0  # generous: a loaded 2-core CI machine can take 20 s just to import torch
HANG_TIMEOUT_S = 8  # the verdict is the same at any limit; the import of torch alone takes ~6 s here


def _tester(cache_root, timeout_s: float) -> Tester:
    config = make_tester_config(compile={"mode": "kernel"}, hardening={"static_rules": False},
                                sandbox={"timeout_s": timeout_s, "memory_limit_mb": 2048, "output_limit_kb": 4})
    return Tester(config, cache_root=cache_root)


@pytest.fixture(scope="module")
def tester(cache_root) -> Tester:
    return _tester(cache_root, TIMEOUT_S)


def judge(tester: Tester, module_code: str):
    task = Task(id="add", source=TASK)
    started = time.monotonic()
    verdict = tester.evaluate(task, Candidate(task_id="add", id="case", source=candidate(module_code)))
    return verdict, time.monotonic() - started


def test_well_behaved_candidate_loads_and_says_what_was_skipped(tester):
    verdict, _ = judge(tester, "")
    assert verdict.outcome == Outcome.COMPILED, verdict.reasons
    assert any("correctness" in s and "no CUDA GPU" in s for s in verdict.skipped)
    assert verdict.sandbox.exit_code == 0 and verdict.sandbox.network_isolated


def test_hang_is_killed_at_the_timeout(cache_root):
    verdict, elapsed = judge(_tester(cache_root, HANG_TIMEOUT_S), "while True:\n    pass")
    assert verdict.outcome == Outcome.TIMEOUT
    assert f"killed after {HANG_TIMEOUT_S} s" in verdict.reasons[0]
    assert HANG_TIMEOUT_S <= elapsed < HANG_TIMEOUT_S + 30


def test_segfault_is_a_crash_naming_the_signal(tester):
    verdict, _ = judge(tester, "import ctypes\nctypes.string_at(0)")
    assert verdict.outcome == Outcome.CRASHED
    assert "killed by SIGSEGV" in verdict.reasons[0]


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_os_exit_before_reporting_is_a_crash_with_the_exit_code(tester):
    verdict, _ = judge(tester, "import os\nos._exit(3)")
    assert verdict.outcome == Outcome.CRASHED
    assert "exited with code 3" in verdict.reasons[0]


def test_stdout_flood_is_truncated_and_the_verdict_still_arrives(tester):
    verdict, elapsed = judge(tester, "import sys\nfor _ in range(20000):\n    sys.stdout.write('x' * 1000 + '\\n')")
    assert verdict.outcome == Outcome.COMPILED, verdict.reasons
    assert verdict.sandbox.output_truncated and len(verdict.sandbox.stdout) < 5000
    assert elapsed < TIMEOUT_S


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_network_is_unreachable_from_the_candidate(tester):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(TIMEOUT_S + 5)
    port = server.getsockname()[1]
    received: list[bytes] = []

    def accept() -> None:
        try:
            connection, _ = server.accept()
            received.append(connection.recv(100))
        except OSError:
            pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'leak')"
    verdict, _ = judge(tester, code)
    server.close()
    listener.join(timeout=5)
    assert received == []
    assert verdict.outcome == Outcome.LOAD_ERROR
    assert "unreachable" in verdict.reasons[0] or "refused" in verdict.reasons[0]


def test_memory_hog_is_killed_by_the_watchdog(tester):
    verdict, _ = judge(tester, "hog = b'x' * (4 * 1024 ** 3)  # written, so resident")
    assert verdict.outcome == Outcome.MEMORY_LIMIT, verdict.reasons
    assert "2048 MB" in verdict.reasons[0]


def test_exception_at_import_is_a_load_error_with_a_readable_traceback(tester):
    verdict, _ = judge(tester, "raise ValueError('bad constant table')")
    assert verdict.outcome == Outcome.LOAD_ERROR
    assert "ValueError: bad constant table" in verdict.reasons[0] and "candidate.py" in verdict.reasons[0]


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_file_size_limit_stops_large_writes(tester):
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (100 * 1024 * 1024))"
    verdict, _ = judge(tester, code)
    # RLIMIT_FSIZE: Python ignores SIGXFSZ, so the write fails with EFBIG.
    assert verdict.outcome == Outcome.RESOURCE_LIMIT, verdict.reasons
    assert "File too large" in verdict.reasons[0]


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_code_run_by_the_runner_cannot_write_outside_its_folders(tester, tmp_path):
    """The run has the build's isolation: an import that writes elsewhere fails with the
    kernel's refusal, nothing appears there, and the verdict's notes say writes were confined."""
    from cudarl.tester.sandbox.write_guard import landlock_abi

    if landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock: writes cannot be confined here")
    outside = tmp_path / "outside"
    outside.mkdir()
    verdict, _ = judge(tester, f'open("{outside / "planted"}", "w").write("x")')
    assert verdict.outcome == Outcome.LOAD_ERROR, verdict.reasons
    assert "PermissionError" in verdict.reasons[0] and "planted" in verdict.reasons[0]
    assert list(outside.iterdir()) == []
    well_behaved, _ = judge(tester, "pass")
    assert any(note.startswith("runner: writes confined to") for note in well_behaved.hardening.notes), \
        well_behaved.hardening.notes
