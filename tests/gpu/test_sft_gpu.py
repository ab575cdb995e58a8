"""The warm start on a GPU: QLoRA really trains on 4-bit base weights (bitsandbytes NF4 layers,
double quantization, bf16 compute) and its loss falls; skipped with the reason where
bitsandbytes or CUDA is missing. The throughput and memory comparison is ``benchmarks/sft.py``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from cudarl.config import SftConfig
from cudarl.sft.dataset import SftData, SftRow
from tests.fixtures.tiny_lm import tiny_tokenizer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
              pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes is missing")]


def test_qlora_trains_on_nf4_base_weights_and_its_loss_falls(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cudarl.sft.train import load_base_model, train_role

    folder = tmp_path / "base"
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                                 eos_token_id=1, pad_token_id=1)).to(torch.bfloat16).save_pretrained(folder)
    config = SftConfig(base_model=str(folder), roles=("generator",), max_steps=30, batch_size=4,
                       gradient_accumulation=1, max_length=128, learning_rate=1e-2, lr_scheduler="constant",
                       warmup_ratio=0.0, logging_steps=5, save_steps=1000, quantization="auto")
    model = load_base_model(config, "cuda")
    assert getattr(model, "is_loaded_in_4bit", False)
    assert type(model.model.layers[0].mlp.down_proj).__name__ == "Linear4bit"
    del model
    pattern = list(range(10, 74))  # one repeated sequence: a loss that must fall fast
    rows = [SftRow(role="generator", task_id=f"t{i}", prompt_ids=tuple(pattern[:16]),
                   completion_ids=tuple(pattern[16:]), origin="pattern") for i in range(120)]
    result = train_role(config, "generator", SftData(train=rows), tiny_tokenizer(), tmp_path / "out", "cuda",
                        progress_bars=False)
    assert result.steps == 30 and result.last_loss < result.first_loss / 2, (result.first_loss, result.last_loss)
    assert (tmp_path / "out" / "generator" / "adapter_model.safetensors").is_file()
