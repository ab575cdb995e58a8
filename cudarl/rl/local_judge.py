"""A ``Judge`` (``cudarl.rollout.episodes.Judge``) over a local ``Tester``, for runs without a
tester pool: builds run in parallel threads, then the judges, and a (task, source) pair judged
once is not judged again (its verdict is copied, ``shared`` set, as the pool's dedupe does).

Why reuse: a GRPO group repeats candidates, and a policy that has converged repeats them step
after step; re-judging each costs seconds on the GPU and would only re-measure the same kernel.
Harness errors are never reused (the tester's fault, not the candidate's). ``reuse=False``
judges every pair afresh.

Covered: order, reuse, parallel builds, concurrent judges (``judge_workers``; their timed runs
still take turns on the GPU through the tester's lock). Not covered: artifacts between
machines, retries (the pool does both).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.tester import Tester
from cudarl.tester.verdict import Outcome, Verdict


class LocalJudge:
    """Call with ``(task, candidate)`` pairs; one verdict per pair, in order."""

    def __init__(
        self,
        tester: Tester,
        build_workers: int = 4,
        judge_workers: int = 1,
        reuse: bool = True,
        progress: Callable[[Verdict], None] | None = None,
    ) -> None:
        if build_workers < 1 or judge_workers < 1:
            raise ValueError(f"need at least one worker of each kind, got {build_workers} and {judge_workers}")
        self.tester, self.build_workers, self.judge_workers = tester, build_workers, judge_workers
        self.reuse, self.progress = reuse, progress
        self._verdicts: dict[tuple[str, str], Verdict] = {}
        self._lock = threading.Lock()
        self.judged = 0
        """Pairs actually judged (not reused) so far."""

    def known(self, task: Task, candidate: Candidate) -> Verdict | None:
        """The verdict kept for this pair, if any."""
        return self._verdicts.get((task.id, candidate.source_hash))

    def __call__(self, pairs: Sequence[tuple[Task, Candidate]]) -> list[Verdict]:
        keys = [(task.id, candidate.source_hash) for task, candidate in pairs]
        fresh: dict[tuple[str, str], tuple[Task, Candidate]] = {}
        for key, pair in zip(keys, pairs):
            if key not in fresh and not (self.reuse and key in self._verdicts):
                fresh[key] = pair
        judged = dict(zip(fresh, self._judge(list(fresh.values()))))
        if self.reuse:
            with self._lock:
                self._verdicts.update({k: v for k, v in judged.items() if v.outcome != Outcome.HARNESS_ERROR})
        out = []
        first = set()
        for key, (task, candidate) in zip(keys, pairs):
            source = judged.get(key) or self._verdicts[key]
            shared = key not in judged or key in first
            first.add(key)
            out.append(
                source.model_copy(
                    deep=True,
                    update={"task_id": task.id, "candidate_id": candidate.id, "shared": shared or source.shared},
                )
            )
        return out

    def _judge(self, pairs: list[tuple[Task, Candidate]]) -> list[Verdict]:
        if not pairs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.build_workers, len(pairs))) as pool:
            built = list(pool.map(lambda pair: self.tester.build(*pair), pairs))

        def judge_one(index: int) -> Verdict:
            task, candidate = pairs[index]
            verdict = self.tester.judge(task, candidate, built[index])
            with self._lock:
                self.judged += 1
            if self.progress:
                self.progress(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=min(self.judge_workers, len(pairs))) as pool:
            return list(pool.map(judge_one, range(len(pairs))))
