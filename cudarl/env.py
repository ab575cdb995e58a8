"""Every environment variable cudarl reads, in one place.

Why one module: a user debugging a run should find every knob that is not in the TOML config
here, with what it does, instead of grepping for ``os.environ``. Nothing else in the project
reads ``os.environ`` directly (child processes get their environment built from here too).
"""

from __future__ import annotations

import os
from pathlib import Path

CUDARL_CACHE_DIR = "CUDARL_CACHE_DIR"
"""Root of the compile cache (built extensions, cubins, compile reports). Default: ~/.cache/cudarl."""

CUDARL_CUDA_ARCH = "CUDARL_CUDA_ARCH"
"""Target architecture such as ``90`` or ``sm_90``; overrides detection and the config."""

CUDARL_NVRTC_DIR = "CUDARL_NVRTC_DIR"
"""Folder of cubins for nvrtc-format kernels (``cudarl.nvrtc``). The tester sets it to the
candidate's build folder in the compile child and the runner. Default: <cache>/nvrtc."""

CUDA_HOME = "CUDA_HOME"
"""CUDA toolkit root. Read by torch's extension builder too; see ``cudarl._compat``."""

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
"""Which GPU a child process sees; set by the pool when pinning bench workers."""

TORCH_CUDA_ARCH_LIST = "TORCH_CUDA_ARCH_LIST"
"""torch's extension builder compiles for these architectures; cudarl sets it to one arch."""

TORCH_EXTENSIONS_DIR = "TORCH_EXTENSIONS_DIR"
"""Where torch's stock ``load_inline`` builds; set only by the compile benchmark's stock baseline."""

MAX_JOBS = "MAX_JOBS"
"""Parallel compiler jobs in torch's extension builder; cudarl sets it from ``compile.jobs``."""

PYTORCH_NVCC = "PYTORCH_NVCC"
"""The nvcc command torch's extension builds run; cudarl sets it to its split driver
(``cudarl.tester.build.nvcc_split``) unless it is already set."""

TMPDIR = "TMPDIR"
"""Temporary files of a build (nvcc, the host compiler); a compile child whose writes are
confined (``sandbox.restrict_writes``) points it at a private folder beside the candidate."""

LD_PRELOAD = "LD_PRELOAD"
"""Libraries the dynamic linker loads first. The judge starts the runner with the launch shim
(``cudarl.tester.judging.launch_shim``) in front of whatever is already there."""

CUDARL_LAUNCH_SHIM = "CUDARL_LAUNCH_SHIM"
"""Path of the built launch shim; the tester sets it for its judges, which preload it into the
runner (the own-kernel knockout). Unset: no knockout, the own-kernel time share decides."""

CC = "CC"
"""The C compiler that builds the launch shim. Default: ``cc``."""

PYTHONPATH = "PYTHONPATH"
"""Passed on to child processes so that they import the same cudarl as the parent."""

VLLM_ENABLE_V1_MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"
"""vLLM runs its engine core in a child process unless this is ``0``; the vLLM engine defaults
it to ``0`` (``cudarl._compat.vllm_in_process``)."""

VLLM_HOST_IP = "VLLM_HOST_IP"
"""The address vLLM's single-GPU process group binds; defaulted to 127.0.0.1 by the vLLM engine."""

GLOO_SOCKET_IFNAME = "GLOO_SOCKET_IFNAME"
"""The network interface torch's gloo groups use; defaulted to ``lo`` by the vLLM engine."""

VLLM_NO_USAGE_STATS = "VLLM_NO_USAGE_STATS"
"""``1`` stops vLLM's usage report (an HTTP post); set by the vLLM engine."""

HF_HUB_OFFLINE = "HF_HUB_OFFLINE"
"""``1``: transformers and vLLM make no hub calls. The vLLM engine sets it when the model is a
local folder."""


def snapshot_environment() -> dict[str, str]:
    """This process's whole environment, to put back later (``restore_environment``)."""
    return dict(os.environ)


def restore_environment(saved: dict[str, str]) -> None:
    """Put back an environment taken with ``snapshot_environment``: a candidate may set
    variables at import (``os.environ``), and none of them may reach the tools a build starts."""
    os.environ.clear()
    os.environ.update(saved)


def get(name: str, default: str | None = None) -> str | None:
    """Read one declared variable (the only sanctioned way to read the environment)."""
    return os.environ.get(name, default)


def set_for_children(name: str, value: str) -> None:
    """Set a declared variable in this process, for the tools it starts (torch's builder, nvcc)."""
    os.environ[name] = value


def set_default(name: str, value: str) -> None:
    """Set a declared variable unless the user already set it (a user's choice wins)."""
    os.environ.setdefault(name, value)


def cache_dir() -> Path:
    """Where compiled candidates are kept across runs."""
    value = get(CUDARL_CACHE_DIR)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "cudarl"


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a sandboxed child starts with.

    The parent's environment is copied (the child needs PATH, CUDA and Python settings), then
    ``extra`` is applied. Secrets such as the correctness seed never travel this way: they go
    over the child's stdin, which the candidate cannot re-read.
    """
    env = dict(os.environ)
    if extra:
        env.update(extra)
    return env

RAY_AUTH_MODE = "RAY_AUTH_MODE"
"""Ray's token authentication ("token" or "disabled"); the cluster test starts its head with
"disabled", as the client in the test's process has it (a head reachable only from that machine)."""

RAY_ENABLE_UV_RUN_RUNTIME_ENV = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
"""Ray's own switch: a driver started under ``uv run`` has its folder shipped as the job's
working_dir and its workers started through ``uv run`` there. cudarl turns that off for the local
Ray clusters it starts (``cudarl._compat.local_ray_workers_on_this_python``) unless this is set;
set it to ``1`` to keep Ray's behaviour there too."""

CUDARL_VERL_CONFIG = "CUDARL_VERL_CONFIG"
"""A cudarl TOML config for the verl integration (``cudarl.verl_env``): the tester pool's and the
reward's settings inside verl's workers, where no command line reaches. Default: cudarl's defaults;
an agent loop's ``cudarl_config`` key or the reward function's ``cudarl_config`` argument wins."""
