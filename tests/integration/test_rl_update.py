"""The update worker's core (``PolicyUpdater``) in one process on a tiny real Qwen2: a step per
adapter by plan (an adapter without samples is left untouched), the KL penalty against the base
model with the adapters off, and a checkpoint taken while one adapter never stepped that loads
back to the same next step."""

from __future__ import annotations

import pytest
import torch

from cudarl.config_rl import AlgorithmConfig
from cudarl.rl.batch import TrainSample
from cudarl.rl.group import plan_step
from cudarl.rl.update import PolicyUpdater, UpdaterSpec
from cudarl.rollout.engine import LoraSettings
from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    tiny_model(tiny_tokenizer(128)).save_pretrained(folder)
    return str(folder)


def _spec(folder, **algorithm) -> UpdaterSpec:
    return UpdaterSpec(model=folder, adapters=("generator", "optimizer"), learning_rate=1e-2, micro_batch=2,
                       lora=LoraSettings(rank=4, alpha=8, target_modules=("q_proj", "v_proj", "lm_head")),
                       algorithm=AlgorithmConfig(**algorithm))


SAMPLES = [TrainSample(token_ids=(20, 21, 22, 5, 6), prompt_length=3, old_logprobs=(-4.8, -4.8), advantage=a,
                       weights_version=0, adapter="generator") for a in (1.0, -1.0, 0.5)]


def _step(updater: PolicyUpdater) -> dict:
    _, plan = plan_step(SAMPLES, ranks=1, micro_batch=updater.spec.micro_batch, by_adapter=True)
    return updater.step(SAMPLES, plan)


def test_only_the_planned_adapter_moves_and_the_kl_is_taken_against_the_base(model_folder):
    updater = PolicyUpdater(_spec(model_folder, kl_coef=0.1))
    before = {name: updater.weights(name) for name in ("generator", "optimizer")}
    first = _step(updater)
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # a fresh adapter is the base model
    second = _step(updater)
    assert second["kl"] > 0  # the adapter moved away from the base
    after = {name: updater.weights(name) for name in ("generator", "optimizer")}
    assert any(not torch.equal(before["generator"][k], after["generator"][k]) for k in before["generator"])
    assert all(torch.equal(before["optimizer"][k], after["optimizer"][k]) for k in before["optimizer"])
    assert updater.version == 2


def test_a_checkpoint_with_an_adapter_that_never_stepped_loads_back_exactly(model_folder, tmp_path):
    original = PolicyUpdater(_spec(model_folder))
    _step(original)
    original.save(str(tmp_path / "trainer"))
    restored = PolicyUpdater(UpdaterSpec(**{**_spec(model_folder).__dict__, "seed": 7}))  # other initial adapters
    restored.load(str(tmp_path / "trainer"))
    assert restored.version == original.version == 1
    _step(original), _step(restored)
    for name in ("generator", "optimizer"):
        expected, got = original.weights(name), restored.weights(name)
        assert all(torch.equal(expected[k], got[k]) for k in expected), name


def test_warm_start_adapters_start_the_updater_and_a_wrong_shape_is_refused(model_folder, tmp_path):
    from dataclasses import replace

    from cudarl.rl.initial_weights import warm_start_folders
    from cudarl.rollout.adapters import save_adapter_folder
    from tests.fixtures.tiny_lm import randomize_lora

    lora = LoraSettings(rank=4, alpha=8, target_modules=("q_proj", "v_proj"))  # adapter folders hold LoRA tensors only
    trained = PolicyUpdater(replace(_spec(model_folder), lora=lora))
    randomize_lora(trained.model, seed=3, scale=0.05, adapter="generator")
    wanted = trained.weights("generator")
    save_adapter_folder(wanted, trained.spec.lora, tmp_path / "sft" / "generator")
    folders = warm_start_folders(str(tmp_path / "sft"), ("generator", "optimizer"), trained.spec.lora)
    assert folders == (("generator", str(tmp_path / "sft" / "generator")),)  # no optimizer folder: it starts fresh
    started = PolicyUpdater(replace(_spec(model_folder), lora=lora, init_adapters=folders, start_version=1, seed=9))
    got = started.weights("generator")
    assert set(got) == set(wanted) and all(torch.equal(got[k], wanted[k]) for k in wanted)
    assert started.version == 1
    fresh = started.weights("optimizer")
    assert all(torch.count_nonzero(v) == 0 for k, v in fresh.items() if "lora_B" in k)
    # the probe the driver checks the engine against: the trainer's own log-probs with these weights
    ids = (20, 21, 22, 5, 6)
    assert started.probe_logprobs(ids, 3, adapter="generator") == trained.probe_logprobs(ids, 3, adapter="generator")

    other = LoraSettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj"))
    with pytest.raises(ValueError, match="is LoRA rank 4, alpha 8 .* the run's is rank 8, alpha 16"):
        warm_start_folders(str(tmp_path / "sft"), ("generator",), other)
    with pytest.raises(ValueError, match="holds no adapter of"):
        warm_start_folders(str(tmp_path), ("generator",), trained.spec.lora)
    with pytest.raises(ValueError, match="is not a folder"):
        warm_start_folders(str(tmp_path / "missing"), ("generator",), trained.spec.lora)
    with pytest.raises(ValueError, match="needs adapters"):
        warm_start_folders(str(tmp_path / "sft"), ("generator",), None)
    with pytest.raises(ValueError, match="does not train"):
        PolicyUpdater(replace(_spec(model_folder), lora=lora, adapters=("optimizer",), init_adapters=folders))
