"""Inputs for trials and timed calls, made the same way by the judge and the runner, and their
fingerprints (the judge checks that the runner made the same inputs from the same seed)."""

from __future__ import annotations


def _to_device(values: list, device) -> list:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def make_inputs(reference, device) -> list:
    """The reference's ``get_inputs()`` with ``device`` as torch's default device, so random
    inputs are drawn on the GPU (KernelBench's CPU-side ``torch.randn`` of a 256 MB tensor took
    about a second per trial), then anything still elsewhere is moved there."""
    import torch

    with torch.device(device):
        return _to_device(reference.get_inputs(), device)


def input_fingerprint(inputs: list) -> list:
    """A cheap summary of generated inputs: the judge compares it with its own (same seed)."""
    import torch

    summary = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            wide = value.detach().double() if value.numel() else value.detach()
            summary.append([list(value.shape), str(value.dtype),
                            float(torch.nan_to_num(wide).sum()) if value.numel() else 0.0])
        else:
            summary.append(repr(value)[:100])
    return summary
