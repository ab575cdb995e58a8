"""``cudarl demo``: the whole system on an embedded default, in minutes on a CPU. A local Ray;
the model (``--model``, or a tiny one built here: no hub needed); the warm start on the demo's
pairs (``cudarl.demo.plan``); then multi-turn GRPO against the real tester pool, the warm start's
adapters as the first weights. With a GPU the verdicts are full (correctness, timing); without
one they stop after compiling and loading, which the first lines and the report say.

Outputs under ``--out``: ``model/`` (a tiny model, when built), ``data/pairs.jsonl``, ``sft/``
(adapters, loss curves), ``train/`` (``steps.jsonl``, checkpoints) and ``report/`` (summary,
plots, best kernels; ``cudarl.demo.report``).

Covered: the phases in order with progress output and the report. Not covered: anything a real
run needs beyond the demo's size (see the README: from the demo to a cluster run).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PRETRAIN_STEPS = 120
"""Language-model steps of the tiny model on the kernels (measured: loss 0.45 after 50, 0.007
after 100; then the warm start's 40 steps gave exact kernels at temperature 0 and 0.7)."""


LOCAL_RAY_CPUS = 8
"""Logical CPUs of the demo's local Ray at least: compile workers, a bench worker, the policy actor
and the update worker each reserve one, and a 2-core machine would hold only two of them. Ray's
CPUs are a bookkeeping count, and these actors mostly wait on one another."""


@dataclass(frozen=True)
class DemoSettings:
    """What ``cudarl demo`` was asked for."""

    out: Path
    """Output folder (must not hold an earlier demo's training)."""
    steps: int = 3
    """GRPO steps."""
    sft_steps: int = 40
    """Warm-start optimizer steps per role."""
    model: str | None = None
    """Hub id or local folder of a real model; None: a tiny model built here."""
    config: str | None = None
    """A TOML config file whose settings override the demo's."""
    address: str | None = None
    """A Ray cluster to run on (None: a local Ray started here)."""


@dataclass
class DemoResult:
    """What the demo did, for the table and the caller."""

    has_gpu: bool
    model: str
    tiny: bool
    rows: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    report: Path | None = None


def run_demo(settings: DemoSettings, say: Callable[[str], None] = print,
             show_step: Callable[[object], None] | None = None,
             on_phase: Callable[[int, str], None] | None = None) -> DemoResult:
    """The demo's phases; ``say`` hears a line per phase, ``show_step`` each RL step's record."""
    import json

    from cudarl.demo.plan import DEMO_TASKS, demo_config, demo_tasks, pretrain_texts, tokenizer_texts, write_pairs
    from cudarl.demo.report import RecordingJudge, step_rows, write_report
    from cudarl.tester import Tester

    started = time.perf_counter()
    out = settings.out.resolve()  # the update workers run in another working folder
    if (out / "train" / "steps.jsonl").exists():
        raise ValueError(f"{out} holds an earlier demo; choose another --out or remove it")
    tiny = settings.model is None
    model = str(out / "model") if tiny else settings.model
    pairs = out / "data" / "pairs.jsonl"
    from cudarl.tester.build.toolchain import gpu_available

    has_gpu = gpu_available()
    config = demo_config(model, tiny, has_gpu, settings.steps, settings.sft_steps, pairs, out / "sft", settings.config)
    result = DemoResult(has_gpu=has_gpu, model=model if not tiny else "a tiny model built here", tiny=tiny)
    if has_gpu:
        say("cudarl demo: a CUDA GPU is here: verdicts are full (guard, compile, load, correctness, timing).")
    else:
        say("cudarl demo: no CUDA GPU here: verdicts are compile-only (guard, compile, load); correctness and "
            "timing are skipped, so nothing passes and the reward only tells building from failing.")
    if not tiny:  # before any work: a model that cannot be reached is a one-line error
        from transformers import AutoConfig

        try:
            AutoConfig.from_pretrained(model)
        except (OSError, ValueError) as exc:
            raise ValueError(f"model {model!r}: {str(exc).splitlines()[0]}") from exc
    out.mkdir(parents=True, exist_ok=True)

    clock = time.perf_counter()
    say(f"[1/3] pairs: judging the suite's kernels of {', '.join(DEMO_TASKS)} here (the optimizer's pairs carry "
        "their verdicts)")
    count = write_pairs(pairs, Tester(config.tester))
    if tiny:
        from cudarl.demo.tiny import build_tiny_model

        say(f"      model: no --model given: building a tiny Qwen2-shaped model and a tokenizer in {out / 'model'} "
            f"(pretrained here on the suite's {len(pretrain_texts())} nvrtc kernels)")
        build_tiny_model(out / "model", tokenizer_texts(pairs), pretrain_texts(), pretrain_steps=PRETRAIN_STEPS,
                         say=say)
    else:
        say(f"      model: {model}")
    result.seconds["pairs_and_model"] = time.perf_counter() - clock

    clock = time.perf_counter()
    say(f"[2/3] warm start: {count} pairs ({len(DEMO_TASKS)} tasks, both roles), {config.sft.max_steps} steps "
        f"per role -> {out / 'sft'}")
    from cudarl.sft.train import run_sft

    for role in run_sft(config.sft, out / "sft"):
        say(f"      {role.role}: loss {role.first_loss:.3f} -> {role.last_loss:.3f} in {role.steps} steps")
    result.seconds["warm_start"] = time.perf_counter() - clock

    clock = time.perf_counter()
    say(f"[3/3] GRPO: {config.train.steps} steps x {config.train.tasks_per_step} tasks x {config.train.group_size} "
        f"episodes, {config.train.optimizer_turns + 1} turns each, on the tester pool -> {out / 'train'}")
    from cudarl.pool.client import start_pool
    from cudarl.rl.driver import run_training

    if settings.address is None:  # its own local Ray, even where another one runs on this machine
        import ray

        from cudarl._compat import local_ray_workers_on_this_python

        if not ray.is_initialized():
            with local_ray_workers_on_this_python():
                ray.init(address="local", num_cpus=max(os.cpu_count() or 1, LOCAL_RAY_CPUS),
                         include_dashboard=False, namespace=config.pool.namespace, logging_level="WARNING")
    pool = start_pool(config, address=settings.address)
    judge = RecordingJudge(pool.judge)

    def phase(step: int, name: str) -> None:
        judge.step = step
        if on_phase:
            on_phase(step, name)

    try:
        run_training(config, out / "train", demo_tasks(), judge, progress=show_step, on_phase=phase)
    finally:
        if settings.address is None:
            pool.shutdown()
    result.seconds["grpo"] = time.perf_counter() - clock
    records = [json.loads(line) for line in (out / "train" / "steps.jsonl").read_text().splitlines() if line]
    result.rows = step_rows(records)
    result.seconds["total"] = time.perf_counter() - started
    summary = {"gpu": has_gpu, "verdicts": "full" if has_gpu else "compile-only (no GPU)",
               "model": result.model, "settings": {"steps": settings.steps, "sft_steps": settings.sft_steps,
                                                  "config": settings.config},
               "seconds": result.seconds, "warm_start": json.loads((out / "sft" / "data.json").read_text())}
    result.report = out / "report"
    result.best = write_report(result.report, summary, result.rows, judge.judged)
    print(f"report written to {result.report}", file=sys.stderr)
    return result
