"""The policy update on one data-parallel rank: the model (LoRA adapters on a frozen base by
default, or every weight), FSDP2 over its decoder blocks, AdamW, and the GRPO step.

One process per rank (a Ray Train worker, ``train_loop``); every method that touches weights is a
collective under FSDP2, so every rank calls it in the same order. ``step`` runs the rank's samples
in micro-batches, each loss already normalized by the *global* counts (``cudarl.rl.loss``), so
gradients are summed, not averaged, over micro-batches; FSDP averages over ranks and the loss's
rank factor undoes that. Exported weights are full tensors on the CPU in the names the rollout
engines take (peft's adapter names, or the model's own).

Covered: set-up, the step, exported weights, probe log-probs, state for checkpoints. Not
covered: where samples come from (the driver) and how weights reach engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cudarl.config_rl import AlgorithmConfig
from cudarl.rl.batch import TrainSample, collate, token_logprobs
from cudarl.rl.loss import BatchCounts, policy_loss
from cudarl.rollout.engine import LoraSettings


@dataclass(frozen=True)
class StepPlan:
    """One adapter's share of a step, the same on every rank."""

    counts: BatchCounts  # the adapter's tokens and samples over the whole step, all ranks
    micro_batches: int  # micro-batches every rank runs for it (empty ones where it has no samples left)


@dataclass(frozen=True)
class UpdaterSpec:
    """What an update worker builds."""

    model: str
    """Hub name or local folder of the base model (the same the policies load)."""
    adapters: tuple[str, ...] = ("generator",)
    """One LoRA adapter per role on one base (empty: full fine-tuning of every weight)."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    micro_batch: int = 4
    """Samples per forward/backward on a rank (gradients are summed over micro-batches)."""
    pad_id: int = 0
    dtype: str = "float32"
    """Parameter dtype ("bfloat16" on GPUs: FSDP2 then reduces gradients in fp32)."""
    temperature: float = 1.0
    """The rollouts' sampling temperature: the loss's log-probs are taken under it."""
    seed: int = 0
    """Seed of the adapters' initialization (every rank starts from the same weights; a rerun too)."""
    start_version: int = 0
    """The engines' current weights version; the first update exports ``start_version + 1``."""
    init_adapters: tuple[tuple[str, str], ...] = ()
    """(adapter, peft folder) pairs whose weights start those adapters (the warm start's output)
    instead of a fresh initialization; each folder's LoRA shape must equal ``lora``."""
    shard_single_rank: bool = False
    """FSDP2 even when the process group has one rank. Off by default: one rank has nothing to
    shard, and FSDP2 then only adds cost (AdamW and clipping dispatched on DTensors, gradients cast
    to fp32 for a reduce over one rank); ``benchmarks/grpo_step.py`` measures both."""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)


class PolicyUpdater:
    def __init__(self, spec: UpdaterSpec, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.spec, self.device = spec, device
        self.version = spec.start_version
        model = AutoModelForCausalLM.from_pretrained(spec.model, dtype=getattr(torch, spec.dtype))
        torch.manual_seed(spec.seed)
        if spec.adapters:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=spec.lora.rank, lora_alpha=spec.lora.alpha, lora_dropout=0.0,
                                target_modules=list(spec.lora.target_modules))
            model = get_peft_model(model, config, adapter_name=spec.adapters[0])
            for name in spec.adapters[1:]:
                model.add_adapter(name, config)
            _load_initial_adapters(model, spec)
        self.model = _shard(model.to(device), spec.dtype, device, spec.shard_single_rank)
        self.model.train()
        self._optimizers = {name: self._optimizer(name) for name in (spec.adapters or (None,))}

    def _optimizer(self, adapter: str | None):
        import torch

        if adapter is not None:
            parameters = [p for name, p in self.model.named_parameters() if f".{adapter}." in name and "lora_" in name]
            for parameter in parameters:
                parameter.requires_grad_(True)
        else:
            parameters = list(self.model.parameters())
        return torch.optim.AdamW(parameters, lr=self.spec.learning_rate, weight_decay=self.spec.weight_decay)

    def _all_trainable(self) -> None:
        """Every trained tensor marked trainable, as at start: torch gives an optimizer that never
        stepped its state only for tensors that require grad, and save and load must agree."""
        for name, parameter in self.model.named_parameters():
            if not self.spec.adapters or "lora_" in name:
                parameter.requires_grad_(True)

    def _use(self, adapter: str | None):
        if adapter is not None:
            self.model.base_model.set_adapter(adapter)
            for name, parameter in self.model.named_parameters():  # set_adapter freezes the others; keep ours
                if "lora_" in name:
                    parameter.requires_grad_(f".{adapter}." in name)

    def step(self, samples: Sequence[TrainSample], plan: Mapping[str | None, StepPlan]) -> dict[str, float]:
        """One optimizer step per adapter in ``plan`` (this rank's share of the samples). Every
        rank runs the same number of micro-batches per adapter (``StepPlan.micro_batches``,
        padded with empty ones where it holds fewer samples): under FSDP2 each forward, backward
        and gradient clip is a collective, and ranks out of step would hang or, worse, reduce one
        adapter's gradients into the other's. Each adapter's loss is its own token mean over the
        whole step (``StepPlan.counts``)."""
        import torch

        key = (lambda sample: sample.adapter) if self.spec.adapters else (lambda sample: None)
        by_adapter: dict[str | None, list[TrainSample]] = {}
        for sample in samples:
            by_adapter.setdefault(key(sample), []).append(sample)
        unknown = [name for name in by_adapter if name not in plan]
        if unknown:
            raise ValueError(f"samples of adapter(s) {unknown}; the updater trains {list(self.spec.adapters)}")
        metrics: dict[str, float] = {"loss": 0.0, "samples": float(len(samples))}
        for adapter in sorted(plan, key=str):
            rows, step_plan = by_adapter.get(adapter, []), plan[adapter]
            if len(rows) > step_plan.micro_batches * self.spec.micro_batch:
                raise ValueError(f"{len(rows)} samples of {adapter!r} do not fit "
                                 f"{step_plan.micro_batches} micro-batches")
            self._use(adapter)
            optimizer = self._optimizers[adapter]
            for index in range(step_plan.micro_batches):
                part = rows[index * self.spec.micro_batch:(index + 1) * self.spec.micro_batch]
                batch = collate(part, self.spec.pad_id) if part else _empty_batch(self.spec.pad_id)
                batch = {k: v.to(self.device) for k, v in batch.items()}
                first = min(s.prompt_length for s in part) - 1 if part else 0
                logprobs = token_logprobs(self.model, batch["input_ids"], batch["attention_mask"],
                                          self.spec.temperature, from_column=first)
                loss, terms = policy_loss(logprobs, batch["old_logprobs"], batch["advantages"], batch["response_mask"],
                                          self.spec.algorithm, step_plan.counts, self._reference(batch, first))
                loss.backward()
                metrics["loss"] += float(loss.detach())
                for name, value in terms.items():
                    metrics[name] = metrics.get(name, 0.0) + value * len(part)
            parameters = [p for group in optimizer.param_groups for p in group["params"]]
            norm = torch.nn.utils.clip_grad_norm_(parameters, self.spec.algorithm.max_grad_norm)
            metrics[f"grad_norm/{adapter or 'model'}"] = float(norm.full_tensor() if hasattr(norm, "full_tensor")
                                                               else norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        metrics = _summed_over_ranks(metrics, self.device)
        for name in list(metrics):
            if name not in ("loss", "samples") and not name.startswith("grad_norm"):
                metrics[name] /= max(metrics["samples"], 1)  # per-sample means of the loss functions' metrics
        self.version += 1
        return metrics

    def _reference(self, batch: dict, from_column: int = 0):
        """The reference policy's log-probs for the KL penalty: the base model, adapters off (no
        second copy); None when the penalty is off."""
        if self.spec.algorithm.kl_coef <= 0:
            return None
        if not self.spec.adapters:
            raise ValueError("a KL penalty needs adapters: full fine-tuning keeps no reference model")
        import torch

        with torch.no_grad(), self.model.disable_adapter():
            return token_logprobs(self.model, batch["input_ids"], batch["attention_mask"], self.spec.temperature,
                                  from_column=from_column)

    def weights(self, adapter: str | None = None) -> dict:
        """Full CPU tensors of ``adapter`` (peft's names) or of the whole model (collective). An
        adapter's come from the adapters' own tensors alone (gathering the whole 1.5B model to the
        host for them cost seconds a step); with the embedding or output layer adapted, peft's
        export also needs their base weights, and the whole state dict is gathered."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        if adapter is not None and not set(self.spec.lora.target_modules) & {"lm_head", "embed_tokens"}:
            from peft import get_peft_model_state_dict

            adapters_state = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu()
                              for name, p in self.model.named_parameters()  # one order on all ranks
                              if "lora_" in name and f".{adapter}." in name}
            return {k: v.clone() for k, v in get_peft_model_state_dict(
                self.model, state_dict=adapters_state, adapter_name=adapter).items()}
        options = StateDictOptions(full_state_dict=True, cpu_offload=True, broadcast_from_rank0=False)
        state = get_model_state_dict(self.model, options=options) if _distributed() else {
            k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        if adapter is None:
            return state
        from peft import get_peft_model_state_dict

        # peft's default naming, as the engines' adapters list their tensors (with the output layer
        # adapted, peft adds its base weight: the engines expect it too)
        adapter_state = get_peft_model_state_dict(self.model, state_dict=state, adapter_name=adapter)
        return {k: v.clone() for k, v in adapter_state.items()}

    def probe_logprobs(self, token_ids: Sequence[int], prompt_length: int, adapter: str | None = None) -> list[float]:
        """The trained model's log-probs of ``token_ids[prompt_length:]`` at temperature 1
        (collective): what the engine's scoring must reproduce after taking the exported weights."""
        import torch

        self._use(adapter if self.spec.adapters else None)
        ids = torch.tensor([list(token_ids)], device=self.device)
        with torch.no_grad():
            values = token_logprobs(self.model, ids, torch.ones_like(ids), from_column=prompt_length - 1)
            values = values[0, prompt_length - 1:]
        return values.float().cpu().tolist()

    def save(self, folder: str) -> None:
        """Model and optimizer state with torch distributed checkpoint (collective: every rank
        writes its shards), and the version."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        self._all_trainable()
        model_state, optimizer_state = get_state_dict(self.model, list(self._optimizers.values()))
        dcp.save({"model": model_state, "optimizers": optimizer_state}, checkpoint_id=folder)
        if not _distributed() or _rank() == 0:
            from pathlib import Path

            (Path(folder) / "version.txt").write_text(str(self.version))

    def load(self, folder: str) -> None:
        """Back to the state ``save`` wrote (collective)."""
        from pathlib import Path

        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        optimizers = list(self._optimizers.values())
        self._all_trainable()
        model_state, optimizer_state = get_state_dict(self.model, optimizers)
        state = {"model": model_state, "optimizers": optimizer_state}
        dcp.load(state, checkpoint_id=folder)
        set_state_dict(self.model, optimizers, model_state_dict=state["model"], optim_state_dict=state["optimizers"])
        self.version = int((Path(folder) / "version.txt").read_text())


def _summed_over_ranks(metrics: dict[str, float], device) -> dict[str, float]:
    """The step's metrics over every rank (collective): the loss functions' per-sample sums and the
    sample counts add up across ranks; the loss is the mean of the ranks' (each rank's is its share
    of the global mean times the number of ranks, the factor that undoes FSDP's gradient
    averaging); gradient norms are already global (clipping reduces them), so rank 0's stand."""
    if not _distributed():
        return metrics
    import torch
    import torch.distributed as dist

    names = sorted(name for name in metrics if not name.startswith("grad_norm"))
    values = torch.tensor([metrics[name] for name in names], dtype=torch.float64, device=device)
    dist.all_reduce(values)
    summed = dict(zip(names, values.tolist()))
    summed["loss"] /= dist.get_world_size()
    return metrics | summed


def _load_initial_adapters(model, spec: UpdaterSpec) -> None:
    """Each of ``spec.init_adapters`` into its adapter; refused, naming the folder, when its shape
    differs from the run's or when any of the adapter's tensors would stay as initialized."""
    from pathlib import Path

    from peft import set_peft_model_state_dict

    from cudarl.rl.initial_weights import require_same_shape
    from cudarl.rollout.adapters import read_adapter_folder

    for name, folder in spec.init_adapters:
        if name not in spec.adapters:
            raise ValueError(f"{folder}: an initial adapter for {name!r}, which the run does not train "
                             f"(adapters: {list(spec.adapters)})")
        settings, weights = read_adapter_folder(Path(folder))
        require_same_shape(folder, settings, spec.lora)
        result = set_peft_model_state_dict(model, weights, adapter_name=name)
        untouched = [key for key in result.missing_keys if "lora_" in key and f".{name}." in key]
        if untouched or result.unexpected_keys:
            first = (untouched or result.unexpected_keys)[0]
            raise ValueError(f"{folder}: its tensors do not fit the model's {name!r} adapter "
                             f"({len(untouched)} left unset, {len(result.unexpected_keys)} unknown; first: {first})")


def _empty_batch(pad_id: int) -> dict:
    """A micro-batch with nothing under the loss mask: it keeps a rank's collectives in step."""
    import torch

    return {"input_ids": torch.full((1, 2), pad_id, dtype=torch.long),
            "attention_mask": torch.ones(1, 2, dtype=torch.long), "response_mask": torch.zeros(1, 1),
            "old_logprobs": torch.zeros(1, 1), "advantages": torch.zeros(1, 1)}


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank()


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _shard(model, dtype: str, device: str, single_rank: bool = False):
    """FSDP2: each decoder block its own unit, then the root (only inside a process group of
    several ranks, or of one when ``single_rank``), on a
    device mesh of ``device``'s type (FSDP2's default mesh is CUDA's wherever a GPU is visible,
    which moved a CPU worker's parameters to the GPU while its batches stayed on the CPU). With
    bf16 parameters, gradients are reduced across ranks in fp32 (summing many bf16 gradients
    loses the small ones)."""
    if not _distributed():
        return model
    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1 and not single_rank:
        return model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=getattr(torch, dtype), reduce_dtype=torch.float32)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    for block in inner.model.layers:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model
