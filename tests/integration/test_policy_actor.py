"""The policy actor on a real local Ray cluster: a tiny real model saved to a folder and loaded by
path (the real loading code), generation through the actor with the engine's token ids and the
weights version, and a verified weight update pushed through it; both roles in one actor over one
base model, each with its own LoRA adapter, the generator's adapter updated alone; the RL run's
client of the actor (weights by object reference, a killed actor replaced on its last weights)."""

from __future__ import annotations

import pytest

from actors.policy import PolicySpec, generator_policy, shared_policy
from cudarl.rollout.engine import LoraSettings, Probe, SamplingSettings
from cudarl.rollout.hf import HFEngine
from tests.fixtures.tiny_lm import randomize_lora, tiny_model, tiny_tokenizer


@pytest.fixture(scope="module")
def two_cpus(ray_cluster):
    """A Ray of exactly 2 CPUs for this module (the policy client's refusal of 3 CPUs depends on
    it), shared by its tests: the session's Ray is shut down first, and this one after them."""
    import ray

    ray_cluster.release()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture
def two_cpu_ray(two_cpus):
    """The module's 2-CPU Ray, cleared after each test (its actors hold the CPUs)."""
    from tests.fixtures.ray_session import clear_cluster

    yield
    clear_cluster()


def test_a_spec_out_of_range_is_refused():
    with pytest.raises(ValueError, match="role"):
        PolicySpec(role="critic", model="m")
    with pytest.raises(ValueError, match="gpu_share"):
        PolicySpec(role="generator", model="m", gpu_share=1.5)
    with pytest.raises(ValueError, match="needs lora"):
        PolicySpec(role="both", model="m")


@pytest.mark.slow
def test_a_generator_policy_generates_and_takes_verified_weights(tmp_path, two_cpu_ray):
    import ray

    tokenizer = tiny_tokenizer()
    tiny_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    trainer = HFEngine(tiny_model(tokenizer, seed=1))  # the trainer's newer weights
    ids = tuple(tokenizer.encode("__global__ void add_kernel(const float* a)"))
    probe = Probe(token_ids=ids, prompt_length=3, expected_logprobs=tuple(trainer.score(ids, 3)), tolerance=1e-4)
    policy = generator_policy(str(tmp_path / "model"), engine="hf")
    assert ray.get(policy.ready.remote()) == {"roles": ["generator"], "model": str(tmp_path / "model"),
                                              "adapters": [], "weights_versions": {"generator": 0}}
    prompt = tokenizer.encode("class ModelNew(nn.Module):")
    (before,) = ray.get(policy.generate.remote([prompt], SamplingSettings(max_new_tokens=6, seed=0)))
    sync = ray.get(policy.update_weights.remote(trainer.model.state_dict(), 1, probe))
    (after,) = ray.get(policy.generate.remote([prompt], SamplingSettings(max_new_tokens=6, seed=0)))
    assert before.weights_version == 0 and after.weights_version == 1 and sync.probe_max_error < 1e-4
    assert list(before.prompt_ids) == prompt and len(after.token_ids) == len(after.logprobs) >= 1


@pytest.mark.slow
def test_one_actor_serves_both_roles_with_an_adapter_each(tmp_path, two_cpu_ray):
    import ray

    tokenizer = tiny_tokenizer()
    lora, weights, probe = _trained_adapter(tokenizer, "generator", 3, tmp_path / "model")
    policy = shared_policy(str(tmp_path / "model"), lora=lora, engine="hf")
    assert ray.get(policy.ready.remote())["adapters"] == ["generator", "optimizer"]
    sync = ray.get(policy.update_weights.remote(weights, 1, probe, role="generator"))
    prompt = tokenizer.encode("class ModelNew(nn.Module):")
    settings = SamplingSettings(max_new_tokens=6, seed=0)
    (generated,) = ray.get(policy.generate.remote([prompt], settings, role="generator"))
    (optimized,) = ray.get(policy.generate.remote([prompt], settings, role="optimizer"))
    with pytest.raises(ray.exceptions.RayTaskError, match="name one of them"):
        ray.get(policy.generate.remote([prompt], settings))
    versions = ray.get(policy.ready.remote())["weights_versions"]
    assert sync.adapter == "generator" and sync.probe_max_error < 1e-4
    assert (generated.adapter, generated.weights_version) == ("generator", 1)
    assert (optimized.adapter, optimized.weights_version) == ("optimizer", 0)
    assert versions == {"generator": 1, "optimizer": 0}


@pytest.mark.slow
def test_the_runs_policy_client_takes_weights_by_reference_and_survives_a_kill(tmp_path, two_cpu_ray):
    import ray

    from cudarl.rl.policy_client import PolicyClient, PolicyUnavailable

    tokenizer = tiny_tokenizer()
    lora, weights, probe = _trained_adapter(tokenizer, "optimizer", 5, tmp_path / "model")
    spec = PolicySpec(role="both", model=str(tmp_path / "model"), engine="hf", lora=lora)
    with pytest.raises(PolicyUnavailable, match="the policy actor needs 3 CPU"):
        PolicyClient(spec, cpus=3)
    with pytest.raises(PolicyUnavailable, match="the policy actor failed to start: .*missing"):
        PolicyClient(PolicySpec(role="generator", model=str(tmp_path / "missing"), engine="hf"), timeout_s=120)
    # as a run starts it (wait=False: its update workers start meanwhile): placed at once, and a
    # failure to load is the same one-line error, from wait_ready
    unloadable = PolicyClient(PolicySpec(role="generator", model=str(tmp_path / "missing"), engine="hf"),
                              timeout_s=120, wait=False)
    with pytest.raises(PolicyUnavailable, match="the policy actor failed to start: .*missing"):
        unloadable.wait_ready()
    client = PolicyClient(spec, cpus=1, timeout_s=120, wait=False)
    assert set(client.adapters) == {"generator", "optimizer"}  # known once it has loaded (waited for here)
    reference = ray.put(weights)
    sync = client.update_weights(reference, 7, probe, adapter="optimizer")
    prompt = tokenizer.encode("class ModelNew(nn.Module):")
    settings = SamplingSettings(max_new_tokens=6, seed=0)
    (before,) = client.generate([prompt], settings, adapter="optimizer")
    assert client.name.startswith("cudarl-policy-") and client.name.endswith("-1")
    ray.kill(ray.get_actor(client.name), no_restart=True)
    with pytest.raises(ray.exceptions.RayActorError):
        client.generate([prompt], settings, adapter="optimizer")
    assert client.dead
    client.restart()  # a new actor, back on version 7, checked on the same probe
    (after,) = client.generate([prompt], settings, adapter="optimizer")
    versions = (client.version_of("optimizer"), client.version_of("generator"), client.name)
    client.stop()
    assert sync.probe_mean_error < 1e-4
    assert (before.weights_version, after.weights_version) == (7, 7)
    assert after.token_ids == before.token_ids and after.logprobs == pytest.approx(before.logprobs, abs=1e-5)
    assert versions[:2] == (7, 0) and versions[2].endswith("-2")  # the second actor of this client


def _trained_adapter(tokenizer, role: str, seed: int, folder):
    """A saved base model and, over it, one role's random (trained-looking) adapter: its settings,
    peft tensors and the probe its log-probs must pass."""
    from peft import get_peft_model_state_dict

    tiny_model(tokenizer, seed=0).save_pretrained(folder)
    lora = LoraSettings(rank=4, alpha=8)
    trainer = HFEngine(tiny_model(tokenizer, seed=0))
    trainer.add_adapter(role, lora)
    randomize_lora(trainer.lora.peft, seed=seed, scale=0.5)
    ids = tuple(tokenizer.encode("__global__ void add_kernel(const float* a)"))
    probe = Probe(token_ids=ids, prompt_length=3, tolerance=1e-4,
                  expected_logprobs=tuple(trainer.score(ids, 3, adapter=role)))
    return lora, get_peft_model_state_dict(trainer.lora.peft, adapter_name=role), probe
