"""The update's losses do not depend on how many update workers share the batch: the same samples
through one worker (its step run in this process, as a worker alone in its group runs it) and
through two real Ray Train workers (FSDP2 over gloo, fp32) give the same losses over two steps,
and the reported metrics cover both ranks' samples. (The same on GPUs, bf16 over
NCCL, is part of ``tests/gpu/test_rl_multigpu.py``, which this reuses.)"""

from __future__ import annotations

import pytest

from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer
from tests.gpu.test_rl_multigpu import loss_curve, loss_samples, one_worker_loss_curve


@pytest.mark.slow
def test_one_and_two_update_workers_give_the_same_losses(tmp_path, shared_ray):
    tokenizer = tiny_tokenizer()
    tiny_model(tokenizer).save_pretrained(tmp_path / "model")
    prompt = tokenizer.encode("class ModelNew(nn.Module): def forward(self, a, b):")
    samples = loss_samples(tokenizer, prompt)
    curves = {1: one_worker_loss_curve(str(tmp_path / "model"), samples, dtype="float32"),
              2: loss_curve(str(tmp_path / "model"), samples, 2, gpus_per_rank=0.0, dtype="float32")}
    assert curves[1][0] != 0 and curves[1][0] != curves[1][1]  # a real loss, and the first update moved it
    assert curves[2] == pytest.approx(curves[1], rel=1e-4, abs=1e-6)
