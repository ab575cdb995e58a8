"""Generation throughput and weight-update times side by side, for a model with the shape of
Qwen2.5-Coder-1.5B (random weights from its config, bf16). Run on a GPU machine:

    uv run python benchmarks/rollout.py [--batches 64 256] [--new-tokens 256] [--prompt-tokens 128]
    uv run python benchmarks/rollout.py --tiny     # a smoke run of the transformers arms on a tiny model (CPU)

Arms: plain ``model.generate``; cudarl's transformers engine with each decoder (the library's
continuous batching, with CUDA graphs forced on where there is a GPU; and ``generate`` with a
static cache and a compiled decode step, ``cudarl.rollout.hf_static``); raw
``vllm.LLM.generate`` and cudarl's vLLM engine on the same ``LLM`` instance (so the only
difference is cudarl's wrapper); weight updates: a full update and a LoRA adapter update
(rank 16 on every projection) through each engine, with the probe's scoring timed apart.
The vLLM arms run in child processes (one ``LLM`` per process, GPU memory freed between).
Every generation arm makes exactly ``--new-tokens`` per sequence (end-of-sequence ignored) from
the same random prompts, sampling at temperature 1. Tokens/s counts generated tokens over wall
time; each engine arm runs every batch twice and the second call is timed (the first compiles or
captures graphs for that shape, as the first step of an RL run would: its time is in the JSON).
Prints a table; writes ``benchmarks/results/rollout-<date>-<gpu>.json`` with commit, versions, settings.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
from run_metadata import ROOT, run_metadata

QWEN_1_5B = {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2, "max_position_embeddings": 32768,
             "tie_word_embeddings": True, "rope_theta": 1000000.0}
TINY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048}
LORA_RANK = 16


def build_model(shape: dict, device: str, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**shape, eos_token_id=None, pad_token_id=0)
    return Qwen2ForCausalLM(config).to(device=device, dtype=dtype).eval()


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def plain_generate(model, prompts: list[list[int]], new_tokens: int) -> float:
    ids = torch.tensor(prompts, device=model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=True, temperature=1.0, pad_token_id=0)
    _sync()
    return time.perf_counter() - started


def engine_generate(engine, prompts: list[list[int]], new_tokens: int) -> float:
    from cudarl.rollout.engine import SamplingSettings

    started = time.perf_counter()
    generations = engine.generate(prompts, SamplingSettings(max_new_tokens=new_tokens, seed=0))
    seconds = time.perf_counter() - started
    short = [g for g in generations if len(g.token_ids) != new_tokens]
    if short:
        raise RuntimeError(f"{len(short)} generations stopped early: the arms would not be comparable")
    return seconds


def random_adapter(engine, name: str) -> dict:
    """The adapter's peft state dict with random values (what a trainer would send)."""
    from peft import get_peft_model_state_dict

    generator = torch.Generator().manual_seed(7)
    weights = get_peft_model_state_dict(engine.lora.peft, adapter_name=name)
    return {key: (torch.randn(t.shape, generator=generator) * 0.01).to(t.dtype) for key, t in weights.items()}


def update_times(engine, model, lora_engine=None, adapter_weights: dict | None = None) -> dict:
    """Seconds for a full update (every tensor of the model) and an adapter update, and for the
    probe's scoring (a 256-token sequence), each through the engine's checked path."""
    from cudarl.rollout.engine import LoraSettings

    times = {}
    if engine is not None:
        weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        sync = engine.update_weights(weights, version=1)
        _sync()
        times["full_update_s"] = sync.seconds
    lora_engine = lora_engine or engine
    if adapter_weights is None:
        lora_engine.add_adapter("generator", LoraSettings(rank=LORA_RANK, alpha=2 * LORA_RANK))
        adapter_weights = random_adapter(lora_engine, "generator")
    sync = lora_engine.update_weights(adapter_weights, version=1, adapter="generator")
    _sync()
    times["adapter_update_s"] = sync.seconds
    times["adapter_tensors"] = sync.tensors
    ids = list(range(1, 257))
    started = time.perf_counter()
    lora_engine.score(ids, 128, adapter="generator")
    _sync()
    times["probe_score_s"] = time.perf_counter() - started
    return times


def vllm_part(part: str, folder: Path, prompts_file: Path, new_tokens: int, out: Path) -> None:
    """One vLLM configuration in this (child) process; writes its rows to ``out``."""
    from cudarl.rollout.vllm_engine import VLLMEngine, VLLMSettings

    settings = VLLMSettings(gpu_memory_utilization=0.6, max_model_len=2048, max_num_seqs=256,
                            max_lora_rank=LORA_RANK, load_format="dummy")
    started = time.perf_counter()
    engine = VLLMEngine(str(folder), settings, lora=part == "lora", eos_token_ids=[])
    result: dict = {"startup_s": time.perf_counter() - started, "rows": []}
    if part == "lora":
        from peft import get_peft_model_state_dict

        from cudarl.rollout.hf import HFEngine

        helper = HFEngine(build_model(QWEN_1_5B, "cpu", torch.bfloat16))  # only for the adapter's key names
        from cudarl.rollout.engine import LoraSettings

        helper.add_adapter("generator", LoraSettings(rank=LORA_RANK, alpha=2 * LORA_RANK))
        keys = get_peft_model_state_dict(helper.lora.peft, adapter_name="generator")
        weights = {k: (torch.randn(t.shape) * 0.01).to(torch.bfloat16) for k, t in keys.items()}
        engine.add_adapter("generator", LoraSettings(rank=LORA_RANK, alpha=2 * LORA_RANK))
        result |= update_times(None, None, lora_engine=engine, adapter_weights=weights)
    else:
        from vllm import SamplingParams, TokensPrompt

        prompts = json.loads(prompts_file.read_text())
        params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens, temperature=1.0, ignore_eos=True,
                                logprobs=0, seed=0)

        def raw(batch: list[list[int]]) -> float:
            begun = time.perf_counter()
            engine.llm.generate([TokensPrompt(prompt_token_ids=p) for p in batch], params, use_tqdm=False)
            return time.perf_counter() - begun

        for batch in prompts:
            raw(batch[:8]), engine_generate(engine, batch[:8], new_tokens)  # warm-up
            for arm, run in (("raw vllm.LLM.generate", raw), ("cudarl vLLM engine",
                                                             lambda b: engine_generate(engine, b, new_tokens))):
                result["rows"].append({"arm": arm, "batch": len(batch), "seconds": run(batch)})
        model_weights = build_model(QWEN_1_5B, "cuda", torch.bfloat16)
        weights = {name: tensor for name, tensor in model_weights.state_dict().items()}
        sync = engine.update_weights(weights, version=1)
        _sync()
        result["full_update_s"] = sync.seconds
    out.write_text(json.dumps(result))


def run_vllm(part: str, folder: Path, prompts: list[list[list[int]]], new_tokens: int, timeout_s: float) -> dict:
    """One vLLM part in a child process; past ``timeout_s`` it is killed, having printed every
    thread's stack shortly before (so a stall in the engine's start-up says where it was)."""
    work = ROOT / ".bench-model" / "parts"
    work.mkdir(parents=True, exist_ok=True)
    (work / "prompts.json").write_text(json.dumps(prompts))
    out = work / f"{part}.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--vllm-part", part, "--new-tokens", str(new_tokens),
               "--part-timeout", str(timeout_s)]
    try:
        child = subprocess.run(command, cwd=ROOT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"the vLLM {part} part did not finish in {timeout_s:.0f} s (stacks above)"}
    if child.returncode != 0 or not out.exists():
        return {"error": f"the vLLM {part} part exited with {child.returncode}"}
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke run, CPU is fine)")
    parser.add_argument("--skip-plain", action="store_true", help="leave out plain model.generate (slow)")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    parser.add_argument("--part-timeout", type=float, default=1800.0,
                        help="seconds each vLLM part (a child process) may take before it is killed")
    parser.add_argument("--vllm-part", choices=["generate", "lora"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = ROOT / ".bench-model"  # ignored by git; vLLM loads the config from a folder
    if args.vllm_part:
        faulthandler.dump_traceback_later(max(10.0, args.part_timeout - 15.0))
        vllm_part(args.vllm_part, folder, folder / "parts" / "prompts.json", args.new_tokens,
                  folder / "parts" / f"{args.vllm_part}.json")
        return 0

    from cudarl.rollout.engine import vllm_installed
    from cudarl.rollout.hf import HFEngine

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = TINY if args.tiny else QWEN_1_5B
    model = build_model(shape, device, torch.bfloat16 if device == "cuda" else torch.float32)
    generator = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, shape["vocab_size"], (batch, args.prompt_tokens), generator=generator).tolist()
               for batch in args.batches]
    rows = []
    # The library leaves CUDA graphs off for attention that needs a mask (sdpa); on a GPU the
    # continuous-batching arm forces them on (the faster of the two, measured earlier).
    batching = {"use_cuda_graph": True} if device == "cuda" else {}
    hf_arms = {"cudarl HF engine, continuous batching": HFEngine(model, eos_token_id=[], pad_token_id=0,
                                                                  continuous_batching=batching, decoder="continuous"),
               "cudarl HF engine, static compiled": HFEngine(model, eos_token_id=[], pad_token_id=0, decoder="static")}
    engine = hf_arms["cudarl HF engine, static compiled"]
    for batch in prompts:
        if not args.skip_plain:
            rows.append({"arm": "plain model.generate", "batch": len(batch),
                         "seconds": plain_generate(model, batch, args.new_tokens)})
        for name, arm in hf_arms.items():
            first = engine_generate(arm, batch, args.new_tokens)  # compiles / captures for this shape
            rows.append({"arm": name, "batch": len(batch), "first_call_seconds": first,
                         "seconds": engine_generate(arm, batch, args.new_tokens)})
    updates = {"hf": update_times(engine, model)}
    del engine, model, hf_arms
    if device == "cuda":
        torch.cuda.empty_cache()
    if not args.tiny and device == "cuda" and vllm_installed():
        folder.mkdir(exist_ok=True)
        build_model(QWEN_1_5B, "cpu", torch.bfloat16).config.save_pretrained(folder)
        generate = run_vllm("generate", folder, prompts, args.new_tokens, args.part_timeout)
        rows += generate.pop("rows", [])
        updates["vllm"] = generate | {"lora": run_vllm("lora", folder, prompts, args.new_tokens, args.part_timeout)}
    for row in rows:
        row["tokens_per_s"] = row["batch"] * args.new_tokens / row["seconds"]
        print(f"{row['arm']:40s} batch {row['batch']:4d}  tokens/s {row['tokens_per_s']:10.0f}", flush=True)
    print(json.dumps(updates, indent=1))
    metadata = run_metadata(args.commit)
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"rollout-{datetime.now(UTC).date().isoformat()}-{(metadata['gpu'] or 'cpu').replace(' ', '-')}.json")
    settings = {"batches": args.batches, "new_tokens": args.new_tokens, "prompt_tokens": args.prompt_tokens,
                "model_shape": shape, "device": device, "lora_rank": LORA_RANK,
                "vllm": "installed" if vllm_installed() else "not installed"}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows, "updates": updates},
                              indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
