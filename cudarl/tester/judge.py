"""The judge: the trusted half of an evaluation (``python -m cudarl.tester.judge --result-fd N``).

It runs no candidate code. It loads the task's reference, draws the secret trial seeds, starts the
runner (the candidate's process) and asks it for outputs, which it compares with the reference
outputs it computed itself; it times the reference in its own process before the candidate is
loaded; and it signs the result it sends to the tester. Everything the candidate could tamper
with (the reference, the expected outputs, the seeds of trials not yet run, the result pipe and
its key) lives here, out of reach.

Checks made here: correctness on fresh inputs (regular and hidden shapes), the runner's
problems (subclass, aliasing, modified inputs, threads, patched functions), that the candidate's
own kernels did the work (profiled trial), re-checks of two timed outputs chosen at random,
side-stream lateness, and event times against the host clock. Verdict messages follow the same
``hello``/``stage``/``result`` protocol as the compile child.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from cudarl.tester import channel
from cudarl.tester.child import describe_exception, make_inputs
from cudarl.tester.runner_link import CHANNEL_TAG, ForgedReply, RunnerGone, RunnerLink, outputs_from

_RESULTS = channel.ResultWriter(-1)  # the signed result pipe, set up in main()
_RUNNER_FAILURES = {"runtime_error", "cuda_error", "memory_limit", "load_error", "crashed", "resource_limit"}


def send(event: str, **fields) -> None:
    _RESULTS.send(event, **fields)


def finish(outcome: str, stage: str, reasons: list[str] | None = None, **fields) -> None:
    """Sign and send the result; the runner and anything it started are killed; exit."""
    _RESULTS.finish(outcome, stage, reasons, **fields)


class Judge:
    def __init__(self, job: dict) -> None:
        import torch

        from cudarl.tester.loading import import_source

        self.torch = torch
        self.job = job
        secret = random.Random(job.pop("seed"))
        self.secret = secret
        self.init_seed = secret.getrandbits(62)
        self.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        self.reference = import_source(Path(job["task_path"]), "cudarl_reference")
        self.report = {"trials_run": 0, "trials_passed": 0, "hidden_trials_run": 0, "hidden_trials_passed": 0,
                       "atol": job["atol"], "rtol": job["rtol"], "max_abs_error": 0.0, "max_rel_error": 0.0,
                       "first_failure": None}
        self.hardening: dict = {"kernels": [], "own_time_share": None, "notes": []}
        self.link: RunnerLink | None = None
        self.model = None

    def build_reference(self) -> None:
        self.torch.manual_seed(self.init_seed)
        self.model = self.reference.Model(*self.reference.get_init_inputs()).to(self.device).eval()

    def inputs_for(self, seed: int) -> list:
        self.torch.manual_seed(seed)
        return make_inputs(self.reference, self.device)

    def expected_for(self, seed: int) -> tuple[object, list]:
        inputs = self.inputs_for(seed)
        with self.torch.no_grad():
            out = self.model(*[v.clone() if isinstance(v, self.torch.Tensor) else v for v in inputs])
        return out, inputs

    def compare(self, reply: dict, blobs: list[bytes], expected: object):
        """The runner's outputs (as rebuilt from its reply) against the judge's expected ones."""
        from cudarl.tester import correctness

        output, problem = outputs_from(reply, blobs, self.device)
        if problem:
            return correctness.Comparison(False, problem)
        return correctness.compare_outputs(output, expected, self.job["atol"], self.job["rtol"])

    def fail(self, outcome: str, stage: str, reasons: list[str]) -> None:
        finish(outcome, stage, reasons, correctness=self.report, hardening=self.hardening)

    def ask(self, op: str, stage: str, **fields) -> tuple[dict, list[bytes]]:
        try:
            reply, blobs = self.link.ask(op, stage, **fields)
        except RunnerGone:
            outcome, reason = self.link.death()
            self.fail(outcome, stage, [f"{reason} (during {stage})"])
        except ForgedReply as exc:
            finish("rejected", stage, [str(exc)])
        if not reply.get("ok"):
            outcome = reply.get("outcome")
            if outcome not in _RUNNER_FAILURES:  # the runner may only report failures, never a pass
                self.fail("rejected", stage, [f"{CHANNEL_TAG} the runner reported outcome {outcome!r}"])
            self.fail(outcome, stage, [str(r) for r in reply.get("reasons", [])][:5])
        return reply, blobs

    def problems_verdict(self, problems: list[str], stage: str, label: str) -> None:
        for problem in problems:
            tag = problem.split("]")[0] + "]" if problem.startswith("[") else ""
            if tag in ("[alias]", "[thread]", "[patched]", CHANNEL_TAG):
                self.fail("rejected", stage, [f"{label}: {problem}"])
        if problems:
            self.fail("incorrect", stage, [f"{label}: {problems[0]}"])

    def check_trial(self, label: str, number: int, seed: int, key: str, profile: bool) -> None:
        from cudarl.tester.runner import input_fingerprint

        self.send_stage("correctness", trial=number if key == "trials" else f"hidden {number}")
        expected, inputs = self.expected_for(seed)
        reply, blobs = self.ask("trial", "correctness", seed=seed, profile=profile, poison=self.job["poison_memory"])
        self.report[f"{key}_run"] += 1
        where = f"{label} {number}"
        self.problems_verdict(reply["problems"], "correctness", where)
        if reply["fingerprint"] != input_fingerprint(inputs):
            if input_fingerprint(self.inputs_for(seed)) == input_fingerprint(inputs):
                self.fail("rejected", "correctness",
                          [f"{where}: [inputs] the candidate's process generated different inputs than the judge "
                           "for the same seed (it changed input generation or torch's global state)"])
            self.fail("harness_error", "correctness",
                      [f"{where}: the task's get_inputs is not deterministic for a seed"])
        result = self.compare(reply, blobs, expected)
        self.report["max_abs_error"] = max(self.report["max_abs_error"], result.max_abs_error)
        self.report["max_rel_error"] = max(self.report["max_rel_error"], result.max_rel_error)
        if not result.ok:
            index = number if key == "trials" else self.report["trials_run"] + number
            self.report["first_failure"] = {"trial": index, "reason": f"{where}: {result.reason}"}
            self.fail("incorrect", "correctness", [f"{where}: {result.reason}"])
        self.report[f"{key}_passed"] += 1
        if profile:
            self.judge_kernels(reply)

    def judge_kernels(self, reply: dict) -> None:
        from cudarl.tester.hardening import KernelTime, own_kernel_share

        if reply.get("kernels") is None:
            self.hardening["notes"].append(f"own-kernel check skipped: {reply.get('profile_note') or 'no GPU'}")
            return
        kernels = [KernelTime(**k) for k in reply["kernels"]]
        own_names = set(self.job["kernel_names"])
        share, own, other = own_kernel_share(kernels, own_names)
        self.hardening["own_time_share"] = share
        self.hardening["kernels"] = [{"name": k.name[:200], "microseconds": k.microseconds, "launches": k.launches,
                                      "own": k in own} for k in kernels[:20]]
        others = ", ".join(f"{k.name[:80]} ({k.microseconds:.0f} us)" for k in other[:3]) or "nothing"
        if not own:
            self.fail("rejected", "correctness",
                      [f"[no-own-kernel] none of the candidate's kernels ({', '.join(sorted(own_names)) or 'none found'})"
                       f" ran in forward; the GPU ran: {others}"])
        if share < self.job["own_kernel_min_share"]:
            self.fail("rejected", "correctness",
                      [f"[torch-work] only {share:.0%} of forward's GPU kernel time was in the candidate's kernels;"
                       f" the rest: {others}"])

    def send_stage(self, stage: str, **fields) -> None:
        send("stage", stage=stage, **fields)


def gpu_turns_for(judge: Judge, job: dict):
    """The judge's turns on its GPU (``timing.gpu_turns``), or None when it takes none. The CUDA
    context is created first, outside any turn: that start-up overlaps other judges' work."""
    if judge.device.type != "cuda":
        return None
    judge.torch.cuda.set_per_process_memory_fraction(job["gpu_memory_fraction"])
    judge.torch.empty(1, device=judge.device)
    if not job.get("gpu_lock") or job["timing"]["gpu_turns"] == "off":
        return None
    from cudarl.tester.gpu_turns import GpuTurns

    return GpuTurns(job["gpu_lock"], job["timing"]["gpu_turns"])


def take_turn(judge: Judge, turns, exclusive: bool, stage: str) -> None:
    """Wait for a turn on the GPU (if any); the wait shows in the verdict as ``<stage> (gpu turn)``
    and is not counted against the judge's time limit (``ChildLimits.turn_wait_s``)."""
    if turns is not None:
        turns.take(exclusive, lambda: judge.send_stage(stage, model="gpu turn"))


def reference_for(judge: Judge, job: dict, timed: bool) -> tuple[tuple[object, int] | None, float]:
    """(reference timing, its age in seconds): an earlier judge's when the tester passed one in,
    else timed here (age 0; None when nothing is timed)."""
    reused = job.get("reference_timing")
    if not timed or reused is None:
        return time_reference(judge, job), 0.0  # while the runner is still importing torch
    from cudarl.tester.verdict import TimingStats

    judge.hardening["notes"].append(f"reference timing reused from a judge {reused['age_s']:.0f} s earlier")
    return (TimingStats.model_validate(reused["stats"]), judge.secret.getrandbits(40) << 20), reused["age_s"]


def run(job: dict) -> None:
    send("stage", stage="load")
    # First, so the runner imports torch (and starts the profiler) while the judge starts.
    link = RunnerLink(job["isolate_pids"], warm_profiler=job["own_kernel_check"])
    judge = Judge(job)
    judge.link = link
    judge.hardening["notes"].append("processes: every one the candidate starts is adopted and killed by the judge"
                                    if link.subreaper else "processes: killed by process group only")
    turns = gpu_turns_for(judge, job)
    timed = job["timing"]["enabled"] and judge.device.type == "cuda"
    take_turn(judge, turns, exclusive=timed and job.get("reference_timing") is None, stage="load")
    judge.send_stage("load", model="reference")
    try:
        judge.build_reference()
    except BaseException as exc:  # noqa: BLE001
        finish("harness_error", "load", [f"the task's reference failed to load: {describe_exception(exc)}"])
    reference_timing, reference_age_s = reference_for(judge, job, timed)
    take_turn(judge, turns, exclusive=False, stage="load")
    judge.send_stage("load", model="candidate")
    reply, _ = judge.ask("load", "load", task_path=job["task_path"], candidate_path=job["candidate_path"],
                         build_root=job["build_root"], arch=job["arch"], cuda_cflags=job["cuda_cflags"],
                         jobs=job["jobs"], init_seed=judge.init_seed, gpu_memory_fraction=job["gpu_memory_fraction"],
                         drop_capabilities=job["drop_capabilities"], inline_fast=job.get("inline_fast"))
    judge.hardening["notes"] += reply.get("notes", [])
    if judge.device.type != "cuda" and not job.get("cpu_correctness"):
        finish("loaded", "load", hardening=judge.hardening)

    trial_seeds = [judge.secret.getrandbits(62) for _ in range(job["trials"])]
    profiled = judge.secret.randrange(len(trial_seeds))  # which trial is profiled is secret too
    for number, seed in enumerate(trial_seeds):
        judge.check_trial("trial", number, seed, "trials", profile=job["own_kernel_check"] and number == profiled)
    if job.get("hidden"):
        defaults = {name: getattr(judge.reference, name) for name in job["hidden"]}
        set_constants(judge, job["hidden"], "correctness")
        for number in range(job["hidden_trials"]):
            judge.check_trial("hidden-shape trial", number, judge.secret.getrandbits(62), "hidden_trials", False)
        if reference_timing is not None:
            set_constants(judge, defaults, "timing")
    raise_if_patched(judge)
    if reference_timing is not None:
        take_turn(judge, turns, exclusive=True, stage="timing")
    finish_timed(judge, job, reference_timing, reference_age_s)


def set_constants(judge: Judge, constants: dict, stage: str) -> None:
    """Switch both sides to another shape set (the task's module constants), rebuilding the models."""
    for name, value in constants.items():
        setattr(judge.reference, name, value)
    judge.build_reference()
    judge.ask("rebuild", stage, constants=constants)


def raise_if_patched(judge: Judge) -> None:
    reply, _ = judge.ask("patched", "correctness")
    judge.problems_verdict(reply["problems"], "correctness", "after the trials")


def time_reference(judge: Judge, job: dict) -> tuple[object, int] | None:
    """Time the reference (stats, base seed of the timed inputs), before any candidate code has
    run: nothing the candidate could start (a process or thread loading the GPU) can slow it."""
    from cudarl.config import TimingConfig
    from cudarl.tester import timing

    if not job["timing"]["enabled"] or judge.device.type != "cuda":
        return None
    base = judge.secret.getrandbits(40) << 20
    inputs = timing.TimedInputs(judge.inputs_for, base, job["fresh_timing_inputs"])
    judge.send_stage("timing", model="reference")
    with judge.torch.no_grad():
        stats = timing.time_callable(lambda _k: judge.model(*inputs.current), timing.l2_flush_buffer(judge.device),
                                     TimingConfig(**job["timing"]), prepare=inputs.prepare)
    return stats, base


def finish_timed(judge: Judge, job: dict, reference: tuple[object, int] | None, reference_age_s: float = 0.0) -> None:
    from cudarl.tester.verdict import TimingStats

    torch = judge.torch
    if reference is None:
        finish("correct", "correctness", correctness=judge.report, hardening=judge.hardening)
    ref_stats, base = reference
    judge.send_stage("timing", model="candidate")
    started = time.monotonic()
    reply, blobs = judge.ask("time", "timing", base_seed=base, timing=job["timing"],
                             pick_seed=judge.secret.getrandbits(62), fresh_inputs=job["fresh_timing_inputs"],
                             reset_l2=job["reset_persisting_l2"])
    wall_ms = (time.monotonic() - started) * 1000.0
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
    timing_report = {
        "candidate": cand_stats.model_dump(), "reference": ref_stats.model_dump(),
        "speedup": ref_stats.median_ms / cand_stats.median_ms if cand_stats.median_ms > 0 else 0.0,
        "l2_flush_bytes": reply["l2_flush_bytes"], "device": torch.cuda.get_device_name(judge.device),
        "reference_age_s": reference_age_s,
    }
    judge.link.close()
    finish("passed", "done", correctness=judge.report, timing=timing_report, hardening=judge.hardening)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--result-fd", type=int, required=True)
    _RESULTS.fd = parser.parse_args().result_fd
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    _RESULTS.key = bytes.fromhex(job.pop("key"))
    from cudarl.tester.isolation import apply_limits, make_undumpable

    applied = apply_limits(job["limits"]["file_size_limit_mb"], job["limits"]["isolate_network"])
    applied["undumpable"] = make_undumpable()
    send("hello", pid=os.getpid(), **applied)
    try:
        run(job)
    except BaseException as exc:  # noqa: BLE001 - a judge failure is the harness's, never the candidate's pass
        finish("harness_error", "load", [f"the judge failed: {describe_exception(exc)}"])


if __name__ == "__main__":
    main()
