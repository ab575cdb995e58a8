"""Tasks as verl's RL datasets read them: one parquet row per task, with the chat messages of the
generator's first turn (``prompt``), the agent loop's name (``agent_name``), ``data_source``,
``reward_model.ground_truth`` (the task id) and ``extra_info`` (the index, the split, the tier and
the whole task as JSON, so a worker on any node rebuilds it without cudarl's task files).

Covered: rows, the train/validation split (whole tasks, seeded), the parquet files, the task back
from a row. Not covered: loading (verl's ``RLHFDataset``, exercised in ``tests/integration/test_verl_env.py``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.tasks.task import Task

AGENT_NAME = "cudarl_kernel_agent"
"""The agent loop's name in ``cluster/verl/agent_loops.yaml`` and in every exported row."""
DATA_SOURCE = "cudarl"


def verl_row(task: Task, index: int, split: str) -> dict:
    """One task as a verl dataset row."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": AGENT_NAME,
        "prompt": [{"role": "system", "content": system_prompt()},
                   {"role": "user", "content": generator_prompt(task)}],
        "ability": "cuda_kernels",
        "reward_model": {"style": "rule", "ground_truth": task.id},
        "extra_info": {"index": index, "split": split, "task_id": task.id, "tier": task.tier,
                       "task_json": task.model_dump_json()},
    }


def split_tasks(tasks: Sequence[Task], validation_fraction: float, seed: int = 0) -> tuple[list[Task], list[Task]]:
    """(train, validation): whole tasks, a seeded shuffle; at least one training task."""
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    if not tasks:
        raise ValueError("no tasks to export")
    order = list(tasks)
    random.Random(seed).shuffle(order)
    held = min(int(round(len(order) * validation_fraction)), len(order) - 1)
    return order[held:], order[:held]


def write_parquet(tasks: Sequence[Task], out: Path, validation_fraction: float = 0.1,
                  seed: int = 0) -> dict[str, Path]:
    """``out/train.parquet`` (and ``out/val.parquet`` when any task is held out); the paths by split."""
    from datasets import Dataset

    train, validation = split_tasks(tasks, validation_fraction, seed)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, chosen in (("train", train), ("val", validation)):
        if not chosen:
            continue
        path = out / f"{split}.parquet"
        Dataset.from_list([verl_row(task, index, split) for index, task in enumerate(chosen)]).to_parquet(str(path))
        written[split] = path
    return written


def task_of(extra_info: Mapping | None, ground_truth: str | None = None) -> Task:
    """The task a row names: from its ``extra_info.task_json``, else the built-in suite by id."""
    if extra_info and extra_info.get("task_json"):
        return Task.model_validate(json.loads(extra_info["task_json"]))
    task_id = ground_truth or (extra_info or {}).get("task_id")
    from cudarl.tasks.builtin import load_suite

    for task in load_suite():
        if task.id == task_id:
            return task
    raise ValueError(f"the row names task {task_id!r}, which is neither in its extra_info nor in the built-in suite")
