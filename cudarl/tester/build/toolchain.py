"""What the compile stage builds with: nvcc, torch, the target architecture.

Detected once per process and folded into every cache key, so a toolchain upgrade never serves
a stale build. GPU detection uses ``nvidia-smi`` first so the parent never creates a CUDA
context of its own (that would take GPU memory from the candidates).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from cudarl import _compat, env


class ToolchainError(RuntimeError):
    """No usable CUDA compiler; the message says what is missing."""


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    nvcc_version: str
    cuda_home: Path
    torch_version: str
    torch_cuda: str | None  # CUDA version torch was built with; None for CPU builds

    @property
    def fingerprint(self) -> str:
        return f"nvcc={self.nvcc_version};torch={self.torch_version};torch_cuda={self.torch_cuda}"

    @property
    def can_build_extensions(self) -> bool:
        """Full ``load_inline`` builds need a CUDA build of torch (for its CUDA libraries)."""
        return self.torch_cuda is not None


@functools.cache
def detect_toolchain() -> Toolchain:
    root = _compat.cuda_home()
    if root is None:
        raise ToolchainError("no CUDA toolkit found: install it or set CUDA_HOME (nvcc must be at $CUDA_HOME/bin/nvcc)")
    nvcc = root / "bin" / "nvcc"
    torch_version, torch_cuda = _compat.torch_versions()  # without a torch import (seconds of CPU)
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    return Toolchain(nvcc=nvcc, nvcc_version=match.group(2) if match else out.strip()[-40:],
                     cuda_home=root, torch_version=torch_version, torch_cuda=torch_cuda)


@functools.cache
def gpu_arch() -> str | None:
    """Compute capability of GPU 0 as '90', or None when there is no GPU. Asked of nvidia-smi, else
    NVML, else (without nvidia-ml-py) torch; the first two see every GPU whatever CUDA_VISIBLE_DEVICES says."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.split()
            if out and re.fullmatch(r"\d+\.\d+", out[0]):
                return out[0].replace(".", "")
        except (OSError, subprocess.SubprocessError):
            pass
    try:  # NVML (a dependency) answers without a torch import, which costs seconds of CPU
        import pynvml  # noqa: F401
    except ImportError:
        pass
    else:
        from cudarl import nvml

        return nvml.compute_capability()
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        return f"{major}{minor}"
    return None


def gpu_available() -> bool:
    return gpu_arch() is not None


def resolve_arch(configured: str | None, fallback: str) -> str:
    """The one architecture to build for: env override, config, the GPU's own, the fallback."""
    chosen = env.get(env.CUDARL_CUDA_ARCH) or configured or gpu_arch() or fallback
    chosen = chosen.removeprefix("sm_").replace(".", "")
    if not re.fullmatch(r"\d{2,3}[a-z]?", chosen):
        raise ToolchainError(f"invalid CUDA architecture {chosen!r}; expected something like '90' or 'sm_90a'")
    return chosen


def torch_include_flags() -> list[str]:
    """Include paths that CUDA sources written against ``torch/extension.h`` need."""
    cpp = _compat.import_cpp_extension()
    flags = [f"-I{p}" for p in cpp.include_paths()]
    flags.append(f"-I{sysconfig.get_paths()['include']}")
    return flags
