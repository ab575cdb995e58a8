"""Output comparison rules, on CPU tensors (the same functions run on the GPU)."""

import torch

from cudarl.tester.judging.correctness import compare_outputs, inputs_unchanged


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
