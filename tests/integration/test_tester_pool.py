"""The tester pool on a real local Ray cluster (CPU only): real compile workers running nvcc, real
bench workers running the sandboxed judge (load stage only without a GPU), real Prometheus export.

Covered: 200 submissions with duplicates and failures resolve exactly once, with backpressure
(``max_queued`` far below the batch); stats and the exported metrics agree with what happened;
``ray.kill`` of a busy compile worker and of a busy bench worker loses nothing; scaling up under
load, back down when idle, and pinned by ``scale``; the per-item deadline.
Not covered here: GPU stages (tests/gpu/test_pool_gpu.py), nodes joining (test_pool_multinode.py).
"""

from __future__ import annotations

import random
import time
import urllib.request
from collections import Counter

import pytest
import ray  # a dependency: a broken install must fail, not skip

from cudarl.config import CudarlConfig
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Outcome
from tests.fixtures.tiny import TASK, candidate

pytestmark = pytest.mark.slow

ADD = Task(id="add", source=TASK)


def good(number: int) -> str:
    return candidate(f"VARIANT = {number}")


def compile_error(number: int) -> str:
    return good(number).replace("out[i] = a[i] + b[i];", f"out[i] = a[i] + b[i] + undefined_{number};")


def parse_error(number: int) -> str:
    return f"def broken_{number}(:\n"


BENCH_SLOTS = CudarlConfig().pool.bench_slots  # items a killed bench worker may have had in flight


@pytest.fixture
def local_ray(shared_ray):
    """The session's Ray; the metrics scraped here carry the pool's own name, so other tests'
    pools on the same cluster do not count."""
    return shared_ray


def make_pool(name: str, tmp_path, **pool):
    from cudarl.pool import start_pool

    config = CudarlConfig.model_validate({
        "tester": {"compile": {"cache_dir": str(tmp_path / name)}},
        "pool": {"name": name, "scale_interval_s": 0.25, "bench_workers_without_gpu": 2, **pool}})
    return start_pool(config)


def wait_for(condition, timeout_s: float, what: str, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def scrape(port: int, metric: str, **labels: str) -> float:
    """Sum of the exported samples of ``metric`` whose labels include ``labels``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(metric + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_200_submissions_with_duplicates_and_failures_resolve_exactly_once(local_ray, tmp_path):
    pool = make_pool("pool-200", tmp_path, min_compile_workers=2, max_compile_workers=2, max_queued=4)
    sources = ([("good", good(n)) for n in range(5) for _ in range(16)]
               + [("compile_error", compile_error(n)) for n in range(4) for _ in range(10)]
               + [("parse_error", parse_error(n)) for n in range(10) for _ in range(8)])
    random.Random(7).shuffle(sources)
    assert len(sources) == 200
    candidates = [Candidate(task_id="add", id=f"c{index:03d}", source=source)
                  for index, (_, source) in enumerate(sources)]
    expected = {f"c{index:03d}": kind for index, (kind, _) in enumerate(sources)}
    waiting_seen = []
    refs = pool.submit_many((ADD, c) for c in candidates)
    while True:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0.5)
        waiting_seen.append(pool.stats()["waiting_for_room"])
        if len(ready) == len(refs):
            break
    verdicts = ray.get(refs)

    assert sorted(v.candidate_id for v in verdicts) == sorted(expected)  # one verdict each
    want = {"good": Outcome.COMPILED, "compile_error": Outcome.COMPILE_ERROR, "parse_error": Outcome.PARSE_ERROR}
    for verdict in verdicts:
        assert verdict.outcome == want[expected[verdict.candidate_id]], (verdict.candidate_id, verdict.reasons)
    by_source = {}
    for verdict, c in zip(verdicts, candidates):
        by_source.setdefault(c.source, set()).add((verdict.outcome,
                                                   verdict.compile.cache_key if verdict.compile else None))
    assert all(len(outcomes) == 1 for outcomes in by_source.values())  # duplicates share one judgement
    assert sum(not v.shared for v in verdicts) == 19  # judged once per distinct source
    assert max(waiting_seen) > 0  # backpressure: submissions waited for room

    stats = pool.stats()
    assert stats["counts"]["submitted"] == 200
    assert stats["verdicts"] == {"compiled": 80, "compile_error": 40, "parse_error": 80}
    assert stats["counts"]["verdict_cache_misses"] == 19 and stats["counts"]["verdict_cache_hits"] == 181
    assert stats["counts"]["compile_cache_misses"] == 9 and "compile_cache_hits" not in stats["counts"]
    assert stats["stage_seconds"]["compile"]["count"] == 19 and stats["stage_seconds"]["bench"]["count"] == 5
    assert stats["in_flight"] == 0 and stats["queued"] == {"compile": 0, "bench": 0} and stats["restarts"] == {}

    # The same figures through Ray's Prometheus endpoint (exported every few seconds).
    labels, port = {"pool": "pool-200"}, local_ray.metrics_port
    wait_for(lambda: scrape(port, "ray_cudarl_tester_verdicts_total", outcome="compiled", **labels) == 80, 60,
             "the verdict counter to be exported")
    assert scrape(port, "ray_cudarl_tester_verdicts_total", outcome="compile_error", **labels) == 40
    assert scrape(port, "ray_cudarl_tester_verdicts_total", outcome="parse_error", **labels) == 80
    assert scrape(port, "ray_cudarl_tester_cache_lookups_total", cache="verdict", result="hit", **labels) == 181
    assert scrape(port, "ray_cudarl_tester_stage_seconds_count", stage="compile", **labels) == 19
    wait_for(lambda: scrape(port, "ray_cudarl_tester_workers", kind="compile", **labels) == 2, 30, "the workers gauge")
    pool.shutdown()


def test_killed_workers_lose_nothing(local_ray, tmp_path):
    pool = make_pool("pool-kill", tmp_path, min_compile_workers=2, max_compile_workers=2,
                     min_bench_workers=1, bench_workers_without_gpu=1)
    sources = [good(100 + n) for n in range(3)] + [compile_error(100 + n) for n in range(6)]
    refs = pool.submit_many((ADD, Candidate(task_id="add", id=f"k{n}", source=s)) for n, s in enumerate(sources))
    busy = wait_for(lambda: ray.get(pool.handle.worker_handles.remote("compile", busy_only=True)), 120,
                    "a busy compile worker", every_s=0.05)
    ray.kill(busy[0], no_restart=True)
    busy = wait_for(lambda: ray.get(pool.handle.worker_handles.remote("bench", busy_only=True)), 300,
                    "a busy bench worker", every_s=0.05)
    ray.kill(busy[0], no_restart=True)
    verdicts = ray.get(refs, timeout=600)

    outcomes = Counter(v.outcome for v in verdicts)
    assert outcomes == {Outcome.COMPILED: 3, Outcome.COMPILE_ERROR: 6}, [v.reasons for v in verdicts]
    stats = pool.stats()
    assert stats["restarts"] == {"compile/died": 1, "bench/died": 1}
    assert 1 <= stats["counts"]["reruns"] <= 1 + BENCH_SLOTS
    assert stats["workers"]["compile"]["ready"] == 2 and stats["workers"]["bench"]["ready"] == 1
    pool.shutdown()


def test_pool_scales_up_under_load_back_down_when_idle_and_on_request(local_ray, tmp_path):
    pool = make_pool("pool-scale", tmp_path, min_compile_workers=1, max_compile_workers=4, idle_s=2.0,
                     scale_up_queue_depth=1)
    wait_for(lambda: pool.stats()["workers"]["compile"]["ready"] == 1, 120, "the first compile worker")
    refs = pool.submit_many((ADD, Candidate(task_id="add", id=f"s{n}", source=compile_error(200 + n)))
                            for n in range(10))
    seen = []
    while ray.wait(refs, num_returns=len(refs), timeout=0.25)[1]:
        workers = pool.stats()["workers"]["compile"]
        seen.append(workers["ready"] + workers["starting"])
    assert all(v.outcome == Outcome.COMPILE_ERROR for v in ray.get(refs))
    assert max(seen) > 1, seen
    wait_for(lambda: pool.stats()["workers"]["compile"]["ready"] == 1, 60, "scaling back down to the minimum")

    stats = pool.scale(compile=3)
    assert stats["workers"]["compile"]["bounds"] == [3, 3]
    wait_for(lambda: pool.stats()["workers"]["compile"]["ready"] == 3, 120, "three compile workers")
    time.sleep(3)  # idle past idle_s: pinned workers stay
    assert pool.stats()["workers"]["compile"]["ready"] == 3
    pool.scale(compile="auto")
    wait_for(lambda: pool.stats()["workers"]["compile"]["ready"] == 1, 60, "autoscaling back to the minimum")
    with pytest.raises(ray.exceptions.RayTaskError, match="must be >= 0"):
        pool.scale(compile=-1)
    pool.shutdown()


def test_an_item_past_its_deadline_gets_a_timeout_verdict_and_is_not_cached(local_ray, tmp_path):
    pool = make_pool("pool-deadline", tmp_path, item_deadline_s=2.0, bench_workers_without_gpu=1)
    wait_for(lambda: all(w["ready"] for w in pool.stats()["workers"].values()), 120, "the workers")
    source = good(300)  # compiles in about a second, loads in several
    first = ray.get(pool.submit(ADD, Candidate(task_id="add", id="d1", source=source)), timeout=120)
    assert first.outcome == Outcome.TIMEOUT
    assert "item_deadline_s" in first.reasons[0]
    second = ray.get(pool.submit(ADD, Candidate(task_id="add", id="d2", source=source)), timeout=120)
    assert second.outcome == Outcome.TIMEOUT and not second.shared  # judged again, not served from cache
    assert pool.stats()["verdicts"] == {"timeout": 2}
    pool.shutdown()
