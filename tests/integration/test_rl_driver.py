"""The RL run end to end on a CPU with real parts: a tiny model trained here to answer the task
with an honest nvrtc kernel, saved with its tokenizer and loaded by path, the real episode loop,
a real tester pool on a local Ray (compile-only verdicts: no GPU), rewards, GRPO advantages,
Ray Train update workers, verified syncs, the step log and checkpoints; then a run stopped after
two steps and resumed (with a half-written checkpoint left behind, as a kill leaves it) ends in
exactly the state of the uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch

from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from cudarl.tasks.builtin import load_suite, suite_solutions
from tests.fixtures.tiny_lm import chat_tokenizer, memorized_model, tiny_model

TASK = {t.id: t for t in load_suite()}["vector_add"]
ANSWER = ("Strategy: a grid-stride loop, one kernel.\n```python\n"
          + suite_solutions({"vector_add"}, form="nvrtc")[0].source + "```\n")


@pytest.mark.slow
def test_the_full_loop_with_a_real_pool_and_an_exact_resume(tmp_path):
    import ray
    from transformers import AutoTokenizer

    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training
    from cudarl.rollout.adapters import read_adapter_folder

    trained = chat_tokenizer([system_prompt(), generator_prompt(TASK), ANSWER])
    trained.save_pretrained(tmp_path / "model")
    tiny_model(trained).save_pretrained(tmp_path / "model")  # its config.json makes the folder a Qwen2 model's
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model")  # as the run loads it (the Qwen2 class)
    prompt = ChatTokens(tokenizer).prompt(system_prompt(), generator_prompt(TASK))
    memorized_model(tokenizer, prompt, ANSWER).save_pretrained(tmp_path / "model")
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"mode": "kernel"}},
        "pool": {"min_compile_workers": 1, "max_compile_workers": 1},
        "train": {"model": str(tmp_path / "model"), "engine": "hf", "steps": 3, "tasks_per_step": 1,
                  "group_size": 2, "optimizer_turns": 1, "max_new_tokens": 400, "temperature": 0.1,
                  "lora_rank": 4, "lora_alpha": 8, "learning_rate": 1e-3, "checkpoint_every": 1},
        "curriculum": {"tiers": ["easy"]}})
    stopped = tmp_path / "stopped"
    try:
        pool = start_pool(config, num_cpus=3)
        records = run_training(config, tmp_path / "run", [TASK], pool.judge)
        run_training(config.with_changes({"train.steps": 2}), stopped, [TASK], pool.judge)
        (stopped / "checkpoints" / "step-3.partial" / "trainer").mkdir(parents=True)  # a kill mid-checkpoint
        resumed = run_training(config, stopped, [TASK], pool.judge, resume=True)
    finally:
        ray.shutdown()
    lines = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2] and [r.weights_version for r in records] == [1, 2, 3]
    for line in lines:
        stats = line["stats"]
        assert stats["episodes"] == 2 and stats["turns"] >= 2 and stats["samples"] >= 2
        assert stats["kinds"].get("compiled_only", 0) >= 1  # the memorized kernel reached the pool and built
        assert all(error < 1e-3 for error in line["sync_errors"].values())  # both adapters checked
        assert set(line["sync_errors"]) == {"generator", "optimizer"}
        assert stats["version_lag"] == 0  # on-policy: every sample came from the weights of the step before
    state = json.loads((tmp_path / "run" / "checkpoints" / "step-3" / "state.json").read_text())
    assert (state["step"], state["weights_version"]) == (3, 3)

    # the resumed run ran step 2 alone, from the step-2 checkpoint, and ends where the whole run did
    assert [(r.step, r.weights_version) for r in resumed] == [(2, 3)]
    resumed_lines = [json.loads(line) for line in (stopped / "steps.jsonl").read_text().splitlines()]
    assert [line["step"] for line in resumed_lines] == [0, 1, 2]
    for whole, again in zip(lines, resumed_lines):
        assert (whole["stats"], whole["update"]) == (again["stats"], again["update"])
    for role in ("generator", "optimizer"):
        settings, expected = read_adapter_folder(tmp_path / "run" / "checkpoints" / "step-3" / role)
        _, got = read_adapter_folder(stopped / "checkpoints" / "step-3" / role)
        assert settings.rank == 4 and expected.keys() == got.keys()
        assert all(torch.equal(expected[name], got[name]) for name in expected), role
    assert not (stopped / "checkpoints" / "step-3.partial").exists()
