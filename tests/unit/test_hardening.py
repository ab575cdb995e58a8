"""Runtime-defense helpers that need no GPU: replaced functions are named, aliasing is found,
and the timing rules (``[timer]``, ``[side-stream]``) fire on the figures that break them."""

from __future__ import annotations

import pytest
import torch

from cudarl.tester.judging import hardening


def test_replaced_harness_and_torch_functions_are_named():
    from cudarl.tester.judging import hardening, timing

    originals = hardening.Originals()
    assert originals.changed() == []
    saved = timing.summarize
    try:
        timing.summarize = lambda samples: saved([s * 0.3 for s in samples])
        assert originals.changed() == ["cudarl.tester.judging.timing.summarize"]
    finally:
        timing.summarize = saved
    assert originals.changed() == []


def test_outputs_sharing_memory_with_inputs_or_each_other_are_found():
    x = torch.zeros(8)
    assert "input 0" in hardening.aliasing([x[2:]], [x])
    y = torch.zeros(8)
    assert "outputs 0 and 1" in hardening.aliasing([y, y.view(2, 4)], [x])
    assert hardening.aliasing([torch.zeros(8)], [x]) == ""


def _stats(samples_ms: list[float], **figures):
    from cudarl.tester.judging.timing import summarize

    return summarize(samples_ms).model_copy(update=figures)


@pytest.mark.parametrize("figures, wall_ms, expected", [
    ({}, 100.0, []),
    ({"clock_violations": 3}, 100.0, ["[timer] 3 timed run(s) reported more event time than the host clock"]),
    ({}, 5.0, ["[timer] the candidate's timed runs add up to more than the judge's clock"]),  # 20 x 0.5 ms > 5 ms
    ({"late_runs": 2}, 100.0, []),  # two late runs are noise
    ({"late_runs": 3}, 100.0, ["[side-stream] in 3 of 20 timed runs"]),  # above max(2, 10% of 20)
], ids=["honest", "event-beyond-host-clock", "forged-total", "two-late", "side-stream"])
def test_the_timing_rules_fire_on_the_figures_that_break_them(figures, wall_ms, expected):
    from cudarl.tester.judging.timing import timing_rules_broken

    broken = timing_rules_broken(_stats([0.5] * 20, **figures), wall_ms, side_stream_share=0.1)
    assert len(broken) == len(expected) and all(b.startswith(e) for b, e in zip(broken, expected)), broken
