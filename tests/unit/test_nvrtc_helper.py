"""The nvrtc launch helper's argument handling: every bad launch is refused before the driver,
with an error naming the argument. (Launching needs the GPU; compiling is tested in
test_nvrtc_build.py.)"""

from __future__ import annotations

import pytest
import torch

from cudarl.nvrtc import KernelArgumentError, Scalar, f64, i64, kernel, launch_dims, normalize_argument

SOURCE = 'extern "C" __global__ void add(const float* a, float* out, int n) {}'


@pytest.mark.parametrize("value, what, dims", [
    (256, "block", (256, 1, 1)), ((16, 16), "block", (16, 16, 1)), ((4, 2, 1), "grid", (4, 2, 1)),
    (2**31 - 1, "grid", (2**31 - 1, 1, 1)),
])
def test_launch_dimensions_become_three_tuples(value, what, dims):
    assert launch_dims(value, what) == dims


@pytest.mark.parametrize("value, what, words", [
    (0, "grid", "grid[0] = 0"), ((32, 64), "block", "2048 threads"), ((1, 1, 1, 1), "grid", "1-3 ints"),
    ((1, 70000), "grid", "grid[1] = 70000"), (2.5, "block", "1-3 ints"), ((True,), "block", "1-3 ints"),
])
def test_bad_launch_dimensions_are_refused(value, what, words):
    with pytest.raises(KernelArgumentError, match=words.replace("[", r"\[").replace("]", r"\]")):
        launch_dims(value, what)


def test_scalars_get_explicit_types():
    assert normalize_argument(0, 7) == Scalar(7, "int32")
    assert normalize_argument(0, 0.5) == Scalar(0.5, "float32")
    assert normalize_argument(0, i64(2**40)) == Scalar(2**40, "int64")
    assert normalize_argument(0, f64(0.1)).ctype == "float64"


@pytest.mark.parametrize("value, words", [
    (2**31, "does not fit in int32; wrap it in i64"), (True, "bool"), ("3", "str"),
    (torch.zeros(4), "on cpu; kernels need CUDA tensors"),
])
def test_bad_arguments_are_refused_with_their_index(value, words):
    with pytest.raises(KernelArgumentError, match="argument 3") as error:
        normalize_argument(3, value)
    assert words in str(error.value)


def test_a_kernel_name_missing_from_the_source_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDARL_CUDA_ARCH", "90")
    monkeypatch.setenv("CUDARL_NVRTC_DIR", str(tmp_path))
    kernel(SOURCE, "add")
    with pytest.raises(KernelArgumentError, match="no __global__ function named 'mul'"):
        kernel(SOURCE, "mul")
