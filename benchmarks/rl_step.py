"""The time of whole RL steps split by phase, for a model with the shape of Qwen2.5-Coder-1.5B
(random weights) on one GPU shared by the policy engine, a bench worker and the update worker:
``cudarl.rl.driver.run_training``, the loop ``cudarl train`` runs, for ``--steps`` steps. Run on a
GPU machine:

    uv run python benchmarks/rl_step.py [--steps 3] [--engine auto] [--max-new-tokens 1024]
    uv run python benchmarks/rl_step.py --tiny --steps 2      # a smoke run on a CPU (tiny model)

What it measures: each step's seconds as the driver records them in ``steps.jsonl`` (rollout:
generation of every turn; judge: the tester pool's calls; update: the update worker's job;
sync: weights to the engine and its check; the whole step), and the tokens generated. The first
step includes the engines' warm-up (CUDA graphs, allocator), so the table shows it apart from the
mean of the later ones.

What it does not: a random model writes no kernels, so every answer is a format error and the
judge phase is near zero here; the judge's cost with real kernels is in the kernel-domain learning
run (``scripts/kernel_learning_gpu.sh``, the same ``seconds`` records). The tokenizer is a byte-level
BPE trained here on the suite's prompts, its vocabulary padded to the model's with filler tokens
(no hub here), so prompts are a little longer in tokens than Qwen's tokenizer makes them.

Prints a table; writes ``benchmarks/results/rl_step-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rollout import QWEN_1_5B, TINY, build_model
from run_metadata import ROOT, run_metadata

PHASES = ("rollout", "judge", "update", "sync", "step")
SPECIAL = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tokenizer(texts: list[str], vocab_size: int, trained: int = 4000):
    """A byte-level BPE tokenizer trained on ``texts`` (``trained`` entries), then padded to
    ``vocab_size`` with filler tokens (ASCII, so they decode), so that every id the model can
    sample decodes; ChatML template, ``<|im_end|>`` its end of turn."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=min(trained, vocab_size), special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    state = json.loads(tokenizer.to_str())
    vocab = state["model"]["vocab"]
    for index in range(len(vocab), vocab_size):
        vocab[f"fill{index}"] = index
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(state)), eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<unk>")
    fast.chat_template = CHATML
    return fast


def build_policy_folder(folder: Path, shape: dict, texts: list[str]) -> int:
    """Model (random weights, bf16) and tokenizer saved in ``folder``; the parameter count."""
    import torch

    tokenizer = build_tokenizer(texts, shape["vocab_size"])
    tokenizer.save_pretrained(folder)
    model = build_model(shape, "cpu", torch.bfloat16)  # the rollout benchmark's model, ended by our end of turn
    for config in (model.config, model.generation_config):
        config.eos_token_id, config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def phase_table(lines: list[dict]) -> dict:
    """Per phase: the first step's seconds and the mean of the later steps' (None with one step)."""
    table = {}
    for phase in PHASES:
        values = [float(line["seconds"].get(phase, 0.0)) for line in lines]
        table[phase] = {"first": values[0] if values else None,
                        "later_mean": statistics.fmean(values[1:]) if len(values) > 1 else None}
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tasks", default="vector_add,softmax", help="suite tasks, comma-separated")
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--engine", choices=["auto", "hf", "vllm"], default="auto")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke run; a CPU is fine)")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.steps < 1 or args.group_size < 2 or args.max_new_tokens < 1:
        parser.error("--steps and --max-new-tokens must be at least 1, --group-size at least 2")

    import ray
    import torch

    from cudarl.agents.prompts import generator_prompt, system_prompt
    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training
    from cudarl.tasks.builtin import load_suite

    gpu = torch.cuda.is_available()
    wanted = args.tasks.split(",")
    tasks = [task for task in load_suite() if task.id in wanted]
    if len(tasks) != len(wanted):
        parser.error(f"unknown task(s): {sorted(set(wanted) - {task.id for task in tasks})}")
    shape = TINY if args.tiny else QWEN_1_5B
    texts = [system_prompt()] + [generator_prompt(task) for task in load_suite()]
    with tempfile.TemporaryDirectory() as scratch:
        folder, run = Path(scratch) / "model", Path(scratch) / "run"
        started = time.perf_counter()
        params = build_policy_folder(folder, shape, texts * 3)
        print(f"model and tokenizer built in {time.perf_counter() - started:.0f} s ({params / 1e9:.2f} B parameters)",
              flush=True)
        train = {"model": str(folder), "engine": args.engine, "steps": args.steps,
                 "tasks_per_step": args.tasks_per_step, "group_size": args.group_size, "optimizer_turns": 1,
                 "max_new_tokens": args.max_new_tokens, "checkpoint_every": args.steps + 1,
                 "dtype": "bfloat16" if gpu else "float32"}
        pool = {"min_compile_workers": 1, "max_compile_workers": 2, "min_bench_workers": 1, "max_bench_workers": 1}
        if gpu:
            train |= {"gpus_per_rank": 0.25, "vllm_gpu_memory": 0.35}
            pool |= {"gpus_per_bench_worker": 0.1}
        config = CudarlConfig.model_validate({"pool": pool, "train": train, "curriculum": {"tiers": ["easy"]}})
        try:
            ray.init(address="local", num_cpus=8, num_gpus=1 if gpu else 0, include_dashboard=False,
                     namespace="cudarl-bench", logging_level="WARNING")
            judge = start_pool(config).judge
            run_training(config, run, tasks, judge,
                         progress=lambda record: print(f"step {record.step} done", flush=True))
        finally:
            ray.shutdown()
        lines = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    table = phase_table(lines)
    print(f"{'phase':10s} {'first step s':>13s} {'later mean s':>13s}")
    for phase, row in table.items():
        later = f"{row['later_mean']:13.2f}" if row["later_mean"] is not None else f"{'n/a':>13s}"
        print(f"{phase:10s} {row['first']:13.2f} {later}")
    metadata = run_metadata(args.commit)
    machine = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"rl_step-{datetime.now(UTC).date()}-{machine}.json")
    settings = vars(args) | {"model_shape": shape, "params": params, "config": config.train.model_dump(mode="json")}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "phases": table,
                               "steps": [{"seconds": line["seconds"], "stats": line.get("stats")} for line in lines]},
                              indent=2, default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
