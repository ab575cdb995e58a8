"""What every benchmark result records about its run: the commit, the library versions, the
machine. Why a module: a figure without the tree and the versions that produced it cannot be
compared with the next one. The commit comes from ``git`` when the tree has its history, else
from ``--commit`` (a copy of the tree without ``.git``, as on a lent GPU machine)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str | None:
    """HEAD of the checkout, with ``-dirty`` when tracked files differ; None without git history."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT, timeout=10).returncode != 0
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def run_metadata(commit: str | None = None) -> dict:
    """Commit, Python, torch and its CUDA, the GPU and its driver, and the CPU count."""
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    driver = None
    if gpu:
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = None
    return {"commit": commit or git_commit() or "unknown", "python": platform.python_version(),
            "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu, "driver": driver,
            "cpus": os.cpu_count()}
