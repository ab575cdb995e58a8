"""Warm-start training throughput and peak GPU memory, QLoRA against bf16 LoRA, side by side, for a
model with the shape of Qwen2.5-Coder-1.5B (random weights from its config, saved to a folder and
loaded by path, so the 4-bit arm quantizes at load like a real model). Run on a GPU machine:

    uv run python benchmarks/sft.py [--steps 200] [--batch 4] [--seq 1024]
    uv run python benchmarks/sft.py --tiny --steps 4     # a smoke run of the code path on a CPU (LoRA arm only)

Each arm trains through cudarl's own path (``cudarl.sft.train.train_role``: TRL's ``SFTTrainer``,
peft LoRA rank 16 on every projection, gradient checkpointing, completion-only loss) on the same
random token rows, in its own child process so its peak memory is its own. Tokens/s is the steady
rate: the tokens of the steps after the first ``--warmup-steps`` over the time they took (the first
steps carry one-off costs: allocator growth, kernel selection); peak memory is
``torch.cuda.max_memory_allocated``. Each arm prints a progress line per step, which this process
reads as it comes: an arm cut by ``--arm-timeout`` still reports the steps it finished (marked
``cut``), so a short budget yields figures rather than nothing. Goal: QLoRA's peak at most half of
bf16 LoRA's, at no worse than 60% of its tokens/s. Prints a table; writes
``benchmarks/results/sft-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from rollout import QWEN_1_5B, TINY, build_model
from run_metadata import ROOT, run_metadata

ARMS = {"QLoRA (NF4, double quant, bf16 compute)": "4bit", "bf16 LoRA": "none"}


def _tokenizer(folder: Path):
    """A small real tokenizer trained here: the trainer needs one (padding, saving); the rows are ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(["__global__ void kernel(float* x) { x[0] = 1.0f; }"] * 10,
                                  trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<|endoftext|>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   unk_token="<unk>")
    fast.save_pretrained(folder)


def build_folder(folder: Path, shape: dict) -> None:
    import torch

    build_model(shape, "cpu", torch.bfloat16).save_pretrained(folder)  # the rollout benchmark's model
    _tokenizer(folder)


def _progress_callback():
    """A trainer callback printing ``STEP <n> <seconds since training began> <peak GiB>`` per step."""
    import torch
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0
            print(f"STEP {state.global_step} {time.perf_counter() - self.started:.4f} {peak:.4f}", flush=True)

    return Progress()


def steady_rate(progress: list[tuple[int, float, float]], warmup: int, tokens_per_step: int) -> dict:
    """Figures from an arm's progress lines (step, seconds, peak GiB): the steady tokens/s over the
    steps after ``warmup`` (all steps where too few came after it), and the peak so far."""
    if not progress:
        return {}
    base = next((p for p in progress if p[0] == warmup), None) if len(progress) > warmup + 1 else None
    first_step, first_time = (base[0], base[1]) if base else (0, 0.0)
    last_step, last_time, peak = progress[-1]
    rate = (last_step - first_step) * tokens_per_step / (last_time - first_time) if last_time > first_time else None
    return {"steps_done": last_step, "steady_from_step": first_step, "tokens_per_s": rate,
            "peak_memory_gib": peak or None}


def run_arm(folder: Path, quantization: str, steps: int, batch: int, seq: int, out: Path) -> dict:
    """One arm in this (child) process: train (a progress line per step), then the figures."""
    import torch
    from transformers import AutoTokenizer

    from cudarl.config import SftConfig
    from cudarl.sft.dataset import SftData, SftRow
    from cudarl.sft.train import train_role

    device = "cuda" if torch.cuda.is_available() else "cpu"
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    generator = torch.Generator().manual_seed(1)
    rows = [SftRow(role="generator", task_id=f"t{i}", prompt_ids=tuple(ids[:seq // 4]),
                   completion_ids=tuple(ids[seq // 4:]), origin="random")
            for i, ids in enumerate(torch.randint(2, vocab, (batch * steps, seq), generator=generator).tolist())]
    config = SftConfig(base_model=str(folder), roles=("generator",), max_steps=steps, batch_size=batch,
                       gradient_accumulation=1, max_length=seq, logging_steps=max(1, steps // 10),
                       save_steps=10 * steps, quantization=quantization, lr_scheduler="constant", warmup_ratio=0.0)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    result = train_role(config, "generator", SftData(train=rows), AutoTokenizer.from_pretrained(folder), out,
                        device, progress_bars=False, callbacks=[_progress_callback()])
    wall = time.perf_counter() - started
    history = json.loads((out / "generator" / "loss.json").read_text())["log_history"]
    runtime = next(e["train_runtime"] for e in history if "train_runtime" in e)
    return {"quantization": quantization, "steps": result.steps, "tokens": steps * batch * seq,
            "train_runtime_s": runtime, "wall_s": wall, "tokens_per_s_all_steps": steps * batch * seq / runtime,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
            "first_loss": result.first_loss, "last_loss": result.last_loss}


def run_arm_child(command: list[str], timeout: float, warmup: int, tokens_per_step: int) -> dict:
    """Run one arm's child, reading its progress lines as they come; on timeout, kill it and keep
    what the finished steps measured."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress: list[tuple[int, float, float]] = []
    found: list[str] = []
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(child.stderr), daemon=True)
    drain.start()

    def read() -> None:
        for line in child.stdout:
            if line.startswith("STEP "):
                step, seconds, peak = line.split()[1:4]
                progress.append((int(step), float(seconds), float(peak)))
            elif line.startswith("ROW "):
                found.append(line[4:])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        reader.join(5)
        row = steady_rate(progress, warmup, tokens_per_step)
        if not row:
            return {"error": f"timed out after {timeout:.0f} s before its first step"}
        return row | {"cut": f"timed out after {timeout:.0f} s"}
    reader.join(5)
    drain.join(5)
    if child.returncode != 0 or not found:
        return {"error": ("".join(errors) or "no result line")[-2000:]}
    return steady_rate(progress, warmup, tokens_per_step) | json.loads(found[-1])  # the final peak wins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup-steps", type=int, default=5, help="first steps left out of the steady rate")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--tiny", action="store_true", help="a tiny model (smoke run; on a CPU only the LoRA arm)")
    parser.add_argument("--arm-timeout", type=float, default=1200.0, help="seconds each arm may take")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        with tempfile.TemporaryDirectory() as scratch:
            row = run_arm(Path(args.folder), args.arm, args.steps, args.batch, args.seq, Path(scratch))
        print("ROW " + json.dumps(row), flush=True)
        return 0

    import torch

    shape = TINY if args.tiny else QWEN_1_5B
    arms = dict(ARMS) if torch.cuda.is_available() else {"bf16 LoRA": "none"}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        build_folder(folder, shape)
        for name, quantization in arms.items():
            command = [sys.executable, __file__, "--arm", quantization, "--folder", str(folder), "--steps",
                       str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq)]
            print(f"{name}: running (at most {args.arm_timeout:.0f} s)", file=sys.stderr, flush=True)
            row = run_arm_child(command, args.arm_timeout, args.warmup_steps, args.batch * args.seq)
            rows.append({"arm": name} | row)
    for row in rows:
        if "error" in row:
            print(f"{row['arm']:42s} FAILED: {row['error'].strip().splitlines()[-1] if row['error'].strip() else ''}")
            continue
        memory = f"{row['peak_memory_gib']:8.2f} GiB" if row.get("peak_memory_gib") else "     n/a"
        rate = f"{row['tokens_per_s']:9.0f}" if row.get("tokens_per_s") else "      n/a"
        loss = (f"loss {row['first_loss']:.3f} -> {row['last_loss']:.3f}" if "first_loss" in row
                else f"cut after step {row['steps_done']} ({row['cut']})")
        print(f"{row['arm']:42s} tokens/s {rate}  peak {memory}  {loss}")
    ratios = {}
    by = {row["arm"]: row for row in rows if "error" not in row}
    if len(by) == 2 and all(row.get("tokens_per_s") and row.get("peak_memory_gib") for row in by.values()):
        qlora, lora = by["QLoRA (NF4, double quant, bf16 compute)"], by["bf16 LoRA"]
        ratios = {"qlora_peak_vs_lora": qlora["peak_memory_gib"] / lora["peak_memory_gib"],
                  "qlora_tokens_per_s_vs_lora": qlora["tokens_per_s"] / lora["tokens_per_s"]}
        print(f"QLoRA / bf16 LoRA: peak memory {ratios['qlora_peak_vs_lora']:.2f}x (goal <= 0.5), "
              f"tokens/s {ratios['qlora_tokens_per_s_vs_lora']:.2f}x (goal >= 0.6)")
    metadata = run_metadata(args.commit)
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"sft-{datetime.now(UTC).date().isoformat()}-{(metadata['gpu'] or 'cpu').replace(' ', '-')}.json")
    settings = {"steps": args.steps, "warmup_steps": args.warmup_steps, "batch": args.batch, "seq": args.seq,
                "model_shape": shape, "lora_rank": 16, "gradient_checkpointing": True,
                "fused_loss": _fused_loss_in_use(metadata)}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows, "ratios": ratios}, indent=2))
    print(f"wrote {out}")
    return 0


def _fused_loss_in_use(metadata: dict) -> str:
    """What ``sft.fused_loss = "auto"`` chose in the arms: Liger's fused loss on a GPU where it is
    installed (peak memory differs by gigabytes between the two)."""
    import importlib.util

    return "liger" if metadata["gpu"] and importlib.util.find_spec("liger_kernel") else "none"


if __name__ == "__main__":
    raise SystemExit(main())
