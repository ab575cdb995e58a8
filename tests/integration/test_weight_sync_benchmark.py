"""``benchmarks/weight_sync.py --tiny`` end to end on CPUs: two real Ray actors, the object store
against the gloo weight channel, a JSON with every arm for both payloads (the GPU run, NCCL between
two GPUs, is part of ``scripts/multigpu.sh``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_tiny_run_writes_every_arm(tmp_path):
    out = tmp_path / "weight_sync.json"
    done = subprocess.run([sys.executable, "benchmarks/weight_sync.py", "--tiny", "--repeats", "2", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [(r["payload"], r["arm"]) for r in rows] == [
        (payload, arm) for payload in ("adapters", "model")
        for arm in ("object store", "channel", "channel, GPU-resident")]
    for payload in ("adapters", "model"):
        sizes = {r["bytes"] for r in rows if r["payload"] == payload}
        assert len(sizes) == 1 and sizes.pop() > 0  # every arm moved the same tensors
    assert all(len(r["seconds"]) == 2 for r in rows) and result["settings"]["backend"] == "gloo"
    assert "vs store" in done.stdout
