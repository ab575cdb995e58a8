"""Reading a model's answer into a candidate (``cudarl.agents.parsing``).

Covered: one block, several blocks with the reference first, missing fences, an unclosed final
fence, prose around code, ``<think>`` blocks (closed, orphan close, unclosed), syntax errors, no
``ModelNew``, empty answers, form detection on the suite's own solutions, the ``Strategy:``
line, a 1 MB garbage answer, the ``format_error`` verdict, and that importing the module loads
neither torch nor Ray. Not covered: judging the candidates (the tester's tests).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudarl.agents.parsing import parse_answer
from cudarl.tasks.builtin import suite_solutions
from cudarl.tester.verdict import Outcome

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "cudarl/tasks/suite/vector_add.py").read_text()
INLINE = next(c.source for c in suite_solutions({"vector_add"}))
NVRTC = next(c.source for c in suite_solutions({"vector_add"}, form="nvrtc"))
SMALL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def fenced(code: str, label: str = "python") -> str:
    return f"```{label}\n{code}```\n"


def test_one_block_with_prose_around_it():
    answer = f"Strategy: vectorise with float4\nHere is my kernel:\n\n{fenced(NVRTC)}\nIt should be fast."
    parsed = parse_answer(answer)
    assert parsed.ok and parsed.source == NVRTC and parsed.form == "nvrtc" and parsed.problem == ""
    assert parsed.strategy == "vectorise with float4"
    assert parsed.reasoning.startswith("Strategy: vectorise") and parsed.reasoning.endswith("It should be fast.")
    assert "class ModelNew" not in parsed.reasoning


def test_several_blocks_take_the_last_that_defines_model_new():
    answer = (f"The reference is:\n{fenced(REFERENCE)}\nMy first try:\n{fenced(INLINE)}\n"
              f"Better, with NVRTC:\n{fenced(NVRTC, 'py')}\nUsage:\n{fenced('model = ModelNew()')}")
    parsed = parse_answer(answer)
    assert parsed.source == NVRTC and parsed.form == "nvrtc"
    assert "class Model(nn.Module)" in parsed.reasoning and "load_inline" in parsed.reasoning


def test_reference_only_is_a_problem_not_a_candidate():
    parsed = parse_answer(f"I would start from this:\n{fenced(REFERENCE)}")
    assert not parsed.ok and parsed.source is None and parsed.problem == "no code block defines class ModelNew"


@pytest.mark.parametrize("label", ["", "py", "python3", "Python", "python title=kernel.py"])
def test_accepted_fence_labels(label):
    assert parse_answer(fenced(SMALL, label)).source == SMALL


def test_tilde_fences_and_a_block_labelled_as_something_else():
    assert parse_answer(f"~~~python\n{SMALL}~~~\n").source == SMALL
    cuda_first = fenced("__global__ void k() {}\n", "cuda") + fenced(SMALL, "cpp")
    assert parse_answer(cuda_first).source == SMALL  # python code under a wrong label still counts


def test_unclosed_final_fence_runs_to_the_end():
    parsed = parse_answer(f"Strategy: grid-stride loop\n```python\n{INLINE}")
    assert parsed.source == INLINE and parsed.form == "inline"


def test_bare_answer_without_fences():
    parsed = parse_answer(NVRTC)
    assert parsed.source == NVRTC and parsed.form == "nvrtc" and parsed.reasoning == ""


def test_bare_code_with_prose_before_and_after():
    parsed = parse_answer(f"Sure! Here is the code.\n\n{SMALL}\nThis runs one kernel per call, so it is quick.\n")
    assert parsed.source == SMALL
    assert parsed.reasoning == "Sure! Here is the code.\n\nThis runs one kernel per call, so it is quick."


def test_think_blocks_are_not_the_answer():
    draft = fenced("class ModelNew:\n    pass\n")
    parsed = parse_answer(f"<think>Let me draft:\n{draft}Hmm.</think>\nStrategy: final\n{fenced(SMALL)}")
    assert parsed.source == SMALL and "draft" not in parsed.reasoning and parsed.strategy == "final"
    orphan = parse_answer(f"thinking with the opening tag in the prompt\n{draft}</think>\n{fenced(SMALL)}")
    assert orphan.source == SMALL and "thinking" not in orphan.reasoning
    cut_off = parse_answer(f"<think>I will write\n{fenced(SMALL)}")
    assert not cut_off.ok and cut_off.problem == "the answer has no text outside its <think> reasoning"


def test_syntax_error_names_the_line():
    parsed = parse_answer(fenced("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n"))
    assert not parsed.ok and parsed.problem.startswith("the code does not parse: SyntaxError line 3:")


def test_a_broken_last_block_does_not_hide_an_earlier_good_one():
    broken = "class ModelNew(:\n"
    assert parse_answer(fenced(SMALL) + "Or shorter:\n" + fenced(broken)).source == SMALL


def test_no_model_new_and_empty_answers():
    assert parse_answer(fenced("def f():\n    return 1\n")).problem == "no code block defines class ModelNew"
    assert parse_answer("").problem == "the answer is empty"
    assert parse_answer("   \n\n").problem == "the answer is empty"
    assert parse_answer("I cannot help with that.").problem == "the answer has no code block and no class ModelNew"
    nested = parse_answer(fenced("if True:\n    class ModelNew:\n        pass\n"))
    assert nested.problem == "no code block defines class ModelNew"  # the guard needs it at module level


def test_bare_text_mentioning_model_new_that_does_not_parse():
    parsed = parse_answer("class ModelNew(nn.Module:\n    pass\n")
    assert not parsed.ok and parsed.problem.startswith("the code does not parse: SyntaxError line 1")


@pytest.mark.parametrize("candidate", suite_solutions() + suite_solutions(form="nvrtc"), ids=lambda c: c.id)
def test_form_of_every_suite_solution(candidate):
    parsed = parse_answer(fenced(candidate.source))
    assert parsed.source == candidate.source
    assert parsed.form == ("nvrtc" if candidate.id.endswith("-nvrtc") else "inline")


def test_form_detection_variants():
    assert parse_answer(fenced("import cudarl.nvrtc as nv\nclass ModelNew:\n    pass\n")).form == "nvrtc"
    assert parse_answer(fenced("from cudarl import nvrtc\nclass ModelNew:\n    pass\n")).form == "nvrtc"
    assert parse_answer(fenced("import torch.utils.cpp_extension as ce\nx = ce.load_inline\n"
                               "class ModelNew:\n    pass\n")).form == "inline"
    assert parse_answer(fenced(SMALL)).form is None  # no kernels: usable here, the guard refuses it


def test_strategy_line_variants_and_length_cap():
    assert parse_answer(f"**Strategy:** fuse the two passes\n{fenced(SMALL)}").strategy == "fuse the two passes"
    assert parse_answer(f"- strategy: tile in shared memory\n{fenced(SMALL)}").strategy == "tile in shared memory"
    in_code = "# Strategy: one warp per row\n" + SMALL
    assert parse_answer(fenced(in_code)).strategy == "one warp per row"
    assert len(parse_answer(f"Strategy: {'x' * 1000}\n{fenced(SMALL)}").strategy) == 200
    assert parse_answer(fenced(SMALL)).strategy == ""


def test_windows_line_endings_and_odd_inputs():
    assert parse_answer(fenced(SMALL).replace("\n", "\r\n")).source == SMALL
    assert not parse_answer(fenced("class ModelNew:\n    x = '\x00'\x00\n")).ok  # a null byte: a problem, no raise
    assert parse_answer(None).problem == "the answer is a NoneType, not text"  # type: ignore[arg-type]
    deep = parse_answer(fenced("class ModelNew:\n    x = " + "(" * 5000 + ")" * 5000 + "\n"))
    assert not deep.ok and deep.problem.startswith("the code does not parse")


def test_a_megabyte_of_garbage_is_read_quickly():
    chunks = ["```python\n", "<think>", "class ModelNew(", "def f(:\n", "```\n", "x = 1\n", "\x1b[31m", "é漢"]
    garbage = "".join(chunks[(i * 7919) % len(chunks)] for i in range(60_000))[: 1 << 20]
    started = time.monotonic()
    parsed = parse_answer(garbage)
    assert time.monotonic() - started < 5.0
    assert isinstance(parsed.problem, str)
    started = time.monotonic()
    parse_answer("<think>" * 100_000 + "`" * 300_000 + "class ModelNew(" * 20_000)
    assert time.monotonic() - started < 5.0


FORMAT_ERROR_MISSING = pytest.mark.skipif(
    not hasattr(Outcome, "FORMAT_ERROR"),
    reason="Outcome.FORMAT_ERROR is not in cudarl/tester/verdict.py yet; format_error_verdict needs it")


@FORMAT_ERROR_MISSING
def test_format_error_verdict_names_the_problem():
    from cudarl.agents.parsing import format_error_verdict

    verdict = format_error_verdict("vector_add", "vector_add/turn-1", "no code block defines class ModelNew",
                                   answer="just prose")
    assert verdict.outcome == Outcome.FORMAT_ERROR and not verdict.correct and verdict.speedup is None
    assert verdict.reasons == ["no code block defines class ModelNew"] and verdict.stage.value == "guard"
    assert verdict.candidate_hash == format_error_verdict("t", "c", "x", answer="just prose").candidate_hash
    assert type(verdict).from_json(verdict.to_json()) == verdict


def test_importing_the_agents_loads_neither_torch_nor_ray():
    probe = ("import sys, cudarl.agents.parsing, cudarl.agents.feedback, cudarl.agents.prompts; "
             "print('torch' in sys.modules, 'ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
