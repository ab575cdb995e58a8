"""Output comparison rules, on CPU tensors (the same functions run on the GPU)."""

import torch

from cudarl.tester.judging.correctness import compare_outputs, compare_tensors, inputs_unchanged


def test_identical_outputs_pass_with_zero_error():
    ref = torch.randn(64, 64)
    result = compare_outputs(ref.clone(), ref, 1e-4, 1e-4)
    assert result.ok and result.max_abs_error == 0.0


def test_small_error_within_tolerance_passes_and_is_reported():
    ref = torch.ones(100)
    result = compare_outputs(ref + 5e-5, ref, 1e-4, 1e-4)
    assert result.ok and 4e-5 < result.max_abs_error < 6e-5


def test_error_beyond_tolerance_fails_naming_the_first_index():
    ref = torch.zeros(10)
    out = ref.clone()
    out[7] = 1.0
    result = compare_outputs(out, ref, 1e-4, 1e-4)
    assert not result.ok and "index (7,)" in result.reason and result.max_abs_error == 1.0


def test_wrong_shape_dtype_and_type_fail():
    ref = torch.randn(4, 4)
    assert "shape" in compare_outputs(ref.view(-1), ref, 1e-4, 1e-4).reason
    assert "dtype" in compare_outputs(ref.double(), ref, 1e-4, 1e-4).reason
    assert "not a torch.Tensor" in compare_outputs(ref.numpy(), ref, 1e-4, 1e-4).reason


def test_tensor_subclasses_and_sparse_tensors_are_refused():
    class Sneaky(torch.Tensor):
        pass

    ref = torch.randn(3, 3)
    assert "subclass" in compare_outputs(ref.as_subclass(Sneaky), ref, 1e-4, 1e-4).reason
    assert "layout" in compare_outputs(ref.to_sparse(), ref, 1e-4, 1e-4).reason


def test_nan_where_reference_is_finite_fails_even_with_huge_tolerance():
    ref = torch.randn(100)
    out = ref.clone()
    out[3] = float("nan")
    result = compare_outputs(out, ref, 1e9, 1e9)
    assert not result.ok and "NaN" in result.reason


def test_matching_nan_and_inf_in_the_reference_pass():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs(ref.clone(), ref, 1e-4, 1e-4).ok
    assert not compare_outputs(torch.tensor([1.0, float("nan"), 0.0]), ref, 1e-4, 1e-4).ok


def test_tuple_outputs_compare_elementwise_and_structure_must_match():
    a, b = torch.randn(3), torch.randn(2)
    assert compare_outputs((a.clone(), b.clone()), (a, b), 1e-4, 1e-4).ok
    assert "structure" in compare_outputs((a.clone(),), (a, b), 1e-4, 1e-4).reason


def test_half_precision_compares_in_float32():
    ref = torch.randn(1000).half()
    out = (ref.float() + 1e-3).half()
    assert compare_outputs(out, ref, 1e-2, 1e-2).ok
    assert not compare_outputs(out, ref, 1e-5, 1e-5).ok


def test_inputs_unchanged_detects_in_place_writes():
    before = [torch.randn(5), 3]
    after = [before[0].clone(), 3]
    assert inputs_unchanged(before, after) == ""
    after[0][2] += 1
    assert "input 0 was modified" in inputs_unchanged(before, after)


def test_atol_is_scaled_by_the_references_rms_hand_computed():
    ref = torch.tensor([1e-6, 2e-6], dtype=torch.float64)
    # RMS = sqrt((1e-12 + 4e-12) / 2) = 1.5811e-6, so atol 1e-4 becomes 1.5811e-10
    within = torch.tensor([1e-6 + 2.5e-10, 2e-6], dtype=torch.float64)  # allowed 1.58e-10 + 1e-4 * 1e-6 = 2.58e-10
    beyond = torch.tensor([1e-6 + 2.7e-10, 2e-6], dtype=torch.float64)
    assert compare_tensors(within, ref, 1e-4, 1e-4, "out").ok
    failed = compare_tensors(beyond, ref, 1e-4, 1e-4, "out")
    assert not failed.ok and "atol=1.58e-10" in failed.reason
    large = torch.tensor([3.0, -4.0], dtype=torch.float64)  # RMS above 1: the plain atol
    assert compare_tensors(large + 1.5e-4, large, 1e-4, 1e-4, "out").ok  # 1e-4 + 1e-4 * 3 = 4e-4 allowed
    zeros = torch.zeros(2, dtype=torch.float64)  # an all-zero reference keeps the plain atol too
    assert compare_tensors(zeros + 9e-5, zeros, 1e-4, 1e-4, "out").ok


def _softmax_case():
    torch.manual_seed(0)
    x = torch.rand(4, 65536)  # KernelBench's softmax inputs are uniform too
    return x, torch.softmax(x, dim=1)  # values near 1.5e-5: a fixed atol of 1e-4 checks nothing


def test_precision_loss_and_constant_outputs_fail_on_small_magnitude_outputs():
    x, ref = _softmax_case()
    wrong = {
        "zeros": torch.zeros_like(ref),
        "constant": torch.full_like(ref, 1 / ref.shape[1]),
        "fp16 math": torch.softmax(x.half(), dim=1).float(),
        "bf16 math": torch.softmax(x.bfloat16(), dim=1).float(),
    }
    for name, out in wrong.items():
        assert compare_tensors(out, ref, 1e-4, 1e-4, name).ok is False, name
        assert (out - ref).abs().max() < 1e-4  # what the unscaled rule let through


def test_an_honest_fp32_softmax_with_another_summation_order_passes():
    x, ref = _softmax_case()
    shifted = (x - x.max(dim=1, keepdim=True).values).exp()
    blocks = shifted.view(4, 256, 256).sum(dim=2).flip(1).cumsum(dim=1)[:, -1:]  # blockwise, reversed
    assert compare_tensors(shifted / blocks, ref, 1e-4, 1e-4, "out").ok


def test_tf32_like_inputs_to_a_matmul_fail_and_fp32_reordering_passes():
    torch.manual_seed(0)
    a, b = torch.randn(128, 1024), torch.randn(1024, 128)
    ref = a @ b

    def tf32(t: torch.Tensor) -> torch.Tensor:  # keep 10 mantissa bits, as TF32 tensor cores do
        return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)

    assert not compare_tensors(tf32(a) @ tf32(b), ref, 1e-4, 1e-4, "out").ok
    halves = a[:, :512] @ b[:512] + a[:, 512:] @ b[512:]  # split-K, another summation order
    assert compare_tensors(halves, ref, 1e-4, 1e-4, "out").ok


def test_exact_fp32_math_turns_tf32_off_for_matmuls_and_convolutions():
    """What the judge and the runner call before any model is built (``_compat``)."""
    from cudarl import _compat

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        _compat.exact_fp32_math()
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True  # torch's defaults
