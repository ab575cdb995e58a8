"""Does forward's result depend on the candidate's own kernels? The decoy defence, by data flow.

A candidate that keeps cuBLAS or cuDNN for its GEMM or convolution and fuses the epilogue in its
own kernel spends most of forward's GPU time in library kernels, and is honest; a candidate that
launches a kernel whose output it throws away, and returns torch's result, is not. A time share
cannot tell them apart; this can. For one checked forward the runner holds back every launch of
the candidate's own kernels (``launch_shim`` for kernels in its built extensions, a switch in
``cudarl.nvrtc``'s launcher for nvrtc kernels) after filling the free GPU memory with NaN, while
torch's and the libraries' kernels run as usual. If forward's output is then bit for bit what it
was with the kernels running, nothing they computed reached the output: a decoy.

Covered: ``<<<...>>>`` and ``cudaLaunchKernel`` launches from the candidate's extensions, and
``cudarl.nvrtc`` launches. Not covered (the checked forward observes no held-back launch, and the
judge falls back to the time-share rule and says so): driver-API launches, ``cudaLaunchKernelEx``,
CUDA graph replays. An own kernel that only copies torch's result into the output counts as a
dependency; the reported ``own_time_share`` shows how much of the work it did. A forward that
raises with its kernels held back depends on them (when the error is a CUDA error, the trials
after it fail as well: a candidate whose own kernels compute indices that torch then uses would
be wronged; none of the suite's do).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from cudarl.tester.judging.launch_shim import LaunchShim


def poison_(tensor: torch.Tensor) -> None:
    """Overwrite ``tensor`` in place with values no honest computation leaves unchanged."""
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.logical_not_()
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN of the same bits; ``torch.equal`` says NaN != NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))


def same_outputs(first: list, second: list) -> bool:
    """Whether two forwards' flattened outputs are identical, tensors bit for bit."""
    if len(first) != len(second):
        return False
    for a, b in zip(first, second):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return False
        if isinstance(a, torch.Tensor) and not same_bits(a, b):
            return False
        if not isinstance(a, torch.Tensor) and a != b:
            return False
    return True


class Knockout:
    """The switch for the candidate's own launches, and the checked forward."""

    def __init__(self, shim: LaunchShim | None) -> None:
        self.shim = shim
        self.active = False
        self.nvrtc_skipped = 0

    def install_on_nvrtc(self) -> None:
        """Make ``cudarl.nvrtc`` launches skippable (before the candidate is imported)."""
        from cudarl import nvrtc

        launch = nvrtc.Kernel.__call__
        if getattr(launch, "__cudarl_knockout__", False):
            return
        knockout = self

        def held_back(kernel, *args, **kwargs):
            if knockout.active:
                knockout.nvrtc_skipped += 1
                return None
            return launch(kernel, *args, **kwargs)

        held_back.__cudarl_knockout__ = True  # type: ignore[attr-defined]
        nvrtc.Kernel.__call__ = held_back

    def skipped(self) -> int:
        return self.nvrtc_skipped + (self.shim.skipped() if self.shim else 0)

    def forward_depends(self, run: Callable[[], list], expected: list) -> tuple[bool | None, str]:
        """Run the checked forward (``run`` returns its flattened outputs, synchronized) with
        the own launches held back and compare with ``expected``: (True: the output changed;
        False: identical; None: no launch was held back, so undecided) and a note."""
        before = self.skipped()
        self.active = True
        if self.shim:
            self.shim.switch(True)
        try:
            outputs = run()
        except Exception as exc:  # noqa: BLE001 - the candidate's reaction, whatever it is
            return True, f"forward raised with its own kernels held back ({type(exc).__name__})"
        finally:
            self.active = False
            if self.shim:
                self.shim.switch(False)
        held = self.skipped() - before
        if held == 0:
            how = "" if self.shim else " (no launch shim in this runner)"
            return None, f"no launch of the candidate's own kernels could be held back{how}"
        if same_outputs(outputs, expected):
            return False, f"{held} own launch(es) held back; forward's output unchanged"
        return True, f"{held} own launch(es) held back; forward's output changed"
