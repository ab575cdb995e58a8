"""The warm start end to end on a CPU: a tiny real model (built from a config, saved to a folder
and loaded by path like a hub model) and a tokenizer trained here, fine-tuned with TRL on the
suite's pairs for a few steps: the loss falls, the held-out loss is reported, the reports and
the loss curve are written, the adapter loads into the transformers engine through its checked
update path and changes what the model predicts, and a second run resumes from the checkpoint."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest
import torch

from cudarl.config import SftConfig
from cudarl.sft.examples import suite_examples
from cudarl.tasks.builtin import load_suite
from tests.fixtures.tiny_lm import chat_tokenizer


@pytest.fixture(scope="module")
def base_folder(tmp_path_factory):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("tiny-base")
    examples = suite_examples(load_suite())
    tokenizer = chat_tokenizer([e.answer for e in examples] + [e.user for e in examples] + [examples[0].system],
                               vocab_size=4000)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384,
                         initializer_range=0.2,  # logits far from uniform: a rank-16 adapter can move them
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _config(folder, **changes) -> SftConfig:
    settings = dict(base_model=str(folder), roles=("generator",), max_length=3300, max_steps=8, batch_size=2,
                    gradient_accumulation=1, learning_rate=2e-2, lr_scheduler="constant", warmup_ratio=0.0,
                    logging_steps=2, eval_steps=8, save_steps=4, held_out_fraction=0.2, quantization="none",
                    max_examples=16, seed=1)
    return SftConfig(**(settings | changes))


def test_the_warm_start_learns_reports_and_its_adapter_loads_into_a_policy(base_folder, tmp_path):
    from transformers import AutoTokenizer

    from actors.policy import Policy, PolicySpec
    from cudarl.rollout.adapters import read_adapter_folder
    from cudarl.rollout.chat import ChatTokens
    from cudarl.sft.train import run_sft

    out = tmp_path / "sft"
    [result] = run_sft(_config(base_folder), out, progress_bars=False)
    assert result.steps == 8 and result.resumed_from is None
    assert result.last_loss < result.first_loss - 0.5, (result.first_loss, result.last_loss)  # nats per token
    assert result.held_out_loss is not None and math.isfinite(result.held_out_loss)
    data = json.loads((out / "data.json").read_text())
    assert data["train"]["rows"] > 0 and data["held_out"]["rows"] > 0 and data["held_out"]["tasks"] > 0
    assert data["dropped"]["longer than max_length"] > 0  # counted, not cut
    assert json.loads((out / "config.json").read_text())["max_steps"] == 8
    curves = json.loads((out / "generator" / "loss.json").read_text())
    assert len(curves["train"]) == 4 and [step for step, _ in curves["held_out"]] == [8]
    assert (out / "generator" / "loss.png").read_bytes()[:4] == b"\x89PNG"

    settings, weights = read_adapter_folder(out / "generator")
    assert settings.rank == 16 and any(key.endswith("lora_B.weight") for key in weights)
    policy = Policy(asdict(PolicySpec(role="generator", model=str(base_folder), engine="hf", dtype="float32",
                                      adapters={"generator": str(out / "generator")})))
    assert policy.ready()["weights_versions"] == {"generator": 1} and policy.ready()["adapters"] == ["generator"]
    chat = ChatTokens(AutoTokenizer.from_pretrained(base_folder))
    example = suite_examples(load_suite())[0]
    prompt = chat.prompt(example.system, example.user)
    answer = chat.encode(example.answer)[:64]
    tuned = sum(policy.score(prompt + answer, len(prompt)))
    base = sum(policy.engine.score(prompt + answer, len(prompt)))  # the same model without the adapter
    assert tuned > base + 1.0, (base, tuned)  # the adapter learned what an answer looks like

    [again] = run_sft(_config(base_folder, max_steps=10), out, progress_bars=False)
    assert again.resumed_from is not None and again.resumed_from.endswith("checkpoint-8")
    assert again.steps == 10
    with pytest.raises(ValueError, match="changed: learning_rate"):  # another run's checkpoints: never resumed
        run_sft(_config(base_folder, max_steps=12, learning_rate=1e-3), out, progress_bars=False)


def test_bad_settings_and_missing_rows_end_in_one_line(base_folder, tmp_path, capsys):
    from cudarl.cli.main import main

    assert main(["sft", "--out", str(tmp_path / "a"), "--set", "no_such_setting=1"]) == 2
    assert "no_such_setting" in capsys.readouterr().err
    assert main(["sft", "--out", str(tmp_path / "b"), "--set", "max_steps=-5"]) == 2
    code = main(["sft", "--model", str(base_folder), "--out", str(tmp_path / "c"), "--set", 'roles=["optimizer"]',
                 "--set", "quantization=none", "--set", "max_steps=1"])
    err = capsys.readouterr().err
    assert code == 2 and "no training rows for the optimizer role" in err
    assert json.loads((tmp_path / "c" / "data.json").read_text())["train"]["rows"] == 0  # written before failing
    with pytest.raises(ValueError, match="4-bit quantization needs a CUDA GPU"):
        from cudarl.sft.train import load_base_model

        load_base_model(_config(base_folder, quantization="4bit"), "cpu")


@pytest.mark.slow  # default-suite budget (tests/README.md): a second warm start
def test_packed_rows_train_too(base_folder, tmp_path):
    """``packing``: rows packed into sequences of ``max_length`` (TRL's best-fit packing, the
    completion-only labels packed with them): six rows of 2-5k tokens fit in fewer 12k sequences."""
    from cudarl.sft.train import run_sft

    [result] = run_sft(_config(base_folder, packing=True, max_length=12000, max_examples=6, batch_size=1,
                               max_steps=1, eval_steps=1, save_steps=100, logging_steps=1),
                       tmp_path / "packed", progress_bars=False)
    assert result.steps == 1 and math.isfinite(result.last_loss) and math.isfinite(result.held_out_loss)
    history = json.loads((tmp_path / "packed" / "generator" / "loss.json").read_text())["log_history"]
    epoch = next(entry["epoch"] for entry in history if "loss" in entry)
    assert epoch > 1 / 5  # one packed sequence per step covers more than one of the six rows
