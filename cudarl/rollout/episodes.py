"""The episode loop: a generator turn, then optimizer turns, every candidate judged, for many
episodes at once (a GRPO group, or a batch of tasks), token-exact.

Why episodes run in lockstep: each turn of all active episodes is one engine call (continuous
batching fills the GPU) and one judge call (the pool compiles and benches them in parallel).
Per turn: the answer's tokens come from the engine; the answer is parsed (no usable candidate:
a ``format_error`` verdict, nothing judged); a candidate identical to one the episode already
had reuses its verdict instead of being judged again; the rest go to ``judge`` together. An
episode stops at the target speedup, after its last turn, when its next prompt would not fit, or
at its deadline (``EpisodeSettings.deadline``).
Context modes: ``code_and_feedback`` (default, as published kernel-RL systems do: each
optimizer prompt is rendered afresh from the task, the best code so far, the trajectory and the
last feedback; earlier reasoning is dropped) or ``full`` (the previous prompt, the engine's
response ids and the feedback tokens, appended and never re-rendered).
Roles: the generator's turn and the optimizer's turns may use different LoRA adapters of one
engine (``EpisodeSettings.generator_adapter`` / ``optimizer_adapter``); every turn records its
adapter and weights version. Not covered: rewards (``cudarl.reward``), the policies' actors (``actors/``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from cudarl.agents.feedback import IMPROVE_REQUEST, feedback_text
from cudarl.agents.parsing import ParsedAnswer, format_error_verdict, parse_answer
from cudarl.agents.prompts import TurnSummary, generator_prompt, optimizer_prompt, summarize_turn, system_prompt
from cudarl.agents.trajectory import Trajectory, TurnSample
from cudarl.rollout.chat import ChatTokens
from cudarl.rollout.engine import Generation, RolloutEngine, SamplingSettings
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Verdict

Judge = Callable[[list[tuple[Task, Candidate]]], list[Verdict]]
"""Judges candidates, one verdict per pair in order (``PoolClient.judge``, or a local tester)."""


@dataclass(frozen=True)
class EpisodeSettings:
    """How an episode runs."""

    optimizer_turns: int = 3
    """Optimizer turns after the generator's first candidate."""
    target_speedup: float | None = None
    """Stop an episode once a correct candidate reaches this speedup (None: run every turn)."""
    context_mode: Literal["code_and_feedback", "full"] = "code_and_feedback"
    """What later turns see of earlier ones (module docstring)."""
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    max_prompt_tokens: int = 16384
    """An episode whose next prompt is longer stops (``context_limit``)."""
    generator_adapter: str | None = None
    """The engine's LoRA adapter for the first turn (None: the base weights)."""
    optimizer_adapter: str | None = None
    """The engine's LoRA adapter for the optimizer turns (None: the base weights)."""
    deadline: float | None = None
    """A ``time.monotonic()`` instant: turns not started by then are skipped and the episodes stop
    with ``"time"`` (a served request's budget); a turn under way finishes. None: no limit."""

    def __post_init__(self) -> None:
        if not 0 <= self.optimizer_turns <= 64:
            raise ValueError(f"optimizer_turns must be in [0, 64], got {self.optimizer_turns}")
        if self.target_speedup is not None and self.target_speedup <= 0:
            raise ValueError(f"target_speedup must be positive, got {self.target_speedup}")


@dataclass
class _Episode:
    task: Task
    episode_id: str
    prompt_ids: list[int]
    turns: list[TurnSample] = field(default_factory=list)
    summaries: list[TurnSummary] = field(default_factory=list)
    judged: dict[str, Verdict] = field(default_factory=dict)  # candidate hash -> verdict
    stopped: str = ""


def run_episodes(engine: RolloutEngine, chat: ChatTokens, judge: Judge, tasks: Sequence[tuple[Task, str]],
                 settings: EpisodeSettings | None = None) -> list[Trajectory]:
    """One trajectory per ``(task, episode_id)``, in order."""
    settings = settings or EpisodeSettings()
    system = system_prompt()
    episodes = [_Episode(task, episode_id, chat.prompt(system, generator_prompt(task))) for task, episode_id in tasks]
    for turn in range(settings.optimizer_turns + 1):
        active = [e for e in episodes if not e.stopped]
        for episode in active:
            if len(episode.prompt_ids) > settings.max_prompt_tokens:
                episode.stopped = "context_limit"
        active = [e for e in active if not e.stopped]
        if active and settings.deadline is not None and time.monotonic() >= settings.deadline:
            for episode in active:
                episode.stopped = "time"
            break
        if not active:
            break
        adapter = settings.generator_adapter if turn == 0 else settings.optimizer_adapter
        sampling = settings.sampling
        if sampling.seed is not None:  # each turn its own draws (engines add the request index)
            sampling = replace(sampling, seed=sampling.seed + turn * len(episodes))
        generations = engine.generate([e.prompt_ids for e in active], sampling, adapter=adapter)
        verdicts = _judge_turn(active, generations, chat, judge, turn)
        for episode, generation, (verdict, parsed, candidate_hash) in zip(active, generations, verdicts):
            _record(episode, generation, verdict, parsed, candidate_hash, turn)
            _advance(episode, chat, system, settings, turn)
    return [Trajectory(task_id=e.task.id, episode_id=e.episode_id, turns=tuple(e.turns),
                       context_mode=settings.context_mode, stopped_because=e.stopped or "max_turns")
            for e in episodes]


def _judge_turn(active: list[_Episode], generations: list[Generation], chat: ChatTokens, judge: Judge,
                turn: int) -> list[tuple[Verdict, ParsedAnswer, str | None]]:
    """(verdict, parsed answer, candidate hash) per active episode; one ``judge`` call for the turn."""
    verdicts: list[Verdict | None] = []
    parsed_answers: list[ParsedAnswer] = []
    hashes: list[str | None] = []
    pending: list[tuple[int, Candidate]] = []
    for index, (episode, generation) in enumerate(zip(active, generations)):
        answer = chat.decode(generation.token_ids)
        parsed = parse_answer(answer)
        parsed_answers.append(parsed)
        candidate_id = f"{episode.episode_id}/t{turn}"
        if not parsed.ok:
            verdicts.append(format_error_verdict(episode.task.id, candidate_id, parsed.problem, answer))
            hashes.append(None)
            continue
        candidate = Candidate(task_id=episode.task.id, id=candidate_id, source=parsed.source)
        hashes.append(candidate.source_hash)
        verdicts.append(episode.judged.get(candidate.source_hash))  # never judge the same candidate twice
        if verdicts[-1] is None:
            pending.append((index, candidate))
    if pending:
        judged = judge([(active[index].task, candidate) for index, candidate in pending])
        if len(judged) != len(pending):
            raise RuntimeError(f"the judge returned {len(judged)} verdicts for {len(pending)} candidates")
        for (index, candidate), verdict in zip(pending, judged):
            active[index].judged[candidate.source_hash] = verdicts[index] = verdict
    return list(zip(verdicts, parsed_answers, hashes))


def _record(episode: _Episode, generation: Generation, verdict: Verdict, parsed: ParsedAnswer,
            candidate_hash: str | None, turn: int) -> None:
    previous = episode.summaries[-1].speedup if episode.summaries else None
    episode.turns.append(TurnSample(
        role="generator" if turn == 0 else "optimizer", prompt_ids=tuple(episode.prompt_ids),
        response_ids=generation.token_ids, logprobs=generation.logprobs, weights_version=generation.weights_version,
        adapter=generation.adapter, verdict=verdict, candidate_hash=candidate_hash, finished=generation.finished))
    episode.summaries.append(summarize_turn(parsed, verdict, previous))


def _advance(episode: _Episode, chat: ChatTokens, system: str, settings: EpisodeSettings, turn: int) -> None:
    """Stop the episode, or build its next prompt."""
    last = episode.turns[-1]
    if settings.target_speedup is not None and (last.speedup or 0.0) >= settings.target_speedup:
        episode.stopped = "target_speedup"
        return
    if turn == settings.optimizer_turns:
        return
    if settings.context_mode == "full":
        message = feedback_text(last.verdict, episode.summaries[-2].speedup if len(episode.summaries) > 1 else None)
        episode.prompt_ids = [*episode.prompt_ids, *last.response_ids,
                              *chat.feedback(message + "\n\n" + IMPROVE_REQUEST,
                                             last.response_ids)]
    else:
        episode.prompt_ids = chat.prompt(system, optimizer_prompt(episode.task, episode.summaries))
