"""Generation throughput side by side, for a model with the shape of Qwen2.5-Coder-1.5B (random
weights from its config, bf16): plain ``model.generate``, cudarl's transformers engine
(continuous batching), raw ``vllm.LLM.generate`` when vLLM is installed, and a full weight update
through the engine. Run on a GPU machine:

    uv run python benchmarks/rollout.py [--batches 64 256] [--new-tokens 256] [--prompt-tokens 128]
    uv run python benchmarks/rollout.py --tiny     # a smoke run of the same arms on a tiny model (CPU)

Every arm generates exactly ``--new-tokens`` per sequence (end-of-sequence ignored) from the same
random prompts, sampling at temperature 1. Tokens/s counts generated tokens over wall time.
Not measured yet (not built): cudarl's vLLM engine and LoRA adapter updates.
Prints a table; writes ``benchmarks/results/rollout-<date>-<gpu>.json`` with commit, versions, settings.
"""

from __future__ import annotations

import argparse
import json
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


def build_model(shape: dict, device: str, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**shape, eos_token_id=None, pad_token_id=0)
    return Qwen2ForCausalLM(config).to(device=device, dtype=dtype).eval()


def plain_generate(model, prompts: list[list[int]], new_tokens: int) -> float:
    ids = torch.tensor(prompts, device=model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=True, temperature=1.0, pad_token_id=0)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def engine_generate(model, prompts: list[list[int]], new_tokens: int) -> float:
    from cudarl.rollout.engine import SamplingSettings
    from cudarl.rollout.hf import HFEngine

    engine = HFEngine(model, eos_token_id=[], pad_token_id=0)
    started = time.perf_counter()
    generations = engine.generate(prompts, SamplingSettings(max_new_tokens=new_tokens, seed=0))
    seconds = time.perf_counter() - started
    short = [g for g in generations if len(g.token_ids) != new_tokens]
    if short:
        raise RuntimeError(f"{len(short)} generations stopped early: the arms would not be comparable")
    return seconds


def vllm_generate(folder: Path, prompts: list[list[int]], new_tokens: int) -> float | str:
    try:
        from vllm import LLM, SamplingParams
    except ImportError:
        return "vLLM not installed"
    llm = LLM(model=str(folder), skip_tokenizer_init=True, dtype="bfloat16", enforce_eager=False)
    params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens, temperature=1.0, ignore_eos=True)
    started = time.perf_counter()
    llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return time.perf_counter() - started


def full_update(model) -> float:
    from cudarl.rollout.hf import HFEngine

    engine = HFEngine(model, eos_token_id=[], pad_token_id=0)
    weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    started = time.perf_counter()
    engine.update_weights(weights, version=1)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke run, CPU is fine)")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = TINY if args.tiny else QWEN_1_5B
    model = build_model(shape, device, torch.bfloat16 if device == "cuda" else torch.float32)
    generator = torch.Generator().manual_seed(1)
    rows = []
    for batch in args.batches:
        prompts = torch.randint(1, shape["vocab_size"], (batch, args.prompt_tokens), generator=generator).tolist()
        arms = {"plain model.generate": lambda p=prompts: plain_generate(model, p, args.new_tokens),
                "cudarl HF engine": lambda p=prompts: engine_generate(model, p, args.new_tokens)}
        if not args.tiny:
            folder = ROOT / ".bench-model"  # ignored by git; vLLM loads from a folder
            if not folder.exists():
                model.save_pretrained(folder)
            arms["raw vllm.LLM.generate"] = lambda p=prompts, f=folder: vllm_generate(f, p, args.new_tokens)
        for arm, run in arms.items():
            seconds = run()
            tokens = batch * args.new_tokens
            rows.append({"arm": arm, "batch": batch, "seconds": seconds if isinstance(seconds, float) else None,
                         "tokens_per_s": tokens / seconds if isinstance(seconds, float) else None,
                         "note": seconds if isinstance(seconds, str) else ""})
            shown = f"{tokens / seconds:10.0f}" if isinstance(seconds, float) else f"{'-':>10s}  {seconds}"
            print(f"{arm:24s} batch {batch:4d}  tokens/s {shown}", flush=True)
    update_s = full_update(model)
    print(f"full weight update through the engine: {update_s:.3f} s")
    metadata = run_metadata(args.commit)
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"rollout-{datetime.now(UTC).date().isoformat()}-{(metadata['gpu'] or 'cpu').replace(' ', '-')}.json")
    settings = {"batches": args.batches, "new_tokens": args.new_tokens, "prompt_tokens": args.prompt_tokens,
                "model_shape": shape, "device": device}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows,
                               "full_update_s": update_s}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
