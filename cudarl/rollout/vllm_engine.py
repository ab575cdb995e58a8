"""The vLLM engine (``vllm==0.20.0``, an optional extra for CUDA machines), in this process.

Why in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, see ``cudarl._compat.vllm_in_process``):
on one GPU shared with the trainer, weights reach the model by reference through
``collective_rpc`` with a function, with no pickling and no engine child process.

How the interface is kept:
- Token ids in, token ids out: prompts are ``TokensPrompt``s, the tokenizer is never loaded
  (``skip_tokenizer_init``), so end-of-sequence ids are passed as ``stop_token_ids``.
- End of sequence is exactly ``eos_token_ids`` (``ignore_eos`` with ``stop_token_ids``: vLLM
  would otherwise add the model config's end-of-sequence id on its own).
- Log-probs are of the distribution sampled from (``logprobs_mode="processed_logprobs"``:
  after temperature and top-p), as the transformers engine's; at temperature 0 (greedy) they are
  the untempered log-softmax. Temperatures in (0, 0.01) are refused: vLLM would raise them to
  0.01. ``score`` uses prompt log-probs, which vLLM computes at temperature 1: the probe check
  runs at temperature 1.
- Token ids outside the vocabulary are refused before they reach the GPU (with no tokenizer,
  vLLM does not check them, and an embedding lookup out of range kills the CUDA context that
  this process shares with the trainer).
- Adapters: one LoRA adapter per role. Version 0 of an adapter is the base (peft starts B at 0),
  so it generates with no LoRA request. Each update writes a peft folder, registers it under a
  new integer id (vLLM caches adapters by id and re-reads a ``load_inplace`` request from disk on
  every step), removes the previous id and its folder, checks that exactly the new one is
  registered, and resets the prefix cache (cached KV was computed with the old weights). vLLM's
  CPU-side adapter store holds one more than ``max_loras``, so adding a role's new version
  before removing its old one never evicts the other role's adapter.
- Full updates: ``load_weights`` on the model through ``collective_rpc`` (in place, so CUDA
  graphs keep valid pointers); a parameter left unloaded fails the update (vLLM's loader skips
  names it does not know); then the prefix cache is reset. Refused when LoRA is enabled (vLLM
  renames the wrapped layers: some fail to load, others are skipped silently).
- Every update's check is the probe (vLLM has no read-back of its fused weights): an update
  without a probe is reported as unverified in ``WeightSync.notes``.
Not covered: tensor parallelism, several GPUs, sleep mode, a trainer in another process (vLLM's
``init_weight_transfer_engine``). GPU-only; tested by ``tests/gpu/test_vllm_gpu.py``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cudarl import _compat
from cudarl.rollout.adapters import save_adapter_folder
from cudarl.rollout.engine import (
    Generation,
    LoraSettings,
    Probe,
    SamplingSettings,
    WeightSync,
    WeightSyncError,
    WeightVersions,
    check_score_request,
    check_token_ids,
)

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The adapter ranks vLLM 0.20 can be started with (``max_lora_rank``)."""


@dataclass(frozen=True)
class VLLMSettings:
    """How the vLLM engine is started (fields are ``vllm.LLM`` arguments)."""

    dtype: str = "bfloat16"
    max_model_len: int | None = None
    """Longest sequence (prompt + continuation); None: the model's own limit."""
    gpu_memory_utilization: float = 0.4
    """Fraction of the GPU vLLM may take; its start-up check needs this much free."""
    kv_cache_memory_bytes: int | None = None
    """KV cache size; set it when the GPU is shared (vLLM's profiling assumes the GPU is its own)."""
    enforce_eager: bool = False
    """No CUDA graphs or compilation: slower decoding, start-up in seconds."""
    max_num_seqs: int = 256
    max_loras: int = 2
    """Adapters in one batch (vLLM's default is 1; two roles need 2)."""
    max_lora_rank: int = 64
    """Largest adapter rank; vLLM accepts only the values in ``LORA_RANKS``."""
    seed: int = 0
    load_format: str = "auto"
    """``dummy``: random weights of the model's shape (benchmarks)."""
    extra: dict = field(default_factory=dict)
    """Further ``vllm.LLM`` arguments, passed as they are."""

    def __post_init__(self) -> None:
        if not 0.05 <= self.gpu_memory_utilization <= 0.98:
            raise ValueError(f"gpu_memory_utilization must be in [0.05, 0.98], got {self.gpu_memory_utilization}")
        if self.max_loras < 1 or (self.max_model_len is not None and self.max_model_len < 16):
            raise ValueError("max_loras must be at least 1 and max_model_len at least 16")
        if self.max_lora_rank not in LORA_RANKS:
            raise ValueError(f"max_lora_rank must be one of {LORA_RANKS}, got {self.max_lora_rank}")


@dataclass
class _Adapter:
    settings: LoraSettings
    lora_id: int | None = None  # None: version 0, the base weights
    folder: Path | None = None


class VLLMEngine:
    """``vllm.LLM`` behind the ``RolloutEngine`` interface."""

    def __init__(self, model: str, settings: VLLMSettings | None = None, lora: bool = False,
                 eos_token_ids: Sequence[int] | None = None) -> None:
        self.settings = settings or VLLMSettings()
        _compat.vllm_in_process(model_is_local=Path(model).exists())
        from vllm import LLM

        arguments = {"model": model, "skip_tokenizer_init": True, "logprobs_mode": "processed_logprobs",
                     "dtype": self.settings.dtype, "max_model_len": self.settings.max_model_len,
                     "gpu_memory_utilization": self.settings.gpu_memory_utilization,
                     "enforce_eager": self.settings.enforce_eager, "max_num_seqs": self.settings.max_num_seqs,
                     "seed": self.settings.seed, "load_format": self.settings.load_format}
        if lora:
            arguments |= {"enable_lora": True, "max_loras": self.settings.max_loras,
                          "max_cpu_loras": self.settings.max_loras + 1, "max_lora_rank": self.settings.max_lora_rank}
        if self.settings.kv_cache_memory_bytes:
            arguments["kv_cache_memory_bytes"] = self.settings.kv_cache_memory_bytes
        self.llm = LLM(**(arguments | self.settings.extra))
        _require_in_process(self.llm)
        self.vocab_size = int(self.llm.model_config.get_vocab_size())
        self.lora_enabled = lora
        self.eos_ids = [int(t) for t in (eos_token_ids if eos_token_ids is not None else _eos_ids(model))]
        self.versions = WeightVersions()
        self._adapters: dict[str, _Adapter] = {}
        self._next_lora_id = 1
        self._folders = tempfile.TemporaryDirectory(prefix="cudarl-vllm-adapters-")

    @property
    def weights_version(self) -> int:
        return self.versions.of(None)

    @property
    def adapters(self) -> tuple[str, ...]:
        return tuple(self._adapters)

    def version_of(self, adapter: str | None = None) -> int:
        return self.versions.of(adapter)

    def add_adapter(self, name: str, settings: LoraSettings) -> None:
        if not self.lora_enabled:
            raise ValueError("this vLLM engine was started without LoRA (lora=True)")
        if not name or name in self._adapters:
            raise ValueError(f"adapter name {name!r} is empty or taken")
        if settings.rank > self.settings.max_lora_rank:
            raise ValueError(f"adapter rank {settings.rank} is above the engine's max_lora_rank "
                             f"{self.settings.max_lora_rank}")
        if len(self._adapters) >= self.settings.max_loras:
            raise ValueError(f"the engine holds at most {self.settings.max_loras} adapters (max_loras)")
        self._adapters[name] = _Adapter(settings)
        self.versions.add(name)

    def _lora_request(self, adapter: str | None):
        """The request that applies ``adapter`` now (None: the base weights, or version 0)."""
        self.version_of(adapter)
        state = self._adapters.get(adapter) if adapter else None
        if state is None or state.lora_id is None:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest(f"{adapter}-v{self.versions.of(adapter)}", state.lora_id, str(state.folder))

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings,
                 adapter: str | None = None) -> list[Generation]:
        """One continuation per prompt, in order; request ``i`` samples with seed ``seed + i``
        (one seed for all would give a GRPO group identical samples)."""
        from vllm import SamplingParams, TokensPrompt

        self.versions.require_usable(adapter)
        request = self._lora_request(adapter)
        if not prompts:
            return []
        check_token_ids(prompts, self.vocab_size)
        if 0 < settings.temperature < 0.01:
            raise ValueError(f"temperature {settings.temperature} is in (0, 0.01), which vLLM raises to 0.01: "
                             "use 0 (greedy) or at least 0.01")
        params = [SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                 top_p=settings.top_p, logprobs=0, stop_token_ids=self.eos_ids, ignore_eos=True,
                                 detokenize=False,
                                 seed=None if settings.seed is None else settings.seed + index)
                  for index in range(len(prompts))]
        version = self.version_of(adapter)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                    lora_request=request, use_tqdm=False)
        generations = []
        for index, (prompt, output) in enumerate(zip(prompts, outputs)):
            if list(output.prompt_token_ids) != list(prompt):
                raise RuntimeError(f"generation {index}: the engine's prompt ids differ from the request's")
            used = getattr(output.lora_request, "lora_int_id", None)
            if used != getattr(request, "lora_int_id", None):
                raise WeightSyncError(f"generation {index} ran with adapter id {used}, not "
                                      f"{getattr(request, 'lora_int_id', None)} ({adapter!r})")
            completion = output.outputs[0]
            tokens = tuple(int(t) for t in completion.token_ids)
            logprobs = tuple(float(step[token].logprob) for step, token in zip(completion.logprobs, tokens))
            generations.append(Generation(request_id=f"{index}", prompt_ids=tuple(prompt), token_ids=tokens,
                                          logprobs=logprobs, finished=completion.finish_reason == "stop",
                                          weights_version=version, adapter=adapter))
        return generations

    def score(self, token_ids: Sequence[int], prompt_length: int, adapter: str | None = None) -> list[float]:
        """Log-probs (temperature 1) of ``token_ids[prompt_length:]``, from vLLM's prompt log-probs."""
        from vllm import SamplingParams, TokensPrompt

        check_score_request(token_ids, prompt_length, self.vocab_size)
        request = self._lora_request(adapter)
        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False)
        (output,) = self.llm.generate([TokensPrompt(prompt_token_ids=list(token_ids))], params,
                                      lora_request=request, use_tqdm=False)
        steps = output.prompt_logprobs
        return [float(steps[i][token_ids[i]].logprob) for i in range(prompt_length, len(token_ids))]

    def update_weights(self, weights: Mapping[str, torch.Tensor], version: int, probe: Probe | None = None,
                       adapter: str | None = None) -> WeightSync:
        """The adapter's new tensors (peft names) or the model's (transformers names), then the probe."""
        def load() -> int:
            return self._load_adapter(adapter, weights, version) if adapter else self._load_base(weights)

        return self.versions.update(self, weights, version, probe, adapter, load)

    def _load_adapter(self, name: str, weights: Mapping[str, torch.Tensor], version: int) -> int:
        from vllm.lora.request import LoRARequest

        state = self._adapters[name]
        folder = save_adapter_folder(weights, state.settings, Path(self._folders.name) / f"{name}-v{version}")
        lora_id, self._next_lora_id = self._next_lora_id, self._next_lora_id + 1
        engine = self.llm.llm_engine
        if not engine.add_lora(LoRARequest(f"{name}-v{version}", lora_id, str(folder))):
            raise WeightSyncError(f"vLLM did not load adapter {name!r} version {version} from {folder}",
                                  nothing_loaded=True)  # the previous adapter stays registered
        previous = state.lora_id
        if previous is not None:
            engine.remove_lora(previous)
        registered = set(engine.list_loras())
        if lora_id not in registered or (previous is not None and previous in registered):
            raise WeightSyncError(f"after the update vLLM holds adapters {sorted(registered)}: expected {lora_id} "
                                  f"and not {previous}")
        if state.folder is not None:
            shutil.rmtree(state.folder, ignore_errors=True)  # its id is gone: never read again
        state.lora_id, state.folder = lora_id, folder
        self._reset_prefix_cache()
        return len(weights)

    def _reset_prefix_cache(self) -> None:
        if not self.llm.reset_prefix_cache():
            raise WeightSyncError("vLLM did not reset its prefix cache (blocks in use): cached KV of the old "
                                  "weights could be reused")

    def _load_base(self, weights: Mapping[str, torch.Tensor]) -> int:
        if self.lora_enabled:
            raise WeightSyncError("full weight updates are refused while LoRA is enabled: vLLM renames the "
                                  "adapted layers and would skip their weights silently; update the adapters",
                                  nothing_loaded=True)
        named = [(name, tensor) for name, tensor in weights.items()]

        def load(worker, tensors):
            model = worker.model_runner.get_model()
            loaded = model.load_weights(tensors)
            return sorted({name for name, _ in model.named_parameters()} - set(loaded))

        (missing,) = self.llm.collective_rpc(load, args=(named,))
        if missing:
            raise WeightSyncError(f"vLLM's model left {len(missing)} parameter(s) unloaded (names from another "
                                  f"model?), e.g. {missing[:3]}")
        self._reset_prefix_cache()
        return len(named)


def _require_in_process(llm) -> None:
    """Weight updates pass tensors by reference to an engine core in this process; a user's
    ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` would move it to a child (functions refused, tensors copied)."""
    from vllm.v1.engine.core_client import InprocClient

    if not isinstance(llm.llm_engine.engine_core, InprocClient):
        raise RuntimeError("the vLLM engine core runs in another process: unset VLLM_ENABLE_V1_MULTIPROCESSING "
                           "or set it to 0 (cudarl updates weights in place, in this process)")


def _eos_ids(model: str) -> list[int]:
    """End-of-sequence ids from the model's generation config, else its config (vLLM without a
    tokenizer knows none, and would never stop a sequence early)."""
    from transformers import AutoConfig, GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(model).eos_token_id
    except OSError:
        eos = None
    if eos is None:
        eos = AutoConfig.from_pretrained(model).eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])
