"""The RL run: per step, tasks from the curriculum, groups of multi-turn episodes on the rollout
engine, every candidate judged (the tester pool), rewards and advantages, one update on the
update workers, the new adapters pushed to the engine and checked, a line of statistics.

The engine runs in a policy actor (``policy_client``: placed by Ray by its GPU share, loading while
the update workers start, restarted on its last weights when it dies); the update workers are a Ray
Train group (``group``); the curriculum and the reward bookkeeping are actors
(``actors/curriculum_controller.py``, ``actors/reward_aggregator.py``; trajectories reach the
latter through the object store); the judge is any ``Judge`` (``PoolClient.judge`` for ``cudarl
train``). Every sample carries the weights version that generated it, and each step's sync is
refused unless the engine reproduces the trainer's log-probs on a probe from that step's data.
Weights travel from the update worker to the policy actor as object references, or GPU to GPU over
a weight channel (``weight_sync``); the driver fetches them only to write a checkpoint.

Covered: the loop; with ``train.overlap``, step n+1's rollout running while step n's update runs
(in a thread here; the workers are other processes), one step off-policy, its version lag logged;
each step's record (``step_log``: ``steps.jsonl``, Prometheus, TensorBoard, W&B) with the step
time split into rollout (generation), judge, update and sync; a rollout that meets a dead or
silent Ray worker tried again (``train.step_retries``) from the curriculum's state before it (a
dead or silent policy actor is replaced first, on its last weights); checkpoints every
``checkpoint_every`` steps (the trainer's model and optimizer state through torch distributed
checkpoint, each role's adapter as a peft folder with the probe it was synced with, the
curriculum, the step), each whole or absent; and ``resume``: from the last whole checkpoint, the
engine checked on the saved probes, on the same seeds, to the state an uninterrupted run reaches
(a checkpoint's step never overlaps the next rollout, so this holds with overlap too). An update
worker that dies fails the run with ``UpdateWorkersError``; ``--resume`` continues it. Not
covered: more than one step of lag, more than one engine replica.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from cudarl.config import CudarlConfig
from cudarl.rl.group import UpdateGroup
from cudarl.rl.initial_weights import WARM_START_VERSION, load_into_engine, restore_engine, warm_start_folders
from cudarl.rl.step_log import StepLog, StepRecord
from cudarl.rl.update import UpdaterSpec
from cudarl.rl.weight_sync import ChannelPlan, choose_channel, describe, push_weights
from cudarl.rollout.engine import LoraSettings, Probe, SamplingSettings
from cudarl.rollout.episodes import EpisodeSettings, Judge, run_episodes
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Outcome

ROLES = ("generator", "optimizer")
PROBE_RESPONSE_TOKENS = 32
MAY_CHANGE_ON_RESUME = ("steps", "step_retries", "tensorboard", "wandb_project", "weight_sync")
"""Settings a resumed run may change: none changes what it computes (each channel moves the same bits)."""


@dataclass
class _Rollout:
    """One step's judged episodes, ready for its update."""

    step: int
    tier: str  # the curriculum tier when the step's tasks were drawn
    trajectories: list
    groups: list[str]
    tiers: list[str]
    seconds: dict  # rollout (generation, judge calls left out), judge
    overlapped: bool
    retries: int


class _TimedJudge:
    """The judge, with the seconds spent in it summed (the step's judge phase)."""

    def __init__(self, judge: Judge) -> None:
        self.judge, self.seconds = judge, 0.0

    def __call__(self, pairs):
        started = time.perf_counter()
        try:
            return self.judge(pairs)
        finally:
            self.seconds += time.perf_counter() - started


def _retryable(exc: BaseException) -> bool:
    """A failure another try of the rollout may not meet: a Ray worker (tester pool, bench or
    policy worker) that died or did not answer."""
    import ray.exceptions

    return isinstance(exc, ray.exceptions.RayError | TimeoutError | ConnectionError)


def run_training(config: CudarlConfig, out: Path, tasks: list[Task], judge: Judge,
                 progress: Callable[[StepRecord], None] | None = None, resume: bool = False,
                 on_phase: Callable[[int, str], None] | None = None) -> list[StepRecord]:
    """Run up to ``config.train.steps`` steps (with ``resume``: from the last whole checkpoint in
    ``out``); the records of the steps run here, also appended to ``out/steps.jsonl``.
    ``on_phase(step, phase)`` hears each phase as it starts (rollout, update, sync, checkpoint)."""
    from transformers import AutoTokenizer

    from actors.policy import PolicySpec
    from cudarl.rl.placement import cluster_node_gpus, plan_placement, run_slots
    from cudarl.rl.policy_client import PolicyClient
    from cudarl.rollout.chat import ChatTokens

    train = config.train
    if config.algorithm.kl_coef > 0 and train.full_finetune:
        raise ValueError("algorithm.kl_coef > 0 needs adapters: full fine-tuning keeps no reference model")
    if not resume and ((out / "steps.jsonl").exists() or (out / "checkpoints").exists()):
        raise ValueError(f"{out} holds an earlier run: resume it (--resume) or choose another output folder")
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out / "config.json", config, resume)
    if Path(train.model).is_dir():  # a local folder, absolute: the update workers run in another working folder
        train = train.model_copy(update={"model": str(Path(train.model).resolve())})
    tokenizer = AutoTokenizer.from_pretrained(train.model)
    lora = None if train.full_finetune else LoraSettings(rank=train.lora_rank, alpha=train.lora_alpha)
    policy = PolicySpec(role="both" if lora else "generator", model=train.model, engine=train.engine,
                        dtype=train.dtype, gpu_share=train.policy_gpu, lora=lora,
                        vllm={"gpu_memory_utilization": train.vllm_gpu_memory,
                              "enforce_eager": train.vllm_enforce_eager,
                              "max_lora_rank": _vllm_lora_rank(train.lora_rank)})
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    initial = warm_start_folders(train.init_adapters, ROLES, lora)  # refused here, before any worker starts
    spec = UpdaterSpec(model=train.model, adapters=ROLES if lora else (), lora=lora or LoraSettings(),
                       learning_rate=train.learning_rate, micro_batch=train.micro_batch, pad_id=pad_id,
                       dtype=train.dtype, temperature=train.temperature, seed=train.seed,
                       start_version=WARM_START_VERSION if initial else 0, init_adapters=initial,
                       algorithm=config.algorithm)
    import ray

    from actors.curriculum_controller import CurriculumControllerActor
    from actors.reward_aggregator import RewardAggregatorActor

    curriculum = CurriculumControllerActor.remote(tasks, config.curriculum)
    aggregator = RewardAggregatorActor.remote(config.reward, config.algorithm)
    engine = None
    try:
        plan = plan_placement(run_slots(config), cluster_node_gpus())  # refused here, not hung later
        print("\n".join(plan.lines()), file=sys.stderr, flush=True)
        engine = PolicyClient(policy, cpus=train.policy_cpus, timeout_s=train.policy_timeout_s, wait=False)
        return _run_steps(config, out, engine, ChatTokens(tokenizer), spec, lora, _TimedJudge(judge), curriculum,
                          aggregator, progress, resume, on_phase or (lambda step, phase: None))
    finally:
        if engine is not None:
            engine.stop()
        for actor in (curriculum, aggregator):
            ray.kill(actor)


def _run_steps(config: CudarlConfig, out: Path, engine, chat, spec: UpdaterSpec, lora: LoraSettings | None,
               judge: _TimedJudge, curriculum, aggregator, progress: Callable[[StepRecord], None] | None,
               resume: bool, on_phase: Callable[[int, str], None]) -> list[StepRecord]:
    """From the checkpoint (on resume) to the last step: the pipeline of rollouts and updates."""
    import ray

    train = config.train
    checkpoint = latest_checkpoint(out) if resume else None
    first_step = 0
    if checkpoint is not None:
        state = json.loads((checkpoint / "state.json").read_text())
        ray.get(curriculum.load_state_dict.remote(state["curriculum"]))
        first_step = state["step"]
    if resume:
        _keep_log_lines(out / "steps.jsonl", before=first_step)
    group = UpdateGroup(spec, ranks=train.ranks, gpus_per_rank=train.gpus_per_rank,
                        resume_from=str(checkpoint / "trainer") if checkpoint else None)
    if checkpoint is not None and group.version != state["weights_version"]:
        group.stop()
        raise RuntimeError(f"{checkpoint}: the trainer's state is version {group.version}, the checkpoint's "
                           f"adapters {state['weights_version']}")
    try:
        engine.wait_ready()  # its engine loaded while the update workers started
        if checkpoint is not None:
            restore_engine(engine, checkpoint, lora, state)
        policy_gpu = engine.device_uuid()
        channel = choose_channel(train.weight_sync, group.device_uuids, policy_gpu, any_rank=lora is not None)
        print(describe(channel, group.device_uuids, policy_gpu), file=sys.stderr, flush=True)
        if checkpoint is None and spec.init_adapters:
            on_phase(first_step, "warm start: adapters into the engine")
            load_into_engine(engine, group, chat, spec.init_adapters, _sync_tolerance(train.dtype))
    except BaseException:
        group.stop()
        raise
    log = StepLog(out, ray.get(curriculum.tiers.remote()), tensorboard=train.tensorboard,
                  wandb_project=train.wandb_project)
    run = _Run(config, engine, chat, judge, curriculum, aggregator, group, lora, on_phase, channel)
    records: list[StepRecord] = []
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cudarl-update") as updates:
            pending = run.rollout(first_step, overlapped=False) if first_step < train.steps else None
            for step in range(first_step, train.steps):
                ends_in_checkpoint = (step + 1) % train.checkpoint_every == 0 or step + 1 == train.steps
                staging = _staging(out, step) if ends_in_checkpoint else None
                rollout, pending = pending, None
                update = updates.submit(run.update, rollout, staging)
                if train.overlap and not ends_in_checkpoint:  # the next rollout on the weights before this update
                    pending = run.rollout(step + 1, overlapped=True)
                record, result, probes = run.sync(rollout, update.result(), run.last_record_end)
                records.append(record)
                log.write(record)
                if progress:
                    progress(record)
                if staging is not None:
                    run.on_phase(step, "checkpoint")
                    _checkpoint(staging, result, probes, lora, ray.get(curriculum.state_dict.remote()), record)
                if pending is None and step + 1 < train.steps:
                    pending = run.rollout(step + 1, overlapped=False)
    finally:
        log.close()
        group.stop()
    return records


class _Run:
    """The phases of a step over the run's engine, judge, update workers and two actors: the
    ``CurriculumController`` (tasks, verdicts, state) and the ``RewardAggregator`` (samples)."""

    def __init__(self, config: CudarlConfig, engine, chat, judge: _TimedJudge, curriculum, aggregator,
                 group: UpdateGroup, lora: LoraSettings | None, on_phase: Callable[[int, str], None],
                 channel: ChannelPlan | None = None) -> None:
        self.config, self.engine, self.chat, self.judge = config, engine, chat, judge
        self.curriculum, self.aggregator, self.group, self.lora = curriculum, aggregator, group, lora
        self.on_phase, self.channel = on_phase, channel
        self.last_record_end = time.perf_counter()

    def rollout(self, step: int, overlapped: bool) -> _Rollout:
        """Draw the step's tasks and run its episodes; a try that meets a dead or silent worker is
        run again (up to ``train.step_retries`` times) from the curriculum's state before it."""
        import ray

        state = ray.get(self.curriculum.state_dict.remote())
        retries = self.config.train.step_retries
        for attempt in range(retries + 1):
            try:
                return self._rollout_once(step, overlapped, attempt)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                if attempt == retries:
                    first_line = str(exc).splitlines()[0] if str(exc) else ""
                    raise RuntimeError(f"step {step + 1}: the rollout failed {attempt + 1} times; last: "
                                       f"{type(exc).__name__}: {first_line}") from exc
                print(f"step {step + 1}: rollout try {attempt + 1} failed ({type(exc).__name__}); trying again",
                      file=sys.stderr, flush=True)
                if self.engine.dead:
                    self.engine.restart()
                ray.get(self.curriculum.load_state_dict.remote(state))
        raise AssertionError("unreachable")

    def _rollout_once(self, step: int, overlapped: bool, retries: int) -> _Rollout:
        train = self.config.train
        self.on_phase(step, "rollout (overlapping the last update)" if overlapped else "rollout")
        started, judged_before = time.perf_counter(), self.judge.seconds
        import ray

        tier, chosen = ray.get([self.curriculum.tier.remote(), self.curriculum.sample.remote(train.tasks_per_step)])
        episodes = [(task, f"s{step}-t{index}-e{k}") for index, task in enumerate(chosen)
                    for k in range(train.group_size)]
        groups = [f"{step}:{index}" for index in range(len(chosen)) for _ in range(train.group_size)]
        settings = EpisodeSettings(
            optimizer_turns=train.optimizer_turns, target_speedup=train.target_speedup,
            sampling=SamplingSettings(max_new_tokens=train.max_new_tokens, temperature=train.temperature,
                                      seed=(train.seed * 1_000_003 + step) * 65_536),  # + turn x episodes + request
            generator_adapter="generator" if self.lora else None,
            optimizer_adapter="optimizer" if self.lora else None)
        trajectories = run_episodes(self.engine, self.chat, self.judge, episodes, settings)
        ray.get(self.curriculum.record_verdicts.remote(
            [turn.verdict for trajectory in trajectories for turn in trajectory.turns
             if Outcome(turn.verdict.outcome) != Outcome.HARNESS_ERROR]))
        judged = self.judge.seconds - judged_before
        return _Rollout(step=step, tier=tier, trajectories=trajectories, groups=groups,
                        tiers=[task.tier for task, _ in episodes],
                        seconds={"rollout": time.perf_counter() - started - judged, "judge": judged},
                        overlapped=overlapped, retries=retries)

    def update(self, rollout: _Rollout, staging: Path | None):
        """Samples from the step's episodes and one update over them (run in a thread, so the next
        rollout may go on meanwhile); the samples, their statistics, the result and its seconds."""
        step = rollout.step
        self.on_phase(step, "update")
        started = time.perf_counter()
        import ray

        samples, stats = ray.get(self.aggregator.aggregate.remote(
            ray.put(rollout.trajectories), rollout.groups, rollout.tiers, self.group.version))
        if not samples:
            raise RuntimeError(f"step {step + 1}: every turn ended in a harness error; nothing to learn from")
        source = samples[0]
        probe_ids = source.token_ids[:min(len(source.token_ids), source.prompt_length + PROBE_RESPONSE_TOKENS)]
        result = self.group.update(step, samples, probe=(probe_ids, source.prompt_length),
                                   save_to=str(staging / "trainer") if staging is not None else None)
        return stats, (probe_ids, source.prompt_length), result, time.perf_counter() - started

    def sync(self, rollout: _Rollout, updated, step_started: float) -> tuple[StepRecord, object, dict]:
        """The update's weights into the engine, each adapter checked on the step's probe; the
        record, the update's result and the probes (by adapter)."""
        stats, (probe_ids, prompt_length), result, update_seconds = updated
        self.on_phase(rollout.step, "sync")
        started = time.perf_counter()
        tolerance = _sync_tolerance(self.config.train.dtype)
        probes = {adapter: Probe(probe_ids, prompt_length, tuple(result.probe_logprobs[adapter]), tolerance)
                  for adapter in result.weights}
        syncs = push_weights(self.engine, self.group, result, probes, self.channel)
        sync_errors = {adapter: sync.probe_mean_error for adapter, sync in syncs.items()}
        ended = time.perf_counter()
        self.last_record_end = ended
        record = StepRecord(step=rollout.step, tier=rollout.tier, weights_version=result.version,
                            stats=asdict(stats), update=result.metrics, sync_errors=sync_errors,
                            seconds=rollout.seconds | {"update": update_seconds, "sync": ended - started,
                                                       "step": ended - step_started},
                            overlapped=rollout.overlapped, retries=rollout.retries,
                            sync_via=self.channel.backend if self.channel else "object_store")
        return record, result, probes


def _sync_tolerance(dtype: str) -> float:
    """The probe's tolerance on the mean log-prob difference between trainer and engine."""
    return 1e-3 if dtype == "float32" else 0.02


def _staging(out: Path, step: int) -> Path:
    staging = out / "checkpoints" / f"step-{step + 1}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def _vllm_lora_rank(rank: int) -> int:
    """The smallest adapter-rank ceiling vLLM accepts that holds ``rank`` (vLLM sizes its adapter
    buffers by it)."""
    from cudarl.rollout.vllm_engine import LORA_RANKS

    return min((r for r in LORA_RANKS if r >= rank), default=max(LORA_RANKS))


def latest_checkpoint(out: Path) -> Path | None:
    """The newest whole checkpoint in ``out`` (a ``.partial`` folder, left by a run killed while
    writing one, is never chosen)."""
    whole = [folder for folder in (out / "checkpoints").glob("step-*")
             if not folder.name.endswith(".partial") and (folder / "state.json").is_file()]
    return max(whole, key=lambda folder: int(folder.name.removeprefix("step-")), default=None)


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
    anything but ``MAY_CHANGE_ON_RESUME`` (a resumed run must be the same run)."""
    settings = json.loads(config.model_dump_json())
    if resume and path.is_file():
        before = json.loads(path.read_text())
        now = json.loads(config.model_dump_json())
        for name in MAY_CHANGE_ON_RESUME:
            before.get("train", {}).pop(name, None)
            now["train"].pop(name, None)
        if before != now:
            changed = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
            raise ValueError(f"{path}: the run was started with other settings (in {', '.join(changed)}); "
                             f"resume it with the same ones (only train.{', train.'.join(MAY_CHANGE_ON_RESUME)} "
                             "may change)")
    path.write_text(json.dumps(settings, indent=2))


def _checkpoint(staging: Path, result, probes: dict, lora: LoraSettings | None, curriculum: dict,
                record: StepRecord) -> None:
    """Complete a checkpoint the trainer wrote its state into (``staging/trainer``): the trained
    weights (each role's adapter as a peft folder, which policies load; or the whole model's
    tensors), the probes they were synced with, the curriculum and the step; then rename it into
    place, so it is whole or absent."""
    from cudarl.rollout.adapters import save_adapter_folder

    if lora is not None:
        for role in ROLES:
            save_adapter_folder(result.fetch(role), lora, staging / role)
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in result.fetch(None).items()}, str(staging / "model.safetensors"))
    saved_probes = {adapter or "model": asdict(probe) for adapter, probe in probes.items()}
    (staging / "state.json").write_text(json.dumps({"step": record.step + 1, "weights_version": record.weights_version,
                                                    "probes": saved_probes, "curriculum": curriculum}, indent=2))
    folder = staging.with_name(staging.name.removesuffix(".partial"))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
