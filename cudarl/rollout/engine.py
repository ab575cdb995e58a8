"""The engine interface the agents and the trainer see, and its typed records.

Why one small interface: the episode loop, the trainer's weight sync and the benchmarks must not
care whether transformers or vLLM generates. Everything crossing it is token ids (never text to be
re-tokenized), per-token log-probs of the sampled tokens, and the weights version. Covered here:
the records, ``WeightSyncError``, the probe check every engine's ``update_weights`` uses, and
``resolve_engine_name`` (which engine, with a clear error when the chosen one is not installed),
and ``LoraSettings``. Adapters: an engine may hold named LoRA adapters over one base model (one
per role); ``adapter=None`` means the base weights. Versions are kept per adapter (the base has
its own): a sample records the version of the weights that produced it, so a trainer that
updates only the generator's adapter never mislabels the optimizer's samples.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

EngineName = Literal["auto", "hf", "vllm"]


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample. ``temperature`` 0 is greedy; log-probs are of the distribution sampled from."""

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if not 0.0 <= self.temperature <= 10.0:
            raise ValueError(f"temperature must be in [0, 10], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(frozen=True)
class Generation:
    """One sampled continuation: the engine's own token ids and their log-probs, and the weights
    version that produced them (what the trainer's importance ratios and staleness checks need)."""

    request_id: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finished: bool  # ended on an end-of-sequence token (False: cut at max_new_tokens)
    weights_version: int
    adapter: str | None = None  # the LoRA adapter generating (None: the base weights)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{self.request_id}: {len(self.token_ids)} tokens but {len(self.logprobs)} log-probs")


@dataclass(frozen=True)
class Probe:
    """A fixed token sequence and the log-probs the trainer's model gives its continuation
    (``token_ids[prompt_length:]``): after a weight update the engine must give the same.

    The check is on the *mean* absolute difference over the probe's tokens, not the largest: an
    engine computing in bf16 against an fp32 trainer leaves single-token outliers (0.11 measured on
    a 32-token probe of a small random Qwen2 with a random adapter, mean far lower), while weights
    that did not take, or an adapter from another version, move every token."""

    token_ids: tuple[int, ...]
    prompt_length: int
    expected_logprobs: tuple[float, ...]
    tolerance: float = 1e-3
    """Largest mean absolute log-prob difference accepted."""


@dataclass(frozen=True)
class WeightSync:
    """What an update did: the new version, how many tensors it replaced, and the probe check."""

    version: int
    tensors: int
    probe_max_error: float | None = None  # largest per-token log-prob difference on the probe
    probe_mean_error: float | None = None  # mean difference: the one checked against the tolerance
    notes: tuple[str, ...] = field(default_factory=tuple)
    adapter: str | None = None  # the adapter updated (None: the base weights)
    seconds: float = 0.0  # wall time of the update, checks included


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter's shape; the trainer's adapters must have the same (their tensors replace these)."""

    rank: int = 16
    alpha: int = 32
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Module names the adapter wraps (Qwen2/Llama names by default)."""

    def __post_init__(self) -> None:
        if not 1 <= self.rank <= 1024:
            raise ValueError(f"LoRA rank must be in [1, 1024], got {self.rank}")
        if self.alpha <= 0:
            raise ValueError(f"LoRA alpha must be positive, got {self.alpha}")
        if not self.target_modules:
            raise ValueError("LoRA target_modules must name at least one module")

    def same_shape(self, other: LoraSettings) -> bool:
        """The same rank, alpha and wrapped modules (in any order: peft writes them as a set), so
        one's tensors load into the other at the same scale."""
        return (self.rank, self.alpha, sorted(self.target_modules)) == (
            other.rank, other.alpha, sorted(other.target_modules))


class WeightSyncError(RuntimeError):
    """A weight update that did not take effect (or took the wrong weights): training on samples
    from stale weights must stop, loudly. ``nothing_loaded``: refused before any tensor was
    copied, so the engine's weights are as they were."""

    def __init__(self, message: str, nothing_loaded: bool = False) -> None:
        super().__init__(message)
        self.nothing_loaded = nothing_loaded


@runtime_checkable
class RolloutEngine(Protocol):
    """Generate, score and take new weights. Implementations: ``hf.HFEngine``, ``vllm.VLLMEngine``."""

    @property
    def weights_version(self) -> int: ...
    """The base weights' version."""

    @property
    def adapters(self) -> tuple[str, ...]: ...

    def version_of(self, adapter: str | None = None) -> int: ...

    def add_adapter(self, name: str, settings: LoraSettings) -> None: ...

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings,
                 adapter: str | None = None) -> list[Generation]: ...

    def score(self, token_ids: Sequence[int], prompt_length: int, adapter: str | None = None) -> list[float]: ...

    def update_weights(self, weights: Mapping[str, object], version: int, probe: Probe | None = None,
                       adapter: str | None = None) -> WeightSync:
        ...


def check_probe(engine: RolloutEngine, probe: Probe, adapter: str | None = None) -> tuple[float, float]:
    """The (largest, mean) log-prob difference between the engine and the trainer on the probe;
    raises ``WeightSyncError`` when the mean is above the probe's tolerance or any difference is not
    finite (the update did not take, or took other weights)."""
    got = engine.score(probe.token_ids, probe.prompt_length, adapter=adapter)
    if len(got) != len(probe.expected_logprobs):
        raise WeightSyncError(f"probe: the engine scored {len(got)} tokens, the trainer {len(probe.expected_logprobs)}")
    differences = [abs(a - b) for a, b in zip(got, probe.expected_logprobs)]
    largest = max(differences, default=0.0)
    mean = sum(differences) / len(differences) if differences else 0.0
    if not math.isfinite(largest) or mean > probe.tolerance:
        raise WeightSyncError(f"after the update the engine's log-probs differ from the trainer's by {mean:.3g} on "
                              f"average, {largest:.3g} at most (tolerance {probe.tolerance:g} on the average): "
                              "the new weights are not the ones generating")
    return largest, mean


class WeightVersions:
    """Per-adapter weights versions (None: the base) and the updates that failed their check: the
    bookkeeping and the update sequence every engine shares, so no engine can skip a step
    (version order, the probe, refusing to generate with weights that failed it)."""

    def __init__(self) -> None:
        self._versions: dict[str | None, int] = {None: 0}
        self._unverified: dict[str | None, str] = {}

    def add(self, adapter: str) -> None:
        self._versions[adapter] = 0

    def of(self, adapter: str | None = None) -> int:
        if adapter not in self._versions:
            names = ", ".join(name for name in self._versions if name) or "none"
            raise ValueError(f"no adapter {adapter!r} (have: {names})")
        return self._versions[adapter]

    def require_usable(self, adapter: str | None) -> None:
        """Raise when the base or ``adapter`` holds weights that failed their check."""
        self.of(adapter)
        for name in {None, adapter}:
            if self._unverified.get(name):
                raise WeightSyncError(f"refusing to generate: {self._unverified[name]}")

    def update(self, engine: RolloutEngine, weights: Mapping, version: int, probe: Probe | None,
               adapter: str | None, load: Callable[[], int]) -> WeightSync:
        """Check the version and the tensors' presence, ``load()`` them (returns how many), move
        the version, check the probe (a failure, or a load that stopped part-way, leaves the
        weights unusable until a good update)."""
        started = time.perf_counter()
        current = self.of(adapter)
        if version <= current:
            raise WeightSyncError(f"weights version {version} is not newer than the engine's {current}"
                                  + (f" for adapter {adapter!r}" if adapter else ""))
        if not weights:
            raise WeightSyncError("an update with no tensors")
        try:
            count = load()
        except Exception as exc:  # a load that stopped part-way leaves weights no version describes
            if not getattr(exc, "nothing_loaded", False):
                self._unverified[adapter] = (f"the update to version {version} failed while loading, its weights "
                                             f"may be partly replaced ({type(exc).__name__}: {exc})")
            raise
        self._versions[adapter] = version
        try:
            largest, mean = check_probe(engine, probe, adapter) if probe is not None else (None, None)
        except WeightSyncError as exc:
            self._unverified[adapter] = f"the update to version {version} failed its check: {exc}"
            raise
        self._unverified.pop(adapter, None)
        return WeightSync(version=version, tensors=count, probe_max_error=largest, probe_mean_error=mean,
                          adapter=adapter,
                          notes=() if probe is not None else ("unverified: no probe was given",),
                          seconds=time.perf_counter() - started)


def check_token_ids(sequences: Sequence[Sequence[int]], vocab_size: int) -> None:
    """Refuse empty sequences and ids outside ``[0, vocab_size)`` before they reach a GPU: an
    embedding lookup out of range is a device-side assert that kills the process's CUDA context
    (shared with the trainer), where a ``ValueError`` names the bad id."""
    for index, sequence in enumerate(sequences):
        if len(sequence) == 0:
            raise ValueError("every prompt needs at least one token")
        low, high = min(sequence), max(sequence)
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"sequence {index} holds token id {bad}, outside the vocabulary [0, {vocab_size})")


def check_score_request(token_ids: Sequence[int], prompt_length: int, vocab_size: int) -> None:
    """A scoring request both engines accept: at least one token scored after at least one of
    context, every id in the vocabulary."""
    if not 1 <= prompt_length < len(token_ids):
        raise ValueError(f"prompt_length must be in [1, {len(token_ids) - 1}], got {prompt_length}")
    check_token_ids([token_ids], vocab_size)


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_engine_name(name: EngineName, device: str | None = None) -> Literal["hf", "vllm"]:
    """``auto``: vLLM when it is installed and the engine goes on a GPU (``device`` "cuda", or
    None with CUDA present), else transformers. ``vllm`` without vLLM installed is an error
    naming what to install."""
    if name not in ("auto", "hf", "vllm"):
        raise ValueError(f"engine must be 'auto', 'hf' or 'vllm', got {name!r}")
    if name == "vllm" and not vllm_installed():
        raise RuntimeError("engine 'vllm' was chosen but vLLM is not installed (pip install vllm==0.20.0, "
                           "which needs a CUDA machine with torch 2.11); use engine 'hf' or 'auto'")
    if name == "auto":
        return "vllm" if vllm_installed() and _on_gpu(device) else "hf"
    return name


def _on_gpu(device: str | None) -> bool:
    if device is not None:
        return device.startswith("cuda")
    import torch

    return torch.cuda.is_available()
