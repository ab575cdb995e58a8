"""The RL run: per step, tasks from the curriculum, groups of multi-turn episodes on the rollout
engine, every candidate judged (the tester pool), rewards and advantages, one update on the
update workers, the new adapters pushed to the engine and checked, a line of statistics.

The engine runs in this process (the policy actors come with serving); the update workers are a
Ray Train group (``group``); the judge is any ``Judge`` (``PoolClient.judge`` for ``cudarl
train``). Every sample carries the weights version that generated it, and each step's sync is
refused unless the engine reproduces the trainer's log-probs on a probe from that step's data.

Covered: the loop, its log (``steps.jsonl``, one JSON object per step, written as each ends),
adapters and the run's state every ``checkpoint_every`` steps. Not covered yet: resuming the
optimizer's state (a resumed run restarts from the saved adapters only), overlapping rollout and
update, metrics to Prometheus, the policy actors.
"""

from __future__ import annotations

import json
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
                 progress: Callable[[StepRecord], None] | None = None) -> list[StepRecord]:
    """Run ``config.train.steps`` steps; the records are also in ``out/steps.jsonl``."""
    from transformers import AutoTokenizer

    from cudarl.rollout.chat import ChatTokens
    from cudarl.rollout.loading import load_engine

    train = config.train
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2))
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
                       dtype=train.dtype, temperature=train.temperature, algorithm=config.algorithm)
    curriculum = Curriculum(tasks, config.curriculum)
    group = UpdateGroup(spec, ranks=train.ranks, gpus_per_rank=train.gpus_per_rank)
    records: list[StepRecord] = []
    try:
        for step in range(train.steps):
            record, weights = _step(step, config, engine, chat, judge, curriculum, group, lora)
            records.append(record)
            with (out / "steps.jsonl").open("a") as log:
                log.write(json.dumps(asdict(record)) + "\n")
            if progress:
                progress(record)
            if (step + 1) % train.checkpoint_every == 0 or step + 1 == train.steps:
                _checkpoint(out / "checkpoints" / f"step-{step + 1}", weights, lora, curriculum, record)
    finally:
        group.stop()
    return records


def _step(step: int, config: CudarlConfig, engine, chat, judge: Judge, curriculum: Curriculum, group: UpdateGroup,
          lora: LoraSettings | None) -> tuple[StepRecord, dict]:
    train = config.train
    started = time.perf_counter()
    chosen = curriculum.sample(train.tasks_per_step)
    episodes = [(task, f"s{step}-t{index}-e{k}") for index, task in enumerate(chosen) for k in range(train.group_size)]
    groups = [f"{step}:{index}" for index in range(len(chosen)) for _ in range(train.group_size)]
    settings = EpisodeSettings(
        optimizer_turns=train.optimizer_turns, target_speedup=train.target_speedup,
        sampling=SamplingSettings(max_new_tokens=train.max_new_tokens, temperature=train.temperature,
                                  seed=train.seed * 1_000_003 + step),
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
    result = group.update(step, samples, probe=(probe_ids, probe_source.prompt_length))
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


def _checkpoint(folder: Path, weights: dict, lora: LoraSettings | None, curriculum: Curriculum,
                record: StepRecord) -> None:
    """The trained weights (each role's adapter as a peft folder, which policies load; or the
    whole model's tensors), the curriculum and the step, written to a temporary folder and
    renamed: a checkpoint is whole or absent."""
    import shutil

    from cudarl.rollout.adapters import save_adapter_folder

    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if lora is not None:
        for role in ROLES:
            save_adapter_folder(weights[role], lora, staging / role)
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in weights[None].items()}, str(staging / "model.safetensors"))
    (staging / "state.json").write_text(json.dumps({"step": record.step + 1, "weights_version": record.weights_version,
                                                    "curriculum": curriculum.state_dict()}, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
