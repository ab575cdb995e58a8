"""Start a small pool on this machine, judge a few suite solutions and print the pool's stats
every few seconds: a quick look at a pool that does not progress (workers, queues, last error)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray  # noqa: E402

from cudarl.config import CudarlConfig  # noqa: E402
from cudarl.pool import start_pool  # noqa: E402
from cudarl.tasks.builtin import load_suite, suite_solutions  # noqa: E402


def main() -> int:
    ids = sys.argv[1].split(",") if len(sys.argv) > 1 else ["vector_add", "relu"]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 120
    tasks = {t.id: t for t in load_suite()}
    candidates = [c for c in suite_solutions() if c.task_id in ids]
    ray.init(include_dashboard=False)
    pool = start_pool(CudarlConfig.model_validate({"pool": {"min_compile_workers": 2, "max_compile_workers": 2}}))
    refs = pool.submit_many((tasks[c.task_id], c) for c in candidates)
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=5)
        print(f"{time.monotonic() - started:6.1f} s done {len(done)}/{len(refs)} {pool.stats()}", flush=True)
        if not pending:
            break
    for verdict in ray.get([r for r in refs if r in done]):
        print(verdict.candidate_id, verdict.outcome.value, verdict.reasons[:1], verdict.stage_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
