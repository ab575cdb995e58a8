"""TesterPool: the tester as a service on a Ray cluster, fronting compile and bench workers.

``submit(task, candidate)`` called as ``pool.submit.remote(...)`` hands the caller an object ref
at once; the verdict fills it when judged (an async actor: thousands of submissions wait here,
not in the caller). Each item goes compile queue -> a ``CompileWorker`` -> bench queue -> a
``BenchWorker``; the build travels between them as an artifact ref owned by this actor.

Covered: identical (task, source) pairs share one judgement, in flight or already judged; a
worker that dies under an item (killed, node lost) is replaced and the item re-run up to
``pool.retries`` times, then answered ``harness_error``; a worker silent past its stage deadline
is killed and replaced and the item answered ``timeout``, as is any item past
``pool.item_deadline_s``; a bench worker whose GPU fails a health check after a crashing
candidate is replaced; every submission gets exactly one verdict; at ``pool.max_queued`` items
new submissions wait for room. Workers scale with queue depth and idleness between configured
bounds, bench workers up to one per GPU of the cluster (GPU nodes that join add them).
Not covered: a pool whose bench workers sit on GPUs of different architectures builds for the
first one's; the pool actor itself is a single point of failure (restart it and resubmit).
"""

from __future__ import annotations

import asyncio
import time

import ray
from ray.exceptions import ObjectLostError, OwnerDiedError, RayActorError, RayTaskError

from actors.bench_worker import BenchWorkerActor
from actors.compile_worker import CompileWorkerActor
from cudarl.config import CudarlConfig
from cudarl.pool.book import ItemBook, PoolTally
from cudarl.pool.records import (
    CompileProfile,
    PoolItem,
    PoolWorker,
    bench_config,
    builder_config,
    judgement_key,
    kind_load,
    pool_verdict,
    workers_summary,
)
from cudarl.pool.scaling import Bounds, bench_bounds, compile_bounds, pool_targets
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.build.artifact import ArtifactError
from cudarl.tester.verdict import Outcome, Stage, Verdict

COMPILE, BENCH = "compile", "bench"
_UNCACHED = (Outcome.HARNESS_ERROR, Outcome.COMPILE_TIMEOUT)  # may be the machine, not the candidate


class TesterPool:
    """See the module docstring. ``config`` is a ``CudarlConfig`` dump (its ``tester`` and ``pool``)."""

    def __init__(self, config: dict | None = None) -> None:
        self.config = CudarlConfig.model_validate(config or {})
        self.settings = self.config.pool
        self.queues: dict[str, asyncio.Queue] = {COMPILE: asyncio.Queue(), BENCH: asyncio.Queue()}
        self.workers: dict[str, list[PoolWorker]] = {COMPILE: [], BENCH: []}
        self.book = ItemBook(self.settings.max_queued, self.settings.verdict_cache_size)
        self.tally = PoolTally((COMPILE, BENCH))
        self.manual: dict[str, Bounds | None] = {COMPILE: None, BENCH: None}
        self.bounds: dict[str, Bounds] = {COMPILE: Bounds(0, 0), BENCH: Bounds(0, 0)}
        self.compile_profile: CompileProfile | None = None  # mode and arch fixed from the bench workers
        self.cluster = {"CPU": 0.0, "GPU": 0.0}
        self.started_at = time.monotonic()
        self.numbers = iter(range(1, 1 << 62))
        self.last_error = ""
        self.scaler: asyncio.Task | None = None

    # ----- the API -----------------------------------------------------------------------

    async def submit(self, task: Task, candidate: Candidate) -> Verdict:
        """The verdict for one candidate (call with ``.remote``: the caller gets a ref at once)."""
        self._ensure_started()
        self.tally.counts["submitted"] += 1
        started = time.monotonic()
        key = judgement_key(task, candidate)
        item, verdict, created = await self.book.claim(key, lambda: self._new_item(key, task, candidate))
        if verdict is None:
            verdict = await asyncio.shield(item.future)
        self.tally.cache_lookup("verdict", hit=not created)
        return self._deliver(verdict, task, candidate, not created, started)

    async def submit_many(self, pairs: list[tuple[Task, Candidate]]) -> list[Verdict]:
        """All verdicts in one ref, in order (``cudarl.pool.PoolClient.submit_many`` gives one ref each)."""
        return list(await asyncio.gather(*(self.submit(task, candidate) for task, candidate in pairs)))

    async def stats(self) -> dict:
        """Counts since the pool started, queue depths and workers (what ``cudarl tester stats`` prints)."""
        self._ensure_started()
        workers = {kind: workers_summary(members, self.bounds[kind], self.manual[kind] is not None,
                                         self.tally.restarts_of(kind))
                   for kind, members in self.workers.items()}
        return {"name": self.settings.name, "uptime_s": round(time.monotonic() - self.started_at, 1),
                "cluster": dict(self.cluster), "workers": workers,
                "compile_profile": vars(self.compile_profile) if self.compile_profile else None,
                "queued": {kind: queue.qsize() for kind, queue in self.queues.items()},
                "in_flight": len(self.book.inflight), "waiting_for_room": self.book.waiting,
                **self.tally.summary(), "last_error": self.last_error}

    async def scale(self, compile: int | str | None = None, bench: int | str | None = None) -> dict:
        """Pin a kind to exactly N workers, or give it back to autoscaling with ``"auto"``."""
        self._ensure_started()
        for kind, value in ((COMPILE, compile), (BENCH, bench)):
            if value == "auto":
                self.manual[kind] = None
            elif value is not None:
                count = int(value)
                if count < 0:
                    raise ValueError(f"{kind} workers must be >= 0, got {count}")
                self.manual[kind] = Bounds(count, count)
        self._rescale()
        return await self.stats()

    async def worker_handles(self, kind: str, busy_only: bool = False) -> list:
        """Actor handles of one kind's ready workers (operators and fault tests kill them)."""
        return [w.handle for w in self.workers[kind] if w.info is not None and (w.busy or not busy_only)]

    async def ping(self) -> str:
        self._ensure_started()
        return self.settings.name

    async def shutdown(self) -> None:
        """Kill every worker (the pool actor itself is killed by the caller)."""
        if self.scaler:
            self.scaler.cancel()
        for members in self.workers.values():
            for worker in list(members):
                self._drop(worker)

    # ----- items -------------------------------------------------------------------------

    def _new_item(self, key: str, task: Task, candidate: Candidate) -> PoolItem:
        loop = asyncio.get_running_loop()
        item = PoolItem(key, task, candidate, loop.create_future(), time.monotonic())
        item.expiry = loop.call_later(self.settings.item_deadline_s, self._expire, item)
        self.queues[COMPILE].put_nowait(item)
        return item

    def _expire(self, item: PoolItem) -> None:
        self._finish(item, pool_verdict(item, Outcome.TIMEOUT, Stage.GUARD,
                                    f"no verdict within pool.item_deadline_s = {self.settings.item_deadline_s:.0f} s "
                                    "of submission (queueing included)"), cacheable=False)

    def _finish(self, item: PoolItem, verdict: Verdict, cacheable: bool = True) -> None:
        """Resolve an item exactly once; later results for it are dropped."""
        if self.book.close(item, verdict, cacheable and verdict.outcome not in _UNCACHED):
            self.tally.stage("item", time.monotonic() - item.submitted)

    def _rerun_or_fail(self, item: PoolItem, why: str) -> None:
        item.reruns += 1
        item.built, item.artifact = None, None
        if item.reruns > self.settings.retries:
            self._finish(item, pool_verdict(item, Outcome.HARNESS_ERROR, Stage.COMPILE,
                                        f"{why}; gave up after {item.reruns} runs"), cacheable=False)
        elif not item.future.done():
            self.tally.counts["reruns"] += 1
            self.queues[COMPILE].put_nowait(item)

    def _deliver(self, verdict: Verdict, task: Task, candidate: Candidate, shared: bool, started: float) -> Verdict:
        mine = verdict.model_copy(deep=True, update={"task_id": task.id, "candidate_id": candidate.id,
                                                     "shared": shared})
        mine.stage_seconds["pool"] = time.monotonic() - started
        self.tally.verdict(mine.outcome.value)
        return mine

    # ----- workers -----------------------------------------------------------------------

    async def _work(self, worker: PoolWorker) -> None:
        """One worker's life: wait until it is up, then serve its queue from each of its slots."""
        try:
            worker.info = await worker.handle.ready.remote()
        except Exception as exc:  # noqa: BLE001 - the actor failed to start
            self.last_error = f"{worker.kind} worker failed to start: {exc}"[:2000]
            self._drop(worker)
            return
        worker.idle_since = time.monotonic()
        if worker.retiring:
            return
        if worker.kind == BENCH:
            self._note_bench(worker)
        loop = asyncio.get_running_loop()
        worker.loops += [loop.create_task(self._serve(worker)) for _ in range(worker.slots - 1)]
        await self._serve(worker)

    async def _serve(self, worker: PoolWorker) -> None:
        """One slot: take items until the worker dies or retires."""
        me = asyncio.current_task()
        while not worker.retiring:
            worker.waiting.add(me)
            try:
                item = await self.queues[worker.kind].get()
            finally:
                worker.waiting.discard(me)
            if worker.retiring:
                self.queues[worker.kind].put_nowait(item)
                return
            if item.future.done():
                continue
            worker.items.add(item)
            try:
                alive = await (self._compile(worker, item) if worker.kind == COMPILE else self._bench(worker, item))
            except Exception as exc:  # noqa: BLE001 - a pool bug or an odd Ray error: never lose the item
                self.last_error = f"{worker.kind} worker {worker.number}: {exc!r}"[:2000]
                self._rerun_or_fail(item, f"the pool failed around its {worker.kind} worker ({type(exc).__name__})")
                self._replace(worker, "error")
                alive = False
            finally:
                worker.items.discard(item)
                if not worker.items:
                    worker.idle_since = time.monotonic()
            if not alive:
                return
        if not worker.items:
            self._drop(worker)

    async def _compile(self, worker: PoolWorker, item: PoolItem) -> bool:
        started = time.monotonic()
        record, artifact = worker.handle.compile.options(num_returns=2).remote(item.task, item.candidate)
        deadline = self.config.tester.compile.timeout_s + self.settings.deadline_grace_s
        built = await self._await(worker, item, record, deadline, Stage.COMPILE)
        if built is None:
            return not worker.retiring
        self.tally.stage(COMPILE, time.monotonic() - started)
        if built.verdict.compile is not None:
            self.tally.cache_lookup("compile", built.verdict.compile.cached)
        if item.future.done():
            return True  # expired while it compiled
        if not built.ready:
            self._finish(item, built.verdict)
        else:
            item.built, item.artifact = built, artifact
            self.queues[BENCH].put_nowait(item)
        return True

    async def _bench(self, worker: PoolWorker, item: PoolItem) -> bool:
        started = time.monotonic()
        ref = worker.handle.judge.remote(item.task, item.candidate, item.built, [item.artifact])
        tester = self.config.tester  # a judge's waits for GPU turns do not count against its time limit
        deadline = tester.sandbox.timeout_s + tester.timing.gpu_turn_wait_s + self.settings.deadline_grace_s
        verdict = await self._await(worker, item, ref, deadline, Stage.LOAD)
        if verdict is None:
            return not worker.retiring
        self.tally.stage(BENCH, time.monotonic() - started)
        healthy, why = True, ""
        if verdict.outcome in (Outcome.CUDA_ERROR, Outcome.CRASHED, Outcome.TIMEOUT):
            try:
                healthy, why = await asyncio.wait_for(worker.handle.health.remote(), self.settings.deadline_grace_s)
            except Exception as exc:  # noqa: BLE001 - timeout, dead actor, failing probe: all unhealthy
                healthy, why = False, f"health check failed: {exc!r}"[:300]
        self._finish(item, verdict, cacheable=healthy)  # a sick GPU may have caused it: not shared later
        if not healthy:
            self.last_error = f"bench worker {worker.number} unhealthy after {item.candidate.id}: {why}"
            self._replace(worker, "unhealthy")
            return False
        return True

    async def _await(self, worker: PoolWorker, item: PoolItem, ref, deadline: float, stage: Stage):
        """A worker's answer, or None after handling its death, deadline or error."""
        try:
            return await asyncio.wait_for(ref, deadline)
        except TimeoutError:
            self._replace(worker, "deadline")
            self._finish(item, pool_verdict(item, Outcome.TIMEOUT, stage,
                                        f"the {worker.kind} worker gave no answer within {deadline:.0f} s; "
                                        "it was killed and replaced"), cacheable=False)
        except RayTaskError as exc:
            lost = stage != Stage.COMPILE and isinstance(exc.cause, (ObjectLostError, OwnerDiedError, ArtifactError))
            if lost:
                self._rerun_or_fail(item, f"the build could not reach the bench worker ({type(exc.cause).__name__})")
            else:
                self.last_error = str(exc)[-2000:]
                self._finish(item, pool_verdict(item, Outcome.HARNESS_ERROR, stage,
                                            f"the {worker.kind} worker failed: {str(exc)[-1500:]}"), cacheable=False)
        except RayActorError as exc:
            self._replace(worker, "died")  # once per worker, however many of its slots notice
            self._rerun_or_fail(item, f"its {worker.kind} worker died ({type(exc).__name__})")
        worker.retiring = worker.retiring or worker not in self.workers[worker.kind]
        return None

    def _spawn(self, kind: str) -> PoolWorker:
        number = next(self.numbers)
        if kind == COMPILE:
            tester = builder_config(self.config.tester, self.compile_profile)
            handle = CompileWorkerActor.options(num_cpus=self.settings.compile_worker_cpus).remote(
                tester.model_dump(mode="json"))
            worker = PoolWorker(kind, number, handle)
        else:
            gpus = self.settings.gpus_per_bench_worker if self.cluster["GPU"] > 0 else 0.0
            # Placed by its GPU alone: its candidates' processes are not Ray tasks anyway, and a
            # GPU node whose CPUs compile workers took must still get its bench workers.
            cpus = 0 if gpus else 1
            tester = bench_config(self.config.tester, self.settings.bench_slots, self.settings.gpus_per_bench_worker)
            handle = BenchWorkerActor.options(num_cpus=cpus, num_gpus=gpus,
                                              max_concurrency=self.settings.bench_slots + 2).remote(
                tester.model_dump(mode="json"))
            worker = PoolWorker(kind, number, handle, gpus=gpus, slots=self.settings.bench_slots)
        self.workers[kind].append(worker)
        worker.loops.append(asyncio.get_running_loop().create_task(self._work(worker)))
        return worker

    def _drop(self, worker: PoolWorker) -> None:
        if worker in self.workers[worker.kind]:
            self.workers[worker.kind].remove(worker)
        worker.retiring = True
        current = asyncio.current_task()
        # Slots waiting in queue.get() stop now (a cancelled get loses nothing); busy ones stop
        # after their item. A worker still starting has only its _work task.
        for loop in worker.waiting | (set(worker.loops) if worker.info is None else set()):
            if loop is not current:
                loop.cancel()
        try:
            ray.kill(worker.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _replace(self, worker: PoolWorker, reason: str) -> None:
        if worker not in self.workers[worker.kind]:
            return  # another slot of this worker already replaced it
        self.tally.restart(worker.kind, reason)
        self._drop(worker)
        self._spawn(worker.kind)

    def _note_bench(self, worker: PoolWorker) -> None:
        """Compile workers build for the bench workers' GPU; a new profile retires the old builders.
        A worker given a GPU share on which torch sees no CUDA still sets the profile when there
        is none (its candidates are only loaded; stats' last_error says why), or nothing would
        ever be built."""
        info = worker.info
        assert info is not None
        profile = info.profile
        if not info.has_gpu:
            if worker.gpus == 0 or self.compile_profile is not None:
                return
            self.last_error = (f"bench worker {worker.number} holds {worker.gpus:g} GPU but torch sees no CUDA on "
                               f"its node: candidates are built in {info.mode} mode and only loaded")
        if profile != self.compile_profile:
            self.compile_profile = profile
            for builder in list(self.workers[COMPILE]):
                builder.retiring = True
                if not builder.busy:
                    self._drop(builder)
            self._rescale()

    # ----- scaling -----------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self.scaler is None:
            self.tally.start(self.settings.name)
            self.scaler = asyncio.get_running_loop().create_task(self._scale_forever())

    async def _scale_forever(self) -> None:
        while True:
            try:
                self._rescale()
            except Exception as exc:  # noqa: BLE001 - keep scaling; say why in stats
                self.last_error = f"scaling: {exc!r}"[:2000]
            await asyncio.sleep(self.settings.scale_interval_s)

    def _rescale(self) -> None:
        resources = ray.cluster_resources()
        self.cluster = {"CPU": float(resources.get("CPU", 0)), "GPU": float(resources.get("GPU", 0))}
        s = self.settings
        bench = self.manual[BENCH] or bench_bounds(s.min_bench_workers, s.max_bench_workers, self.cluster["GPU"],
                                                   s.gpus_per_bench_worker, s.bench_workers_without_gpu)
        self.bounds[BENCH] = bench
        if self.cluster["GPU"] > 0:  # GPU-less bench workers give way to GPU ones once idle
            for worker in list(self.workers[BENCH]):
                if worker.gpus == 0 and not worker.busy:
                    self._drop(worker)
        # Automatic compile maxima leave a CPU per bench slot for the judges (GPU-pinned bench
        # actors reserve none themselves) or per GPU-less bench actor (one each).
        bench_cpus = float(bench.high * (s.bench_slots if self.cluster["GPU"] > 0 else 1))
        self.bounds[COMPILE] = self.manual[COMPILE] or compile_bounds(
            s.min_compile_workers, s.max_compile_workers, self.cluster["CPU"], bench_cpus, s.compile_worker_cpus)
        members = {kind: [w for w in self.workers[kind] if not w.retiring] for kind in (BENCH, COMPILE)}
        loads = {kind: kind_load(members[kind], self.queues[kind].qsize()) for kind in (BENCH, COMPILE)}
        targets = pool_targets(loads[BENCH], loads[COMPILE], self.bounds[BENCH], self.bounds[COMPILE],
                               s.scale_up_queue_depth, s.idle_s,
                               self.cluster["GPU"] > 0 and self.compile_profile is None)
        for kind, target in zip((BENCH, COMPILE), targets):
            for _ in range(target - len(members[kind])):
                self._spawn(kind)
            idle = sorted((w for w in members[kind] if not w.busy), key=lambda w: w.idle_since)
            for worker in idle[:max(0, len(members[kind]) - target)]:
                self._drop(worker)
            self.tally.gauges(kind, self.queues[kind].qsize(), len(self.workers[kind]))


TesterPoolActor = ray.remote(num_cpus=0, max_concurrency=100000, max_restarts=0)(TesterPool)
