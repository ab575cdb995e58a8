"""The RL run: per step, tasks from the curriculum, groups of multi-turn episodes on the rollout
engine, every candidate judged (the tester pool), rewards and advantages, one update on the
update workers, the new adapters pushed to the engine and checked, a line of statistics.

The engine runs in this process (the policy actors come with serving); the update workers are a
Ray Train group (``group``); the judge is any ``Judge`` (``PoolClient.judge`` for ``cudarl
train``). Every sample carries the weights version that generated it, and each step's sync is
refused unless the engine reproduces the trainer's log-probs on a probe from that step's data.

Covered: the loop, its log (``steps.jsonl``, one JSON object per step, written as each ends),
checkpoints every ``checkpoint_every`` steps (the trainer's model and optimizer state through
torch distributed checkpoint, each role's adapter as a peft folder, the curriculum, the step),
each whole or absent, and ``resume``: from the last whole checkpoint, on the same seeds, to the
state an uninterrupted run reaches. Not covered yet: overlapping rollout and update, metrics to
Prometheus and TensorBoard, the policy actors, retrying a step whose workers died.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from cudarl.config import CudarlConfig
from cudarl.rl.group import UpdateGroup
from cudarl.rl.samples import build_samples
from cudarl.rl.update import UpdaterSpec
from cudarl.rollout.engine import LoraSettings, Probe, SamplingSettings
from cudarl.rollout.episodes import EpisodeSettings, Judge, run_episodes
from cudarl.tasks.curriculum import Curriculum
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Outcome

ROLES = ("generator", "optimizer")
PROBE_RESPONSE_TOKENS = 32


@dataclass(frozen=True)
class StepRecord:
    """One line of ``steps.jsonl``."""

    step: int
    tier: str
    weights_version: int  # after this step's update
    stats: dict  # StepStats
    update: dict  # the update workers' metrics
    seconds: dict  # rollout, update, sync, step
    sync_errors: dict  # adapter -> mean probe error


def run_training(config: CudarlConfig, out: Path, tasks: list[Task], judge: Judge,
                 progress: Callable[[StepRecord], None] | None = None, resume: bool = False) -> list[StepRecord]:
    """Run up to ``config.train.steps`` steps (with ``resume``: from the last whole checkpoint in
    ``out``); the records of the steps run here, also appended to ``out/steps.jsonl``."""
    from transformers import AutoTokenizer

    from cudarl.rollout.chat import ChatTokens
    from cudarl.rollout.loading import load_engine

    train = config.train
    if config.algorithm.kl_coef > 0 and train.full_finetune:
        raise ValueError("algorithm.kl_coef > 0 needs adapters: full fine-tuning keeps no reference model")
    if not resume and ((out / "steps.jsonl").exists() or (out / "checkpoints").exists()):
        raise ValueError(f"{out} holds an earlier run: resume it (--resume) or choose another output folder")
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out / "config.json", config, resume)
    tokenizer = AutoTokenizer.from_pretrained(train.model)
    chat = ChatTokens(tokenizer)
    lora = None if train.full_finetune else LoraSettings(rank=train.lora_rank, alpha=train.lora_alpha)
    device = "cuda" if train.gpus_per_rank > 0 else "cpu"
    engine = load_engine(train.model, train.engine, train.dtype, device, lora=lora is not None)
    for role in ROLES if lora else ():
        engine.add_adapter(role, lora)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    spec = UpdaterSpec(model=train.model, adapters=ROLES if lora else (), lora=lora or LoraSettings(),
                       learning_rate=train.learning_rate, micro_batch=train.micro_batch, pad_id=pad_id,
                       dtype=train.dtype, temperature=train.temperature, seed=train.seed,
                       algorithm=config.algorithm)
    curriculum = Curriculum(tasks, config.curriculum)
    checkpoint = latest_checkpoint(out) if resume else None
    first_step = 0
    if checkpoint is not None:
        state = json.loads((checkpoint / "state.json").read_text())
        curriculum.load_state_dict(state["curriculum"])
        first_step = state["step"]
        _restore_engine(engine, checkpoint, lora, state["weights_version"])
    if resume:
        _keep_log_lines(out / "steps.jsonl", before=first_step)
    group = UpdateGroup(spec, ranks=train.ranks, gpus_per_rank=train.gpus_per_rank,
                        resume_from=str(checkpoint / "trainer") if checkpoint else None)
    if checkpoint is not None and group.version != state["weights_version"]:
        group.stop()
        raise RuntimeError(f"{checkpoint}: the trainer's state is version {group.version}, the checkpoint's "
                           f"adapters {state['weights_version']}")
    records: list[StepRecord] = []
    try:
        for step in range(first_step, train.steps):
            staging = None
            if (step + 1) % train.checkpoint_every == 0 or step + 1 == train.steps:
                staging = out / "checkpoints" / f"step-{step + 1}.partial"
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir(parents=True)
            record, weights = _step(step, config, engine, chat, judge, curriculum, group, lora, staging)
            records.append(record)
            with (out / "steps.jsonl").open("a") as log:
                log.write(json.dumps(asdict(record)) + "\n")
            if progress:
                progress(record)
            if staging is not None:
                _checkpoint(staging, weights, lora, curriculum, record)
    finally:
        group.stop()
    return records


def latest_checkpoint(out: Path) -> Path | None:
    """The newest whole checkpoint in ``out`` (a ``.partial`` folder, left by a run killed while
    writing one, is never chosen)."""
    whole = [folder for folder in (out / "checkpoints").glob("step-*")
             if not folder.name.endswith(".partial") and (folder / "state.json").is_file()]
    return max(whole, key=lambda folder: int(folder.name.removeprefix("step-")), default=None)


def _restore_engine(engine, checkpoint: Path, lora: LoraSettings | None, version: int) -> None:
    """The engine back on the checkpoint's weights, under its version, checked like any update."""
    if lora is None:
        from safetensors.torch import load_file

        engine.update_weights(load_file(str(checkpoint / "model.safetensors")), version)
        return
    from cudarl.rollout.adapters import read_adapter_folder

    for role in ROLES:
        _, weights = read_adapter_folder(checkpoint / role)
        engine.update_weights(weights, version, adapter=role)


def _keep_log_lines(log: Path, before: int) -> None:
    """Drop the log lines of steps a killed run finished after its last checkpoint (they rerun)."""
    if not log.is_file():
        return
    kept = []
    for line in log.read_text().splitlines():
        try:
            if json.loads(line)["step"] < before:
                kept.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):  # a line cut short by the kill
            continue
    log.write_text("".join(line + "\n" for line in kept))


def _check_same_run(path: Path, config: CudarlConfig, resume: bool) -> None:
    """Write the run's settings; on resume, refuse settings that differ from the run's own in
    anything but the number of steps (a resumed run must be the same run)."""
    settings = json.loads(config.model_dump_json())
    if resume and path.is_file():
        before = json.loads(path.read_text())
        before.get("train", {}).pop("steps", None)
        now = json.loads(config.model_dump_json())
        now["train"].pop("steps")
        if before != now:
            changed = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
            raise ValueError(f"{path}: the run was started with other settings (in {', '.join(changed)}); "
                             "resume it with the same ones (only train.steps may change)")
    path.write_text(json.dumps(settings, indent=2))


def _step(step: int, config: CudarlConfig, engine, chat, judge: Judge, curriculum: Curriculum, group: UpdateGroup,
          lora: LoraSettings | None, staging: Path | None) -> tuple[StepRecord, dict]:
    train = config.train
    started = time.perf_counter()
    chosen = curriculum.sample(train.tasks_per_step)
    episodes = [(task, f"s{step}-t{index}-e{k}") for index, task in enumerate(chosen) for k in range(train.group_size)]
    groups = [f"{step}:{index}" for index in range(len(chosen)) for _ in range(train.group_size)]
    settings = EpisodeSettings(
        optimizer_turns=train.optimizer_turns, target_speedup=train.target_speedup,
        sampling=SamplingSettings(max_new_tokens=train.max_new_tokens, temperature=train.temperature,
                                  seed=(train.seed * 1_000_003 + step) * 65_536),  # engines add the request index
        generator_adapter="generator" if lora else None, optimizer_adapter="optimizer" if lora else None)
    trajectories = run_episodes(engine, chat, judge, episodes, settings)
    for trajectory in trajectories:
        for turn in trajectory.turns:
            if Outcome(turn.verdict.outcome) != Outcome.HARNESS_ERROR:
                curriculum.record_verdict(turn.verdict)
    rolled_out = time.perf_counter()
    samples, stats = build_samples(trajectories, groups, config.reward, config.algorithm, trainer_version=group.version)
    if not samples:
        raise RuntimeError(f"step {step}: every turn ended in a harness error; nothing to learn from")
    probe_source = samples[0]
    probe_length = min(len(probe_source.token_ids), probe_source.prompt_length + PROBE_RESPONSE_TOKENS)
    probe_ids = probe_source.token_ids[:probe_length]
    result = group.update(step, samples, probe=(probe_ids, probe_source.prompt_length),
                          save_to=str(staging / "trainer") if staging is not None else None)
    updated = time.perf_counter()
    tolerance = 1e-3 if train.dtype == "float32" else 0.02
    sync_errors = {}
    for adapter, weights in result.weights.items():
        probe = Probe(probe_ids, probe_source.prompt_length, tuple(result.probe_logprobs[adapter]), tolerance)
        sync = engine.update_weights(weights, result.version, probe=probe, adapter=adapter)
        sync_errors[str(adapter)] = sync.probe_mean_error
    synced = time.perf_counter()
    record = StepRecord(step=step, tier=curriculum.tier, weights_version=result.version, stats=asdict(stats),
                        update=result.metrics, sync_errors=sync_errors,
                        seconds={"rollout": rolled_out - started, "update": updated - rolled_out,
                                 "sync": synced - updated, "step": synced - started})
    return record, result.weights


def _checkpoint(staging: Path, weights: dict, lora: LoraSettings | None, curriculum: Curriculum,
                record: StepRecord) -> None:
    """Complete a checkpoint the trainer wrote its state into (``staging/trainer``): the trained
    weights (each role's adapter as a peft folder, which policies load; or the whole model's
    tensors), the curriculum and the step; then rename it into place, so it is whole or absent."""
    from cudarl.rollout.adapters import save_adapter_folder

    if lora is not None:
        for role in ROLES:
            save_adapter_folder(weights[role], lora, staging / role)
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in weights[None].items()}, str(staging / "model.safetensors"))
    (staging / "state.json").write_text(json.dumps({"step": record.step + 1, "weights_version": record.weights_version,
                                                    "curriculum": curriculum.state_dict()}, indent=2))
    folder = staging.with_name(staging.name.removesuffix(".partial"))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
