"""Per-role LoRA adapters in the transformers engine, with a real tiny model and real peft
adapters: two roles share one base model, each with its own adapter and version; an adapter
update from a trainer's peft model takes effect (the probe agrees, samples carry the new
version and the adapter's name, their log-probs are the adapter's own); the silent failures of
public RL code are caught: base weights pushed as the adapter, an adapter of another rank, a
partial adapter, a stale adapter that does not match the trainer's probe."""

from __future__ import annotations

import pytest
import torch

from cudarl.rollout.engine import LoraSettings, Probe, SamplingSettings, WeightSyncError
from cudarl.rollout.hf import HFEngine
from tests.fixtures.tiny_lm import randomize_lora, tiny_model, tiny_tokenizer

LORA = LoraSettings(rank=4, alpha=8)
SAMPLING = SamplingSettings(max_new_tokens=6, seed=4)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def engine(tokenizer) -> HFEngine:
    engine = HFEngine(tiny_model(tokenizer, seed=0))
    engine.add_adapter("generator", LORA)
    engine.add_adapter("optimizer", LORA)
    return engine


def _trained_adapter(tokenizer, seed: int, settings: LoraSettings = LORA) -> tuple[HFEngine, dict]:
    """A trainer-side peft adapter over the same base, with random (non-zero) LoRA weights."""
    from peft import get_peft_model_state_dict

    trainer = HFEngine(tiny_model(tokenizer, seed=0))
    trainer.add_adapter("generator", settings)
    randomize_lora(trainer.lora.peft, seed, scale=0.5)
    return trainer, get_peft_model_state_dict(trainer.lora.peft, adapter_name="generator")


def _probe(trainer: HFEngine, tokenizer) -> Probe:
    ids = tuple(tokenizer.encode("__global__ void add_kernel(const float* a) { out[i] = a[i]; }"))
    return Probe(token_ids=ids, prompt_length=4, expected_logprobs=tuple(trainer.score(ids, 4, adapter="generator")),
                 tolerance=1e-4)


def test_fresh_adapters_equal_the_base_and_keep_their_own_versions(engine, tokenizer):
    ids = tokenizer.encode("class ModelNew(nn.Module): def forward(self, a, b):")
    base = engine.score(ids, 3)
    assert engine.adapters == ("generator", "optimizer")
    assert engine.score(ids, 3, adapter="generator") == pytest.approx(base, abs=1e-6)
    assert [engine.version_of(a) for a in (None, "generator", "optimizer")] == [0, 0, 0]
    with pytest.raises(ValueError, match="no adapter 'critic'"):
        engine.generate([ids], SAMPLING, adapter="critic")
    with pytest.raises(ValueError, match="taken"):
        engine.add_adapter("generator", LORA)


def test_an_adapter_update_takes_effect_for_its_role_only(engine, tokenizer):
    trainer, weights = _trained_adapter(tokenizer, seed=1)
    probe = _probe(trainer, tokenizer)
    ids = list(probe.token_ids)
    optimizer_before = engine.score(ids, 4, adapter="optimizer")
    sync = engine.update_weights(weights, version=1, probe=probe, adapter="generator")
    assert (sync.version, sync.adapter, sync.tensors) == (1, "generator", len(weights)) and sync.probe_max_error < 1e-4
    assert engine.version_of("generator") == 1 and engine.version_of("optimizer") == engine.weights_version == 0
    assert engine.score(ids, 4, adapter="optimizer") == pytest.approx(optimizer_before, abs=1e-6)
    assert engine.score(ids, 4, adapter="generator") != pytest.approx(optimizer_before, abs=1e-3)

    prompt = tokenizer.encode("__global__ void add_kernel(")
    for adapter, version in (("generator", 1), ("optimizer", 0), (None, 0)):
        generation = engine.generate([prompt], SAMPLING, adapter=adapter)[0]
        assert (generation.adapter, generation.weights_version) == (adapter, version)
        rescored = engine.score(list(prompt) + list(generation.token_ids), len(prompt), adapter=adapter)
        assert rescored == pytest.approx(list(generation.logprobs), abs=1e-4)  # the adapter's own log-probs


def test_base_weights_pushed_as_the_adapter_are_refused(engine, tokenizer):
    base = tiny_model(tokenizer, seed=1).state_dict()
    with pytest.raises(WeightSyncError, match="name nothing in adapter 'generator'.*base weights"):
        engine.update_weights(base, version=1, adapter="generator")
    assert engine.version_of("generator") == 0


def test_an_adapter_of_another_rank_or_a_partial_one_is_refused(engine, tokenizer):
    _, wide = _trained_adapter(tokenizer, seed=1, settings=LoraSettings(rank=8, alpha=16))
    with pytest.raises(WeightSyncError, match="another rank"):
        engine.update_weights(wide, version=1, adapter="generator")
    _, weights = _trained_adapter(tokenizer, seed=1)
    partial = dict(list(weights.items())[: len(weights) // 2])
    with pytest.raises(WeightSyncError, match="lacks"):
        engine.update_weights(partial, version=1, adapter="generator")
    assert engine.version_of("generator") == 0


def test_an_adapter_other_than_the_trainers_fails_its_probe_and_stops_that_role(engine, tokenizer):
    trainer, _ = _trained_adapter(tokenizer, seed=1)
    _, stale = _trained_adapter(tokenizer, seed=2)  # another step's adapter: loads fine, generates wrongly
    with pytest.raises(WeightSyncError, match="differ from the trainer's"):
        engine.update_weights(stale, version=1, probe=_probe(trainer, tokenizer), adapter="generator")
    prompt = tokenizer.encode("__global__ void add_kernel(")
    with pytest.raises(WeightSyncError, match="refusing to generate"):
        engine.generate([prompt], SAMPLING, adapter="generator")
    assert engine.generate([prompt], SAMPLING, adapter="optimizer")[0].weights_version == 0  # the other role goes on


def test_a_full_base_update_still_loads_by_the_base_names_under_adapters(engine, tokenizer):
    new_base = tiny_model(tokenizer, seed=3)
    sync = engine.update_weights(new_base.state_dict(), version=1)
    assert sync.tensors == len(new_base.state_dict()) and engine.weights_version == 1
    ids = tokenizer.encode("class ModelNew(nn.Module): def forward(self, a, b):")
    expected = HFEngine(new_base).score(ids, 3)
    assert engine.score(ids, 3) == pytest.approx(expected, abs=1e-5)
    assert engine.score(ids, 3, adapter="optimizer") == pytest.approx(expected, abs=1e-5)  # B = 0 still


def test_an_adapter_folder_written_for_file_reading_engines_loads_in_peft_as_the_same_adapter(tokenizer, tmp_path):
    from peft import PeftModel

    from cudarl.rollout.adapters import save_adapter_folder

    trainer, weights = _trained_adapter(tokenizer, seed=1)
    folder = save_adapter_folder(weights, LORA, tmp_path / "generator-v1")
    loaded = PeftModel.from_pretrained(tiny_model(tokenizer, seed=0), str(folder)).eval()
    ids = tokenizer.encode("__global__ void add_kernel(const float* a) { out[i] = a[i]; }")
    with torch.inference_mode():
        logits = loaded(torch.tensor([ids])).logits[0, 3:-1].float()
    got = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[4:])[:, None])[:, 0].tolist()
    assert got == pytest.approx(trainer.score(ids, 4, adapter="generator"), abs=1e-5)


def test_tensors_that_are_not_an_adapter_of_the_rank_are_refused_before_any_file_is_written(tokenizer, tmp_path):
    from cudarl.rollout.adapters import save_adapter_folder

    with pytest.raises(WeightSyncError, match="not a LoRA tensor"):
        save_adapter_folder(tiny_model(tokenizer, seed=1).state_dict(), LORA, tmp_path / "a")
    _, wide = _trained_adapter(tokenizer, seed=1, settings=LoraSettings(rank=8, alpha=16))
    with pytest.raises(WeightSyncError, match="another rank"):
        save_adapter_folder(wide, LORA, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_adapter_folder_reads_back_and_other_lora_variants_are_refused(tmp_path):
    import json

    from cudarl.rollout.adapters import read_adapter_folder, save_adapter_folder
    from cudarl.rollout.engine import LoraSettings

    settings = LoraSettings(rank=4, alpha=8, target_modules=("q_proj",))
    weights = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.randn(4, 64),
               "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.randn(64, 4)}
    folder = save_adapter_folder(weights, settings, tmp_path / "adapter")
    read_settings, read_weights = read_adapter_folder(folder)
    assert read_settings == settings and all(torch.equal(read_weights[k], v) for k, v in weights.items())
    config_path = folder / "adapter_config.json"
    config = json.loads(config_path.read_text())
    for change, named in (({"use_rslora": True}, "use_rslora"), ({"alpha_pattern": {"q_proj": 4}}, "alpha_pattern"),
                          ({"lora_alpha": 8.5}, "fractional lora_alpha")):
        config_path.write_text(json.dumps(config | change))
        with pytest.raises(ValueError, match=named):
            read_adapter_folder(folder)
    (folder / "adapter_model.safetensors").unlink()
    with pytest.raises(ValueError, match="missing"):
        read_adapter_folder(folder)
