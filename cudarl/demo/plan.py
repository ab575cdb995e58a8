"""What the demo runs: its tasks, its warm-start pairs and the settings of both phases.

The tasks are the built-in suite's with an nvrtc solution: on a machine without a GPU every
candidate is compiled, and an nvrtc kernel builds in about a second where a C++ extension takes
about a minute on two cores. The settings are the defaults of a real run except where the demo's
size needs otherwise, each said below; a user's config file (``--config``) overrides any of them.

Covered: the tasks, the pairs file, the tokenizer's texts, the config. Not covered: running it
(``cudarl.demo.run``).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from cudarl.config import ConfigError, CudarlConfig

DEMO_TASKS = ("vector_add", "relu")
"""The suite's two easy tasks with an nvrtc solution (five tasks have one): what a tiny random
model learns to answer in a warm start of a few minutes on two cores (every row holds the
1,400-token system prompt, and attention over it is most of a step's time)."""
COMPILED_FEEDBACK = "compiled and loaded; correctness and timing were not run on this machine"


def demo_tasks():
    """The demo's tasks, in the suite's own records."""
    from cudarl.tasks.builtin import load_suite

    by_id = {task.id: task for task in load_suite()}
    return [by_id[task_id] for task_id in DEMO_TASKS]


def write_pairs(path: Path, tester=None) -> int:
    """The warm start's pairs as JSONL (the format ``sft.jsonl`` reads): per task, a generator
    pair (the task -> its nvrtc solution) and an optimizer pair (the task and that kernel with the
    verdict ``tester`` gives it here -> the same kernel again), so the optimizer's prompt is the
    one its first turn will see. Why the optimizer resubmits: the suite holds one solution per
    task, so it has no slower-to-faster pairs; the kernel archive (``sft.archive``) gives real
    ones. Without ``tester`` the verdict is a fixed compile-only text. Returns the number of lines."""
    from cudarl.agents.parsing import parse_answer
    from cudarl.agents.prompts import summarize_turn
    from cudarl.sft.examples import answer_text
    from cudarl.tasks.builtin import suite_solutions

    tasks = {task.id: task for task in demo_tasks()}
    lines = []
    for candidate in suite_solutions(set(DEMO_TASKS), form="nvrtc"):
        answer = answer_text(f"a hand-written nvrtc kernel for {candidate.task_id}", candidate.source)
        lines.append({"task_id": candidate.task_id, "answer": answer})
        previous = {"previous": candidate.source, "previous_feedback": COMPILED_FEEDBACK}
        if tester is not None:
            turn = summarize_turn(parse_answer(answer), tester.evaluate(tasks[candidate.task_id], candidate))
            previous = {"previous": turn.source, "previous_feedback": turn.feedback, "previous_speedup": turn.speedup,
                        "previous_strategy": turn.strategy, "previous_outcome": turn.outcome}
        lines.append({"task_id": candidate.task_id, "role": "optimizer", "answer": answer, **previous})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return len(lines)


def pretrain_texts() -> list[str]:
    """What a tiny model is pretrained on: the suite's nvrtc kernels (all five), the code a real
    code model would have seen."""
    from cudarl.tasks.builtin import suite_solutions

    return [candidate.source for candidate in suite_solutions(form="nvrtc")]


def tokenizer_texts(pairs: Path) -> list[str]:
    """What a tiny model's tokenizer is trained on: every prompt and answer of the pairs (as the
    warm start's loader renders them) and the system prompt."""
    from cudarl.agents.prompts import system_prompt
    from cudarl.sft.examples import jsonl_examples
    from cudarl.tasks.report import LoadReport

    examples = jsonl_examples(pairs, demo_tasks(), LoadReport(source=str(pairs)))
    return [system_prompt()] + [text for example in examples for text in (example.user, example.answer)]


def demo_config(model: str, tiny: bool, has_gpu: bool, steps: int, sft_steps: int, pairs: Path, sft_out: Path,
                user_file: str | None = None) -> CudarlConfig:
    """The demo's settings: a real run's defaults with the changes below, then the user's file."""
    changes: dict[str, object] = {
        "tester.compile.mode": "kernel",  # every demo answer is an nvrtc kernel
        "pool.min_compile_workers": 1, "pool.max_compile_workers": 2,
        # compile-only verdicts pay 0; failing to build or to answer in the format costs, so that
        # without a GPU the policy still has something to learn (with one, passing pays 1 and more)
        "reward.compile_failure": -0.5, "reward.format_error": -1.0,
        "sft.base_model": model, "sft.suite": False, "sft.jsonl": [str(pairs)], "sft.max_steps": sft_steps,
        "sft.batch_size": 2, "sft.gradient_accumulation": 1, "sft.logging_steps": 10,
        "sft.save_steps": max(sft_steps, 1), "sft.eval_steps": max(sft_steps, 1),
        "train.model": model, "train.steps": steps, "train.tasks_per_step": 2, "train.group_size": 4,
        "train.optimizer_turns": 1, "train.max_new_tokens": 384, "train.temperature": 0.7,
        "train.checkpoint_every": max(steps, 1), "train.init_adapters": str(sft_out),
        "curriculum.tiers": ["easy"],
    }
    # tiny: a model built here, pretrained on five kernels, warm-started on two tasks. GRPO's
    # learning rate 1e-4: AdamW's first steps move every weight by about the learning rate
    # whatever its gradient, and at 1e-3 one step broke the optimizer's memorized answers
    # (its turns went from 7 of 8 compiled to none: measured)
    if tiny:
        changes |= {"sft.held_out_fraction": 0.0, "sft.learning_rate": 5e-3, "sft.lr_scheduler": "constant_with_warmup",
                    "sft.lora_rank": 32, "sft.lora_alpha": 32, "sft.lora_dropout": 0.0,
                    "sft.gradient_checkpointing": False,
                    "train.lora_rank": 32, "train.lora_alpha": 32, "train.learning_rate": 1e-4,
                    "train.micro_batch": 8, "sft.quantization": "none",
                    # the transformers engine: vLLM's start takes longer than the tiny model's whole rollout
                    "train.engine": "hf"}
    if has_gpu:  # one GPU shared by the update worker, the engine and a bench worker
        changes |= {"train.gpus_per_rank": 0.25, "train.policy_gpu_share": 0.25,
                    "train.vllm_gpu_memory": 0.3, "train.vllm_enforce_eager": True,
                    "pool.max_bench_workers": 1, "pool.gpus_per_bench_worker": 0.25}
    config = CudarlConfig().with_changes(changes)
    if user_file:
        config = config.with_changes(_flatten(_read_toml(user_file)))
    return config


def _read_toml(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from exc


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    """``{"train": {"steps": 20}}`` -> ``{"train.steps": 20}`` (no setting's value is a table)."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat |= _flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat
