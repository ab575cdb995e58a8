"""The tester's side of a judgement: the job it hands the judge, and the verdict it reads from
the judge's process (its signed messages, its exit, the sandbox's watchdogs).

Kept apart from ``tester.py`` so that the whole mapping from "what the sandboxed judge did" to
``Verdict`` reads in one place: a harness failure (a turn wait past its limit, a reference that
could not be timed) is ``harness_error``, never the candidate's fault; the sandbox's limits give
``timeout``, ``memory_limit``, ``resource_limit``, ``crashed``; otherwise the judge's own result.
"""

from __future__ import annotations

import secrets
import time
from concurrent.futures import Future
from pathlib import Path

from cudarl.config import TesterConfig
from cudarl.tester.build.compile import cuda_cflags
from cudarl.tester.judging.records import JudgeJob
from cudarl.tester.judging.reference_timing import ReferenceTimingFailed
from cudarl.tester.sandbox.parent import ChildOutcome
from cudarl.tester.verdict import (
    CorrectnessReport,
    HardeningReport,
    Outcome,
    SandboxReport,
    Stage,
    TimingReport,
    TimingStats,
    Verdict,
)

NO_GPU = "no CUDA GPU on this machine"


def judge_job(config: TesterConfig, workdir: Path, build_root: Path, arch: str, atol: float, rtol: float,
              hidden: dict, kernel_names: list[str], cpu_correctness: bool = False,
              inline_fast: dict | None = None, gpu_lock: str | None = None, reference_only: bool = False,
              load_only: bool = False) -> JudgeJob:
    """The judge's job: paths, a fresh secret seed, tolerances and every setting it needs.
    ``cpu_correctness`` runs the correctness trials without a GPU (pure-PyTorch candidates, tests);
    ``inline_fast`` must be what the compile stage used (``Tester.inline_fast``); ``gpu_lock`` is the
    file behind the judge's turns on its GPU (``timing.gpu_turns``); ``reference_only`` asks the
    judge to time the task's reference and nothing else; ``load_only`` (a tester without a GPU) asks
    it only to have the candidate loaded, without torch in the judge (``JudgeJob.load_only``)."""
    sandbox, hardening = config.sandbox, config.hardening
    return JudgeJob(
        task_path=str(workdir / "reference.py"), candidate_path=str(workdir / "candidate.py"),
        build_root=str(build_root), arch=arch, cuda_cflags=tuple(cuda_cflags(config.compile)),
        jobs=config.compile.jobs, seed=secrets.randbits(63), trials=max(1, config.correctness.trials),
        atol=atol, rtol=rtol, gpu_memory_fraction=sandbox.gpu_memory_fraction,
        hidden=dict(hidden), hidden_trials=config.correctness.hidden_trials,
        timing=config.timing.model_dump(), cpu_correctness=cpu_correctness,
        kernel_names=tuple(kernel_names), own_kernel_check=hardening.own_kernel_check,
        own_kernel_min_share=hardening.own_kernel_min_share,
        side_stream_share=hardening.side_stream_share, poison_memory=hardening.poison_memory,
        fresh_timing_inputs=hardening.fresh_timing_inputs, reset_persisting_l2=hardening.reset_persisting_l2,
        drop_capabilities=hardening.drop_capabilities, isolate_pids=sandbox.isolate_pids,
        restrict_writes=sandbox.restrict_writes,
        inline_fast=inline_fast, gpu_lock=gpu_lock, reference_only=reference_only,
        load_only=load_only and not cpu_correctness and not reference_only,
    )


def where(child: ChildOutcome) -> str:
    """The stage the child last reported, for reasons (``during correctness trial 3``)."""
    last = child.last("stage")
    if not last:
        return "before the child reported any stage"
    detail = f" trial {last['trial']}" if "trial" in last else (f" ({last['model']})" if "model" in last else "")
    return f"during {last['stage']}{detail}"


def stage_seconds(child: ChildOutcome) -> dict[str, float]:
    """Wall time per stage from the child's timestamped stage messages; timing and loading are split
    by model (``timing (reference)``, ``timing (candidate)``, ``load (candidate)``)."""
    marks = [(f"{m['stage']} ({m['model']})" if "model" in m else m["stage"], m["t"])
             for m in child.messages if m.get("event") in ("stage", "result") and "t" in m]
    seconds: dict[str, float] = {}
    for (stage, start), (_, end) in zip(marks, marks[1:]):
        seconds[stage] = seconds.get(stage, 0.0) + max(0.0, end - start)
    return seconds


def read_judge(child: ChildOutcome, verdict: Verdict, config: TesterConfig) -> dict | None:
    """Fill ``verdict`` from a candidate's judge process; returns the judge's result message
    (None when it sent none)."""
    sandbox = config.sandbox
    verdict.sandbox = SandboxReport(exit_code=child.exit_code, signal=child.signal_name, wall_s=child.wall_s,
                                    network_isolated=child.network_isolated, stdout=child.stdout,
                                    stderr=child.stderr, output_truncated=child.output_truncated)
    verdict.stage_seconds.update(stage_seconds(child))
    verdict.stage_seconds["run"] = child.wall_s
    result = child.last("result")
    last_stage = child.last("stage")
    if last_stage:
        verdict.stage = Stage(last_stage["stage"])
    if child.turn_wait_exceeded:
        verdict.conclude(Outcome.HARNESS_ERROR, f"waited more than timing.gpu_turn_wait_s = "
                         f"{config.timing.gpu_turn_wait_s:.0f} s for turns on the GPU {where(child)} (other judges "
                         "held it); not the candidate's fault")
    elif child.timed_out:
        verdict.conclude(Outcome.TIMEOUT, f"killed after {sandbox.timeout_s:.0f} s wall-clock {where(child)}")
    elif child.memory_exceeded:
        verdict.conclude(Outcome.MEMORY_LIMIT, f"host memory above {sandbox.memory_limit_mb} MB {where(child)}; killed")
    elif child.processes_exceeded:
        verdict.conclude(Outcome.RESOURCE_LIMIT, f"more than {sandbox.max_processes} processes {where(child)}; killed")
    elif result is None:
        how = f"was killed by {child.signal_name}" if child.signal_name else f"exited with code {child.exit_code}"
        tail = child.stderr.strip().splitlines()[-5:]
        verdict.conclude(Outcome.CRASHED, f"the candidate's process {how} {where(child)} without reporting a result"
                         + ("\n" + "\n".join(tail) if tail else ""))
    else:
        _apply_result(result, verdict)
    if child.forged_messages:
        verdict.hardening = verdict.hardening or HardeningReport()
        verdict.hardening.forged_messages = child.forged_messages
        if verdict.correct:
            verdict.conclude(Outcome.REJECTED, f"[channel] {child.forged_messages} unauthenticated message(s) "
                             "reached the result channel")
    if result is not None and result.get("outcome") == "loaded":
        verdict.skipped += [f"correctness: {NO_GPU}", f"timing: {NO_GPU}"]
    return result


def _apply_result(result: dict, verdict: Verdict) -> None:
    name = result["outcome"]
    verdict.conclude(Outcome.COMPILED if name == "loaded" else Outcome(name), *result.get("reasons", []),
                     stage=Stage(result["stage"]))
    if result.get("correctness"):
        verdict.correctness = CorrectnessReport.model_validate(result["correctness"])
    if result.get("hardening"):
        verdict.hardening = HardeningReport.model_validate(result["hardening"])


def read_reference(child: ChildOutcome, config: TesterConfig) -> TimingStats:
    """The reference timing from a reference-only judge; ``ReferenceTimingFailed`` otherwise."""
    result = child.last("result")
    if child.turn_wait_exceeded:
        raise ReferenceTimingFailed(f"it waited more than timing.gpu_turn_wait_s = "
                                    f"{config.timing.gpu_turn_wait_s:.0f} s for an exclusive GPU turn")
    if child.timed_out or result is None:
        how = "timed out" if child.timed_out else f"ended ({child.signal_name or child.exit_code}) without a result"
        tail = " / ".join(child.stderr.strip().splitlines()[-3:])
        raise ReferenceTimingFailed(f"its process {how} {where(child)}" + (f": {tail}" if tail else ""))
    if result.get("outcome") != "reference" or child.forged_messages:
        raise ReferenceTimingFailed("; ".join(result.get("reasons", [])) or f"outcome {result.get('outcome')}")
    return TimingStats.model_validate(result["reference"])


def add_reference(verdict: Verdict, timing: dict, reference: Future | None) -> None:
    """Complete a passed verdict's timing with the task's shared reference timing (waiting
    for it if it is still being measured); without one the verdict is ``harness_error``."""
    candidate = TimingStats.model_validate(timing["candidate"])
    started = time.monotonic()
    try:
        if reference is None:
            raise ReferenceTimingFailed("no reference timing was started")
        measured = reference.result()
    except Exception as exc:  # noqa: BLE001 - a failed reference is the harness's problem, never the candidate's
        verdict.conclude(Outcome.HARNESS_ERROR, f"the candidate was correct and timed ({candidate.median_ms:.4f} ms "
                         f"median) but the reference could not be timed: {exc}")
        return
    finally:
        verdict.stage_seconds["timing (reference wait)"] = time.monotonic() - started
    verdict.timing = TimingReport(candidate=candidate, reference=measured.stats,
                                  speedup=measured.stats.median_ms / candidate.median_ms
                                  if candidate.median_ms > 0 else 0.0,
                                  l2_flush_bytes=timing["l2_flush_bytes"], device=timing["device"],
                                  reference_age_s=measured.age_s())
