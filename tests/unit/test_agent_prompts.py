"""Feedback text (``cudarl.agents.feedback``) and the rendered prompts (``cudarl.agents.prompts``).

Covered: feedback for a verdict of every outcome, built with the real ``Verdict`` model as the
tester fills it; a compile error buried in 200 lines of nvcc noise; ANSI codes and control
characters from the candidate removed; malformed reports never raising; the worked examples
in the system prompt passing the tester's guard in their stated formats; and the prompts for the
suite's ``vector_add`` task compared exactly with ``tests/unit/snapshots/``. Not covered: how
a model reads them (the RL runs measure that).

After changing a template on purpose, rewrite the snapshots and review the diff:
``.venv/bin/python -m tests.unit.test_agent_prompts``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cudarl.agents.feedback import feedback_text, trim_compile_errors
from cudarl.agents.parsing import parse_answer
from cudarl.agents.prompts import TurnSummary, generator_prompt, optimizer_prompt, summarize_turn, system_prompt
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester.judging.timing import summarize
from cudarl.tester.verdict import (
    CompileReport,
    CorrectnessReport,
    HardeningReport,
    KernelLaunch,
    KernelResources,
    Outcome,
    SandboxReport,
    Stage,
    TimingReport,
    TrialFailure,
    Verdict,
)

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REGENERATE = "rewrite them with `.venv/bin/python -m tests.unit.test_agent_prompts` and review the diff"
NVCC_ERROR = ('candidate.cu(14): error: identifier "idx" is undefined\n'
              "          out[idx] = a[i] + b[i];\n              ^\n")


def begin() -> Verdict:
    return Verdict.begin("vector_add", "vector_add/turn", "hash")


def compiled(verdict: Verdict, errors: str = "") -> Verdict:
    verdict.compile = CompileReport(mode="nvrtc", arch="sm_90", cache_key="k", cached=False, seconds=0.4,
                                    errors=errors, kernels=[] if errors else [
                                        KernelResources(name="vector_add", mangled_name="vector_add", arch="sm_90",
                                                        registers=16, shared_memory_bytes=0),
                                        KernelResources(name="tile_kernel", mangled_name="tile_kernel",
                                                        arch="sm_90", registers=255, shared_memory_bytes=49152,
                                                        spill_store_bytes=96, spill_load_bytes=128,
                                                        stack_frame_bytes=104)])
    return verdict


def passed(speedup: float = 1.25) -> Verdict:
    verdict = compiled(begin())
    verdict.correctness = CorrectnessReport(trials_run=5, trials_passed=5, hidden_trials_run=2,
                                            hidden_trials_passed=2, atol=1e-4, rtol=1e-4, max_abs_error=2.4e-7,
                                            max_rel_error=1e-6)
    verdict.timing = TimingReport(candidate=summarize([0.2 / speedup] * 5), reference=summarize([0.2] * 5),
                                  speedup=speedup, l2_flush_bytes=1 << 26, device="gpu")
    verdict.hardening = HardeningReport(own_time_share=0.93, own_result_dependency=True, kernels=[
        KernelLaunch(name="vector_add", microseconds=150.0, launches=1, own=True),
        KernelLaunch(name="at::native::fill_kernel", microseconds=11.0, launches=1, own=False)])
    return verdict.conclude(Outcome.PASSED, stage=Stage.DONE)


def incorrect() -> Verdict:
    verdict = compiled(begin())
    reason = ("trial 3: output: 1000003 of 1000003 elements outside atol=0.0001 rtol=0.0001; max abs error 4.1; "
              "first at index (0,): got 0, expected 4.1")
    verdict.correctness = CorrectnessReport(trials_run=3, trials_passed=2, atol=1e-4, rtol=1e-4, max_abs_error=4.1,
                                            max_rel_error=1.0, first_failure=TrialFailure(trial=3, reason=reason))
    return verdict.conclude(Outcome.INCORRECT, reason, stage=Stage.CORRECTNESS)


def compile_error(errors: str = NVCC_ERROR) -> Verdict:
    return compiled(begin(), errors).conclude(Outcome.COMPILE_ERROR, errors, stage=Stage.COMPILE)


def every_outcome() -> dict[str, Verdict]:
    verdicts = {outcome.value: begin().conclude(outcome, f"the {outcome.value} reason") for outcome in Outcome}
    verdicts.update(passed=passed(), incorrect=incorrect(), compile_error=compile_error())
    verdicts["rejected"] = compiled(begin()).conclude(
        Outcome.REJECTED, "[torch-work] the output does not depend on the candidate's kernels", stage=Stage.CORRECTNESS)
    verdicts["crashed"].sandbox = SandboxReport(exit_code=None, signal="SIGSEGV", stderr="Segmentation fault\n")
    return verdicts


@pytest.mark.parametrize("outcome", [o.value for o in Outcome])
def test_feedback_for_every_outcome_names_it_and_its_reasons(outcome):
    verdict = every_outcome()[outcome]
    text = feedback_text(verdict, previous_speedup=1.0)
    assert text.startswith(f"Outcome: {outcome} at stage {verdict.stage.value} (")
    for reason in verdict.reasons:
        assert reason.strip().splitlines()[0] in text


def test_feedback_of_a_passed_verdict_has_timing_share_and_resources():
    text = feedback_text(passed(1.25), previous_speedup=1.0)
    assert "Correctness: 5 of 5 trials passed, 2 of 2 on other shapes; max abs error 2.4e-07" in text
    assert "Timing: yours 0.16 ms, reference 0.2 ms, speedup 1.25x (previous 1x, +25%)" in text
    assert "Own kernels: 93% of forward's GPU time" in text and "other: at::native::fill_kernel: 11.0 us" in text
    assert "vector_add: 16 registers, 0 B static shared memory, no spills" in text
    assert ("tile_kernel: 255 registers, 49152 B static shared memory, SPILLS 96 B stored / 128 B loaded, "
            "104 B stack") in text
    assert "Reasons" not in text


def test_feedback_of_an_incorrect_verdict_shows_the_first_failure_once():
    text = feedback_text(incorrect())
    assert "Correctness: 2 of 3 trials passed; max abs error 4.1" in text
    assert text.count("first at index (0,): got 0, expected 4.1") == 1
    assert "First failure (trial 3): trial 3: output: 1000003 of 1000003" in text


def test_rejected_reasons_keep_their_tags():
    assert "Rejected because:\n- [torch-work] the output" in feedback_text(every_outcome()["rejected"])


def test_compile_error_in_200_lines_of_nvcc_noise_is_trimmed():
    noise = []
    for index in range(40):
        noise += [f"candidate.cu({index}): warning #177-D: variable \"v{index}\" was declared but never referenced",
                  "          int v = 0;", "              ^", "",
                  "          detected during instantiation of \"void k<T>(T *) [with T=float]\" at line 90"]
    log = "\n".join(noise[:100] + NVCC_ERROR.splitlines() + noise[100:]
                    + ["In file included from /usr/local/cuda/include/cuda_runtime.h:3:",
                       "1 error detected in the compilation of \"/tmp/build/candidate.cu\"."])
    assert len(log.splitlines()) > 200
    text = feedback_text(compile_error(log))
    assert "Compiler errors:\n" + NVCC_ERROR.rstrip() in text
    assert "warning #" not in text and "instantiation" not in text and "included from" not in text
    assert text.count(NVCC_ERROR.splitlines()[0]) == 1  # the reason repeats the errors: shown once
    assert "lines of notes, warnings and backtraces dropped]" in text


def test_many_errors_are_capped_and_the_cut_is_counted():
    log = "\n".join(f"candidate.cu({n}): error: expected a \";\"" for n in range(500))
    trimmed = trim_compile_errors(log)
    assert len(trimmed.splitlines()) == 41 and trimmed.endswith("[... 460 more error lines cut]")
    wide = trim_compile_errors("\n".join(f"k.cu({n}): error: " + "x" * 300 for n in range(30)))
    assert len(wide) < 4200 and wide.endswith("more error lines cut]")
    assert trim_compile_errors("ld: cannot find -lcuda") == "ld: cannot find -lcuda"  # no "error" word: kept


def test_candidate_text_is_stripped_of_ansi_and_control_characters():
    verdict = compile_error("k.cu(3): \x1b[1;31merror\x1b[0m: bad \x07thing\x1b]0;title\x07 \u202eevil\r\n  ^")
    verdict.reasons = ["\x1b[2J\x1b[Hcleared\x00 screen\x1b(B"]
    text = feedback_text(verdict)
    assert "k.cu(3): error: bad thing evil" in text and "- cleared screen" in text
    assert not any(ch in text for ch in "\x1b\x07\x00\r\u202e")


def test_feedback_never_raises_on_damaged_verdicts():
    damaged = passed().model_copy()
    object.__setattr__(damaged, "timing", "not a report")
    object.__setattr__(damaged, "compile", 42)
    text = feedback_text(damaged)
    assert text.startswith("Outcome: passed") and "Own kernels" in text
    assert feedback_text(Verdict.model_construct()) == "Outcome: unknown"


def test_worked_examples_in_the_system_prompt_pass_the_guard_in_their_formats():
    from cudarl.tester.build.guard import inspect_source

    text = system_prompt()
    blocks = text.split("```python\n")[1:]
    forms = []
    for block in blocks:
        parsed = parse_answer("```python\n" + block)
        assert parsed.ok, parsed.problem
        guard = inspect_source(parsed.source)
        assert guard.ok, guard.reasons
        forms.append((parsed.form, guard.format))
    assert forms == [("nvrtc", "nvrtc"), ("inline", "inline")]
    nvrtc_solution = next(c.source for c in suite_solutions({"vector_add"}, form="nvrtc"))
    assert 'extern "C" __global__ void vector_add(' in nvrtc_solution and "vector_add(grid=" in blocks[0]


def vector_add_turns() -> list[TurnSummary]:
    """Three judged turns: a compile error, a pass, a wrong answer."""
    nvrtc = next(c.source for c in suite_solutions({"vector_add"}, form="nvrtc"))
    broken = nvrtc.replace("out[i] = a[i] + b[i];", "out[idx] = a[i] + b[i];")
    wrong = nvrtc.replace("out[i] = a[i] + b[i];", "out[i] = a[i];")
    answers = [(f"Strategy: grid-stride loop\n```python\n{broken}```", compile_error()),
               (f"Strategy: grid-stride loop, fixed index\n```python\n{nvrtc}```", passed(0.97)),
               (f"Strategy: float4 loads\n```python\n{wrong}```", incorrect())]
    turns: list[TurnSummary] = []
    for answer, verdict in answers:
        previous = next((t.speedup for t in reversed(turns) if t.speedup is not None), None)
        turns.append(summarize_turn(parse_answer(answer), verdict, previous))
    return turns


def rendered() -> dict[str, str]:
    task = next(t for t in load_suite() if t.id == "vector_add")
    return {"system.txt": system_prompt(), "generator_vector_add.txt": generator_prompt(task),
            "optimizer_vector_add.txt": optimizer_prompt(task, vector_add_turns())}


@pytest.mark.parametrize("name", sorted(rendered()))
def test_prompts_match_their_snapshots(name):
    path = SNAPSHOTS / name
    assert path.exists(), f"{path} is missing: {REGENERATE}"
    assert rendered()[name] == path.read_text(encoding="utf-8"), f"{name} changed: {REGENERATE}"


def test_optimizer_prompt_shows_best_trajectory_and_tried():
    task = next(t for t in load_suite() if t.id == "vector_add")
    text = optimizer_prompt(task, vector_add_turns())
    assert "## Current best: turn 2, 0.97x" in text
    assert "- turn 1: compile_error (grid-stride loop)\n- turn 2: 0.97x" in text
    assert "- turn 3: incorrect (float4 loads)" in text and "Feedback on your last version (turn 3)" in text
    assert text.index("## Already tried") < text.index("- float4 loads", text.index("## Already tried"))
    assert "Your last version failed" in text
    failing = optimizer_prompt(task, [TurnSummary(source="", feedback="Outcome: format_error", outcome="format_error")])
    assert "## Latest version (not correct yet)" in failing and "(no strategies stated yet)" in failing
    with pytest.raises(ValueError, match="generator_prompt"):
        optimizer_prompt(task, [])


def main() -> int:
    """Rewrite the snapshots from the current templates (run after changing them on purpose)."""
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (SNAPSHOTS / name).write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOTS / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
