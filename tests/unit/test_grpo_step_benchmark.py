"""The update-step benchmark (``benchmarks/grpo_step.py``): its TFLOP/s arithmetic against
hand-computed figures, and a tiny run of every arm on a CPU writing the JSON the GPU run writes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from grpo_step import model_tflops  # noqa: E402
from rollout import QWEN_1_5B  # noqa: E402

# Qwen2.5-Coder-1.5B by hand: embeddings 151936 * 1536 (tied: the output layer is the same tensor);
# per layer q 1536 * 1536 + 1536, k and v 1536 * 256 + 256 each, o 1536 * 1536, the MLP 3 * 1536 * 8960,
# two norms 2 * 1536 (46,797,824); 28 layers; the final norm 1536.
QWEN_1_5B_PARAMS = 151936 * 1536 + 28 * 46_797_824 + 1536


def test_the_hand_count_is_the_shape_the_benchmark_builds():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    with torch.device("meta"):
        model = Qwen2ForCausalLM(Qwen2Config(**QWEN_1_5B))
    assert QWEN_1_5B_PARAMS == 1_543_714_304
    assert sum(p.numel() for p in model.parameters()) == QWEN_1_5B_PARAMS


def test_model_tflops_is_six_flops_per_parameter_and_token():
    # 20,000 tokens/s * 6 * 1,543,714,304 = 185,245,716,480,000 FLOP/s
    assert model_tflops(20_000, QWEN_1_5B_PARAMS) == pytest.approx(185.24571648)
    assert model_tflops(20_000, QWEN_1_5B_PARAMS) / 989 == pytest.approx(0.18730608)  # share of an H100's peak


def test_lora_counts_four_flops_per_parameter_and_token():
    assert model_tflops(10_000, 1_500_000_000, flops_per_param_token=4) == pytest.approx(60.0)


@pytest.mark.slow
def test_a_tiny_run_measures_every_arm(tmp_path):
    out = tmp_path / "grpo.json"
    command = [
        sys.executable,
        str(BENCHMARKS / "grpo_step.py"),
        "--tiny",
        "--steps",
        "3",
        "--batch",
        "2",
        "--seq",
        "64",
        "--commit",
        "test",
        "--out",
        str(out),
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [row["kind"] for row in report["rows"]] == ["plain", "full", "full_fsdp", "lora"]
    for row in report["rows"]:
        assert "error" not in row, row["error"]
        assert row["tokens_per_s"] > 0 and row["steps_done"] == 3
        assert row["model_tflops"] > 0
    assert report["ratios"]["cudarl_full_vs_plain"] > 0
    assert report["settings"]["tokens_per_step"] == 2 * 64
    assert "cudarl full / plain" in run.stdout
