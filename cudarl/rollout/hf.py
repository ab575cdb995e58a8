"""The transformers engine: continuous batching (``generate_batch``: paged attention, requests
joining and leaving the batch at every step) on a CPU, and on a GPU ``generate`` with a static
cache and a compiled decode step (``hf_static`` says why).

Why the library's continuous batching and not a decode loop of our own: it is maintained,
schedules requests of different lengths without padding waste, and returns each sampled token's
log-prob (``ContinuousBatchingConfig.return_logprobs``). Those log-probs are of the distribution
sampled from, after temperature and top-p: a trainer that recomputes them must use the same
temperature (and top-p 1, the default here). Covered: generation with token ids and log-probs,
scoring of a given sequence, named LoRA adapters over the one base model (``adapters.AdapterSet``,
peft), full, partial or adapter weight updates with per-adapter versions, key/shape checks, a
read-back check and the probe check. Not covered: multiple GPUs, several adapters in one batch
(a call generates with one adapter; the roles take turns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch

from cudarl.rollout.adapters import AdapterSet, refuse_mismatched
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

Decoder = Literal["auto", "continuous", "static"]


class HFEngine:
    """A causal LM from transformers behind the ``RolloutEngine`` interface."""

    def __init__(self, model, eos_token_id: int | Sequence[int] | None = None, pad_token_id: int | None = None,
                 continuous_batching: dict | None = None, decoder: Decoder = "auto") -> None:
        """``decoder``: "continuous" (the library's continuous batching), "static" (``generate``
        with a static cache and a compiled decode step, ``hf_static``), or "auto": static on a
        GPU, where it was measured several times faster, continuous on a CPU."""
        if decoder not in ("auto", "continuous", "static"):
            raise ValueError(f"decoder must be auto, continuous or static, got {decoder!r}")
        self.model = model.eval()
        on_gpu = next(model.parameters()).device.type == "cuda"
        self.decoder = decoder if decoder != "auto" else ("static" if on_gpu else "continuous")
        eos = eos_token_id if eos_token_id is not None else model.config.eos_token_id
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        self.pad_token_id = pad_token_id if pad_token_id is not None else model.config.pad_token_id
        self.continuous_batching = dict(continuous_batching or {})
        self.lora = AdapterSet(self.model)
        self.versions = WeightVersions()
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)

    @classmethod
    def from_pretrained(cls, name_or_path: str, dtype: str = "auto", device: str | None = None) -> HFEngine:
        """Load by hub name or local folder (the real loading code; no network is needed for a folder)."""
        from transformers import AutoModelForCausalLM

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype).to(device)
        return cls(model)

    @property
    def weights_version(self) -> int:
        return self.versions.of(None)

    @property
    def adapters(self) -> tuple[str, ...]:
        return self.lora.names

    def version_of(self, adapter: str | None = None) -> int:
        return self.versions.of(adapter)

    def add_adapter(self, name: str, settings: LoraSettings) -> None:
        """A LoRA adapter over the base model, version 0 (equal to the base until its first update)."""
        self.lora.add(name, settings)
        self.versions.add(name)

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings,
                 adapter: str | None = None) -> list[Generation]:
        """One continuation per prompt, in the prompts' order (a GRPO group repeats a prompt),
        with ``adapter`` applied (None: the base weights)."""
        from transformers.generation import ContinuousBatchingConfig, GenerationConfig

        self.versions.require_usable(adapter)
        if not prompts:
            return []
        check_token_ids(prompts, self.vocab_size)
        version = self.versions.of(adapter)
        if self.decoder == "static":
            return self._generate_static(prompts, settings, adapter, version)
        sampling = settings.temperature > 0
        config = GenerationConfig(max_new_tokens=settings.max_new_tokens, do_sample=sampling,
                                  temperature=settings.temperature if sampling else None,
                                  top_p=settings.top_p if sampling else None,
                                  eos_token_id=sorted(self.eos_ids) or None, pad_token_id=self.pad_token_id)
        batching = ContinuousBatchingConfig(**{**self._cache_size(prompts, settings), **self.continuous_batching,
                                               "return_logprobs": True, "seed": settings.seed})
        with torch.inference_mode(), self.lora.active(adapter):
            outputs = self.model.generate_batch([list(p) for p in prompts], generation_config=config,
                                                continuous_batching_config=batching, progress_bar=False)
        ordered = sorted(outputs.values(), key=lambda o: int(o.request_id.rsplit("_", 1)[-1]))
        if len(ordered) != len(prompts):
            raise RuntimeError(f"the engine returned {len(ordered)} generations for {len(prompts)} prompts")
        generations = []
        for index, (prompt, output) in enumerate(zip(prompts, ordered)):
            if output.error:
                raise RuntimeError(f"generation {index} failed in the engine: {output.error}")
            if list(output.prompt_ids) != list(prompt):
                raise RuntimeError(f"generation {index}: the engine's prompt ids differ from the request's")
            tokens = tuple(int(t) for t in output.generated_tokens)
            generations.append(Generation(
                request_id=f"{index}", prompt_ids=tuple(prompt), token_ids=tokens,
                logprobs=tuple(float(x) for x in output.logprobs[:len(tokens)]),
                finished=bool(tokens) and tokens[-1] in self.eos_ids, weights_version=version, adapter=adapter))
        return generations

    def _generate_static(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings, adapter: str | None,
                         version: int) -> list[Generation]:
        from cudarl.rollout.hf_static import decode_static

        with self.lora.active(adapter):
            decoded = decode_static(self.model, prompts, settings.max_new_tokens, settings.temperature, settings.top_p,
                                    settings.seed, self.eos_ids, self.pad_token_id)
        return [Generation(request_id=f"{index}", prompt_ids=tuple(prompt), token_ids=result.token_ids,
                           logprobs=result.logprobs, finished=result.stopped, weights_version=version, adapter=adapter)
                for index, (prompt, result) in enumerate(zip(prompts, decoded))]

    @staticmethod
    def _cache_size(prompts: Sequence[Sequence[int]], settings: SamplingSettings) -> dict:
        """A paged cache just large enough for this call (every request at full length) and a
        step of at most 8192 tokens. The library's default sizes the cache from free memory: on
        a GPU shared with the trainer that takes what the trainer needs, and on a CPU filling its
        static tensors took 4 of the 6 s a small call lasted (0.5 s sized like this, measured)."""
        page = 256
        blocks = sum(-(-(len(p) + settings.max_new_tokens) // page) for p in prompts) + 1
        return {"page_size": page, "num_blocks": blocks,
                "max_batch_tokens": min(8192, sum(len(p) for p in prompts) + len(prompts))}

    def score(self, token_ids: Sequence[int], prompt_length: int, adapter: str | None = None,
              temperature: float = 1.0) -> list[float]:
        """Log-probs the model (with ``adapter``) gives ``token_ids[prompt_length:]`` after what precedes each."""
        self.version_of(adapter)
        check_score_request(token_ids, prompt_length, self.vocab_size)
        device = next(self.model.parameters()).device
        ids = torch.tensor([list(token_ids)], device=device)
        with torch.inference_mode(), self.lora.active(adapter):
            logits = self.model(ids).logits[0, prompt_length - 1:-1].float() / max(temperature, 1e-6)
        picked = torch.log_softmax(logits, dim=-1).gather(-1, ids[0, prompt_length:, None])[:, 0]
        return [float(x) for x in picked]

    def update_weights(self, weights: Mapping[str, torch.Tensor], version: int, probe: Probe | None = None,
                       adapter: str | None = None) -> WeightSync:
        """Copy ``weights`` into the base model (``adapter`` None: every key must name one of its
        parameters or buffers) or into ``adapter`` (peft state-dict keys), read them back, and
        check the probe with that adapter. Raises ``WeightSyncError`` on any mismatch: a key
        prefix the model does not have (``base_model.model.`` from an adapter wrapper) would
        otherwise load nothing and keep generating from the old weights. A failed probe leaves
        the adapter unusable until a good update arrives."""
        def load() -> int:
            return self._load_base(weights) if adapter is None else self.lora.load(adapter, weights)

        return self.versions.update(self, weights, version, probe, adapter, load)

    def _load_base(self, weights: Mapping[str, torch.Tensor]) -> int:
        targets = self.lora.base_parameters()
        refuse_mismatched(weights, targets, "the engine's model")
        with torch.no_grad():
            incoming = {n: t.to(device=targets[n].device, dtype=targets[n].dtype) for n, t in weights.items()}
            for name, tensor in incoming.items():
                targets[name].copy_(tensor)
            stale = [name for name, tensor in incoming.items() if not torch.equal(targets[name], tensor)]
        if stale:
            raise WeightSyncError(f"{len(stale)} tensors read back different from what was sent (first: {stale[0]!r})")
        return len(incoming)
