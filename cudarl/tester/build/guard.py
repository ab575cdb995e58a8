"""Stage 1: parse the candidate and refuse obvious non-kernels, without running anything.

Also extracts the arguments of each ``load_inline`` call by evaluating literal expressions
(string constants, names bound to them at module level, ``+`` concatenation, lists, f-strings
without fields). That lets the kernel-only compile mode build the CUDA source without executing
the candidate. With ``static_rules`` on, the hardening rules of ``static_rules`` run too (patching,
introspection, caching, forbidden imports, CUDA-source tricks); the runtime defenses live in the
judge and the runner.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from cudarl.build_rules import refused_includes, refused_nvrtc_options
from cudarl.tester.build import static_rules
from cudarl.tester.build.build_options import refused_build_options

_LOADERS = {"load_inline"}
_OPTIONS = ("extra_cuda_cflags", "extra_cflags", "extra_ldflags", "extra_include_paths")


@dataclass(frozen=True)
class InlineBuild:
    """The statically known arguments of one ``load_inline`` call."""

    name: str | None
    cuda_sources: tuple[str, ...]
    cpp_sources: tuple[str, ...]
    functions: tuple[str, ...]
    extra_cuda_cflags: tuple[str, ...]
    resolved: bool  # False when some argument was not a literal expression


@dataclass(frozen=True)
class NvrtcBuild:
    """The statically known arguments of one ``cudarl.nvrtc.kernel`` call."""

    name: str | None
    source: str | None
    options: tuple[str, ...]
    resolved: bool  # False when the source, name or options are not literal expressions


@dataclass
class GuardResult:
    ok: bool
    outcome: str = ""  # "parse_error" or "rejected" when not ok
    reasons: list[str] = field(default_factory=list)
    builds: list[InlineBuild] = field(default_factory=list)
    kernel_names: list[str] = field(default_factory=list)  # __global__ functions in the CUDA sources
    format: str = "inline"  # "inline" (load_inline) or "nvrtc" (cudarl.nvrtc kernels)
    nvrtc_builds: list[NvrtcBuild] = field(default_factory=list)


class _Unresolved(Exception):
    pass


def _evaluate(node: ast.AST, names: dict[str, object]) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(e, names) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        if type(left) is type(right) and isinstance(left, (str, list)):
            return left + right
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    raise _Unresolved(ast.dump(node)[:80])


def _module_constants(tree: ast.Module) -> dict[str, object]:
    names: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                names[stmt.targets[0].id] = _evaluate(stmt.value, names)
            except _Unresolved:
                names.pop(stmt.targets[0].id, None)
    return names


def _as_strings(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _Unresolved("not a string or list of strings")


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _extract_build(call: ast.Call, names: dict[str, object]) -> InlineBuild:
    order = ["name", "cpp_sources", "cuda_sources", "functions"]
    args: dict[str, ast.AST] = dict(zip(order, call.args))
    args.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    values: dict[str, object] = {}
    resolved = True
    for key in ("name", "cpp_sources", "cuda_sources", "functions", "extra_cuda_cflags"):
        if key not in args:
            continue
        try:
            values[key] = _evaluate(args[key], names)
        except _Unresolved:
            resolved = False
    try:
        build = InlineBuild(
            name=values.get("name") if isinstance(values.get("name"), str) else None,  # type: ignore[arg-type]
            cuda_sources=_as_strings(values.get("cuda_sources")),
            cpp_sources=_as_strings(values.get("cpp_sources")),
            functions=_as_strings(values.get("functions")),
            extra_cuda_cflags=_as_strings(values.get("extra_cuda_cflags")),
            resolved=resolved,
        )
    except _Unresolved:
        build = InlineBuild(None, (), (), (), (), resolved=False)
    return build


def _refused_options(call: ast.Call, names: dict[str, object]) -> list[str]:
    """The build options of one ``load_inline`` call the allowlist refuses, where the guard can
    read them (the loading hook checks the values the call gets at run time too)."""
    given = {kw.arg: kw.value for kw in call.keywords if kw.arg in _OPTIONS}
    values = {}
    for key, node in given.items():
        try:
            values[key] = _evaluate(node, names)
        except _Unresolved:
            continue
    return refused_build_options(values)


def inspect_source(source: str, static_rules_enabled: bool = True) -> GuardResult:
    """Parse and screen a candidate; never executes it. ``static_rules_enabled=False`` keeps only
    the basic checks (used to show what the runtime defenses catch on their own)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return GuardResult(False, "parse_error", [f"Python syntax error at line {exc.lineno}: {exc.msg}"])
    except (ValueError, RecursionError) as exc:
        return GuardResult(False, "parse_error", [f"source cannot be parsed: {exc}"])

    defines_model = any(
        (isinstance(n, ast.ClassDef) and n.name == "ModelNew")
        or (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets))
        for n in tree.body
    )
    reasons: list[str] = []
    if not defines_model:
        reasons.append("no ModelNew: the candidate must define `class ModelNew(nn.Module)` at module level")

    names = _module_constants(tree)
    loader_calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _call_name(node) in _LOADERS]
    builds = [_extract_build(node, names) for node in loader_calls]
    # always, static rules or not: the options and includes reach the compiler, which reads and writes files
    reasons += [reason for call in loader_calls for reason in _refused_options(call, names)]
    nvrtc_kernels = _nvrtc_calls(tree)
    string_constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    has_kernel_text = any("__global__" in s for s in string_constants)
    if not builds and not nvrtc_kernels:
        reasons.append("no CUDA kernel: the candidate neither calls torch.utils.cpp_extension.load_inline nor "
                       "creates cudarl.nvrtc kernels")
    elif not has_kernel_text and all(b.resolved for b in builds):
        reasons.append("no CUDA kernel: the candidate's sources define no __global__ function")
    native = "\n".join(s for s in string_constants if "__global__" in s or "torch::" in s or "#include" in s)
    reasons += refused_includes(native)
    kernels = sorted(static_rules.kernel_names(native))
    if static_rules_enabled:
        violations = static_rules.check_python(tree) + static_rules.check_native_source(native)
        reasons += [str(v) for v in violations]
    form = "nvrtc" if nvrtc_kernels and not builds else "inline"
    nvrtc_builds = [_extract_nvrtc(call, names) for call in nvrtc_kernels]
    reasons += [reason for build in nvrtc_builds for reason in refused_nvrtc_options(build.options)]
    if reasons:
        return GuardResult(False, "rejected", reasons, builds, kernels, form, nvrtc_builds)
    return GuardResult(True, builds=builds, kernel_names=kernels, format=form, nvrtc_builds=nvrtc_builds)


def _extract_nvrtc(call: ast.Call, names: dict[str, object]) -> NvrtcBuild:
    args: dict[str, ast.AST] = dict(zip(["source", "name", "options"], call.args))
    args.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    try:
        source = _evaluate(args["source"], names)
        name = _evaluate(args["name"], names)
        options = _as_strings(_evaluate(args["options"], names)) if "options" in args else ()
    except (_Unresolved, KeyError):
        return NvrtcBuild(None, None, (), resolved=False)
    if not isinstance(source, str) or not isinstance(name, str):
        return NvrtcBuild(None, None, (), resolved=False)
    return NvrtcBuild(name, source, options, resolved=True)


def _nvrtc_calls(tree: ast.Module) -> list[ast.Call]:
    """The candidate's ``cudarl.nvrtc.kernel`` calls (the nvrtc format)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "cudarl.nvrtc":
            names |= {alias.asname or alias.name for alias in node.names if alias.name in ("kernel", "Kernel")}
        elif isinstance(node, ast.Import):
            names |= {f"{alias.asname or alias.name}.kernel" for alias in node.names if alias.name == "cudarl.nvrtc"}
    calls = [(node, static_rules.dotted_name(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return [node for node, name in calls if name in names or name.endswith(".nvrtc.kernel")]

