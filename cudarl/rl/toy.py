"""A verifiable toy task to show that the RL loop learns, without kernels or a pretrained model:
the reward of a response is the share of its tokens drawn from a small target set of the
vocabulary. A random model starts near ``len(target) / vocab``; GRPO through the real update
workers (Ray Train, FSDP2 when several ranks) and verified weight syncs to a real rollout engine
must raise it within a few dozen steps.

Covered: the whole step (sample groups, reward, advantages, update, verified sync, version
tags). Not covered: kernels, the tester pool, multi-turn episodes (the driver does those).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from cudarl.config_rl import AlgorithmConfig
from cudarl.rl.advantages import compute_advantages
from cudarl.rl.batch import sample_from_generation
from cudarl.rl.group import UpdateGroup, update_and_sync
from cudarl.rl.update import UpdaterSpec
from cudarl.rollout.engine import LoraSettings, SamplingSettings


@dataclass(frozen=True)
class ToySettings:
    steps: int = 30
    prompts_per_step: int = 4
    group_size: int = 8
    response_tokens: int = 6
    prompt_tokens: int = 8
    target: tuple[int, ...] = tuple(range(4, 36))
    """Token ids that earn reward."""
    learning_rate: float = 2e-2
    lora: LoraSettings = LoraSettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj", "down_proj", "lm_head"))
    """The adapter; on a tiny random model the output layer must be in it: its small random weights
    cap how far the other layers can move the logits."""
    ranks: int = 1
    seed: int = 0


@dataclass(frozen=True)
class ToyStep:
    step: int
    mean_reward: float
    weights_version: int  # the version that generated this step's samples
    synced_version: int  # the version the engine holds after the step's sync
    probe_mean_error: float
    seconds: float
    metrics: dict


def toy_reward(response: tuple[int, ...], target: tuple[int, ...]) -> float:
    return sum(token in target for token in response) / len(response)


def train_toy(model_folder: str, vocab_size: int, settings: ToySettings = ToySettings(),
              progress: Callable[[ToyStep], None] | None = None) -> list[ToyStep]:
    """Run the toy task; one ``ToyStep`` per step (the reward is of the samples the step trained on)."""
    from cudarl.rollout.loading import load_engine

    engine = load_engine(model_folder, "hf", "float32", "cpu", lora=True)
    engine.add_adapter("generator", settings.lora)
    spec = UpdaterSpec(model=model_folder, adapters=("generator",), lora=settings.lora,
                       learning_rate=settings.learning_rate, micro_batch=16,
                       algorithm=AlgorithmConfig(advantage="grpo"), start_version=engine.version_of("generator"))
    group = UpdateGroup(spec, ranks=settings.ranks)
    rng = random.Random(settings.seed)
    probe_ids = tuple(rng.randrange(12, vocab_size) for _ in range(settings.prompt_tokens + 4))
    log: list[ToyStep] = []
    try:
        for step in range(settings.steps):
            started = time.perf_counter()
            prompts = [[rng.randrange(12, vocab_size) for _ in range(settings.prompt_tokens)]
                       for _ in range(settings.prompts_per_step)]
            requests = [prompt for prompt in prompts for _ in range(settings.group_size)]
            generations = engine.generate(requests, SamplingSettings(max_new_tokens=settings.response_tokens,
                                                                     seed=settings.seed * 1000 + step),
                                          adapter="generator")
            rewards = [toy_reward(g.token_ids, settings.target) for g in generations]
            groups = [str(i // settings.group_size) for i in range(len(generations))]
            advantages = compute_advantages(rewards, groups, [0] * len(rewards), "grpo").values
            samples = [sample_from_generation(g, a) for g, a in zip(generations, advantages)]
            result, sync = update_and_sync(group, engine, step, samples, probe_ids, settings.prompt_tokens,
                                           "generator", tolerance=1e-4)
            entry = ToyStep(step=step, mean_reward=sum(rewards) / len(rewards),
                            weights_version=generations[0].weights_version, synced_version=sync.version,
                            probe_mean_error=sync.probe_mean_error or 0.0, seconds=time.perf_counter() - started,
                            metrics=result.metrics)
            log.append(entry)
            if progress:
                progress(entry)
    finally:
        group.stop()
    return log
