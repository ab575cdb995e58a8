"""The tester pool's exactly-once books (``cudarl.pool.book``), without Ray, on a real event loop.

Covered: ``ItemBook.claim`` (one item per key, identical claims in flight share it and all
get its verdict; a claim waiting for room joins an identical item as soon as one starts, and a
cancelled wait takes no room), ``ItemBook.close`` (resolves once: a second close changes neither the verdict,
the cache nor the room; cancels the expiry, drops the artifact), the judged cache (cacheable
verdicts served without a new item, non-cacheable ones and ``cache_size = 0`` not kept; an LRU
where a claim served from the cache is a use), backpressure at ``max_queued`` (``waiting``
counted), and ``PoolTally`` (outcomes, cache lookups, restarts by kind and reason, stage
latency summaries with their 2000-sample window, and the same figures mirrored into a stand-in
for ``TesterMetrics``, hit ratio included).
Not covered: the actor's use of them (``actors/tester_pool.py``: deadlines, reruns, which
outcomes are uncached), the real Ray metrics (``PoolTally.start`` is never called here).
"""

import asyncio

from cudarl.pool.book import ItemBook, PoolTally
from cudarl.pool.records import PoolItem
from cudarl.tester.verdict import Outcome, Stage, Verdict


def verdict(outcome: Outcome = Outcome.PASSED, reason: str = "") -> Verdict:
    return Verdict(task_id="t", candidate_id="c", candidate_hash="h", stage=Stage.DONE, outcome=outcome,
                   reasons=[reason] if reason else [])


class Starts:
    """``start`` callables for ``claim`` that count the items they made."""

    def __init__(self) -> None:
        self.made: list[PoolItem] = []

    def __call__(self, key: str):
        def start() -> PoolItem:
            item = PoolItem(key, None, None, asyncio.get_running_loop().create_future(), 0.0)
            self.made.append(item)
            return item
        return start


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_identical_claims_share_one_item_and_all_get_its_verdict():
    async def main():
        book, starts = ItemBook(max_queued=4, cache_size=8), Starts()
        item, judged, created = await book.claim("k", starts("k"))
        assert created and judged is None and book.inflight == {"k": item}
        again, judged, created = await book.claim("k", starts("k"))
        assert again is item and judged is None and not created and len(starts.made) == 1
        waiters = [asyncio.shield(item.future) for _ in range(3)]
        await settle()
        assert not any(w.done() for w in waiters)
        given = verdict(reason="once")
        assert book.close(item, given, cacheable=True)
        assert all(result is given for result in await asyncio.gather(*waiters))
        assert book.inflight == {}
    asyncio.run(main())


def test_a_second_close_changes_nothing():
    async def main():
        book, starts = ItemBook(max_queued=1, cache_size=8), Starts()
        item, _, _ = await book.claim("k", starts("k"))
        item.artifact = object()
        item.expiry = asyncio.get_running_loop().call_later(3600, lambda: None)
        first, second = verdict(Outcome.PASSED), verdict(Outcome.TIMEOUT, "late")
        assert book.close(item, first, cacheable=True) is True
        assert item.artifact is None and item.expiry.cancelled()
        assert not book.close(item, second, cacheable=True)
        assert item.future.result() is first and book.judged["k"] is first and list(book.judged) == ["k"]
        # the room was given back once only: one new item fits, a second one waits
        await book.claim("a", starts("a"))
        blocked = asyncio.create_task(book.claim("b", starts("b")))
        await settle()
        assert not blocked.done() and book.waiting == 1
        blocked.cancel()
        await settle()
        assert book.waiting == 0 and [i.key for i in starts.made] == ["k", "a"]
    asyncio.run(main())


def test_a_cacheable_verdict_is_served_without_a_new_item_and_others_are_not_kept():
    async def main():
        book, starts = ItemBook(max_queued=4, cache_size=8), Starts()
        item, _, _ = await book.claim("good", starts("good"))
        given = verdict()
        book.close(item, given, cacheable=True)
        again, judged, created = await book.claim("good", starts("good"))
        assert again is None and judged is given and not created and len(starts.made) == 1

        item, _, _ = await book.claim("flaky", starts("flaky"))
        book.close(item, verdict(Outcome.HARNESS_ERROR, "machine"), cacheable=False)
        assert "flaky" not in book.judged
        again, judged, created = await book.claim("flaky", starts("flaky"))
        assert created and judged is None and again is not item and again is starts.made[-1]

        no_cache = ItemBook(max_queued=4, cache_size=0)
        item, _, _ = await no_cache.claim("k", starts("k"))
        no_cache.close(item, verdict(), cacheable=True)
        assert not no_cache.judged and (await no_cache.claim("k", starts("k")))[2]
    asyncio.run(main())


def test_the_judged_cache_is_an_lru_where_a_claim_served_from_it_is_a_use():
    async def main():
        book, starts = ItemBook(max_queued=4, cache_size=2), Starts()
        verdicts = {}
        for key in ("a", "b"):
            item, _, _ = await book.claim(key, starts(key))
            verdicts[key] = verdict(reason=key)
            book.close(item, verdicts[key], cacheable=True)
        assert list(book.judged) == ["a", "b"]
        assert (await book.claim("a", starts("a")))[1] is verdicts["a"]  # "a" used: "b" is now the oldest
        item, _, _ = await book.claim("c", starts("c"))
        book.close(item, verdict(reason="c"), cacheable=True)
        assert list(book.judged) == ["a", "c"]
        made = len(starts.made)
        assert (await book.claim("a", starts("a")))[1] is verdicts["a"] and len(starts.made) == made
        again, judged, created = await book.claim("b", starts("b"))  # evicted: judged anew
        assert created and judged is None and len(starts.made) == made + 1
    asyncio.run(main())


def test_backpressure_waits_for_room_and_a_waiting_duplicate_needs_none():
    async def main():
        book, starts = ItemBook(max_queued=2, cache_size=8), Starts()
        first, _, _ = await book.claim("a", starts("a"))
        await book.claim("b", starts("b"))
        third = asyncio.create_task(book.claim("c", starts("c")))
        twin = asyncio.create_task(book.claim("c", starts("c")))  # same key, also waiting for room
        await settle()
        assert not third.done() and not twin.done() and book.waiting == 2 and len(starts.made) == 2
        book.close(first, verdict(), cacheable=True)
        (item, _, created), (twin_item, _, twin_created) = await asyncio.gather(third, twin)
        assert created and not twin_created and twin_item is item and len(starts.made) == 3
        assert book.waiting == 0 and set(book.inflight) == {"b", "c"}
        # the twin took no room: still exactly full
        fourth = asyncio.create_task(book.claim("d", starts("d")))
        await settle()
        assert not fourth.done() and book.waiting == 1
        assert (await book.claim("c", starts("c")))[0] is item  # in flight: shared at once, no room needed
        book.close(book.inflight["b"], verdict(reason="b"), cacheable=True)
        assert (await fourth)[2] and set(book.inflight) == {"c", "d"}
        assert (await book.claim("b", starts("b")))[1].reasons == ["b"]  # judged: served with the room full
        assert len(starts.made) == 4
    asyncio.run(main())


def test_claims_waiting_for_room_join_the_item_one_of_them_starts_and_a_cancelled_wait_costs_no_room():
    async def main():
        book, starts = ItemBook(max_queued=1, cache_size=8), Starts()
        first, _, _ = await book.claim("a", starts("a"))
        one = asyncio.create_task(book.claim("b", starts("b")))
        two = asyncio.create_task(book.claim("b", starts("b")))
        gives_up = asyncio.create_task(book.claim("x", starts("x")))
        await settle()
        assert book.waiting == 3
        gives_up.cancel()
        await settle()
        assert book.waiting == 2 and book.free == 0
        book.close(first, verdict(), cacheable=True)
        (item, _, created), (joined, _, joined_created) = await asyncio.gather(one, two)
        assert created and not joined_created and joined is item and len(starts.made) == 2
        given = verdict(reason="b")
        book.close(item, given, cacheable=True)
        assert await book.claim("b", starts("b")) == (None, given, False)
        await book.claim("c", starts("c"))  # the cancelled wait took no room: "c" fits at once
        assert book.waiting == 0 and list(book.inflight) == ["c"] and book.free == 0
    asyncio.run(main())


class Recorder:
    """Stands in for ``TesterMetrics``: each metric records (value, tags)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, metric: str):
        recorder = self

        class Metric:
            def inc(self, tags):
                recorder.calls.append((metric, "inc", 1, tags))

            def set(self, value, tags):
                recorder.calls.append((metric, "set", value, tags))

            def observe(self, value, tags):
                recorder.calls.append((metric, "observe", value, tags))
        return Metric()


def test_tally_counts_outcomes_lookups_restarts_and_stage_latencies():
    tally = PoolTally(("compile", "bench"))
    for outcome in ("passed", "incorrect", "passed"):
        tally.verdict(outcome)
    for hit in (False, True, True, False, True):
        tally.cache_lookup("verdict", hit)
    tally.cache_lookup("compile", False)
    tally.restart("bench", "died")
    tally.restart("bench", "died")
    tally.restart("bench", "hung")
    tally.restart("compile", "died")
    for seconds in (0.5, 0.1, 0.3, 0.2):
        tally.stage("compile", seconds)
    tally.stage("item", 9.0)  # whole items: metrics only
    tally.gauges("bench", queued=3, workers=2)  # no metrics yet: nothing to do
    assert tally.restarts_of("bench") == 3 and tally.restarts_of("compile") == 1 and tally.restarts_of("x") == 0
    assert tally.summary() == {
        "counts": {"verdict_cache_misses": 2, "verdict_cache_hits": 3, "compile_cache_misses": 1},
        "verdicts": {"passed": 2, "incorrect": 1},
        "restarts": {"bench/died": 2, "bench/hung": 1, "compile/died": 1},
        "stage_seconds": {"compile": {"count": 4, "p50": 0.3, "p95": 0.5, "mean": 0.275}, "bench": {"count": 0}},
    }


def test_stage_latencies_keep_the_last_2000():
    tally = PoolTally(("bench",))
    tally.stage("bench", 100.0)
    for _ in range(2000):
        tally.stage("bench", 1.0)
    assert tally.summary()["stage_seconds"]["bench"] == {"count": 2000, "p50": 1.0, "p95": 1.0, "mean": 1.0}


def test_tally_mirrors_each_count_into_the_metrics():
    tally = PoolTally(("compile",))
    tally.metrics = Recorder()  # what start() would set, without Ray
    tally.verdict("passed")
    tally.cache_lookup("verdict", True)
    tally.cache_lookup("verdict", False)
    tally.cache_lookup("verdict", True)
    tally.restart("bench", "died")
    tally.stage("item", 2.5)
    tally.gauges("compile", queued=4, workers=1)
    ratios = [value for metric, _, value, tags in tally.metrics.calls
              if metric == "cache_hit_ratio" and tags == {"cache": "verdict"}]
    assert ratios == [1.0, 0.5, 2 / 3]
    calls = [c for c in tally.metrics.calls if c[0] != "cache_hit_ratio"]
    assert calls == [
        ("verdicts", "inc", 1, {"outcome": "passed"}),
        ("cache", "inc", 1, {"cache": "verdict", "result": "hit"}),
        ("cache", "inc", 1, {"cache": "verdict", "result": "miss"}),
        ("cache", "inc", 1, {"cache": "verdict", "result": "hit"}),
        ("restarts", "inc", 1, {"kind": "bench", "reason": "died"}),
        ("stage_seconds", "observe", 2.5, {"stage": "item"}),
        ("queue_depth", "set", 4, {"stage": "compile"}),
        ("workers", "set", 1, {"kind": "compile"}),
    ]
    assert tally.summary()["stage_seconds"] == {"compile": {"count": 0}}  # "item" is not a kept stage
