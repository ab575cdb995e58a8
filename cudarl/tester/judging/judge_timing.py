"""The judge's timing steps (``cudarl.tester.judging.judge``): the reference timed in a
reference-only judge, and the candidate timed by its runner with two timed outputs re-checked
and the timer checked against the host clock. Kept apart from the judge's load and correctness
steps; ``judge`` is the judge's ``Judge`` (its secret, its link to the runner, its verdict)."""

from __future__ import annotations

import time
from typing import Any

from cudarl.tester.judging.records import JudgeJob, TimeRequest

Judge = Any  # cudarl.tester.judging.judge.Judge (not imported: that module imports this one)


def time_reference(judge: Judge, job: JudgeJob):
    """Time the reference (``TimingStats``) on inputs from a secret seed."""
    from cudarl.tester.judging import timing

    base = judge.secret.getrandbits(40) << 20
    inputs = timing.TimedInputs(judge.inputs_for, base, job.fresh_timing_inputs)
    judge.send_stage("timing", model="reference")
    with judge.torch.no_grad():
        return timing.time_callable(lambda _k: judge.model(*inputs.current), timing.l2_flush_buffer(judge.device),
                                    job.timing_config(), prepare=inputs.prepare)


def time_candidate(judge: Judge, job: JudgeJob) -> dict:
    """Time the candidate, re-check two timed outputs and the timer; the candidate's timing report
    (the tester adds the reference's, from ``reference_only`` jobs, and the speedup). Every failed
    check ends the judge with its verdict."""
    from cudarl.tester.judging.timing import timing_rules_broken
    from cudarl.tester.verdict import TimingStats

    torch = judge.torch
    base = judge.secret.getrandbits(40) << 20
    judge.send_stage("timing", model="candidate")
    started = time.monotonic()
    request = TimeRequest(base_seed=base, timing=job.timing, pick_seed=judge.secret.getrandbits(62),
                          fresh_inputs=job.fresh_timing_inputs, reset_l2=job.reset_persisting_l2)
    reply, blobs = judge.ask(request, "timing", on_header=judge.pause_turn)
    wall_ms = (time.monotonic() - started) * 1000.0
    # The timed runs are over: the rechecks below are GPU work like a trial's, in a shared turn
    # (under "whole" the judge keeps its exclusive one).
    judge.take_turn(exclusive=False, stage="timing")
    judge.problems_verdict(reply["problems"], "timing", "timing")
    cursor = 0
    for check in reply["checks"]:
        count = sum(1 for m in check["outputs"] if m.get("kind") == "tensor")
        expected, _ = judge.expected_for(int(check["seed"]))
        result = judge.compare(check, blobs[cursor:cursor + count], expected)
        cursor += count
        if not result.ok:
            call = int(check["seed"]) - base
            judge.fail("incorrect", "timing", [f"[recheck] the output of timed call {max(call, 0)} "
                                               f"was wrong: {result.reason}"])
    cand_stats = TimingStats.model_validate(reply["stats"])
    broken = timing_rules_broken(cand_stats, wall_ms, job.side_stream_share)
    if broken:
        judge.fail("rejected", "timing", broken[:1])
    judge.hardening["notes"].append(f"persisting-L2 reset: {'on' if reply['persisting_l2_reset'] else 'unavailable'}")
    return {"candidate": cand_stats.model_dump(), "l2_flush_bytes": reply["l2_flush_bytes"],
            "device": torch.cuda.get_device_name(judge.device)}
