"""The vLLM engine on a GPU (needs ``vllm==0.20.0``; skipped with the reason where it is not
installed): a small real model saved to a folder and loaded by path, two role adapters over it,
token ids and log-probs from the engine (a re-scoring agrees), an adapter update from a
trainer's peft adapter verified by the probe and used by the next generation (version and
adapter recorded, exactly one vLLM adapter id per role), a stale adapter caught, and a full
update refused while LoRA is on."""

from __future__ import annotations

import pytest
import torch

from cudarl.rollout.engine import LoraSettings, Probe, SamplingSettings, WeightSyncError, vllm_installed
from cudarl.rollout.hf import HFEngine
from tests.fixtures.tiny_lm import randomize_lora

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (an optional extra)")]

SHAPE = {"vocab_size": 512, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048}
EOS = 1
LORA = LoraSettings(rank=8, alpha=16)
PROMPT = list(range(10, 40))


def _model(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**SHAPE, eos_token_id=EOS, pad_token_id=0)).to(torch.bfloat16).eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("vllm-model")
    _model().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def engine(folder):
    from cudarl.rollout.vllm_engine import VLLMEngine, VLLMSettings

    engine = VLLMEngine(str(folder), VLLMSettings(enforce_eager=True, max_model_len=1024, gpu_memory_utilization=0.3,
                                                  max_lora_rank=16), lora=True)
    for role in ("generator", "optimizer"):
        engine.add_adapter(role, LORA)
    return engine


def _trainer(folder, seed: int) -> tuple[HFEngine, dict]:
    from peft import get_peft_model_state_dict
    from transformers import Qwen2ForCausalLM

    trainer = HFEngine(Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).to("cuda"))
    trainer.add_adapter("generator", LORA)
    randomize_lora(trainer.lora.peft, seed, scale=0.3)
    return trainer, get_peft_model_state_dict(trainer.lora.peft, adapter_name="generator")


def _probe(trainer: HFEngine) -> Probe:
    ids = tuple(range(50, 90))
    return Probe(token_ids=ids, prompt_length=8, tolerance=0.1,  # bf16 engine vs fp32 trainer
                 expected_logprobs=tuple(trainer.score(ids, 8, adapter="generator")))


def test_generation_is_token_exact_and_each_request_has_its_own_seed(engine):
    generations = engine.generate([PROMPT] * 4, SamplingSettings(max_new_tokens=16, seed=3))
    assert len({g.token_ids for g in generations}) > 1
    for generation in generations:
        assert generation.weights_version == 0 and generation.adapter is None
        rescored = engine.score(PROMPT + list(generation.token_ids), len(PROMPT))
        assert rescored == pytest.approx(list(generation.logprobs), abs=0.05)


def test_an_adapter_update_is_verified_and_used_for_its_role_only(engine, folder):
    trainer, weights = _trainer(folder, seed=1)
    sync = engine.update_weights(weights, version=1, probe=_probe(trainer), adapter="generator")
    print(f"adapter update: {sync.seconds:.3f} s, probe error {sync.probe_mean_error:.4f} on average, "
          f"{sync.probe_max_error:.4f} at most")
    assert sync.adapter == "generator" and sync.probe_mean_error < 0.1 and not sync.notes
    generated = engine.generate([PROMPT], SamplingSettings(max_new_tokens=8, seed=0), adapter="generator")[0]
    optimized = engine.generate([PROMPT], SamplingSettings(max_new_tokens=8, seed=0), adapter="optimizer")[0]
    assert (generated.adapter, generated.weights_version) == ("generator", 1)
    assert (optimized.adapter, optimized.weights_version) == ("optimizer", 0)
    rescored = trainer.score(PROMPT + list(generated.token_ids), len(PROMPT), adapter="generator")
    differences = [abs(a - b) for a, b in zip(rescored, generated.logprobs)]
    assert sum(differences) / len(differences) < 0.1 and max(differences) < 0.3  # the trainer's adapter generated them

    trainer2, weights2 = _trainer(folder, seed=2)
    engine.update_weights(weights2, version=2, probe=_probe(trainer2), adapter="generator")
    assert len(engine.llm.llm_engine.list_loras()) == 1  # version 1's adapter is gone


def test_a_stale_adapter_fails_its_probe_and_a_full_update_is_refused_under_lora(engine, folder):
    trainer, _ = _trainer(folder, seed=5)
    _, stale = _trainer(folder, seed=6)
    with pytest.raises(WeightSyncError, match="differ from the trainer's"):
        engine.update_weights(stale, version=3, probe=_probe(trainer), adapter="generator")
    with pytest.raises(WeightSyncError, match="refusing to generate"):
        engine.generate([PROMPT], SamplingSettings(max_new_tokens=4), adapter="generator")
    with pytest.raises(WeightSyncError, match="refused while LoRA is enabled"):
        engine.update_weights(_model(seed=1).state_dict(), version=1)
