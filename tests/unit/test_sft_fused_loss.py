"""The warm start's fused-loss switch (``sft.fused_loss``): off on a CPU under ``auto``, and a
clear error when asked for where it cannot run (no silent fallback)."""

from __future__ import annotations

import pytest

from cudarl.config import SftConfig
from cudarl.sft.train import use_liger


def test_auto_is_off_without_a_gpu_and_none_is_always_off():
    assert use_liger(SftConfig(fused_loss="auto"), "cpu") is False
    assert use_liger(SftConfig(fused_loss="none"), "cuda") is False


def test_asking_for_liger_on_a_cpu_names_what_it_needs():
    with pytest.raises(ValueError, match="needs a CUDA GPU and the liger-kernel package"):
        use_liger(SftConfig(fused_loss="liger"), "cpu")


def test_an_unknown_value_is_refused_by_the_config():
    with pytest.raises(ValueError, match="fused_loss"):
        SftConfig(fused_loss="fast")
