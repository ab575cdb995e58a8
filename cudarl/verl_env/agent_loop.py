"""cudarl's multi-turn episode as a verl agent loop (``AgentLoopBase``, verl 0.9.1): the
generator's turn from the row's messages, then optimizer turns, each answer parsed with cudarl's
parser and judged by the tester pool, its verdict fed back as a user message (response mask 0),
until a correct candidate reaches ``target_speedup``, ``max_turns`` or the response budget.

Why this shape: verl trains on one token stream per trajectory, built with its continuous-token
helpers (``ct_merge_assistant_token``, ``ct_merge_context_msg``) from the engine's own token ids:
earlier turns are never re-tokenized, and the feedback's tokens are the only ones rendered here.
verl copies the trajectory's final reward onto all of it, so per-turn credit cannot reach its
loss: the loop returns one aggregate (``aggregate``: the first turn's return discounted by
cudarl's ``algorithm.gamma`` by default, or the best or last turn's reward) and every turn's
reward and verdict in ``extra_fields`` for logging.

Registered for verl's workers by ``cluster/verl/agent_loops.yaml`` (``agent_loop_config_path``);
its extra keys (``max_turns``, ``target_speedup``, ``aggregate``, ``cudarl_config``) reach
``__init__``. Covered: the loop, the stopping rules, format errors judged without the pool, a
repeated candidate not judged again. Not covered: verl's trainer around it (needs vLLM or SGLang
on GPUs), images.
"""

from __future__ import annotations

import json
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from cudarl.agents.feedback import IMPROVE_REQUEST, feedback_text
from cudarl.agents.parsing import format_error_verdict, parse_answer
from cudarl.reward import discounted_returns, turn_reward
from cudarl.tasks.candidate import Candidate
from cudarl.tester.verdict import Outcome
from cudarl.verl_env.pool import judge, settings
from cudarl.verl_env.rows import AGENT_NAME, task_of

AGGREGATES = ("return", "best", "last")


@register(AGENT_NAME)
class CudarlKernelAgentLoop(AgentLoopBase):
    """One cudarl episode per dataset row (rows from ``cudarl tasks export --format verl``)."""

    def __init__(self, *args, max_turns: int = 4, target_speedup: float = 1.0, aggregate: str = "return",
                 cudarl_config: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not 1 <= int(max_turns) <= 64:
            raise ValueError(f"max_turns must be in [1, 64], got {max_turns}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        if float(target_speedup) <= 0:
            raise ValueError(f"target_speedup must be positive, got {target_speedup}")
        self.max_turns, self.target_speedup, self.aggregate = int(max_turns), float(target_speedup), aggregate
        self.cudarl = settings(cudarl_config)
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **row) -> AgentLoopOutput:
        task = task_of(row.get("extra_info"), (row.get("reward_model") or {}).get("ground_truth"))
        messages = [dict(message) for message in row["raw_prompt"]]
        runtime = await self.ct_build_initial_tokens(messages)
        prompt_length = len(runtime)
        mask: list[int] = []
        logprobs: list[float] | None = []
        request_id, metrics = uuid4().hex, {"generate_sequences": 0.0, "compute_score": 0.0}
        turns: list[dict] = []
        judged: dict[str, Any] = {}  # candidate hash -> verdict: a repeated candidate is not judged again
        stopped = "max_turns"
        for turn in range(self.max_turns):
            started = time.perf_counter()
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=runtime,
                                                        sampling_params=sampling_params)
            metrics["generate_sequences"] += time.perf_counter() - started
            if not output.log_probs:
                logprobs = None  # one turn without them: none for the trajectory
            merged, mask, merged_logprobs = await self.ct_merge_assistant_token(
                runtime, output.token_ids, mask, logprobs, assistant_logprobs=output.log_probs or None)
            runtime, logprobs = merged.token_ids, merged_logprobs if logprobs is not None else None
            answer = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            started = time.perf_counter()
            verdict = await self._verdict(task, answer, f"{request_id}/t{turn}", judged)
            metrics["compute_score"] += time.perf_counter() - started
            reward = turn_reward(verdict, self.cudarl.reward)
            turns.append({"turn": turn, "outcome": Outcome(verdict.outcome).value, "kind": reward.kind,
                          "reward": reward.value if reward.counted else 0.0, "counted": reward.counted,
                          "speedup": verdict.speedup})
            if reward.kind == "correct" and (verdict.speedup or 0.0) >= self.target_speedup:
                stopped = "target_speedup"
                break
            if turn + 1 == self.max_turns:
                break
            if len(mask) >= self.response_length:
                stopped = "response_length"
                break
            messages.append({"role": "assistant", "content": answer})
            previous = list(messages)
            messages.append({"role": "user", "content": feedback_text(verdict) + "\n\n" + IMPROVE_REQUEST})
            merged, longer_mask, merged_logprobs = await self.ct_merge_context_msg(previous, messages, runtime, mask,
                                                                                   logprobs)
            if len(longer_mask) >= self.response_length:
                stopped = "response_length"
                break
            runtime, mask = merged.token_ids, longer_mask
            logprobs = merged_logprobs if logprobs is not None else None
        response_ids = runtime[prompt_length:]
        rewards = [t["reward"] for t in turns]
        return AgentLoopOutput(
            prompt_ids=runtime[:prompt_length], response_ids=response_ids[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=self._aggregate(rewards), num_turns=2 * len(turns) + 1, metrics=metrics,
            extra_fields={"turn_scores": rewards, "tool_rewards": [], "cudarl_task_id": task.id,
                          "cudarl_stopped": stopped, "cudarl_turns": json.dumps(turns)})

    async def _verdict(self, task, answer: str, candidate_id: str, judged: dict):
        parsed = parse_answer(answer)
        if not parsed.ok:
            return format_error_verdict(task.id, candidate_id, parsed.problem, answer)
        candidate = Candidate(task_id=task.id, id=candidate_id, source=parsed.source)
        if candidate.source_hash not in judged:
            judged[candidate.source_hash] = await judge(self.cudarl, task, candidate)
        return judged[candidate.source_hash]

    def _aggregate(self, rewards: list[float]) -> float:
        if not rewards:
            return 0.0
        if self.aggregate == "best":
            return max(rewards)
        if self.aggregate == "last":
            return rewards[-1]
        return discounted_returns(rewards, self.cudarl.algorithm.gamma)[0]
