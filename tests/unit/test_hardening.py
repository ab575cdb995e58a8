"""Runtime-defense helpers that need no GPU: replaced functions are named, aliasing is found."""

from __future__ import annotations

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
