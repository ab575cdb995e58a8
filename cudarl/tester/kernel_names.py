"""Kernel names as compilers and profilers print them, reduced to what a candidate wrote: the
guard's static rules use them on the source, the judge's own-kernel check on the profiler's
launches (``judging.hardening``), the tester on ``ptxas`` reports. A module of its own so that
the judging side does not import the build side's rules."""

from __future__ import annotations

import re


def kernel_base_name(name: str) -> str:
    """``void ns::foo<float, 4>(float const*, int)`` -> ``foo``; ``_Z3fooPf`` -> ``foo``."""
    if name.startswith("_Z"):  # Itanium mangling: length-prefixed names, nested ones in N...E
        nested = name.startswith("_ZN")
        rest, last = name[3:] if nested else name[2:], ""
        while match := re.match(r"\d+", rest):
            begin, length = len(match.group(0)), int(match.group(0))
            last, rest = rest[begin:begin + length], rest[begin + length:]
            if not nested:
                break
        if last:
            return last
    return qualified_kernel_name(name).split("::")[-1]


def qualified_kernel_name(name: str) -> str:
    """``void ns::foo<float, 4>(float const*)`` -> ``ns::foo``; the anonymous namespace is dropped
    (a candidate's file-local kernels are still its own)."""
    core = name.replace("(anonymous namespace)::", "").removeprefix("void ").strip()
    depth, cut = 0, len(core)
    for index, char in enumerate(core):  # cut at the first top-level '<' or '('
        if char in "<(" and depth == 0:
            cut = index
            break
    return core[:cut].strip()


def compiled_kernel_names(kernels: list) -> set[str]:
    """Names of the kernels the compiler reported (``KernelResources``): namespace-qualified when
    the demangled name has a namespace, so a library kernel of the same base name never matches."""
    return {qualified_kernel_name(k.name) if not k.name.startswith("_Z") else kernel_base_name(k.name)
            for k in kernels}
