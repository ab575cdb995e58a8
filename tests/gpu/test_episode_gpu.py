"""An episode on a real GPU with full verdicts: the trained tiny policy's honest nvrtc kernel is
judged by a real tester (correctness and timing), its token ids and log-probs are the engine's
own, and a repeated candidate reuses its verdict. (The CPU version, compile-only through a local
TesterPool, is ``tests/integration/test_episodes.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudarl import env
from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from cudarl.rollout.engine import SamplingSettings
from cudarl.rollout.episodes import EpisodeSettings, run_episodes
from cudarl.rollout.hf import HFEngine
from cudarl.tester import Outcome, Tester
from tests.conftest import make_tester_config
from tests.fixtures.tiny_lm import chat_tokenizer, memorized_model
from tests.integration.test_episodes import ANSWER, TASK

pytestmark = pytest.mark.gpu


def test_an_episode_with_full_verdicts(tmp_path_factory):
    tokenizer = chat_tokenizer([system_prompt(), generator_prompt(TASK), ANSWER])
    chat = ChatTokens(tokenizer)
    first_prompt = chat.prompt(system_prompt(), generator_prompt(TASK))
    engine = HFEngine(memorized_model(tokenizer, first_prompt, ANSWER).to("cuda"))
    root = Path(env.get(env.CUDARL_CACHE_DIR) or tmp_path_factory.mktemp("gpu-cache"))
    tester = Tester(make_tester_config(timing={"budget_s": 1.0}), cache_root=root)
    judged: list[str] = []

    def judge(pairs):
        judged.extend(candidate.id for _, candidate in pairs)
        return [tester.evaluate(task, candidate) for task, candidate in pairs]

    settings = EpisodeSettings(optimizer_turns=2, context_mode="full",
                               sampling=SamplingSettings(max_new_tokens=400, temperature=0.0), target_speedup=100.0)
    (trajectory,) = run_episodes(engine, chat, judge, [(TASK, "ep-gpu")], settings)
    first = trajectory.turns[0]
    assert first.verdict.outcome == Outcome.PASSED, first.verdict.reasons
    assert first.speedup is not None and first.speedup > 0.2 and judged[0] == "ep-gpu/t0"
    for turn in trajectory.turns:
        rescored = engine.score(turn.prompt_ids + turn.response_ids, len(turn.prompt_ids))
        assert rescored == pytest.approx(list(turn.logprobs), abs=1e-3)
    assert all(t.verdict is first.verdict for t in trajectory.turns[1:] if t.candidate_hash == first.candidate_hash)
