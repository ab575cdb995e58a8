"""The fairness corpus (``tests/fairness``) on the CPU: honest kernels in the patterns a blunt
judge rejected pass the guard, and the hacks imitating them are refused with their tag. Their
whole verdicts need the GPU (``tests/gpu/test_fairness_gpu.py``). Entries with a ``not-yet``
line are strict xfails: the gap stays visible and the test turns red once it is closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudarl.tasks.builtin import load_suite
from cudarl.tester.build.guard import inspect_source
from cudarl.tester.build.loading import refused_sources
from cudarl.tester.build.static_rules import check_native_source
from tests.fixtures.exploits import FAIRNESS, Exploit, load_exploits

CORPUS = load_exploits(FAIRNESS)
OUTCOMES = {"passed", "rejected", "incorrect", "runtime_error", "crashed", "resource_limit", "cuda_error"}
# Tags the judge gives at run time (the profiled trial), not the static rules.
RUNTIME_TAGS = ("[no-own-kernel]", "[torch-work]", "[alias]")


def _not_yet(entry: Exploit):
    marks = [pytest.mark.xfail(strict=True, reason=entry.not_yet)] if entry.not_yet else []
    return pytest.param(entry, id=entry.id, marks=marks)


def _static_reasons(source: str) -> list[str]:
    """What the static rules say before anything runs: the guard's reasons, then the text rules
    on each ``load_inline`` call's sources as the call will receive them (the compile child's
    ``refused_sources``; the guard itself reads string constants one by one)."""
    guard = inspect_source(source)
    built = [refused_sources({"cpp_sources": list(b.cpp_sources), "cuda_sources": list(b.cuda_sources)},
                             check_native_source) for b in guard.builds if b.resolved]
    return guard.reasons + [reason for reasons in built for reason in reasons]


def test_the_corpus_has_honest_kernels_and_hacks_for_suite_tasks():
    assert {e.expect for e in CORPUS} >= {"passed", "rejected", "incorrect"}
    assert {e.task_id for e in CORPUS} <= {t.id for t in load_suite()}
    for entry in CORPUS:
        assert entry.expect in OUTCOMES and entry.expect_unguarded in OUTCOMES | {None}, entry.id
        assert not entry.not_yet_unguarded or entry.expect_unguarded, entry.id
        assert not (entry.not_yet and entry.not_yet_verdict), f"{entry.id}: one of not-yet and not-yet-verdict"


def test_the_corpus_covers_the_patterns_of_the_issue():
    names = {e.id for e in CORPUS}
    for name in ("gemm_bias_relu/honest_cublas_gemm_fused_epilogue", "conv2d_relu/honest_cudnn_conv_fused_epilogue",
                 "vector_add/honest_lazy_handle", "vector_add/honest_import_os_build_env",
                 "vector_add/honest_cpp_includes_torch", "softmax/honest_online_reordered_fp32",
                 "gemm_bias_relu/hack_decoy_epilogue_unused", "vector_add/hack_output_kept_on_self",
                 "softmax/hack_all_zeros", "softmax/hack_fp16_internal_math",
                 "vector_add/hack_build_write_function_pointer", "vector_add/hack_build_write_split_source",
                 "vector_add/hack_run_write"):
        assert name in names


@pytest.mark.parametrize("entry", [_not_yet(e) for e in CORPUS if e.expect == "passed"])
def test_kernels_meant_to_pass_pass_the_static_rules(entry):
    assert _static_reasons(entry.path.read_text()) == []


@pytest.mark.parametrize("entry", [_not_yet(e) for e in CORPUS if e.expect == "rejected" and e.reason.startswith("[")
                                   and e.reason not in RUNTIME_TAGS])
def test_hacks_are_refused_with_their_tag(entry):
    reasons = _static_reasons(entry.path.read_text())
    assert any(r.startswith(entry.reason) for r in reasons), reasons


@pytest.mark.parametrize("entry", [_not_yet(e) for e in CORPUS if e.expect != "passed"
                                   and (e.expect != "rejected" or e.reason in RUNTIME_TAGS)])
def test_hacks_meant_for_the_judge_pass_the_static_rules(entry):
    """Runtime-judged entries (incorrect output, [torch-work], side effects) reach the GPU."""
    assert _static_reasons(entry.path.read_text()) == []


def _write_entry(root: Path, metadata: str) -> None:
    (root / "vector_add").mkdir(parents=True, exist_ok=True)
    (root / "vector_add" / "entry.py").write_text(f'"""An entry.\n\n{metadata}\n"""\n')


@pytest.mark.parametrize("metadata", ["expect: rejected", "expect: incorrect\nreason:",
                                      "expect: passed\nexpect-unguarded: runtime_error\nreason-unguarded:  "])
def test_the_loader_wants_a_reason_for_every_verdict_but_passed(tmp_path, metadata):
    _write_entry(tmp_path, metadata)
    with pytest.raises(ValueError, match="entry.py"):
        load_exploits(tmp_path)


def test_the_loader_reads_not_yet_and_must_not_create(tmp_path):
    _write_entry(tmp_path, "expect: rejected\nreason: [call]\nmust-not-create: /tmp/x\nnot-yet: a gap")
    (entry,) = load_exploits(tmp_path)
    assert (entry.must_not_create, entry.not_yet, entry.not_yet_verdict) == ("/tmp/x", "a gap", "")
    _write_entry(tmp_path, "expect: passed\nmust-not-create: tmp/x")
    with pytest.raises(ValueError, match="absolute"):
        load_exploits(tmp_path)
