"""Episodes end to end with real parts: a tiny real model behind the transformers engine, the
real chat template and parsing, candidates judged by a real tester (compile-only here: no GPU).

- default: a random tiny model (its answers hold no code, so every turn is a ``format_error``
  and nothing is judged): three turns in both context modes, engine log-probs equal to a
  re-scoring, masks exactly on the generated tokens, the ``full`` mode one growing sequence.
- slow: a tiny model trained here until it answers the task with an honest nvrtc kernel: its
  candidate is judged by a real local TesterPool on Ray (compile-only verdicts), a repeated
  candidate reuses its verdict instead of being judged again.
"""

from __future__ import annotations

import pytest

from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from cudarl.rollout.engine import LoraSettings, SamplingSettings
from cudarl.rollout.episodes import EpisodeSettings, run_episodes
from cudarl.rollout.hf import HFEngine
from cudarl.tester.verdict import Outcome
from tests.fixtures.models import ANSWER, TASK
from tests.fixtures.tiny_lm import chat_tokenizer, randomize_lora, tiny_model


@pytest.fixture(scope="module")
def tokenizer():
    return chat_tokenizer([system_prompt(), generator_prompt(TASK), ANSWER])


def _never_called(pairs):
    raise AssertionError(f"nothing should be judged, got {len(pairs)} candidates")


def _check_tokens(engine: HFEngine, trajectory) -> None:
    for turn in trajectory.turns:
        rescored = engine.score(turn.prompt_ids + turn.response_ids, len(turn.prompt_ids), adapter=turn.adapter)
        assert rescored == pytest.approx(list(turn.logprobs), abs=1e-4)
        assert sum(turn.loss_mask) == len(turn.response_ids) and turn.loss_mask[-len(turn.response_ids):] == \
            (1,) * len(turn.response_ids)


def test_each_role_generates_with_its_own_adapter_and_version(tokenizer):
    from peft import get_peft_model_state_dict

    engine, chat = HFEngine(tiny_model(tokenizer, seed=1)), ChatTokens(tokenizer)
    lora = LoraSettings(rank=4, alpha=8)
    for role in ("generator", "optimizer"):
        engine.add_adapter(role, lora)
    randomize_lora(engine.lora.peft, seed=7, scale=0.5, adapter="generator")  # generator: version 1; optimizer: 0
    engine.update_weights(get_peft_model_state_dict(engine.lora.peft, adapter_name="generator"), version=1,
                          adapter="generator")
    settings = EpisodeSettings(optimizer_turns=2, sampling=SamplingSettings(max_new_tokens=8, seed=0),
                               generator_adapter="generator", optimizer_adapter="optimizer")
    (trajectory,) = run_episodes(engine, chat, _never_called, [(TASK, "ep0")], settings)
    assert [(t.role, t.adapter, t.weights_version) for t in trajectory.turns] == [
        ("generator", "generator", 1), ("optimizer", "optimizer", 0), ("optimizer", "optimizer", 0)]
    _check_tokens(engine, trajectory)


@pytest.mark.parametrize("mode", ["code_and_feedback", "full"])
def test_three_turns_of_a_random_model_are_token_exact(tokenizer, mode):
    engine, chat = HFEngine(tiny_model(tokenizer, seed=1)), ChatTokens(tokenizer)
    sampling = SamplingSettings(max_new_tokens=12, seed=0)
    settings = EpisodeSettings(optimizer_turns=2, context_mode=mode, sampling=sampling)
    (trajectory,) = run_episodes(engine, chat, _never_called, [(TASK, "ep0")], settings)
    assert [t.role for t in trajectory.turns] == ["generator", "optimizer", "optimizer"]
    assert all(t.verdict.outcome == Outcome.FORMAT_ERROR and t.candidate_hash is None for t in trajectory.turns)
    assert trajectory.weights_versions == (0, 0, 0) and trajectory.stopped_because == "max_turns"
    _check_tokens(engine, trajectory)
    if mode == "full":
        ids, mask = trajectory.as_sequence()  # every prompt extends the one before: never re-rendered
        assert sum(mask) == sum(len(t.response_ids) for t in trajectory.turns)
        assert len(ids) == len(trajectory.turns[-1].prompt_ids) + len(trajectory.turns[-1].response_ids)
    else:
        assert trajectory.turns[1].prompt_ids != trajectory.turns[0].prompt_ids  # a fresh optimizer prompt


@pytest.mark.slow
def test_an_episode_against_a_real_tester_pool(policy_folder, shared_ray):
    """The memorized policy (the session's) answers with an honest kernel; the pool judges it once."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool

    chat = ChatTokens(AutoTokenizer.from_pretrained(policy_folder))
    first_prompt = chat.prompt(system_prompt(), generator_prompt(TASK))
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(policy_folder).eval())
    greedy = SamplingSettings(max_new_tokens=400, temperature=0.0)
    assert chat.decode(engine.generate([first_prompt], greedy)[0].token_ids).strip() == ANSWER.strip()

    config = CudarlConfig.model_validate({"tester": {"compile": {"mode": "kernel"}},
                                          "pool": {"min_compile_workers": 1, "max_compile_workers": 1}})
    pool = start_pool(config)
    calls: list[int] = []

    def judge(pairs):
        calls.append(len(pairs))
        return pool.judge(pairs)

    settings = EpisodeSettings(optimizer_turns=2, context_mode="full", sampling=greedy)
    (trajectory,) = run_episodes(engine, chat, judge, [(TASK, "ep-pool")], settings)
    pool.shutdown()
    first = trajectory.turns[0]
    assert first.verdict.outcome == Outcome.COMPILED and first.candidate_hash, first.verdict.reasons
    assert len(trajectory.turns) == 3 and calls and sum(calls) <= len({t.candidate_hash for t in trajectory.turns})
    repeats = [t for t in trajectory.turns[1:] if t.candidate_hash == first.candidate_hash]
    assert all(t.verdict is first.verdict for t in repeats)  # reused, not judged again
    _check_tokens(engine, trajectory)


class _SlowEngine:
    """A real engine whose generation takes ``seconds`` (a turn that outlasts the deadline)."""

    def __init__(self, engine: HFEngine, seconds: float) -> None:
        self.engine, self.seconds = engine, seconds

    def generate(self, prompts, settings, adapter=None):
        import time

        time.sleep(self.seconds)
        return self.engine.generate(prompts, settings, adapter=adapter)

    def __getattr__(self, name):
        return getattr(self.engine, name)


@pytest.mark.slow
def test_turns_not_started_by_the_deadline_are_skipped(tokenizer):
    import time

    engine, chat = HFEngine(tiny_model(tokenizer, seed=1)), ChatTokens(tokenizer)
    sampling = SamplingSettings(max_new_tokens=4, seed=0)
    past = EpisodeSettings(optimizer_turns=2, sampling=sampling, deadline=time.monotonic() - 1)
    (trajectory,) = run_episodes(engine, chat, _never_called, [(TASK, "late")], past)
    assert trajectory.turns == () and trajectory.stopped_because == "time"
    # the first turn starts in time and outlasts the deadline: it finishes, the next two are skipped
    soon = EpisodeSettings(optimizer_turns=2, sampling=sampling, deadline=time.monotonic() + 0.5)
    (trajectory,) = run_episodes(_SlowEngine(engine, 1.0), chat, _never_called, [(TASK, "soon")], soon)
    assert len(trajectory.turns) == 1 and trajectory.stopped_because == "time"
    unlimited = EpisodeSettings(optimizer_turns=2, sampling=sampling)
    (trajectory,) = run_episodes(engine, chat, _never_called, [(TASK, "free")], unlimited)
    assert len(trajectory.turns) == 3 and trajectory.stopped_because == "max_turns"
