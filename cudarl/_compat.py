"""Workarounds for upstream behaviour, each with its reason. Nothing else in cudarl patches
third-party code.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from cudarl import env


def cuda_home() -> Path | None:
    """The CUDA toolkit root, or None when no toolkit is installed.

    Why: torch's extension builder guesses CUDA_HOME from the location of ``nvcc`` on PATH. When
    ``nvcc`` is a wrapper script (e.g. /usr/local/bin/nvcc that execs the real compiler), torch
    guesses /usr/local, which has no libcudart, and the link step fails. We resolve the real
    toolkit: CUDA_HOME if set, else the folder of the compiler that the wrapper finally runs
    (found by resolving symlinks and checking for include/cuda.h), else /usr/local/cuda.
    """
    configured = env.get(env.CUDA_HOME)
    if configured and (Path(configured) / "bin" / "nvcc").exists():
        return Path(configured)
    candidates: list[Path] = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = Path(nvcc).resolve()
        candidates.append(real.parent.parent)
        try:  # a wrapper script that execs the real nvcc: read its target
            text = real.read_text(errors="ignore")[:4096]
            for token in text.split():
                if token.endswith("/bin/nvcc"):
                    candidates.append(Path(token).parent.parent)
        except OSError:
            pass
    candidates.append(Path("/usr/local/cuda"))
    for root in candidates:
        if (root / "include" / "cuda.h").exists() and (root / "bin" / "nvcc").exists():
            return root
    return None


def torch_versions() -> tuple[str, str | None]:
    """torch's version and the CUDA version it was built with (None: a CPU build), without
    importing torch where it is not imported yet.

    Why: ``import torch`` costs seconds of CPU, and every process that builds or caches kernels
    (pool workers, the CLI) needs these two strings for its cache keys long before, or without
    ever, needing torch itself. torch writes them into ``torch/version.py``, a file that imports
    nothing of torch's; it is read on its own. Anything unexpected there: torch is imported.
    """
    import sys

    if "torch" not in sys.modules:
        import importlib.util

        try:
            spec = importlib.util.find_spec("torch")
            path = Path(spec.origin).parent / "version.py" if spec and spec.origin else None
            if path is not None and path.is_file():
                probe = importlib.util.spec_from_file_location("cudarl_torch_version_probe", path)
                module = importlib.util.module_from_spec(probe)
                probe.loader.exec_module(module)
                cuda = module.cuda
                if isinstance(module.__version__, str) and (cuda is None or isinstance(cuda, str)):
                    return module.__version__, cuda
        except Exception:  # noqa: BLE001 - an unexpected layout: ask torch itself
            pass
    import torch

    return torch.__version__, torch.version.cuda


def apply_cuda_home() -> Path | None:
    """Set CUDA_HOME for torch's builder (in this process) to the resolved toolkit root."""
    root = cuda_home()
    if root is not None:
        env.set_for_children(env.CUDA_HOME, str(root))
    return root


def import_cpp_extension():
    """Import ``torch.utils.cpp_extension`` with CUDA_HOME resolved first.

    Why: the module computes its CUDA_HOME once, at import time; setting the variable later has
    no effect, so it is set before the import and also patched on the module if it was already
    imported elsewhere with a wrong guess.
    """
    root = apply_cuda_home()
    import torch.utils.cpp_extension as cpp

    if root is not None and getattr(cpp, "CUDA_HOME", None) != str(root):
        cpp.CUDA_HOME = str(root)
    return cpp


def torch_cxx_standard() -> str:
    """The C++ standard flag torch's extension builder uses (``-std=c++17`` or ``-std=c++20``).

    Why: torch moved its headers from C++17 to C++20 (they ``#error`` on older standards), and
    exposes no constant for it. Kernel-only compiles must use the same standard as the full
    build, so we read it from the builder's own source.
    """
    import inspect

    cpp = import_cpp_extension()
    try:
        text = inspect.getsource(cpp)
    except (OSError, TypeError):
        return "-std=c++17"
    return "-std=c++20" if "-std=c++20" in text else "-std=c++17"


def cuda_library_include_dirs() -> list[str]:
    """A folder of links to CUDA library headers that the toolkit lacks but torch's wheels ship.

    Why: torch's ``ATen/cuda/CUDAContext.h`` includes cuSPARSE and cuBLAS headers. A minimal
    toolkit (compiler and runtime only) lacks them, while the CUDA build of torch ships them in
    its ``nvidia`` wheels, which torch's builder does not put on the include path. That wheel
    folder cannot be added whole: its runtime headers belong to the wheel's CUDA version and
    ``#error`` against an older nvcc. So we link only the headers the toolkit does not have,
    into ``<cache>/cuda-library-headers/<hash of the wheel folder>``, and return that folder
    (empty list: nothing needed).
    """
    root = cuda_home()
    toolkit_include = root / "include" if root is not None else None
    if toolkit_include is None or (toolkit_include / "cusparse.h").exists():
        return []
    try:
        import nvidia  # namespace package of the nvidia-* wheels
    except ImportError:
        return []
    sources = [h.parent for base in getattr(nvidia, "__path__", []) for h in Path(base).glob("*/include/cusparse.h")]
    if not sources:
        return []
    # one folder per wheel folder: links made for another environment (deleted since, or not
    # mounted in a build container) must not serve this one
    import hashlib

    shim = env.cache_dir() / "cuda-library-headers" / hashlib.sha256(str(sources[0]).encode()).hexdigest()[:16]
    shim.mkdir(parents=True, exist_ok=True)
    for entry in sources[0].iterdir():
        link = shim / entry.name
        if entry.is_file() and not (toolkit_include / entry.name).exists() and not link.exists():
            try:
                link.symlink_to(entry)
            except FileExistsError:
                pass  # another process linked it first
    return [str(shim)]


def gpu_busy_wait(cycles: int) -> None:
    """Keep the current stream busy for about ``cycles`` GPU clock cycles.

    Why: timing starts with an event on an idle GPU, and the host then needs 10-50 us of Python
    to launch the model; that launch latency varies between processes and was measured spreading
    medians of a 0.15 ms softmax by 12-17% across fresh processes. Queuing a spin kernel before
    the start event hides it. ``torch.cuda._sleep`` is private; where it is missing, timing goes
    on without the spin (and with that noise).
    """
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(cycles)


def forget_extension_version(cpp, name: str) -> None:
    """Make torch's next ``load_inline(name=...)`` in this process build version 0 again.

    Why: torch's JIT builder numbers an extension's builds within a process: a second build of
    the same name with other sources is named ``<name>_v1`` (a different module name and
    ``TORCH_EXTENSION_NAME``). When a trimmed build fails and the source as written is built
    instead, the runner (a new process, version 0) would then see other flags than the compile
    child used and rebuild everything. Forgetting the failed attempt keeps the name stable.
    The versioner is private (``JIT_EXTENSION_VERSIONER.entries``); if it is missing, nothing is
    done and the runner merely rebuilds."""
    entries = getattr(getattr(cpp, "JIT_EXTENSION_VERSIONER", None), "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)


def exact_fp32_math() -> None:
    """Full fp32 precision for matmuls and convolutions in this process (no TF32).

    Why: torch runs fp32 convolutions in TF32 by default (``cudnn.allow_tf32`` is True), so a
    reference would carry TF32 rounding (~1e-3) and the tolerance would have to let TF32 kernels
    through. The judge and the runner both call this before any model is built; a candidate may
    switch TF32 on in its own process, and then fails an fp32 task's tolerance. The legacy flags
    are used because they set convolutions and RNNs together: setting only the newer
    ``cudnn.conv.fp32_precision`` makes later reads of ``cudnn.allow_tf32`` raise (mixed APIs).
    """
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def vllm_in_process(model_is_local: bool) -> None:
    """Environment for a vLLM engine inside this process, on a machine without a network.

    Why each, all set only where the user has not (``env.set_default``), before vllm is imported
    (it reads them at import; huggingface_hub too, so ``HF_HUB_OFFLINE`` may come too late for a
    process that imported transformers first: a local folder needs no hub lookup anyway):
    - ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in this process, so weight
      updates reach the model by reference (``collective_rpc`` with a function, no pickling) and
      no ``spawn`` child re-imports the caller's script (a script without a main guard hangs).
    - ``VLLM_HOST_IP=127.0.0.1``, ``GLOO_SOCKET_IFNAME=lo``: vLLM opens a one-process group even
      on one GPU, and several gloo groups; without these, each looks its host name up, and on a
      host whose name does not resolve each lookup waits for resolver timeouts (the likeliest
      cause of an engine that had not started after minutes on such a machine).
    - ``VLLM_NO_USAGE_STATS=1``: no usage report over HTTP.
    - ``HF_HUB_OFFLINE=1`` for a local folder: no hub lookups (they retry on network errors).
    """
    from cudarl import env

    env.set_default(env.VLLM_ENABLE_V1_MULTIPROCESSING, "0")
    env.set_default(env.VLLM_HOST_IP, "127.0.0.1")
    env.set_default(env.GLOO_SOCKET_IFNAME, "lo")
    env.set_default(env.VLLM_NO_USAGE_STATS, "1")
    if model_is_local:
        env.set_default(env.HF_HUB_OFFLINE, "1")


def allow_decode_recompiles(limit: int = 64) -> None:
    """Let torch.compile keep more compiled versions of the decode step than its default of 8.

    Why: the transformers engine's GPU decoder compiles one version per (batch bucket, cache
    length, active LoRA adapter); two roles' adapters plus the base over a few batch sizes passes
    8, and past its limit dynamo silently runs the function eagerly (correct, several times
    slower). Only ever raised, never lowered below what the user set."""
    import torch._dynamo

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), limit))


GROUPED_DECODE_ATTENTION = "cudarl_grouped_sdpa"


def grouped_decode_attention() -> str:
    """Register (once) and name an attention function: transformers' SDPA, except that a
    one-token query of a grouped-query model attends with its query heads packed per key/value
    head instead of the key/value heads copied per query head.

    Why: transformers' SDPA path packs the heads this way (``pack_gqa``) only outside
    ``torch.compile``; inside a compiled decode step it falls back to ``repeat_kv``, which copies
    the whole key/value cache six times over for a Qwen2.5-1.5B-shaped model at every layer and
    step. Measured on one H200 at batch 256 with a 512-token static cache: those copies and the
    masked attention after them were about 80% of the compiled step's GPU time. Prefill, scoring
    and models without grouped heads go through SDPA unchanged; the mask builder is SDPA's."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if GROUPED_DECODE_ATTENTION in AttentionInterface._global_mapping:
        return GROUPED_DECODE_ATTENTION

    def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
        import torch

        groups = getattr(module, "num_key_value_groups", 1)
        shared_mask = attention_mask is None or attention_mask.shape[1] == 1
        if (query.shape[2] != 1 or groups == 1 or not shared_mask or kwargs.get("position_bias") is not None
                or kwargs.get("softcap") is not None or dropout):
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                          **kwargs)
        batch, heads, _, dim = query.shape
        packed = query.reshape(batch, heads // groups, groups, dim)  # query head h reads key/value head h // groups
        output = torch.nn.functional.scaled_dot_product_attention(packed, key, value, attn_mask=attention_mask,
                                                                  scale=scaling, is_causal=False)
        return output.reshape(batch, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None

    AttentionInterface.register(GROUPED_DECODE_ATTENTION, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GROUPED_DECODE_ATTENTION, sdpa_mask)
    return GROUPED_DECODE_ATTENTION


def one_gpu_per_process(arguments) -> None:
    """Train on one GPU when a single process sees several (``arguments``: transformers'
    ``TrainingArguments`` or TRL's ``SFTConfig``).

    Why: transformers' ``Trainer`` wraps the model in ``nn.DataParallel`` whenever a process that
    no distributed launcher started sees several GPUs, and TRL's ``SFTTrainer`` (1.16) refuses
    that ("does not support nn.DataParallel"), advising ``CUDA_VISIBLE_DEVICES``: too late inside
    ``cudarl demo``, whose process has already asked CUDA for its devices. ``n_gpu`` has no setter;
    its backing field ``_n_gpu`` is what ``Trainer`` reads (transformers 5.24), so it is capped at 1
    here (the model sits on ``cuda:0``). Under ``torchrun`` or ``accelerate launch`` ``n_gpu`` is
    already 1 and nothing changes.
    """
    if arguments.n_gpu > 1:  # reading it sets the devices up first
        arguments._n_gpu = 1


@contextlib.contextmanager
def local_ray_workers_on_this_python() -> Iterator[None]:
    """Around the ``ray.init`` that starts a local Ray: its workers run on this process's Python.

    Why: Ray (2.60) sees any ``uv run`` among the driver's ancestors and then, by default, ships
    the driver's folder as the job's working_dir and starts every worker through ``uv run`` there,
    so uv builds a fresh copy of the environment in every Ray session (6.2 GB for cudarl's, under
    ``/tmp/ray/session_*/runtime_resources/working_dir_files``) and each worker start pays a uv
    sync. A local Ray runs on this machine, in this very environment: the copy buys nothing.
    Ray reads the switch (``ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV``) when ``ray.init``
    runs, so it is turned off for that call only; a user's own ``RAY_ENABLE_UV_RUN_RUNTIME_ENV``
    wins, and clusters joined by address keep Ray's behaviour.
    """
    from ray._private import ray_constants

    if env.get(env.RAY_ENABLE_UV_RUN_RUNTIME_ENV) is not None:
        yield
        return
    saved = ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    try:
        yield
    finally:
        ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = saved


def start_train_autoscaling_coordinator() -> None:
    """Start Ray Train's autoscaling coordinator before a ``TorchTrainer`` needs it.

    Why: Ray Train (2.60) creates the coordinator, a detached actor, on first use: its controller,
    right after starting, asks it for the workers' resources and waits 5 s for the answer
    (``AUTOSCALING_REQUESTS_GET_TIMEOUT_S``). On a busy machine the actor's process takes longer
    than that to start, so the request fails with a logged traceback, is sent again, and the
    worker group starts 5-10 s later (seen on every update group on 2 cores). Creating it first,
    with the very call Ray Train makes (``get_if_exists``: one actor either way), has it answering
    by the time the controller asks. Does nothing where Ray has moved the function.
    """
    try:
        from ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator import (
            get_or_create_autoscaling_coordinator,
        )
    except ImportError:
        return
    get_or_create_autoscaling_coordinator()
