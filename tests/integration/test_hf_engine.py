"""The transformers engine with a real tiny model (built from a config, tokenizer trained here):
its token ids and log-probs are the model's own (a re-scoring of the same tokens agrees), groups
of one prompt come back in order, and weight updates are verified: an update that would not take
effect (keys the model does not have, a stale version, weights other than the trainer's) fails
loudly instead of leaving the engine on old weights."""

from __future__ import annotations

import pytest
import torch

from cudarl.rollout.engine import Probe, SamplingSettings, WeightSyncError, resolve_engine_name, vllm_installed
from cudarl.rollout.hf import HFEngine
from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def engine(tokenizer) -> HFEngine:
    return HFEngine(tiny_model(tokenizer, seed=0))


@pytest.fixture(params=["continuous", "static"])
def any_decoder(tokenizer, request) -> HFEngine:
    """The engine with each of its decoders (static runs eagerly on a CPU: same loop, no graphs)."""
    return HFEngine(tiny_model(tokenizer, seed=0), decoder=request.param)


def _prompts(tokenizer) -> list[list[int]]:
    return [tokenizer.encode("class ModelNew(nn.Module):"), tokenizer.encode("__global__ void add_kernel(")]


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0], ids=["t1", "t0.7", "greedy"])
def test_log_probs_are_the_models_own_for_the_tokens_it_sampled(any_decoder, tokenizer, temperature):
    engine = any_decoder
    settings = SamplingSettings(max_new_tokens=8, temperature=temperature, seed=3)
    generations = engine.generate(_prompts(tokenizer), settings)
    assert [list(g.prompt_ids) for g in generations] == _prompts(tokenizer)
    for generation in generations:
        assert 1 <= len(generation.token_ids) <= 8 and generation.weights_version == 0
        rescored = engine.score(generation.prompt_ids + generation.token_ids, len(generation.prompt_ids),
                                temperature=temperature or 1.0)
        if temperature == 0.0:  # greedy: every token is the argmax, its log-prob at temperature 1
            assert all(lp <= 0 for lp in generation.logprobs)
        assert rescored == pytest.approx(list(generation.logprobs), abs=1e-4)


def test_a_group_of_one_prompt_comes_back_in_order_with_its_own_samples(any_decoder, tokenizer):
    engine = any_decoder
    prompt = _prompts(tokenizer)[0]
    generations = engine.generate([prompt] * 4, SamplingSettings(max_new_tokens=6, seed=1))
    assert [g.request_id for g in generations] == ["0", "1", "2", "3"]
    assert all(list(g.prompt_ids) == prompt for g in generations)
    assert len({g.token_ids for g in generations}) > 1  # sampled, not one answer copied


def _trainer_probe(trainer: HFEngine, tokenizer, tolerance: float = 1e-4) -> Probe:
    ids = tuple(tokenizer.encode("__global__ void add_kernel(const float* a) { out[i] = a[i]; }"))
    return Probe(token_ids=ids, prompt_length=4, expected_logprobs=tuple(trainer.score(ids, 4)), tolerance=tolerance)


def test_static_decoder_pads_prompts_of_any_length_and_stops_each_sequence_at_its_own_stop_token(tokenizer):
    stops = list(range(0, tokenizer.vocab_size, 3))  # a third of the vocabulary: every sequence stops early
    engine = HFEngine(tiny_model(tokenizer, seed=0), eos_token_id=stops, decoder="static")
    prompts = [tokenizer.encode("x"), tokenizer.encode("__global__ void add_kernel(float* out, const float* a)"),
               tokenizer.encode("int i = blockIdx.x;")]
    assert len({len(p) for p in prompts}) == 3
    settings = SamplingSettings(max_new_tokens=24, seed=5)
    generations = engine.generate(prompts, settings)
    assert [list(g.prompt_ids) for g in generations] == prompts
    assert any(g.finished for g in generations)
    for generation in generations:
        tokens = generation.token_ids
        assert all(token not in stops for token in tokens[:-1])  # cut right after the first stop token
        assert generation.finished == (tokens[-1] in stops) and (generation.finished or len(tokens) == 24)
        rescored = engine.score(generation.prompt_ids + tokens, len(generation.prompt_ids))
        assert rescored == pytest.approx(list(generation.logprobs), abs=1e-4)  # padding changed nothing
    state = torch.random.get_rng_state()
    again = engine.generate(prompts, settings)
    assert [g.token_ids for g in again] == [g.token_ids for g in generations]  # the seed decides the samples
    assert torch.equal(torch.random.get_rng_state(), state)  # and the process's random state is left alone
    engine.generate(prompts, SamplingSettings(max_new_tokens=2))  # unseeded: the same
    assert torch.equal(torch.random.get_rng_state(), state)
    integral = engine.generate(prompts[:1], SamplingSettings(max_new_tokens=2, temperature=1, top_p=1))  # ints
    assert len(integral[0].token_ids) >= 1


def test_static_decoder_with_grouped_query_heads_samples_what_the_model_scores():
    """Six query heads over two key/value heads: one-token decode steps attend with the query
    heads packed per key/value head (``_compat.grouped_decode_attention``), prefill and scoring
    through SDPA; the sampled tokens' log-probs must be the ones scoring gives."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=300, hidden_size=96, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=6, num_key_value_heads=2)).eval()
    engine = HFEngine(model, eos_token_id=[], pad_token_id=0, decoder="static")
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    for generation in engine.generate(prompts, SamplingSettings(max_new_tokens=12, seed=1)):
        assert len(generation.token_ids) == 12
        rescored = engine.score(generation.prompt_ids + generation.token_ids, len(generation.prompt_ids))
        assert rescored == pytest.approx(list(generation.logprobs), abs=1e-4)
    assert model.config._attn_implementation == "sdpa"  # packed heads only inside a call: the model may be shared


def test_decoder_choice_is_checked(tokenizer):
    assert HFEngine(tiny_model(tokenizer, seed=0)).decoder == "continuous"  # auto on a CPU
    with pytest.raises(ValueError, match="decoder must be"):
        HFEngine(tiny_model(tokenizer, seed=0), decoder="paged")


def test_a_full_update_takes_effect_and_is_verified_by_the_probe(engine, tokenizer):
    trainer = HFEngine(tiny_model(tokenizer, seed=1))
    probe = _trainer_probe(trainer, tokenizer)
    with pytest.raises(WeightSyncError):  # before the update the engine disagrees with the trainer
        from cudarl.rollout.engine import check_probe

        check_probe(engine, probe)
    sync = engine.update_weights(trainer.model.state_dict(), version=1, probe=probe)
    assert sync.version == engine.weights_version == 1 and sync.probe_mean_error <= sync.probe_max_error < 1e-4
    generations = engine.generate(_prompts(tokenizer), SamplingSettings(max_new_tokens=4, seed=2))
    assert all(g.weights_version == 1 for g in generations)


def test_a_partial_update_with_the_models_own_names_is_applied(engine, tokenizer):
    trainer = tiny_model(tokenizer, seed=2)
    head = {"lm_head.weight": trainer.lm_head.weight.detach().clone()}
    sync = engine.update_weights(head, version=1)
    assert sync.tensors == 1 and torch.equal(engine.model.lm_head.weight, head["lm_head.weight"])


def test_a_full_state_dict_of_a_model_with_tied_embeddings_loads(tokenizer):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    engine, trainer = HFEngine(Qwen2ForCausalLM(config)), Qwen2ForCausalLM(config)
    assert "lm_head.weight" in trainer.state_dict()  # the tied name is in the state dict, not in named_parameters
    sync = engine.update_weights(trainer.state_dict(), version=1)
    assert sync.tensors == len(trainer.state_dict())
    assert torch.equal(engine.model.lm_head.weight, trainer.model.embed_tokens.weight)


def test_an_update_that_would_load_nothing_fails_and_leaves_the_engine_as_it_was(engine, tokenizer):
    before = engine.model.lm_head.weight.detach().clone()
    adapter_style = {f"base_model.model.{k}": v for k, v in tiny_model(tokenizer, seed=1).state_dict().items()}
    with pytest.raises(WeightSyncError, match="name nothing in the engine's model"):
        engine.update_weights(adapter_style, version=1)
    with pytest.raises(WeightSyncError, match="not newer"):
        engine.update_weights({"lm_head.weight": before}, version=0)
    assert engine.weights_version == 0 and torch.equal(engine.model.lm_head.weight, before)


def test_weights_other_than_the_trainers_are_caught_and_generation_stops(engine, tokenizer):
    probe = _trainer_probe(HFEngine(tiny_model(tokenizer, seed=1)), tokenizer)
    wrong = tiny_model(tokenizer, seed=5).state_dict()  # the trainer's model is seed 1
    with pytest.raises(WeightSyncError, match="differ from the trainer's"):
        engine.update_weights(wrong, version=1, probe=probe)
    with pytest.raises(WeightSyncError, match="refusing to generate"):
        engine.generate(_prompts(tokenizer), SamplingSettings(max_new_tokens=2))


def test_engine_choice_and_settings_are_checked():
    if not vllm_installed():
        with pytest.raises(RuntimeError, match="vLLM is not installed"):
            resolve_engine_name("vllm")
    assert resolve_engine_name("hf") == "hf" and resolve_engine_name("auto") in ("hf", "vllm")
    assert resolve_engine_name("auto", device="cpu") == "hf"  # vLLM only ever on a GPU
    with pytest.raises(ValueError, match="engine must be"):
        resolve_engine_name("tensorrt")
    for bad in ({"max_new_tokens": 0}, {"temperature": -1.0}, {"top_p": 0.0}):
        with pytest.raises(ValueError):
            SamplingSettings(**bad)


def test_token_ids_outside_the_vocabulary_are_refused_before_the_model_sees_them(engine, tokenizer):
    """On a GPU an out-of-range id is a device-side assert that kills the CUDA context the
    trainer shares; here it is a ValueError naming the id, and the engine still works after."""
    vocab = engine.vocab_size
    assert vocab == engine.model.get_input_embeddings().num_embeddings
    good = _prompts(tokenizer)[0]
    for bad, named in ((good + [vocab], vocab), (good + [-1], -1)):
        with pytest.raises(ValueError, match=f"token id {named}, outside the vocabulary"):
            engine.generate([good, bad], SamplingSettings(max_new_tokens=2))
        with pytest.raises(ValueError, match=f"token id {named}"):
            engine.score(bad, 2)
    with pytest.raises(ValueError, match="at least one token"):
        engine.generate([[]], SamplingSettings(max_new_tokens=2))
    (after,) = engine.generate([good], SamplingSettings(max_new_tokens=2))
    assert after.prompt_ids == tuple(good) and 1 <= len(after.token_ids) <= 2


def test_vllm_settings_are_checked_without_vllm():
    """Settings vLLM 0.20 would refuse only once its engine is starting fail at once."""
    from cudarl.rollout.vllm_engine import LORA_RANKS, VLLMSettings

    assert VLLMSettings().max_lora_rank in LORA_RANKS and VLLMSettings().max_model_len is None
    for bad, message in (({"max_lora_rank": 48}, "max_lora_rank must be one of"),
                         ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
                         ({"max_loras": 0}, "max_loras"), ({"max_model_len": 8}, "max_model_len")):
        with pytest.raises(ValueError, match=message):
            VLLMSettings(**bad)


def test_an_update_that_stops_part_way_leaves_the_engine_refusing_to_generate(engine, tokenizer):
    weights = tiny_model(tokenizer, seed=1).state_dict()
    weights["lm_head.weight"] = torch.full_like(weights["lm_head.weight"], float("nan"))  # a trainer gone wrong
    with pytest.raises(WeightSyncError, match="read back different"):  # copied, then caught on the read-back
        engine.update_weights(weights, version=1)
    with pytest.raises(WeightSyncError, match="refusing to generate: the update to version 1 failed while loading"):
        engine.generate(_prompts(tokenizer), SamplingSettings(max_new_tokens=2))
    sync = engine.update_weights(tiny_model(tokenizer, seed=1).state_dict(), version=2)  # a good update heals it
    assert sync.version == 2 and engine.generate(_prompts(tokenizer), SamplingSettings(max_new_tokens=2))
