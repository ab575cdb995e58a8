"""The policy update's cost: tokens/s and peak GPU memory of cudarl's GRPO update step against a plain
Hugging Face training step, side by side, for a model with the shape of Qwen2.5-Coder-1.5B (random
weights from its config, saved to a folder and loaded by path as ``PolicyUpdater`` loads a real
model; bf16 on a GPU, fp32 on a CPU). Run on a GPU machine:

    uv run python benchmarks/grpo_step.py [--steps 12] [--batch 4] [--seq 4096]
    uv run python benchmarks/grpo_step.py --tiny --steps 4     # a smoke run of every arm on a CPU (256 tokens a row)

Arms, each on the same ``--batch`` rows of ``--seq`` random token ids, in its own child process (so
its peak memory is its own, and a crash, an out-of-memory error or a timeout loses only that arm):

- ``plain``: ``model(input_ids, labels=input_ids)`` forward, backward, ``torch.optim.AdamW`` step,
  ``zero_grad``; every weight trained, no process group.
- ``cudarl full``: ``cudarl.rl.update.PolicyUpdater`` with no adapters (every weight trained), in a
  one-process group (NCCL on a GPU, gloo on a CPU; FSDP2 left out at one rank, the default),
  driven as ``train_loop_per_worker`` drives it on one rank: ``plan_step(ranks=1)``, then
  ``PolicyUpdater.step`` per step (one micro-batch of ``--batch`` samples: fp32 log-probs of the
  response tokens, verl's PPO clip-high loss, gradient clipping, AdamW).
  Samples: prompt ``--seq // 8`` tokens, the rest the response.
- ``cudarl full, FSDP2 on 1 rank``: the same with ``UpdaterSpec.shard_single_rank`` (the model wrapped
  in FSDP2 although one rank has nothing to shard; off by default, this arm is why).
- ``cudarl LoRA``: the same with a LoRA adapter per role (rank 16 on every projection, the trainer's
  defaults), the samples split between the two adapters (one micro-batch and one optimizer step each).

Tokens/s counts every token of the batch (prompt and response, ``--batch * --seq`` per step) and is
the steady rate: the steps after the first ``--warmup-steps`` over the time they took. Each arm
prints a progress line per step, read here as it comes: an arm cut by ``--arm-timeout`` still reports
the steps it finished (marked ``cut``). Peak memory is ``torch.cuda.max_memory_allocated`` over the
steps (reset after loading: it includes the weights and optimizer state, not the load's transients).
Model TFLOP/s is ``6 * params * tokens/s`` for the full arms (forward 2, backward 4 FLOPs per
parameter and token; attention's score and value products are left out, so it understates at long
sequences) and ``4 * params * tokens/s`` for LoRA (no gradients of the frozen base weights; the
adapters' own small products left out), given also as a share of ``--peak-tflops`` (989: H100 and
H200 bf16 dense). Gradient checkpointing is off in every arm: ``UpdaterSpec`` has no switch for it.
Goal: cudarl's full step at no less than 90% of the plain step's tokens/s.

The time of one whole RL step split by phase is not measured here: ``cudarl train`` records it for
every step, in the ``seconds`` record of each line of ``steps.jsonl`` in its output folder (rollout,
update, sync and the whole step; judge too where the driver times it apart from rollout). Read the
split from such a run.

``--arms plain,full,plain,full``: only these arms, in this order; an arm named twice runs twice and
its ratio uses the mean of its runs (interleaving the arms spreads a machine's drift over both).

``--profile-dir DIR``: each arm then runs one more step (not timed) under torch's profiler and
writes its operators by total time to ``DIR/<arm>.txt``, to see where the arms differ.

Prints a table; writes ``benchmarks/results/grpo_step-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rollout import QWEN_1_5B, TINY, build_model
from run_metadata import ROOT, run_metadata
from sft import run_arm_child  # reads the progress lines; the steady rate is sft.steady_rate's

ARMS = {"plain HF step (full)": "plain", "cudarl GRPO step (full)": "full",
        "cudarl GRPO step (full, FSDP2 on 1 rank)": "full_fsdp", "cudarl GRPO step (LoRA x2)": "lora"}
ROLES = ("generator", "optimizer")
ADVANTAGES = (1.0, 0.5, -1.0, -0.5)  # cycled over the samples: nonzero, both signs within each adapter's half
LEARNING_RATE = 1e-5  # UpdaterSpec's default, used by the plain arm too
FLOPS_PER_PARAM_TOKEN = {"plain": 6, "full": 6, "full_fsdp": 6, "lora": 4}


def model_tflops(tokens_per_s: float, params: int, flops_per_param_token: int = 6) -> float:
    """The model's TFLOP/s estimate: ``flops_per_param_token * params * tokens/s / 1e12``."""
    return flops_per_param_token * params * tokens_per_s / 1e12


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _plain_arm(folder: Path, ids, device: str, dtype: str):
    """A plain Hugging Face training step on ``ids``; returns the step function (its loss)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    ids = ids.to(device)
    mask = torch.ones_like(ids)  # cudarl's step passes one too

    def step() -> float:
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def _cudarl_arm(folder: Path, ids, device: str, dtype: str, lora: bool, fsdp: bool = False):
    """cudarl's update step on one rank, as ``train_loop_per_worker`` runs it; returns the step function."""
    import torch.distributed as dist

    from cudarl.rl.batch import TrainSample
    from cudarl.rl.group import plan_step
    from cudarl.rl.update import PolicyUpdater, UpdaterSpec

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)
    batch, seq = ids.shape
    adapters = ROLES if lora else ()
    spec = UpdaterSpec(
        model=str(folder), adapters=adapters, learning_rate=LEARNING_RATE, micro_batch=batch, pad_id=0, dtype=dtype,
        shard_single_rank=fsdp,
    )
    updater = PolicyUpdater(spec, device=device)
    prompt = max(1, seq // 8)
    samples = []
    for index, row in enumerate(ids.tolist()):
        adapter = adapters[index % len(adapters)] if adapters else None
        # The old log-probs are the updater's own (a no-grad pass per sample, before timing): what an
        # engine reports for on-policy samples, so the first step's ratio is 1 as in a real first
        # update. Their values do not change the step's cost (clipping only masks the gradient).
        old = updater.probe_logprobs(row, prompt, adapter=adapter)
        samples.append(
            TrainSample(
                token_ids=tuple(row),
                prompt_length=prompt,
                old_logprobs=tuple(old),
                advantage=ADVANTAGES[index % len(ADVANTAGES)],
                weights_version=0,
                adapter=adapter,
            )
        )
    shards, plan = plan_step(samples, ranks=1, micro_batch=spec.micro_batch, by_adapter=bool(adapters))

    def step() -> float:
        return updater.step(shards[0], plan)["loss"]

    return step


def _profile_step(step, device: str, path: Path) -> None:
    """One more step (not timed) under torch's profiler; its operators by total time to ``path``:
    where an arm's time goes, to compare arms op by op."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as profiler:
        step()
        if device == "cuda":
            torch.cuda.synchronize()
    key = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profiler.key_averages().table(sort_by=key, row_limit=30))


def run_arm(arm: str, folder: Path, steps: int, batch: int, seq: int, profile_to: Path | None = None) -> dict:
    """One arm in this (child) process: build, then ``steps`` steps on the same batch, a progress
    line ``STEP <n> <seconds since the first step began> <peak GiB>`` after each; the figures."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = "bfloat16" if device == "cuda" else "float32"
    if device == "cuda":
        torch.cuda.set_device(0)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    ids = torch.randint(2, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
    started = time.perf_counter()
    step = (
        _plain_arm(folder, ids, device, dtype)
        if arm == "plain"
        else _cudarl_arm(folder, ids, device, dtype, lora=arm == "lora", fsdp=arm == "full_fsdp")
    )
    build_s = time.perf_counter() - started
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    losses, peak = [], 0.0
    begun = time.perf_counter()
    for number in range(1, steps + 1):
        losses.append(step())
        if device == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"STEP {number} {time.perf_counter() - begun:.4f} {peak:.4f}", flush=True)
    if profile_to is not None:
        _profile_step(step, device, profile_to)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return {
        "dtype": dtype,
        "device": device,
        "build_s": build_s,
        "steps_s": time.perf_counter() - begun,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_memory_gib": peak or None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup-steps", type=int, default=3, help="first steps left out of the steady rate")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=None, help="tokens per row (default 4096; 256 with --tiny)")
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=989.0,
        help="the GPU's dense bf16 peak, for the share of it (989: H100 and H200)",
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke run; a CPU is fine)")
    parser.add_argument("--arm-timeout", type=float, default=900.0, help="seconds each arm may take")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    parser.add_argument("--profile-dir", default=None, help="profile one extra step of each arm; tables here")
    parser.add_argument("--arms", default=",".join(ARMS.values()),
                        help=f"comma-separated arms to run, in this order (default all: {','.join(ARMS.values())})")
    parser.add_argument("--arm", choices=sorted(set(ARMS.values())), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.seq = args.seq or (256 if args.tiny else 4096)
    if args.steps < 1 or args.batch < 1 or args.seq < 2:
        parser.error("--steps and --batch must be at least 1, --seq at least 2")
    chosen = [kind.strip() for kind in args.arms.split(",") if kind.strip()]
    unknown = sorted(set(chosen) - set(ARMS.values()))
    if unknown or not chosen:
        parser.error(f"--arms: unknown arm(s) {unknown}; choose from {','.join(ARMS.values())}")
    if args.arm:
        profile_to = Path(args.profile_dir) / f"{args.arm}.txt" if args.profile_dir else None
        row = run_arm(args.arm, Path(args.folder), args.steps, args.batch, args.seq, profile_to)
        print("ROW " + json.dumps(row), flush=True)
        return 0

    import torch

    shape = TINY if args.tiny else QWEN_1_5B
    tokens_per_step = args.batch * args.seq
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        model = build_model(shape, "cpu", torch.bfloat16)  # the rollout benchmark's model
        params = sum(p.numel() for p in model.parameters())  # tied embeddings counted once
        model.save_pretrained(folder)  # PolicyUpdater reads only the model: no tokenizer needed
        del model
        names = {kind: name for name, kind in ARMS.items()}
        for name, arm in ((names[kind], kind) for kind in chosen):
            sizes = ["--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq)]
            command = [sys.executable, __file__, "--arm", arm, "--folder", str(folder), *sizes]
            command += ["--profile-dir", str(Path(args.profile_dir).resolve())] if args.profile_dir else []
            print(f"{name}: running (at most {args.arm_timeout:.0f} s)", file=sys.stderr, flush=True)
            row = {"arm": name, "kind": arm} | run_arm_child(
                command, args.arm_timeout, args.warmup_steps, tokens_per_step
            )
            if row.get("tokens_per_s"):
                flops = FLOPS_PER_PARAM_TOKEN[arm]
                row["model_tflops"] = model_tflops(row["tokens_per_s"], params, flops)
                row["share_of_peak"] = row["model_tflops"] / args.peak_tflops
                row["flops_formula"] = f"{flops} * params * tokens/s"
            rows.append(row)
    print(f"{'arm':40s} {'tokens/s':>10s} {'peak GiB':>9s} {'TFLOP/s':>8s} {'of peak':>8s}")
    for row in rows:
        if "error" in row:
            last = row["error"].strip().splitlines()[-1] if row["error"].strip() else ""
            print(f"{row['arm']:40s} FAILED: {last}")
            continue
        rate = f"{row['tokens_per_s']:10.0f}" if row.get("tokens_per_s") else f"{'n/a':>10s}"
        memory = f"{row['peak_memory_gib']:9.2f}" if row.get("peak_memory_gib") else f"{'n/a':>9s}"
        tflops = f"{row['model_tflops']:8.2f}" if "model_tflops" in row else f"{'n/a':>8s}"
        share = f"{row['share_of_peak']:8.1%}" if "share_of_peak" in row else f"{'n/a':>8s}"
        note = f"  cut after step {row['steps_done']} ({row['cut']})" if "cut" in row else ""
        print(f"{row['arm']:40s} {rate} {memory} {tflops} {share}{note}")
    runs: dict[str, list[dict]] = {}  # an arm named twice in --arms ran twice
    for row in rows:
        if row.get("tokens_per_s"):
            runs.setdefault(row["kind"], []).append(row)
    by = {kind: {"tokens_per_s": sum(r["tokens_per_s"] for r in same) / len(same),  # mean rate, largest peak
                 "peak_memory_gib": max((r["peak_memory_gib"] for r in same if r.get("peak_memory_gib")), default=None)}
          for kind, same in runs.items()}
    ratios = {}
    if "plain" in by:
        plain = by["plain"]
        for kind in ("full", "full_fsdp", "lora"):
            if kind in by:
                ratios[f"cudarl_{kind}_vs_plain"] = by[kind]["tokens_per_s"] / plain["tokens_per_s"]
                if by[kind].get("peak_memory_gib") and plain.get("peak_memory_gib"):
                    ratios[f"cudarl_{kind}_peak_vs_plain"] = by[kind]["peak_memory_gib"] / plain["peak_memory_gib"]
    if "cudarl_full_vs_plain" in ratios:
        print(f"cudarl full / plain: tokens/s {ratios['cudarl_full_vs_plain']:.2f}x (goal >= 0.9)")
    if "cudarl_lora_vs_plain" in ratios:
        print(f"cudarl LoRA / plain: tokens/s {ratios['cudarl_lora_vs_plain']:.2f}x")
    metadata = run_metadata(args.commit)
    machine = (metadata["gpu"] or "cpu").replace(" ", "-")
    filename = f"grpo_step-{datetime.now(UTC).date().isoformat()}-{machine}.json"
    out = Path(args.out or ROOT / "benchmarks" / "results" / filename)
    settings = {
        "steps": args.steps,
        "arms": chosen,
        "warmup_steps": args.warmup_steps,
        "batch": args.batch,
        "seq": args.seq,
        "prompt_length": max(1, args.seq // 8),
        "tokens_per_step": tokens_per_step,
        "model_shape": shape,
        "params": params,
        "dtype": "bfloat16" if torch.cuda.is_available() else "float32",
        "learning_rate": LEARNING_RATE,
        "lora": "rank 16, alpha 32, every projection (LoraSettings())",
        "advantages": list(ADVANTAGES),
        "old_logprobs": "the updater's own (probe_logprobs, before timing)",
        "gradient_checkpointing": False,
        "peak_tflops": args.peak_tflops,
    }
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows, "ratios": ratios}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
