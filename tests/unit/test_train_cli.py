"""``cudarl train``'s bad input ends in one line and exit code 2, before any worker starts."""

from __future__ import annotations

from cudarl.cli.main import main


def test_a_setting_without_its_table_is_refused(capsys):
    assert main(["train", "--set", "steps=2"]) == 2
    assert "expected table.name=value" in capsys.readouterr().err


def test_an_unknown_or_out_of_range_setting_is_refused(capsys):
    assert main(["train", "--set", "train.stepz=2"]) == 2
    assert "unknown setting 'train.stepz'" in capsys.readouterr().err
    assert main(["train", "--set", "train.temperature=0"]) == 2
    assert "train.temperature" in capsys.readouterr().err


def test_a_model_folder_without_a_model_is_one_line(tmp_path, capsys):
    assert main(["train", "--model", str(tmp_path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"cudarl train: model '{tmp_path}'"), err
