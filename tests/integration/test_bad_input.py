"""Bad input to the ``cudarl`` command ends in one line and exit code 2, or in a report that
names it; it never ends in a traceback and never loses a report.

Covered: candidate files (a JSONL line that is not an object, a non-string ``task_id``, a null
``source``, duplicate ids, a non-UTF-8 file), a folder given as ``--config``, an ``--out`` that
cannot be written (refused before any judging), one bad task file among good ones (the good
ones are judged, the bad one is in the report with its file), candidates for an unknown task (in
the report's ``unmatched``), loader errors in ``cudarl tasks``, and candidate-controlled text
that looks like rich markup (``[/oops]``, ``[import]``), which prints as written after the report
is on disk. Commands run in real subprocesses.
Not covered here: bad config values (``tests/unit/test_verdict_and_config.py``).
"""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.fixtures.tiny import TASK, candidate

PLAIN = "class ModelNew:\n    pass\n"  # refused by the guard at once: no build needed


def _folders(tmp_path):
    tasks, candidates = tmp_path / "tasks", tmp_path / "candidates"
    tasks.mkdir()
    (candidates / "add").mkdir(parents=True)
    (tasks / "add.py").write_text(TASK)
    (candidates / "add" / "plain.py").write_text(PLAIN)
    return tasks, candidates


def _one_line_error(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert all(fragment in result.stderr for fragment in fragments), result.stderr


def test_malformed_candidates_are_refused_with_file_and_line(tmp_path, cache_root):
    tasks, _ = _folders(tmp_path)
    cases = {
        "not_object.jsonl": ('["add", "x"]\n', "not_object.jsonl:1", "got list"),
        "task_id.jsonl": ('{"task_id": 3, "source": "x"}\n', "task_id.jsonl:1", "'task_id' must be a non-empty string"),
        "source.jsonl": ('\n{"task_id": "add", "source": null}\n', "source.jsonl:2", "'source' must be"),
        "twins.jsonl": ('{"task_id": "add", "id": "a", "source": "x"}\n{"task_id": "add", "id": "a", "source": "y"}\n',
                        "twins.jsonl", "two candidates have the id 'a'"),
    }
    for name, (text, *fragments) in cases.items():
        (tmp_path / name).write_text(text)
        _one_line_error(run_cli("eval", str(tasks), str(tmp_path / name), cache=cache_root), *fragments)
    binary = tmp_path / "binary" / "add"
    binary.mkdir(parents=True)
    (binary / "latin.py").write_bytes(b"# caf\xe9\nclass ModelNew: pass\n")
    _one_line_error(run_cli("eval", str(tasks), str(tmp_path / "binary"), cache=cache_root),
                    "latin.py", "not UTF-8")


def test_a_folder_as_config_and_an_unwritable_out_are_refused_before_judging(tmp_path, cache_root):
    tasks, candidates = _folders(tmp_path)
    _one_line_error(run_cli("eval", str(tasks), str(candidates), "--config", str(tmp_path), cache=cache_root),
                    "is a folder, not a TOML file")
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (blocker / "report.json", tmp_path):
        result = run_cli("eval", str(tasks), str(candidates), "--out", str(out), cache=cache_root)
        _one_line_error(result, "cannot write the report")
        assert "candidate(s)" not in result.stderr  # refused before any work


def test_a_bad_task_file_is_reported_and_the_good_ones_judged(tmp_path, cache_root):
    tasks, candidates = _folders(tmp_path)
    (tasks / "broken.py").write_text("def get_inputs(:\n")
    (tasks / "latin.py").write_bytes(b"# caf\xe9\n")
    (candidates / "ghost").mkdir()
    (candidates / "ghost" / "one.py").write_text(PLAIN)
    out = tmp_path / "report.json"
    result = run_cli("eval", str(tasks), str(candidates), "--out", str(out), "--compile-mode", "kernel",
                     cache=cache_root)
    assert result.returncode == 0, result.stderr
    assert "task skipped" in result.stderr and "broken.py" in result.stderr
    report = json.loads(out.read_text())
    assert [v["candidate_id"] for v in report["verdicts"]] == ["add/plain"]
    assert {bad["where"].rsplit("/", 1)[-1] for bad in report["bad_tasks"]} == {"broken.py", "latin.py"}
    assert all(bad["reason"] for bad in report["bad_tasks"])
    assert report["unmatched"] == [{"candidate_id": "ghost/one", "task_id": "ghost",
                                    "reason": "no task with this id was loaded"}]
    listed = run_cli("tasks", "list", "--tasks", str(tasks), cache=cache_root)
    assert listed.returncode == 0 and "broken.py" in listed.stderr and "add" in listed.stdout, listed.stderr
    _one_line_error(run_cli("tasks", "list", "--tasks", str(tmp_path / "missing"), cache=cache_root),
                    "no such task path")


def test_markup_in_candidate_text_prints_as_written_after_the_report_is_saved(tmp_path, cache_root):
    tasks, candidates = _folders(tmp_path)
    (candidates / "add" / "plain.py").unlink()
    marked = candidate().replace("__global__", '#error "[/oops] [bold]x"\n__global__', 1)
    (candidates / "add" / "markup.py").write_text(marked)
    (candidates / "add" / "import.py").write_text("import socket\n" + candidate())
    out = tmp_path / "report.json"
    result = run_cli("eval", str(tasks), str(candidates), "--out", str(out), "--compile-mode", "kernel",
                     cache=cache_root)
    assert result.returncode == 0, result.stderr
    outcomes = {v["candidate_id"]: v["outcome"] for v in json.loads(out.read_text())["verdicts"]}
    assert outcomes == {"add/markup": "compile_error", "add/import": "rejected"}
    assert "[/oops]" in result.stdout and "[import]" in result.stdout, result.stdout
