"""The policy update over data-parallel GPUs: tokens/s of cudarl's GRPO update through the real
update workers (Ray Train ``TorchTrainer``, FSDP2 over ``N`` ranks, NCCL between GPUs) for a
Qwen2.5-Coder-1.5B-shaped model (random weights from its config, loaded by path), with 1, 2 and 4
GPUs side by side in one run. Run on a machine with several GPUs:

    uv run python benchmarks/update_scaling.py [--ranks 1,2,4] [--steps 6] [--batch-per-rank 4] [--seq 4096]
    uv run python benchmarks/update_scaling.py --tiny --ranks 1,2 --steps 3    # a smoke run on a CPU (gloo)

Weak scaling: each rank takes ``--batch-per-rank`` rows of ``--seq`` random token ids (prompt
``seq // 8``), so the step's batch grows with the ranks and the ideal is N times the tokens/s of
one rank. Each N runs in its own child process with its own local Ray (a crash or a timeout loses
only that N); the update workers are ``cudarl.rl.group.UpdateGroup``, fed by ``UpdateGroup.update``
as the driver feeds them. Two rates per N: ``tokens/s`` of the optimizer step alone (measured in
rank 0 around ``PolicyUpdater.step``: forward, backward, clipping, AdamW, the metrics' all-reduce),
and ``round trip tokens/s`` of the whole ``update`` call (samples through the queues, the step, the
new weights gathered to rank 0 and put in the object store, the probe). Steady rates: the steps
after ``--warmup-steps``. LoRA (both roles' adapters, the RL default) unless ``--full``. The
samples' old log-probs are a constant (the step's cost does not depend on them). Goal (issue on
several GPUs): at least 1.8x the one-GPU tokens/s on 2 GPUs.

Prints a table; writes ``benchmarks/results/update_scaling-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rollout import QWEN_1_5B, TINY, build_model
from run_metadata import ROOT, run_metadata

ROLES = ("generator", "optimizer")


def run_ranks(folder: Path, ranks: int, steps: int, batch_per_rank: int, seq: int, full: bool) -> None:
    """One N in this (child) process: a local Ray, the update workers, ``steps`` updates; a line
    ``STEP <n> <step seconds> <round trip seconds>`` after each."""
    import ray
    import torch

    from cudarl.rl.batch import TrainSample
    from cudarl.rl.group import UpdateGroup
    from cudarl.rl.update import UpdaterSpec

    gpus = torch.cuda.device_count()
    ray.init(address="local", num_cpus=ranks + 2, num_gpus=gpus, include_dashboard=False, logging_level="ERROR")
    adapters = () if full else ROLES
    spec = UpdaterSpec(model=str(folder), adapters=adapters, micro_batch=batch_per_rank, pad_id=0,
                       dtype="bfloat16" if gpus else "float32", learning_rate=1e-5)
    group = UpdateGroup(spec, ranks=ranks, gpus_per_rank=1.0 if gpus else 0.0)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    rows = torch.randint(2, vocab, (ranks * batch_per_rank, seq), generator=torch.Generator().manual_seed(1))
    prompt = max(1, seq // 8)
    samples = [TrainSample(token_ids=tuple(row), prompt_length=prompt, old_logprobs=(-1.0,) * (seq - prompt),
                           advantage=(1.0, -1.0, 0.5, -0.5)[index % 4], weights_version=0,
                           adapter=adapters[index % len(adapters)] if adapters else None)
               for index, row in enumerate(rows.tolist())]
    try:
        for number in range(1, steps + 1):
            started = time.perf_counter()
            result = group.update(number - 1, samples)
            print(f"STEP {number} {result.step_seconds:.4f} {time.perf_counter() - started:.4f} "
                  f"{result.metrics['loss']:.6f}", flush=True)
    finally:
        group.stop()
        ray.shutdown()


def steady(lines: list[tuple[int, float, float]], warmup: int, tokens_per_step: int) -> dict:
    """Tokens/s over the steps after ``warmup`` (all of them where too few came after it)."""
    kept = [line for line in lines if line[0] > warmup] or lines
    if not kept:
        return {"steps_done": 0, "tokens_per_s": None, "round_trip_tokens_per_s": None}
    step_s, trip_s = sum(line[1] for line in kept), sum(line[2] for line in kept)
    return {"steps_done": lines[-1][0], "steady_steps": len(kept), "step_s": step_s / len(kept),
            "round_trip_s": trip_s / len(kept), "tokens_per_s": tokens_per_step * len(kept) / step_s,
            "round_trip_tokens_per_s": tokens_per_step * len(kept) / trip_s}


def run_child(command: list[str], timeout: float) -> tuple[list[tuple[int, float, float]], list[float], str | None]:
    """The child's STEP lines and losses, read as they come (a child cut by ``timeout`` keeps its steps)."""
    lines: list[tuple[int, float, float]] = []
    losses: list[float] = []
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    deadline, tail = time.monotonic() + timeout, []
    for line in child.stdout:
        if line.startswith("STEP "):
            _, number, step_s, trip_s, loss = line.split()
            lines.append((int(number), float(step_s), float(trip_s)))
            losses.append(float(loss))
        else:
            tail = (tail + [line.rstrip()])[-5:]
        if time.monotonic() > deadline:
            child.kill()
            return lines, losses, f"timed out after {timeout:g} s"
    code = child.wait()
    return lines, losses, None if code == 0 else f"exit {code}: " + " | ".join(tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="1,2,4", help="GPU counts to compare (more than the machine has: left out)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--batch-per-rank", type=int, default=4)
    parser.add_argument("--seq", type=int, default=None, help="tokens per row (default 4096; 256 with --tiny)")
    parser.add_argument("--full", action="store_true", help="full fine-tuning instead of two LoRA adapters")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke run; a CPU is fine)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds each N may take")
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    seq = args.seq or (256 if args.tiny else 4096)
    if args.child:
        run_ranks(Path(args.folder), args.child, args.steps, args.batch_per_rank, seq, args.full)
        return 0
    import torch

    gpus = torch.cuda.device_count()
    wanted = [int(n) for n in args.ranks.split(",")]
    counts = [n for n in wanted if gpus == 0 or n <= gpus]
    shape = TINY if args.tiny else QWEN_1_5B
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        model = build_model(shape, "cpu", torch.bfloat16)  # the rollout benchmark's model
        model.save_pretrained(folder)  # the update workers read only the model: no tokenizer needed
        del model
        for ranks in counts:
            print(f"{ranks} rank(s): running (at most {args.timeout:g} s)", flush=True)
            command = [sys.executable, __file__, "--child", str(ranks), "--folder", str(folder), "--steps",
                       str(args.steps), "--batch-per-rank", str(args.batch_per_rank), "--seq", str(seq)]
            command += ["--full"] if args.full else []
            lines, losses, cut = run_child(command, args.timeout)
            row = {"ranks": ranks, **steady(lines, args.warmup_steps, ranks * args.batch_per_rank * seq),
                   "losses": losses, "cut": cut}
            rows.append(row)
    base = next((r["tokens_per_s"] for r in rows if r["ranks"] == 1 and r["tokens_per_s"]), None)
    print(f"{'ranks':>5} {'tokens/s':>10} {'scaling':>8} {'round trip tokens/s':>20}")
    for row in rows:
        scaling = row["tokens_per_s"] / base if base and row["tokens_per_s"] else None
        row["scaling"] = scaling
        print(f"{row['ranks']:>5} {row['tokens_per_s'] or 0:>10.0f} {scaling or 0:>7.2f}x "
              f"{row['round_trip_tokens_per_s'] or 0:>20.0f}" + (f"  ({row['cut']})" if row["cut"] else ""))
    metadata = run_metadata(args.commit)
    metadata["gpus"] = gpus
    gpu_name = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"update_scaling-{datetime.now(UTC).date().isoformat()}-{gpu_name}.json")
    settings = {"ranks": counts, "skipped_ranks": [n for n in wanted if n not in counts], "steps": args.steps,
                "warmup_steps": args.warmup_steps, "batch_per_rank": args.batch_per_rank, "seq": seq,
                "full_finetune": args.full, "model_shape": shape}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
