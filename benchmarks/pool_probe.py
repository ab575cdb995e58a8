"""Start a small pool on this machine, judge a few suite solutions and print the pool's stats
every few seconds: a quick look at a pool that does not progress (workers, queues, last error)."""

from __future__ import annotations

import argparse
import time

import ray

from cudarl.config import CudarlConfig
from cudarl.pool import start_pool
from cudarl.tasks.builtin import load_suite, suite_solutions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("tasks", nargs="?", default="vector_add,relu", help="suite tasks, comma-separated")
    parser.add_argument("seconds", nargs="?", type=float, default=120, help="how long to watch")
    args = parser.parse_args()
    ids = args.tasks.split(",")
    seconds = args.seconds
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
