"""What an episode hands the trainer: per turn, the exact token ids the engine was given and the
ids it produced, their log-probs, the loss mask, the verdict and the weights version.

Why token ids and not text: multi-turn RL breaks when history is re-rendered and re-tokenized
(chat templates drop earlier reasoning, BPE merges differ at segment borders), so the trainer
must see exactly what the engine saw and sampled. Each turn is one sample (``TurnSample``); in
the ``full`` context mode a later turn's prompt is the earlier turn's prompt, response and
feedback tokens appended, never re-rendered, and ``Trajectory.as_sequence`` gives the whole
episode as one sequence with the mask on every generated token. Covered: the records and their
consistency checks. Not covered: rewards and advantages (``cudarl.reward``, the trainer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudarl.tester.verdict import Verdict


@dataclass(frozen=True)
class TurnSample:
    """One policy turn. ``loss_mask`` covers ``prompt_ids + response_ids``: 1 exactly on the
    response (the tokens the policy generated), 0 on the prompt and any feedback in it."""

    role: str  # "generator" or "optimizer"
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    weights_version: int
    verdict: Verdict
    candidate_hash: str | None  # None when the answer held no usable candidate (format_error)
    finished: bool  # the response ended on an end-of-sequence token (False: cut at the length limit)
    adapter: str | None = None  # the LoRA adapter that generated the response (None: the base weights)

    def __post_init__(self) -> None:
        if len(self.response_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.response_ids)} response tokens but {len(self.logprobs)} log-probs")
        if not self.prompt_ids:
            raise ValueError("a turn needs a prompt")

    @property
    def loss_mask(self) -> tuple[int, ...]:
        return (0,) * len(self.prompt_ids) + (1,) * len(self.response_ids)

    @property
    def speedup(self) -> float | None:
        return self.verdict.speedup if self.verdict.correct else None


@dataclass(frozen=True)
class Trajectory:
    """One episode: a generator turn, then optimizer turns, in order."""

    task_id: str
    episode_id: str
    turns: tuple[TurnSample, ...]
    context_mode: str
    stopped_because: str  # "target_speedup", "max_turns", "engine_limit", ...
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best_speedup(self) -> float | None:
        speedups = [t.speedup for t in self.turns if t.speedup is not None]
        return max(speedups) if speedups else None

    @property
    def weights_versions(self) -> tuple[int, ...]:
        return tuple(t.weights_version for t in self.turns)

    def as_sequence(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The episode as one token sequence and its loss mask (``full`` context mode only: there
        every turn's prompt starts with the previous turn's prompt and response)."""
        if self.context_mode != "full":
            raise ValueError(f"one sequence needs the 'full' context mode, not {self.context_mode!r}")
        ids: list[int] = []
        mask: list[int] = []
        for turn in self.turns:
            if tuple(turn.prompt_ids[:len(ids)]) != tuple(ids):
                raise ValueError(f"{self.episode_id}: a turn's prompt does not extend the episode so far")
            new_prompt = turn.prompt_ids[len(ids):]
            ids += [*new_prompt, *turn.response_ids]
            mask += [0] * len(new_prompt) + [1] * len(turn.response_ids)
        return tuple(ids), tuple(mask)
