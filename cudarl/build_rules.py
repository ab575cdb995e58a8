"""What a candidate's build may ask of the compiler, checked wherever the request reaches it: the
NVRTC options of the nvrtc format, and the files a CUDA/C++ source may include (both formats).

Why here, in the base layer: NVRTC builds (``cudarl.nvrtc_build``) run these checks where options
and sources reach NVRTC, whatever assembled them; the tester's guard and loading hook run them
too (with the ``load_inline`` option allowlist, ``cudarl.tester.build.build_options``). Each reason
is tagged ``[build-option]`` or ``[include]``, as the static rules tag theirs; these checks hold
with the static rules off too: the compiler reads and writes files.

An include must name a file by a relative path inside the toolkit's or the candidate's own
folders: an absolute path, a ``..`` step or a home folder would put any readable host file into
the compiler's error, which is the optimizer's feedback. Computed includes (``#include MACRO``)
are refused because their path cannot be checked here; ``.incbin`` (an assembler directive that
copies a file into the object) is refused outright.

Covered: the NVRTC option allowlist, include directives (``#include``, ``#include_next``,
``#import``, ``#embed``, ``__has_include``) after line continuations are joined. Not covered:
confining what the compiler may read (the sandbox's part).
"""

from __future__ import annotations

import re

ALLOWED_OPTIONS = re.compile(
    r"--?use_fast_math|--?std=c\+\+(11|14|17|20)|--?(fmad|ftz|prec-div|prec-sqrt)=(true|false)|"
    r"--?maxrregcount=\d{1,3}|-[DU][A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|"
    r"--(define|undefine)-macro=[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|--?extra-device-vectorization|"
    r"-lineinfo|--generate-line-info|--?restrict|-default-device|--device-as-default-execution-space|"
    r"--?dopt=(on|off)|-w|--disable-warnings|--diag-suppress=[0-9,]+|"
    r"(--ptxas-options|-Xptxas)=(-v|-O[0-3]|--?maxrregcount=\d{1,3}|-dlcm=c[ag]|--warn-on-spills)")
"""NVRTC options a candidate may give (``cudarl.nvrtc.kernel``): optimization, fast math, the C++
standard, defines, warnings, register limits. Options that read files (``--include-path``,
``--pre-include``) or change the target are refused: includes come from the toolkit, the
architecture from the tester."""


def refused_nvrtc_options(options: list[str] | tuple[str, ...]) -> list[str]:
    """The reasons (tagged ``[build-option]``) to refuse a candidate's NVRTC options; empty: allowed."""
    return [f"[build-option] NVRTC option {option!r} is not allowed" for option in options
            if not ALLOWED_OPTIONS.fullmatch(str(option))]


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed)\b(.*)$", re.M)
_HAS_INCLUDE = re.compile(r"__has_include(_next)?\s*\(([^()]*)\)")
_NAMED = re.compile(r"<([^<>\"\n]+)>|\"([^\"<>\n]+)\"")


def refused_includes(text: str) -> list[str]:
    """The reasons (tagged ``[include]``) to refuse the include directives of a CUDA/C++ source."""
    joined = re.sub(r"\\\r?\n", "", text)  # the preprocessor joins continued lines before anything else
    reasons = []
    operands = [(m.group(1), m.group(2)) for m in _DIRECTIVE.finditer(joined)]
    operands += [("__has_include", m.group(2)) for m in _HAS_INCLUDE.finditer(joined)]
    for directive, operand in operands:
        operand = re.split(r"//|/\*", operand, maxsplit=1)[0].strip()
        named = _NAMED.fullmatch(operand)
        if named is None:
            reasons.append(f"[include] `#{directive} {operand}`: a computed include (its path cannot be checked)")
            continue
        path = named.group(1) or named.group(2)
        parts = re.split(r"[/\\]+", path)
        if path.startswith(("/", "~", "\\")) or ".." in parts:
            reasons.append(f"[include] `#{directive} {operand}`: includes name files inside the toolkit's or the "
                           "candidate's folders (no absolute paths, no `..`)")
    if re.search(r"\.incbin\b", joined):
        reasons.append("[include] `.incbin`: copies a file into the build")
    return reasons
