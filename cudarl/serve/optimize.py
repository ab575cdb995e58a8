"""One ``/v1/optimize`` request on an engine and a judge: the generator's turn, then optimizer
turns, every candidate judged, within the request's budget; the best verified kernel with its
verdict and the turn history.

Why the episode loop of training: a served agent must see exactly the prompts and feedback it was
trained on (``cudarl.rollout.episodes``); the budget's seconds become the loop's deadline, so turns
not started in time are skipped and the answer says ``stopped_by: "time"``.

Covered: the request's episode, the choice of the best kernel (correct, fastest; the earliest on a
tie), the answer record. Not covered: HTTP, the A/B split (``app``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from cudarl.agents.parsing import parse_answer
from cudarl.agents.trajectory import TurnSample
from cudarl.rollout.chat import ChatTokens
from cudarl.rollout.engine import RolloutEngine, SamplingSettings
from cudarl.rollout.episodes import EpisodeSettings, Judge, run_episodes
from cudarl.serve.schemas import Budget, OptimizeAnswer, TurnRecord
from cudarl.tasks.task import Task

STOPPED_BY = {"target_speedup": "success", "max_turns": "turns", "time": "time", "context_limit": "context"}


def best_turn(turns: Sequence[TurnSample]) -> int | None:
    """The index of the correct turn with the highest speedup (a correct turn without a timing
    counts below any timed one; the earliest wins a tie); None when no turn was correct."""
    correct = [(index, turn) for index, turn in enumerate(turns) if turn.verdict.correct]
    if not correct:
        return None
    return max(correct, key=lambda pair: (pair[1].speedup if pair[1].speedup is not None else -1.0, -pair[0]))[0]


def run_request(engine: RolloutEngine, chat: ChatTokens, judge: Judge, task: Task, budget: Budget, version: str,
                adapters: tuple[str | None, str | None] = (None, None), sampling: SamplingSettings | None = None,
                target_speedup: float | None = None) -> OptimizeAnswer:
    """Run the request's episode and build its answer."""
    started = time.monotonic()
    settings = EpisodeSettings(optimizer_turns=budget.turns - 1, target_speedup=target_speedup,
                               sampling=sampling or SamplingSettings(), generator_adapter=adapters[0],
                               optimizer_adapter=adapters[1], deadline=started + budget.seconds)
    request_id = uuid.uuid4().hex
    (trajectory,) = run_episodes(engine, chat, judge, [(task, f"request-{request_id[:12]}")], settings)
    records = [TurnRecord(turn=index, role=turn.role, outcome=str(turn.verdict.outcome.value), speedup=turn.speedup,
                          reasons=list(turn.verdict.reasons[:3])) for index, turn in enumerate(trajectory.turns)]
    best = best_turn(trajectory.turns)
    kernel, verdict = None, None
    if best is not None:
        kernel = parse_answer(chat.decode(trajectory.turns[best].response_ids)).source
        verdict = trajectory.turns[best].verdict.model_dump(mode="json")
    return OptimizeAnswer(request_id=request_id, task_id=task.id, version=version, kernel=kernel, verdict=verdict,
                          turns=records,
                          budget_left_s=max(0.0, budget.seconds - (time.monotonic() - started)),
                          stopped_by=STOPPED_BY.get(trajectory.stopped_because, trajectory.stopped_because))
