"""The engine's first weights in a run, other than a step's: the warm start's adapters
(``train.init_adapters``: found and checked before any worker starts, loaded by the update
workers through ``UpdaterSpec.init_adapters`` and pushed into the engine as weights version 1,
checked there on a probe the update workers scored with the same weights, like every later
sync), or a checkpoint's on resume (checked on the probe saved with it).

Covered: finding and checking the warm start's folders, the engine's loads. Not covered: the
update workers' load (``cudarl.rl.update``), making the adapters (``cudarl.sft``), writing
checkpoints (the driver).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cudarl.rollout.engine import LoraSettings, Probe

WARM_START_VERSION = 1
"""The weights version of the warm start's adapters (a fresh adapter is version 0)."""
PROBE_USER = "Write a CUDA kernel that adds two vectors."
PROBE_ANSWER = "Strategy: one thread per element.\n\n```python\nimport torch\n"


def warm_start_folders(folder: str | None, roles: Sequence[str],
                       lora: LoraSettings | None) -> tuple[tuple[str, str], ...]:
    """(role, adapter folder) for each role with an adapter in ``folder`` (a ``cudarl sft``
    output); raises ``ValueError`` naming the path when the folder is missing, holds no adapter
    for any role, or one of different shape than the run's (``lora``)."""
    if folder is None:
        return ()
    if lora is None:
        raise ValueError("train.init_adapters needs adapters; train.full_finetune trains the whole model instead")
    from cudarl.rollout.adapters import read_adapter_settings

    root = Path(folder).resolve()  # the update workers run in another working folder
    if not root.is_dir():
        raise ValueError(f"train.init_adapters: {root} is not a folder (give the output folder of `cudarl sft`)")
    found = tuple((role, str(root / role)) for role in roles if (root / role / "adapter_config.json").is_file())
    if not found:
        raise ValueError(f"train.init_adapters: {root} holds no adapter of {list(roles)} (expected "
                         f"{root / roles[0] / 'adapter_config.json'}, as `cudarl sft` writes it)")
    for _, path in found:
        require_same_shape(path, read_adapter_settings(Path(path)), lora)
    return found


def require_same_shape(path: str, settings: LoraSettings, lora: LoraSettings) -> None:
    """Refuse, naming ``path``, an adapter whose LoRA shape (``settings``) is not the run's (``lora``)."""
    if not settings.same_shape(lora):
        raise ValueError(f"train.init_adapters: {path} is LoRA rank {settings.rank}, alpha {settings.alpha} on "
                         f"{list(settings.target_modules)}; the run's is rank {lora.rank}, alpha {lora.alpha} "
                         f"on {list(lora.target_modules)} (set train.lora_rank and train.lora_alpha to match)")


def load_into_engine(engine, group, chat, folders: Sequence[tuple[str, str]], tolerance: float) -> dict[str, float]:
    """Each role's warm-start adapter into ``engine`` as version ``WARM_START_VERSION``, checked
    on a probe the update workers (``group``, which loaded the same folders) scored; the mean
    probe error per role. A mismatch raises ``WeightSyncError`` as a failed sync does."""
    from cudarl.agents.prompts import system_prompt
    from cudarl.rollout.adapters import read_adapter_folder

    prompt = chat.prompt(system_prompt(), PROBE_USER)
    token_ids = tuple(prompt) + tuple(chat.encode(PROBE_ANSWER))
    expected = group.probe(token_ids, len(prompt))
    errors = {}
    for role, path in folders:
        _, weights = read_adapter_folder(Path(path))
        probe = Probe(token_ids, len(prompt), tuple(expected[role]), tolerance)
        sync = engine.update_weights(weights, WARM_START_VERSION, probe=probe, adapter=role)
        errors[role] = sync.probe_mean_error
    return errors


def restore_engine(engine, checkpoint: Path, lora: LoraSettings | None, state: dict,
                   roles: Sequence[str] = ("generator", "optimizer")) -> None:
    """The engine back on the checkpoint's weights, under its version, each checked on the probe
    the trainer scored with exactly these weights when the checkpoint's step synced them."""
    version, probes = state["weights_version"], state.get("probes", {})
    if lora is None:
        from safetensors.torch import load_file

        engine.update_weights(load_file(str(checkpoint / "model.safetensors")), version,
                              probe=_probe_from_json(probes.get("model")))
        return
    from cudarl.rollout.adapters import read_adapter_folder

    for role in roles:
        _, weights = read_adapter_folder(checkpoint / role)
        engine.update_weights(weights, version, probe=_probe_from_json(probes.get(role)), adapter=role)


def _probe_from_json(saved: dict | None) -> Probe | None:
    if saved is None:  # a checkpoint written before probes were kept
        return None
    return Probe(tuple(saved["token_ids"]), saved["prompt_length"], tuple(saved["expected_logprobs"]),
                 saved["tolerance"])
