"""Comparing a candidate's output with the reference's, and checking inputs were left alone.

Pure torch functions (no CUDA needed), so the rules are unit-tested on the CPU. The rules: the
output must have the reference's structure; each tensor must be a plain dense ``torch.Tensor``
(not a subclass, not sparse, no lazy/meta storage) with the reference's shape, dtype and device;
NaN or Inf where the reference is finite fails; values must satisfy
``|out - ref| <= atol * s + rtol * |ref|`` everywhere, where ``s = min(1, RMS of the reference)``.

Why the scale: with a fixed ``atol`` an output of small magnitude is hardly checked (a softmax
over 393,216 columns has values near 2.5e-6: all zeros is within atol = 1e-4, and so is a
kernel that computes in fp16). Scaling ``atol`` by the reference's own RMS makes the check
relative for such outputs, so all-zeros, a constant and half-precision internal math fail,
while honest kernels of the output's own precision (a different summation order) keep the
same relative margin. Outputs with RMS of 1 or more keep the plain ``atol``; an all-zero
reference keeps it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0


def _flatten(value, path: str = "output") -> list[tuple[str, object]]:
    if isinstance(value, (tuple, list)):
        items: list[tuple[str, object]] = []
        for index, item in enumerate(value):
            items.extend(_flatten(item, f"{path}[{index}]"))
        return items
    return [(path, value)]


def _structure(value) -> object:
    if isinstance(value, (tuple, list)):
        return tuple(_structure(v) for v in value)
    return "tensor" if isinstance(value, torch.Tensor) else type(value).__name__


def check_plain_tensor(value: object, where: str) -> str:
    """Empty string if ``value`` is a plain dense tensor, else the reason it is not."""
    if not isinstance(value, torch.Tensor):
        return f"{where} is a {type(value).__name__}, not a torch.Tensor"
    if type(value) is not torch.Tensor:
        return f"{where} is a tensor subclass ({type(value).__name__}); a plain torch.Tensor is required"
    if value.layout != torch.strided:
        return f"{where} has layout {value.layout}; a dense (strided) tensor is required"
    if value.is_meta:
        return f"{where} is a meta tensor (no data)"
    return ""


def reference_scale(reference: torch.Tensor, finite: torch.Tensor) -> float:
    """The RMS of the reference's finite values (0.0 when there are none)."""
    values = reference[finite].to(torch.float64)
    return float(values.square().mean().sqrt()) if values.numel() else 0.0


def compare_tensors(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, where: str) -> Comparison:
    problem = check_plain_tensor(out, where)
    if problem:
        return Comparison(False, problem)
    if out.shape != ref.shape:
        return Comparison(False, f"{where} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, f"{where} has dtype {out.dtype}, expected {ref.dtype}")
    if out.device != ref.device:
        return Comparison(False, f"{where} is on {out.device}, expected {ref.device}")
    if out.numel() == 0:
        return Comparison(True)
    wide = torch.float64 if out.dtype == torch.float64 else torch.float32
    o, r = out.detach().to(wide), ref.detach().to(wide)
    ref_finite = torch.isfinite(r)
    out_finite = torch.isfinite(o)
    bad_nonfinite = ref_finite & ~out_finite
    if bool(bad_nonfinite.any()):
        count = int(bad_nonfinite.sum())
        kind = "NaN" if bool(torch.isnan(o[bad_nonfinite]).any()) else "Inf"
        return Comparison(False, f"{where} has {count} {kind} value(s) where the reference is finite",
                          float("inf"), float("inf"))
    # Where the reference itself is NaN/Inf, the candidate must match it exactly.
    mismatch_special = ~ref_finite & ~((torch.isnan(r) & torch.isnan(o)) | (r == o))
    if bool(mismatch_special.any()):
        return Comparison(False, f"{where} differs from the reference where the reference is NaN/Inf")
    diff = (o - r).abs().masked_fill(~ref_finite, 0.0)
    max_abs = float(diff.max())
    scaled_atol = atol * min(1.0, reference_scale(r, ref_finite)) or atol
    rel = diff / r.abs().clamp_min(torch.finfo(wide).tiny)
    max_rel = float(rel.masked_fill(r.abs() < scaled_atol, 0.0).max())
    allowed = scaled_atol + rtol * r.abs().masked_fill(~ref_finite, 0.0)
    exceed = diff > allowed
    if bool(exceed.any()):
        count = int(exceed.sum())
        index = tuple(int(i) for i in torch.nonzero(exceed)[0].tolist())
        return Comparison(
            False,
            f"{where}: {count} of {out.numel()} elements outside atol={scaled_atol:.3g} (the task's {atol:g} times "
            f"the reference's RMS, at most 1) rtol={rtol:g}; "
            f"max abs error {max_abs:.3g}; first at index {index}: got {float(o[index]):.6g}, "
            f"expected {float(r[index]):.6g}",
            max_abs, max_rel,
        )
    return Comparison(True, "", max_abs, max_rel)


def compare_outputs(out: object, ref: object, atol: float, rtol: float) -> Comparison:
    """Compare whole outputs (a tensor or a tuple/list of tensors)."""
    nested = isinstance(out, (tuple, list)) or isinstance(ref, (tuple, list))
    if nested and _structure(out) != _structure(ref):
        return Comparison(False, f"output structure {_structure(out)} differs from the reference's {_structure(ref)}")
    worst = Comparison(True)
    for (where, o), (_, r) in zip(_flatten(out), _flatten(ref)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                return Comparison(False, f"{where} is {o!r}, expected {r!r}")
            continue
        result = compare_tensors(o, r, atol, rtol, where)  # type: ignore[arg-type]
        if not result.ok:
            return result
        worst.max_abs_error = max(worst.max_abs_error, result.max_abs_error)
        worst.max_rel_error = max(worst.max_rel_error, result.max_rel_error)
    return worst


def inputs_unchanged(before: list, after: list) -> str:
    """Empty string if every tensor input is bit-identical to its saved copy, else which changed."""
    for index, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor):
            same = (
                isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))
                and bool(torch.equal(torch.isnan(a), torch.isnan(b)))
            )
            if not same:
                return f"input {index} was modified by the candidate (inputs must be left unchanged)"
    return ""
