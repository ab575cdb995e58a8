"""A reward function in verl's form for single-turn training (verl's own agent loop or its plain
rollout, cudarl's tester as the judge): ``custom_reward_function.path`` = this file,
``.name`` = ``compute_score``. verl awaits it (an ``async def``) in its reward workers.

The score is cudarl's turn reward (``cudarl.reward.turn_reward`` under the config's
``[reward]``); the returned dict also carries the verdict's outcome, reward kind and speedup,
which verl logs as extra reward info. Covered: parsing, judging, the reward. Not covered:
multi-turn episodes (``agent_loop``).
"""

from __future__ import annotations

from uuid import uuid4

from cudarl.agents.parsing import format_error_verdict, parse_answer
from cudarl.reward import turn_reward
from cudarl.tasks.candidate import Candidate
from cudarl.tester.verdict import Outcome
from cudarl.verl_env.pool import judge, settings
from cudarl.verl_env.rows import task_of


async def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                        cudarl_config: str | None = None, **kwargs) -> dict:
    """``solution_str`` (the model's answer) judged against the task ``ground_truth`` names."""
    config = settings(cudarl_config)
    task = task_of(extra_info, ground_truth)
    candidate_id = f"verl-{uuid4().hex[:12]}"
    parsed = parse_answer(solution_str)
    if parsed.ok:
        verdict = await judge(config, task, Candidate(task_id=task.id, id=candidate_id, source=parsed.source))
    else:
        verdict = format_error_verdict(task.id, candidate_id, parsed.problem, solution_str)
    reward = turn_reward(verdict, config.reward)
    return {"score": reward.value if reward.counted else 0.0, "outcome": Outcome(verdict.outcome).value,
            "kind": reward.kind, "speedup": verdict.speedup if verdict.speedup is not None else 0.0,
            "counted": reward.counted}
