"""Named LoRA adapters over one transformers model (peft), for the transformers engine.

Why peft and not our own LoRA layers: the trainer's adapters are peft adapters, so their state
dicts (``get_peft_model_state_dict``) load here by the library's own key mapping, and a layer
that sums base and adapter outputs is not ours to get wrong. peft injects its layers into the
model in place, so the model object the engine generates with keeps working, with the active
adapter applied (or none, inside ``disable_adapter``).

What is checked on every adapter update (the silent weight-sync failures of public RL code):
every tensor names a parameter of *this* adapter (base weights or another model's keys load
nothing and are refused), the adapter's tensors are all present, shapes match, and the tensors
read back equal to what was sent. What is not covered: merging adapters into the base, DoRA,
adapters on embeddings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import torch

from cudarl.rollout.engine import LoraSettings, WeightSyncError


def lora_config(settings: LoraSettings):
    """The peft ``LoraConfig`` for ``settings`` (no dropout: rollouts are inference)."""
    from peft import LoraConfig

    return LoraConfig(r=settings.rank, lora_alpha=settings.alpha, target_modules=list(settings.target_modules),
                      lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")


def refuse_mismatched(weights: Mapping[str, torch.Tensor], targets: Mapping[str, torch.Tensor], owner: str,
                      unknown_hint: str = "", shape_hint: str = "") -> None:
    """Raise ``WeightSyncError`` before anything is loaded when a tensor names nothing in
    ``targets`` or has another shape (a wrong prefix or another model would load nothing)."""
    unknown = [key for key in weights if key not in targets]
    if unknown:
        raise WeightSyncError(f"{len(unknown)} of {len(weights)} tensors name nothing in {owner} "
                              f"(first: {unknown[0]!r}{unknown_hint}); nothing was loaded", nothing_loaded=True)
    wrong = [key for key, tensor in weights.items() if tuple(tensor.shape) != tuple(targets[key].shape)]
    if wrong:
        raise WeightSyncError(f"{wrong[0]!r} has shape {tuple(weights[wrong[0]].shape)}, where {owner} has "
                              f"{tuple(targets[wrong[0]].shape)}{shape_hint}; nothing was loaded",
                              nothing_loaded=True)


class AdapterSet:
    """The adapters of one model. ``model`` stays the object that generates; ``peft`` wraps it."""

    def __init__(self, model) -> None:
        self.model = model
        self.peft = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.peft.peft_config) if self.peft is not None else ()

    def add(self, name: str, settings: LoraSettings) -> None:
        """A fresh adapter (B = 0, so it starts equal to the base weights)."""
        if not name or name in self.names:
            raise ValueError(f"adapter name {name!r} is empty or taken (have: {', '.join(self.names) or 'none'})")
        from peft import get_peft_model

        try:
            if self.peft is None:
                self.peft = get_peft_model(self.model, lora_config(settings), adapter_name=name)
            else:
                self.peft.add_adapter(name, lora_config(settings))
        except ValueError as exc:  # e.g. target modules the model does not have
            raise ValueError(f"adapter {name!r} cannot be added to this model: {exc}") from exc
        self.peft.eval()

    @contextmanager
    def active(self, name: str | None) -> Iterator[None]:
        """Run with adapter ``name`` applied, or with none (``None``: the base weights)."""
        if name is None:
            if self.peft is None:
                yield
                return
            with self.peft.disable_adapter():
                yield
            return
        if name not in self.names:
            raise ValueError(f"no adapter {name!r} (have: {', '.join(self.names) or 'none'})")
        self.peft.set_adapter(name)
        active = self.peft.active_adapter
        if active != name:
            raise WeightSyncError(f"adapter {name!r} was selected but {active!r} is active")
        yield

    def base_parameters(self) -> dict[str, torch.Tensor]:
        """The base model's parameters and buffers by their names before any adapter was added
        (peft renames a wrapped ``q_proj.weight`` to ``q_proj.base_layer.weight``)."""
        tensors = (dict(self.model.named_parameters(remove_duplicate=False))  # tied lm_head.weight too
                   | dict(self.model.named_buffers(remove_duplicate=False)))
        if self.peft is None:
            return tensors
        return {name.replace(".base_layer.", "."): tensor for name, tensor in tensors.items() if "lora_" not in name}

    def load(self, name: str, weights: Mapping[str, torch.Tensor]) -> int:
        """Replace adapter ``name``'s tensors with ``weights`` (peft state-dict keys, as
        ``get_peft_model_state_dict`` gives them); returns how many were loaded."""
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        if name not in self.names:
            raise WeightSyncError(f"no adapter {name!r} to update (have: {', '.join(self.names) or 'none'})",
                                  nothing_loaded=True)
        current = get_peft_model_state_dict(self.peft, adapter_name=name)
        refuse_mismatched(weights, current, f"adapter {name!r}",
                          unknown_hint=": base weights or another model's adapter?", shape_hint=" (another rank?)")
        missing = [key for key in current if key not in weights]
        if missing:
            raise WeightSyncError(f"the update lacks {len(missing)} of adapter {name!r}'s {len(current)} tensors "
                                  f"(first: {missing[0]!r}); nothing was loaded", nothing_loaded=True)
        incoming = {key: tensor.to(device=current[key].device, dtype=current[key].dtype)
                    for key, tensor in weights.items()}
        with torch.no_grad():
            result = set_peft_model_state_dict(self.peft, incoming, adapter_name=name)
        if result.unexpected_keys:
            raise WeightSyncError(f"peft did not load {len(result.unexpected_keys)} tensors into {name!r} "
                                  f"(first: {result.unexpected_keys[0]!r})")
        after = get_peft_model_state_dict(self.peft, adapter_name=name)
        stale = [key for key, tensor in incoming.items() if not torch.equal(after[key], tensor)]
        if stale:
            raise WeightSyncError(f"{len(stale)} of adapter {name!r}'s tensors read back different from what was "
                                  f"sent (first: {stale[0]!r})")
        return len(incoming)


def check_adapter_tensors(weights: Mapping[str, torch.Tensor], settings: LoraSettings) -> None:
    """Refuse tensors that are not a LoRA adapter of ``settings``' rank in peft's naming
    (``...<module>.lora_A.weight`` of shape (rank, in), ``lora_B.weight`` of shape (out, rank)),
    before an engine that reads adapters from files gets them: base weights written as an
    adapter would load as nothing, or as another rank, silently."""
    if not weights:
        raise WeightSyncError("an adapter update with no tensors", nothing_loaded=True)
    for key, tensor in weights.items():
        if key.endswith(".lora_A.weight"):
            rank = tensor.shape[0]
        elif key.endswith(".lora_B.weight"):
            rank = tensor.shape[-1]
        else:
            raise WeightSyncError(f"{key!r} is not a LoRA tensor (peft's ...lora_A.weight / ...lora_B.weight): "
                                  "base weights or another format?; nothing was loaded", nothing_loaded=True)
        if rank != settings.rank or tensor.dim() != 2:
            raise WeightSyncError(f"{key!r} has shape {tuple(tensor.shape)}: not rank {settings.rank} "
                                  "(another rank?); nothing was loaded", nothing_loaded=True)
        module = key.rsplit(".lora_", 1)[0].rsplit(".", 1)[-1]
        if module not in settings.target_modules:
            raise WeightSyncError(f"{key!r} adapts {module!r}, which the adapter's target modules "
                                  f"({', '.join(settings.target_modules)}) do not name", nothing_loaded=True)


def save_adapter_folder(weights: Mapping[str, torch.Tensor], settings: LoraSettings, folder: Path) -> Path:
    """Write a peft adapter folder (``adapter_config.json``, ``adapter_model.safetensors``) that
    peft and vLLM load: how adapter weights reach an engine that reads adapters from disk."""
    from safetensors.torch import save_file

    check_adapter_tensors(weights, settings)
    folder.mkdir(parents=True, exist_ok=True)
    lora_config(settings).save_pretrained(str(folder))  # adapter_config.json, peft's own writer
    save_file({key: tensor.detach().to("cpu").contiguous() for key, tensor in weights.items()},
              str(folder / "adapter_model.safetensors"))
    return folder


def read_adapter_settings(folder: Path) -> LoraSettings:
    """The LoRA shape of a peft adapter folder, from its ``adapter_config.json`` alone (no tensors
    are read). Raises ``ValueError`` naming the file when it is missing, not a LoRA config, or
    scales otherwise than plain LoRA (rsLoRA, DoRA, rank/alpha patterns, a fractional alpha: the
    engines' adapters would load it at the wrong scale)."""
    import json

    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        raise ValueError(f"{config_path}: missing (not a peft adapter folder)")
    try:
        config = json.loads(config_path.read_text())
        alpha = config["lora_alpha"]
        settings = LoraSettings(rank=int(config["r"]), alpha=int(alpha),
                                target_modules=tuple(sorted(config["target_modules"])))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{config_path}: not a LoRA adapter config ({exc})") from exc
    scaled_otherwise = [name for name in ("use_rslora", "use_dora", "rank_pattern", "alpha_pattern")
                        if config.get(name)] + (["a fractional lora_alpha"] if alpha != int(alpha) else [])
    if scaled_otherwise:
        raise ValueError(f"{config_path}: {', '.join(scaled_otherwise)} set; only plain LoRA adapters "
                         "(one rank, one alpha, no rsLoRA or DoRA) can be loaded")
    return settings


def read_adapter_folder(folder: Path) -> tuple[LoraSettings, dict[str, torch.Tensor]]:
    """A peft adapter folder (as ``save_adapter_folder`` or a peft ``save_pretrained`` writes it)
    as (settings, tensors in peft's state-dict naming): how a warm-started adapter reaches an
    engine (``add_adapter(name, settings)``, then ``update_weights(tensors, version, adapter=name)``,
    which checks every tensor). Raises ``ValueError`` naming the file when it is missing or not
    a plain LoRA adapter (``read_adapter_settings``)."""
    from safetensors.torch import load_file

    weights_path = folder / "adapter_model.safetensors"
    if not weights_path.is_file():
        raise ValueError(f"{weights_path}: missing (not a peft adapter folder)")
    settings = read_adapter_settings(folder)
    weights = load_file(str(weights_path))
    check_adapter_tensors(weights, settings)
    return settings, weights
