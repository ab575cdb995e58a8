"""The judge's timing steps: the reference's (in a ``reference_only`` judge, which runs no
candidate code) and the candidate's, with the checks made on what the runner reports: two timed
outputs chosen at random are re-checked, event times must fit inside the judge's own clock, and
work may not outlast the call's stream. The GPU turn rules (exclusive while timed runs go on,
shared for the rechecks) are the judge's (``cudarl.tester.judge``, ``gpu_turns``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudarl.tester.judge import Judge


def time_reference(judge: Judge, job: dict):
    """Time the reference (``TimingStats``) on inputs from a secret seed."""
    from cudarl.config import TimingConfig
    from cudarl.tester import timing

    base = judge.secret.getrandbits(40) << 20
    inputs = timing.TimedInputs(judge.inputs_for, base, job["fresh_timing_inputs"])
    judge.send_stage("timing", model="reference")
    with judge.torch.no_grad():
        return timing.time_callable(lambda _k: judge.model(*inputs.current), timing.l2_flush_buffer(judge.device),
                                    TimingConfig(**job["timing"]), prepare=inputs.prepare)


def time_candidate(judge: Judge, job: dict) -> dict:
    """Time the candidate, re-check two timed outputs and the timer; the candidate's timing report
    (the tester adds the reference's, from ``reference_only`` jobs, and the speedup). Every failed
    check ends the judge with its verdict."""
    from cudarl.tester.verdict import TimingStats

    torch = judge.torch
    base = judge.secret.getrandbits(40) << 20
    judge.send_stage("timing", model="candidate")
    started = time.monotonic()
    reply, blobs = judge.ask("time", "timing", on_header=judge.pause_turn, base_seed=base, timing=job["timing"],
                             pick_seed=judge.secret.getrandbits(62), fresh_inputs=job["fresh_timing_inputs"],
                             reset_l2=job["reset_persisting_l2"])
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
    if cand_stats.clock_violations:
        judge.fail("rejected", "timing", [f"[timer] {cand_stats.clock_violations} timed run(s) reported more "
                                          "event time than the host clock measured around them"])
    if cand_stats.mean_ms * cand_stats.count > wall_ms:
        judge.fail("rejected", "timing", ["[timer] the candidate's timed runs add up to more than the judge's "
                                          "clock measured for the whole timing request"])
    if cand_stats.late_runs > max(2, job["side_stream_share"] * cand_stats.count):
        judge.fail("rejected", "timing", [f"[side-stream] in {cand_stats.late_runs} of {cand_stats.count} "
                                          "timed runs, work finished after the call's stream was done "
                                          "(work must run on the current stream)"])
    judge.hardening["notes"].append(f"persisting-L2 reset: {'on' if reply['persisting_l2_reset'] else 'unavailable'}")
    return {"candidate": cand_stats.model_dump(), "l2_flush_bytes": reply["l2_flush_bytes"],
            "device": torch.cuda.get_device_name(judge.device)}
