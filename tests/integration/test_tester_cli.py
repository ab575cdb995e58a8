"""``cudarl tester serve/stats/scale/stop`` and ``cudarl eval --address`` as real processes
against one real local Ray cluster (started by ``serve``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import SUITE, run_cli
from tests.fixtures.processes import stop_group

pytestmark = pytest.mark.slow


def test_serve_stats_scale_eval_and_stop(tmp_path, own_ray):
    """``own_ray``: ``serve`` starts a local Ray of its own. The other commands name it by the
    address ``serve`` prints (``auto`` could find another suite's Ray on this machine)."""
    environment = {**os.environ, "CUDARL_CACHE_DIR": str(tmp_path / "cache")}
    serve = subprocess.Popen([sys.executable, "-m", "cudarl.cli", "tester", "serve", "--every", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        lines = []
        while time.monotonic() < deadline:
            line = serve.stdout.readline()
            lines.append(line)
            if "running" in line:
                break
        assert any("running" in line for line in lines), lines
        address = re.search(r"running on Ray at (\S+?);", "".join(lines)).group(1)
        stats = run_cli("tester", "stats", "--address", address, cache=tmp_path / "cache")
        assert stats.returncode == 0, stats.stdout + stats.stderr
        assert json.loads(stats.stdout)["name"] == "cudarl-tester"
        scaled = run_cli("tester", "scale", "--compile", "2", "--address", address, cache=tmp_path / "cache")
        assert scaled.returncode == 0, scaled.stdout + scaled.stderr
        assert json.loads(scaled.stdout)["compile"]["bounds"] == [2, 2]
        # the suite's nvrtc solution: NVRTC builds in a second, where the inline one's torch-header
        # build takes half a minute and proves nothing more about the commands
        judged = run_cli("eval", str(SUITE), str(SUITE / "solutions_nvrtc"), "--address", address,
                         "--only", "vector_add", "--out", str(tmp_path / "r.json"), cache=tmp_path / "cache")
        assert judged.returncode == 0, judged.stdout + judged.stderr
        report = json.loads((tmp_path / "r.json").read_text())
        assert len(report["verdicts"]) == 1 and report["verdicts"][0]["outcome"] in ("compiled", "passed")
        after = json.loads(run_cli("tester", "stats", "--address", address, cache=tmp_path / "cache").stdout)
        assert after["counts"]["submitted"] == 1  # judged by the running pool, not a new one
        stopped = run_cli("tester", "stop", "--address", address, cache=tmp_path / "cache")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:  # it failed: take its local Ray down with it (its process group)
            stop_group(serve, timeout_s=30)


def test_scale_without_counts_and_detach_without_a_cluster_are_clear_errors():
    result = run_cli("tester", "scale")
    assert result.returncode == 2 and "give --compile and/or --bench" in result.stdout
    result = run_cli("tester", "serve", "--detach")
    assert result.returncode == 2 and "--detach needs --address" in result.stdout
