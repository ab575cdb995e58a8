"""The RL run over several GPUs of one machine: two update workers with FSDP2 over NCCL on GPUs of
their own, the policy actor's weights coming GPU to GPU over the NCCL weight channel (which "auto"
picks there), placed by the run's plan (``cudarl.rl.placement``, printed at start): with 4 GPUs
a whole GPU for each update worker, the policy and a bench worker; with 2, one update worker on
each GPU, beside the policy on one and the bench worker on the other (the update worker off the
policy's GPU sends); two steps with full verdicts, then a resume; and the first steps' losses of
two update workers equal, within bf16's tolerance, to one worker's on the same samples and seed
(the loss is normalized by the global token count, so the split must not change it).
Skipped with the reason on machines with fewer than 2 GPUs. (The one-GPU run, every worker
sharing the card, is ``tests/gpu/test_rl_gpu.py``; the plan on a multi-node cluster without real
GPUs is ``tests/integration/test_rl_placement_multinode.py``.)"""

from __future__ import annotations

import json

import pytest

from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from tests.fixtures.models import ANSWER, TASK
from tests.fixtures.tiny_lm import chat_tokenizer, memorized_model, tiny_model

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


@pytest.mark.skipif(_gpus() < 2, reason="needs 2 GPUs: two update workers on GPUs of their own")
def test_two_ranks_on_their_own_gpus_resume_and_match_one_rank(tmp_path):
    import ray
    from transformers import AutoTokenizer

    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training

    folder = tmp_path / "model"
    trained = chat_tokenizer([system_prompt(), generator_prompt(TASK), ANSWER])
    trained.save_pretrained(folder)
    tiny_model(trained).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt = ChatTokens(tokenizer).prompt(system_prompt(), generator_prompt(TASK))
    memorized_model(tokenizer, prompt, ANSWER, hidden_size=256, exact_in_bf16=True).save_pretrained(folder)

    whole = _gpus() >= 4  # else two GPUs shared: bench 0.5 + update 0.4 on one, policy 0.6 + update 0.4 on the other
    shares = (1.0, 1.0, 1.0) if whole else (0.5, 0.6, 0.4)

    def config(ranks: int, steps: int) -> CudarlConfig:
        return CudarlConfig.model_validate({
            "pool": {"min_compile_workers": 1, "max_compile_workers": 2, "min_bench_workers": 1,
                     "max_bench_workers": 1, "gpus_per_bench_worker": shares[0]},
            "train": {"model": str(folder), "engine": "hf", "steps": steps, "tasks_per_step": 1, "group_size": 4,
                      "optimizer_turns": 1, "max_new_tokens": 400, "temperature": 0.1, "lora_rank": 8,
                      "lora_alpha": 16, "learning_rate": 1e-4, "checkpoint_every": 2, "ranks": ranks,
                      "gpus_per_rank": shares[2], "policy_gpu_share": shares[1], "dtype": "bfloat16",
                      "micro_batch": 2},
            "curriculum": {"tiers": ["easy"]}})

    samples = loss_samples(tokenizer, prompt)
    try:
        ray.init(num_cpus=8, num_gpus=_gpus(), include_dashboard=False, namespace="cudarl", logging_level="WARNING")
        curves = {ranks: loss_curve(str(folder), samples, ranks) for ranks in (1, 2)}
        pool = start_pool(config(2, 2))
        two = run_training(config(2, 2), tmp_path / "two", [TASK], pool.judge)
        resumed = run_training(config(2, 3), tmp_path / "two", [TASK], pool.judge, resume=True)
    finally:
        ray.shutdown()
    # the same samples and seed on one GPU and on two: the same losses (bf16 sums in another order)
    assert curves[1][0] != 0 and curves[2] == pytest.approx(curves[1], rel=2e-2, abs=1e-4)
    assert [(r.step, r.weights_version) for r in two] == [(0, 1), (1, 2)]
    assert [(r.step, r.weights_version) for r in resumed] == [(2, 3)]
    lines = [json.loads(line) for line in (tmp_path / "two" / "steps.jsonl").read_text().splitlines()]
    for line in lines:
        assert line["stats"]["kinds"].get("correct", 0) >= 1, line["stats"]["kinds"]  # full verdicts
        assert all(error < 0.02 for error in line["sync_errors"].values())
        assert line["sync_via"] == "nccl" and set(line["sync_errors"]) == {"generator", "optimizer"}


def loss_samples(tokenizer, prompt: list[int]):
    """Eight turns answering the task, half rewarded and half not (nonzero advantages), for both roles."""
    from cudarl.rl.batch import TrainSample

    answer = tokenizer.encode(ANSWER, add_special_tokens=False)
    samples = []
    for index in range(8):
        response = answer[: 40 + 8 * index]  # different lengths: the token mean must weigh them right
        samples.append(TrainSample(token_ids=tuple(prompt) + tuple(response), prompt_length=len(prompt),
                                   old_logprobs=(-0.5,) * len(response), advantage=(1.0, -1.0)[index % 2],
                                   weights_version=0, adapter=("generator", "optimizer")[index // 4]))
    return samples


def _loss_spec(model: str, dtype: str):
    """The updater both loss curves use: both roles' adapters, two samples per micro-batch."""
    from cudarl.rl.update import UpdaterSpec
    from cudarl.rollout.engine import LoraSettings

    return UpdaterSpec(model=model, adapters=("generator", "optimizer"), lora=LoraSettings(rank=8, alpha=16),
                       learning_rate=1e-3, micro_batch=2, pad_id=0, dtype=dtype, seed=0)


def loss_curve(model: str, samples, ranks: int, gpus_per_rank: float = 1.0, dtype: str = "bfloat16") -> list[float]:
    """Two updates over ``samples`` by ``ranks`` update workers (a GPU each by default); their losses."""
    from cudarl.rl.group import UpdateGroup

    group = UpdateGroup(_loss_spec(model, dtype), ranks=ranks, gpus_per_rank=gpus_per_rank)
    try:
        return [group.update(step, samples).metrics["loss"] for step in range(2)]
    finally:
        group.stop()


def one_worker_loss_curve(model: str, samples, dtype: str = "float32") -> list[float]:
    """The same two updates as one update worker alone in its group runs them, in this process on
    the CPU: the same step plan (``plan_step``) and ``PolicyUpdater.step`` (a worker alone is not
    sharded and has nothing to all-reduce), without paying a Ray Train start for it."""
    from cudarl.rl.group import plan_step
    from cudarl.rl.update import PolicyUpdater

    spec = _loss_spec(model, dtype)
    updater = PolicyUpdater(spec, device="cpu")
    losses = []
    for _ in range(2):
        (shard,), plan = plan_step(samples, 1, spec.micro_batch, by_adapter=True)
        losses.append(updater.step(shard, plan)["loss"])
    return losses
