"""The ``cudarl eval`` command end to end, as a user runs it (a real subprocess)."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.fixtures.tiny import TASK, candidate


def test_eval_prints_a_table_and_writes_the_report(tmp_path, cache_root):
    tasks, candidates = tmp_path / "tasks", tmp_path / "candidates"
    tasks.mkdir()
    (candidates / "add").mkdir(parents=True)
    (tasks / "add.py").write_text(TASK)
    (candidates / "add" / "good.py").write_text(candidate())
    (candidates / "add" / "broken.py").write_text(candidate().replace("a[i] + b[i]", "a[i] + c[i]"))
    (candidates / "add" / "plain.py").write_text("class ModelNew:\n    pass\n")
    out = tmp_path / "report.json"
    result = run_cli("eval", str(tasks), str(candidates), "--out", str(out), "--compile-mode", "kernel",
                     cache=cache_root)
    assert result.returncode == 0, result.stderr
    assert "add/good" in result.stdout and "compile_error" in result.stdout
    assert "correctness and timing are skipped" in result.stderr
    report = json.loads(out.read_text())
    outcomes = {v["candidate_id"]: v["outcome"] for v in report["verdicts"]}
    assert outcomes == {"add/good": "compiled", "add/broken": "compile_error", "add/plain": "rejected"}
    assert report["summary"] == {"compiled": 1, "compile_error": 1, "rejected": 1}
    from cudarl.config import CudarlConfig
    from cudarl.tester.build.toolchain import resolve_arch

    compile_settings = CudarlConfig().tester.compile
    assert report["machine"]["arch"] == f"sm_{resolve_arch(compile_settings.arch, compile_settings.fallback_arch)}"


def test_bad_input_gives_a_clear_error_and_exit_code_2(tmp_path, cache_root):
    result = run_cli("eval", str(tmp_path / "missing"), str(tmp_path), cache=cache_root)
    assert result.returncode == 2 and "no such task path" in result.stderr
    config = tmp_path / "bad.toml"
    config.write_text("[tester]\nspeed = 'max'\n")
    result = run_cli("eval", "--config", str(config), cache=cache_root)
    assert result.returncode == 2 and "tester.speed" in result.stderr
