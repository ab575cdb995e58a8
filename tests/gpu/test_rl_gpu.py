"""Two RL steps on one GPU with full verdicts, the policy engine, a bench worker and the update
worker sharing it: ``cudarl``'s driver with the transformers engine and with vLLM (skipped with
the reason where vLLM is not installed). The policy is a small model trained here to answer the
task with an honest nvrtc kernel, so its candidates reach correctness and timing; the GPU is
shared through fractions (bench worker 0.25, update worker 0.25) so that Ray Train's placement
never waits on it. (The CPU version, compile-only, with overlap and an exact resume, is
``tests/integration/test_rl_driver.py``.)"""

from __future__ import annotations

import json

import pytest

from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from cudarl.rollout.engine import vllm_installed
from tests.fixtures.models import ANSWER, TASK
from tests.fixtures.tiny_lm import chat_tokenizer, memorized_model, tiny_model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("engine", ["hf", pytest.param("vllm", marks=pytest.mark.skipif(
    not vllm_installed(), reason="vLLM is not installed (an optional extra)"))])
def test_two_steps_with_full_verdicts_on_one_shared_gpu(engine, tmp_path):
    import ray
    from transformers import AutoTokenizer

    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training

    folder = tmp_path / "model"
    trained = chat_tokenizer([system_prompt(), generator_prompt(TASK), ANSWER])
    trained.save_pretrained(folder)
    tiny_model(trained).save_pretrained(folder)  # its config.json makes the folder a Qwen2 model's
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt = ChatTokens(tokenizer).prompt(system_prompt(), generator_prompt(TASK))
    # heads of 64 (vLLM's smallest), and the answer exact in bf16 (vLLM's adapters take no fp32)
    memorized_model(tokenizer, prompt, ANSWER, hidden_size=256, exact_in_bf16=True).save_pretrained(folder)
    config = CudarlConfig.model_validate({
        "pool": {"min_compile_workers": 1, "max_compile_workers": 2, "min_bench_workers": 1,
                 "max_bench_workers": 1, "gpus_per_bench_worker": 0.25},
        "train": {"model": str(folder), "engine": engine, "steps": 2, "tasks_per_step": 1, "group_size": 2,
                  "optimizer_turns": 1, "max_new_tokens": 400, "temperature": 0.1, "lora_rank": 8,
                  "lora_alpha": 16, "learning_rate": 1e-4, "checkpoint_every": 2, "gpus_per_rank": 0.25,
                  "dtype": "bfloat16", "vllm_gpu_memory": 0.3, "vllm_enforce_eager": True},
        "curriculum": {"tiers": ["easy"]}})
    try:
        ray.init(num_cpus=6, num_gpus=1, include_dashboard=False, namespace="cudarl", logging_level="WARNING")
        pool = start_pool(config)
        records = run_training(config, tmp_path / "run", [TASK], pool.judge)
    finally:
        ray.shutdown()
    assert [(r.step, r.weights_version) for r in records] == [(0, 1), (1, 2)]
    lines = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    for line in lines:
        stats = line["stats"]
        assert stats["kinds"].get("correct", 0) >= 1, stats["kinds"]  # full verdicts: correctness and timing ran
        assert stats["mean_speedup"] is not None and stats["mean_speedup"] > 0
        assert set(line["sync_errors"]) == {"generator", "optimizer"}
        assert all(error < 0.02 for error in line["sync_errors"].values())  # bf16 engine against the trainer
        assert line["seconds"]["judge"] > 0 and line["seconds"]["update"] > 0
    assert (tmp_path / "run" / "checkpoints" / "step-2" / "state.json").is_file()
