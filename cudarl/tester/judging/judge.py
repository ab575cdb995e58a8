"""The judge: the trusted half of an evaluation (``python -m cudarl.tester.judging.judge --result-fd N``).

It runs no candidate code. It loads the task's reference, draws the secret trial seeds, starts the
runner (the candidate's process) and asks it for outputs, which it compares with the reference
outputs it computed itself; and it signs the result it sends to the tester. Everything the
candidate could tamper with (the reference, the expected outputs, the seeds of trials not yet
run, the result pipe and its key) lives here, out of reach. The reference is timed by a
``reference_only`` judge, a process with no runner at all, once per task and GPU; the tester
shares that timing among the task's judges and computes the speedup
(``cudarl.tester.judging.reference_timing``).

Checks made here: correctness on fresh inputs (regular and hidden shapes), the runner's
problems (subclass, aliasing, modified inputs, threads, patched functions), that the output depends
on the candidate's own kernels (profiled trial, ``knockout``), and the timing checks (re-checks of
two timed outputs, side-stream lateness, event times against the host clock). The job is a
``records.JudgeJob``; messages follow the compile child's ``hello``/``stage``/``result`` protocol.
A warm judge (``--warm``, ``WarmChildren``) has limits, runner, torch and CUDA up when the job comes.
A load-only job (a tester without a GPU: compile-only verdicts) never imports torch here: the
runner builds the reference before it imports the candidate (``run_load_only``); the timing steps
are in ``judge_timing``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from cudarl.tester.judging.inputs import input_fingerprint, make_inputs
from cudarl.tester.judging.judge_timing import time_candidate, time_reference
from cudarl.tester.judging.records import (
    JudgeJob,
    LoadRequest,
    PatchedRequest,
    RebuildRequest,
    ReferenceRequest,
    RunnerRequest,
    TrialRequest,
)
from cudarl.tester.judging.runner_link import CHANNEL_TAG, ForgedReply, RunnerGone, RunnerLink, outputs_from
from cudarl.tester.sandbox import channel
from cudarl.tester.sandbox.child_side import describe_exception, start_child

_RESULTS = channel.ResultWriter(-1)  # the signed result pipe, set up in main()
_RUNNER_FAILURES = {"runtime_error", "cuda_error", "memory_limit", "load_error", "crashed", "resource_limit"}


def send(event: str, **fields) -> None:
    _RESULTS.send(event, **fields)


def finish(outcome: str, stage: str, reasons: list[str] | None = None, **fields) -> None:
    """Sign and send the result; the runner and anything it started are killed; exit."""
    _RESULTS.finish(outcome, stage, reasons, **fields)


class Judge:
    """One judgement's trusted state: the reference, the secret seeds, the report so far."""

    def __init__(self, job: JudgeJob) -> None:
        self.job = job
        secret = random.Random(job.seed)
        self.secret, self.init_seed = secret, secret.getrandbits(62)
        self.torch = self.device = self.reference = None  # set by load_torch (never, in load-only judging)
        self.report = {"trials_run": 0, "trials_passed": 0, "hidden_trials_run": 0, "hidden_trials_passed": 0,
                       "atol": job.atol, "rtol": job.rtol, "max_abs_error": 0.0, "max_rel_error": 0.0,
                       "first_failure": None}
        self.hardening: dict = {"kernels": [], "own_time_share": None, "notes": []}
        self.link: RunnerLink | None = None
        self.model = None
        self.turns = None  # GpuTurns on this judge's GPU (gpu_turns_for), None when it takes none

    def load_torch(self) -> Judge:
        """torch, the device and the reference's module (not yet its model: ``load_reference``)."""
        import torch

        from cudarl import _compat
        from cudarl.files import import_source

        _compat.exact_fp32_math()  # the reference in full fp32 (no TF32), whatever the candidate does
        self.torch = torch
        self.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        self.reference = import_source(Path(self.job.task_path), "cudarl_reference")
        return self

    def attach(self, link: RunnerLink) -> None:
        """The runner this judge asks; the verdict notes how the candidate's processes end."""
        self.link = link
        self.hardening["notes"].append("processes: every one the candidate starts is adopted and killed by the judge"
                                       if link.subreaper else "processes: killed by process group only")

    def take_turn(self, exclusive: bool, stage: str) -> None:
        """Wait for a turn on the GPU (if any); a wait shows in the verdict as ``<stage> (gpu turn)``
        and is not counted against the judge's time limit (``ChildLimits.turn_wait_s``)."""
        if self.turns is not None and self.turns.take(exclusive, lambda: self.send_stage(stage, model="gpu turn")):
            self.send_stage(stage)  # the wait is over: what follows (the judge's or the candidate's work) is clocked

    def pause_turn(self, _header: dict | None = None) -> None:
        """Between steps: the turn is given up, so a judge waiting to time is not held up by this
        judge's whole correctness phase. Also the ``on_header`` of a request (the runner's GPU
        work is over once its reply's header is written; the outputs then cross the pipe)."""
        if self.turns is not None:
            self.turns.pause()

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
        from cudarl.tester.judging import correctness

        output, problem = outputs_from(reply, blobs, self.device)
        if problem:
            return correctness.Comparison(False, problem)
        return correctness.compare_outputs(output, expected, self.job.atol, self.job.rtol)

    def fail(self, outcome: str, stage: str, reasons: list[str]) -> None:
        finish(outcome, stage, reasons, correctness=self.report, hardening=self.hardening)

    def ask(self, request: RunnerRequest, stage: str,
            on_header: Callable[[dict], None] | None = None) -> tuple[dict, list]:
        """The runner's reply; a failure it reports, its death or a forged reply ends the judge."""
        assert self.link is not None
        try:
            reply, blobs = self.link.ask(request, stage, on_header=on_header)
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
        self.take_turn(False, "correctness")
        self.send_stage("correctness", trial=number if key == "trials" else f"hidden {number}")
        expected, inputs = self.expected_for(seed)
        reply, blobs = self.ask(TrialRequest(seed=seed, profile=profile, poison=self.job.poison_memory),
                                "correctness", on_header=self.pause_turn)
        self.report[f"{key}_run"] += 1
        where = f"{label} {number}"
        self.problems_verdict(reply["problems"], "correctness", where)
        # The outputs cross the pipe outside any turn (on_header); checking them is GPU work again.
        self.take_turn(False, "correctness")
        if reply["fingerprint"] != input_fingerprint(inputs):
            if input_fingerprint(self.inputs_for(seed)) == input_fingerprint(inputs):
                self.fail("rejected", "correctness",
                          [f"{where}: [inputs] the candidate's process generated different inputs than the judge "
                           "for the same seed (it changed input generation or torch's global state)"])
            self.fail("harness_error", "correctness",
                      [f"{where}: the task's get_inputs is not deterministic for a seed"])
        result = self.compare(reply, blobs, expected)
        self.pause_turn()
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
        from cudarl.tester.judging.hardening import KernelTime, judge_own_kernels
        if reply.get("kernels") is None:
            self.hardening["notes"].append(f"own-kernel check skipped: {reply.get('profile_note') or 'no GPU'}")
            return
        kernels, dependency = [KernelTime(**k) for k in reply["kernels"]], reply.get("dependency") or {}
        share, listed, reason = judge_own_kernels(kernels, set(self.job.kernel_names), self.job.own_kernel_min_share,
                                                  dependency.get("depends"), dependency.get("note", ""))
        self.hardening.update(own_time_share=share, kernels=listed, own_result_dependency=dependency.get("depends"))
        if reason is not None:
            self.fail("rejected", "correctness", [reason])

    def send_stage(self, stage: str, **fields) -> None:
        send("stage", stage=stage, **fields)


def gpu_turns_for(judge: Judge, job: JudgeJob):
    """The judge's turns on its GPU (``timing.gpu_turns``), or None when it takes none. The CUDA
    context is created first, outside any turn: that start-up overlaps other judges' work."""
    if judge.device.type != "cuda":
        return None
    judge.torch.cuda.set_per_process_memory_fraction(job.gpu_memory_fraction)
    judge.torch.empty(1, device=judge.device)
    if not job.gpu_lock or job.timing["gpu_turns"] == "off":
        return None
    from cudarl.tester.judging.gpu_turns import GpuTurns

    return GpuTurns(job.gpu_lock, job.timing["gpu_turns"])


def load_reference(judge: Judge) -> None:
    """Build the task's reference; a failure is the harness's (or the task's), never the candidate's."""
    judge.send_stage("load", model="reference")
    try:
        judge.build_reference()
    except BaseException as exc:  # noqa: BLE001
        finish("harness_error", "load", [f"the task's reference failed to load: {describe_exception(exc)}"])


def wait_for_reference(judge: Judge, flag: str | None) -> None:
    """Before any turn and before the candidate is loaded: wait until the tester says the
    task's reference timing has ended (``flag`` exists), so that nothing this candidate starts
    can overlap its own reference's timing. The wait is not counted against the time limit."""
    if not flag or Path(flag).exists():
        return
    judge.send_stage("load", model="reference timing wait")
    while not Path(flag).exists():
        time.sleep(0.02)


def run(job: JudgeJob, link: RunnerLink | None = None) -> None:
    """Judge one candidate (``link``: a runner a warm judge started before its job), or, for a
    ``reference_only`` job, time the task's reference and nothing else."""
    if job.reference_only:
        run_reference(job)
    send("stage", stage="load")
    if link is None or link.warm_profiler != job.own_kernel_check:
        if link is not None:
            link.kill()
        # First, so the runner imports torch (and starts the profiler) while the judge starts.
        link = RunnerLink(job.isolate_pids, warm_profiler=job.own_kernel_check)
    if job.load_only:
        run_load_only(Judge(job), link)
    judge = Judge(job).load_torch()
    judge.attach(link)
    judge.turns = gpu_turns_for(judge, job)
    timed = job.timing["enabled"] and judge.device.type == "cuda"
    wait_for_reference(judge, job.reference_ready)
    judge.take_turn(exclusive=False, stage="load")
    load_reference(judge)
    judge.send_stage("load", model="candidate")
    reply, _ = judge.ask(load_request(judge), "load")
    judge.pause_turn()
    judge.hardening["notes"] += reply.get("notes", [])
    if judge.device.type != "cuda" and not job.cpu_correctness:
        finish("loaded", "load", hardening=judge.hardening)

    trial_seeds = [judge.secret.getrandbits(62) for _ in range(job.trials)]
    profiled = judge.secret.randrange(len(trial_seeds))  # which trial is profiled is secret too
    for number, seed in enumerate(trial_seeds):
        judge.check_trial("trial", number, seed, "trials", profile=job.own_kernel_check and number == profiled)
    if job.hidden:
        defaults = {name: getattr(judge.reference, name) for name in job.hidden}
        set_constants(judge, job.hidden, "correctness")
        for number in range(job.hidden_trials):
            judge.check_trial("hidden-shape trial", number, judge.secret.getrandbits(62), "hidden_trials", False)
        if timed:
            set_constants(judge, defaults, "timing")
    raise_if_patched(judge)
    if not timed:
        finish("correct", "correctness", correctness=judge.report, hardening=judge.hardening)
    judge.take_turn(exclusive=True, stage="timing")
    timing_report = time_candidate(judge, job)
    judge.link.close()
    finish("passed", "done", correctness=judge.report, timing=timing_report, hardening=judge.hardening)


def load_request(judge: Judge) -> LoadRequest:
    job = judge.job
    return LoadRequest(task_path=job.task_path, candidate_path=job.candidate_path, build_root=job.build_root,
                       arch=job.arch, cuda_cflags=job.cuda_cflags, jobs=job.jobs, init_seed=judge.init_seed,
                       gpu_memory_fraction=job.gpu_memory_fraction, drop_capabilities=job.drop_capabilities,
                       inline_fast=job.inline_fast, restrict_writes=job.restrict_writes)


def run_load_only(judge: Judge, link: RunnerLink) -> None:
    """No GPU and no CPU correctness: the verdict is whether the candidate loads. The judge then
    never imports torch (a second torch import per candidate, about 4 s of CPU on a small
    machine, was most of the cost of a compile-only verdict). The runner builds the task's
    reference first, in a request of its own answered before any candidate code has run in it,
    so that a reference that fails (or kills the runner) is still the harness's error."""
    judge.attach(link)
    judge.send_stage("load", model="reference")
    try:
        reply, _ = link.ask(ReferenceRequest(task_path=judge.job.task_path, init_seed=judge.init_seed), "load")
        problem = reply.get("reference_error")
    except RunnerGone:
        problem = f"the runner ended while it loaded it ({link.death()[1]})"
    except ForgedReply as exc:
        problem = f"the runner's reply was not its own ({exc})"
    if problem:
        finish("harness_error", "load", [f"the task's reference failed to load: {problem}"])
    judge.send_stage("load", model="candidate")
    reply, _ = judge.ask(load_request(judge), "load")
    judge.hardening["notes"] += reply.get("notes", [])
    finish("loaded", "load", hardening=judge.hardening)


def run_reference(job: JudgeJob) -> None:
    """A reference-only job: time the task's reference alone, in an exclusive GPU turn, in a
    process where no candidate code ever runs. The tester shares the result among the judges of
    the task (``cudarl.tester.judging.reference_timing``); the speedup is computed there."""
    judge = Judge(job).load_torch()
    if judge.device.type != "cuda" or not job.timing["enabled"]:
        finish("harness_error", "timing", ["a reference timing needs a CUDA GPU and timing.enabled"])
    judge.turns = gpu_turns_for(judge, job)
    judge.take_turn(exclusive=True, stage="timing")
    load_reference(judge)
    stats = time_reference(judge, job)
    finish("reference", "timing", reference=stats.model_dump(), device=judge.torch.cuda.get_device_name(judge.device))


def set_constants(judge: Judge, constants: dict, stage: str) -> None:
    """Switch both sides to another shape set (the task's module constants), rebuilding the models."""
    for name, value in constants.items():
        setattr(judge.reference, name, value)
    judge.take_turn(exclusive=stage == "timing", stage=stage)
    judge.build_reference()
    judge.ask(RebuildRequest(constants=constants), stage)
    if stage != "timing":
        judge.pause_turn()


def raise_if_patched(judge: Judge) -> None:
    reply, _ = judge.ask(PatchedRequest(), "correctness")
    judge.problems_verdict(reply["problems"], "correctness", "after the trials")


def apply_own_limits(limits: dict) -> dict:
    """The child-side limits, and the judge made non-dumpable (its memory holds the secrets)."""
    from cudarl.tester.sandbox.isolation import apply_limits, make_undumpable

    return {**apply_limits(limits), "undumpable": make_undumpable()}


def _warm_up(arguments) -> RunnerLink | None:
    """A warm judge's start, before its job exists (``sandbox.parent.WarmChildren``), its limits
    applied: its runner if asked (which imports torch and starts the profiler meanwhile), torch
    and a CUDA context. Nothing secret exists yet; the seeds, the key and the paths come with
    the job."""
    limits = arguments.warm_limits
    link = RunnerLink(limits["isolate_pids"], warm_profiler=arguments.warm_profiler) if arguments.warm_runner else None
    import torch

    if torch.cuda.is_available():
        torch.empty(1, device="cuda")
    return link


def _arguments(parser) -> None:
    parser.add_argument("--warm-runner", action="store_true", help="with --warm: start the runner too")
    parser.add_argument("--warm-profiler", action="store_true",
                        help="with --warm-runner: the runner starts the profiler")


def main() -> None:
    started = start_child(__doc__, apply_own_limits, warm_up=_warm_up, add_arguments=_arguments)
    if started.job is None:
        return  # a warm judge whose pool closed (its runner dies with the process group)
    _RESULTS.fd, _RESULTS.key = started.results.fd, started.results.key
    try:
        run(JudgeJob.from_wire(started.job, ignore=("cwd", "limits")), started.warmed)
    except BaseException as exc:  # noqa: BLE001 - a judge failure is the harness's, never the candidate's pass
        finish("harness_error", "load", [f"the judge failed: {describe_exception(exc)}"])


if __name__ == "__main__":
    main()
