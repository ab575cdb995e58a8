"""Static hardening rules: AST checks of the candidate's Python and text checks of its CUDA/C++.

Why static rules when the runtime defenses exist: they name the trick before anything runs, they
cost milliseconds, and they close doors the runtime cannot watch from inside the candidate's own
process (reading the harness's frames, patching torch, leaving processes behind). Each rule's
reason starts with a tag (``[import]``, ``[patch]``, ...) so rewards and tests can tell them apart.

Covered: imports outside a small allow-list; dynamic code and introspection builtins; dunder
attributes and dunder methods other than ``__init__`` (tensor subclasses, ``__class__`` walks);
assignments to attributes of imported modules (monkey-patching torch, the timer, the harness);
torch's private and introspection modules; ``ModelNew`` derived from the reference ``Model``;
results kept across calls (input-derived data stored on ``self``, in globals or in module-level
containers inside ``forward``; compiled code, kernel handles and scratch buffers may be kept); side
streams from Python; persisting-L2 policies, threads, processes, files, sockets, environment
reads, dynamic loading and private streams in the CUDA/C++ source; torch's host-file readers,
library loaders and stores (``from_file``, ``torch.ops.load_library``, ``cpp_extension.load``,
``torch.distributed`` stores).

Not covered: obfuscation that builds forbidden names at run time without the blocked builtins
(the runtime defenses still apply), tricks confined to device code, and ``self.x.add(...)`` of
input-derived data (it cannot be told from a kernel function named ``add``; fresh inputs every
call leave such a set nothing to recognise).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cudarl.tester.build.input_taint import depends, tainted_names

ALLOWED_IMPORTS = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.cuda", "torch.utils.cpp_extension",
    "torch.utils", "math", "typing", "__future__", "cudarl.nvrtc",
})
# ``os`` for build settings only: these attributes, at module level (``os.environ["MAX_JOBS"] = "4"``
# before ``load_inline``). The rest of ``os`` stays refused although the sandbox stops much of it
# (writes outside the candidate's folders, the network, privileges): ``os.kill`` reaches the judge,
# ``os.write`` the result pipes, ``os._exit``/``os.fork``/``os.system`` end or multiply the process.
# Inside functions (per call) ``os`` is refused: an honest forward has no use for the environment.
OS_ATTRIBUTES = frozenset({"environ", "getenv", "path", "cpu_count"})
_OS_USES = ", ".join(f"os.{name}" for name in sorted(OS_ATTRIBUTES))
# Modules and frame internals reachable as attributes of allowed modules (``torch.sys``,
# ``typing.sys``, ``cpp_extension.subprocess``): refused wherever they appear in an attribute chain.
FORBIDDEN_ATTRIBUTES = frozenset({
    "sys", "os", "builtins", "ctypes", "importlib", "inspect", "threading", "_thread", "subprocess", "shutil",
    "gc", "platform", "socket", "signal", "multiprocessing", "pickle", "marshal", "posix", "environ", "modules",
    "_getframe", "f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame",
    "_driver", "_DRIVER", "_launch", "nvrtc_build",  # cudarl.nvrtc's driver handle and builder
})
FORBIDDEN_CALLS = frozenset({
    "getattr", "setattr", "delattr", "eval", "exec", "compile", "__import__", "globals", "locals", "vars",
    "open", "exit", "quit", "breakpoint",
})
ALLOWED_DUNDERS = frozenset({"__init__"})
PRIVATE_TORCH = ("_C", "_dynamo", "_inductor", "_ops", "_utils", "profiler", "library", "hub",
                 "multiprocessing", "jit", "compile", "load", "save", "_refs", "_prims", "fx", "testing")
PRIVATE_TORCH_PATHS = ("torch.autograd.profiler", "torch.autograd.graph", "torch.autograd.forward_ad")
# torch's ways to read a host file, load a native library, build from files or open a store: refused
# by any path that reaches them (``torch.UntypedStorage.from_file``, ``cpp_extension.load``, not
# ``load_inline``), as attributes or as names imported from their modules.
FILE_AND_LIBRARY_NAMES = frozenset({"from_file", "load_library", "distributed", "TCPStore", "FileStore",
                                    "HashStore", "_jit_compile", "_write_ninja_file", "_run_ninja_build",
                                    "_import_module_from_library"})
FILE_AND_LIBRARY_PATHS = frozenset({"torch.utils.cpp_extension.load"})
# Flags that change only the candidate's own process (the reference runs elsewhere).
PATCHABLE_PREFIXES = ("torch.backends.",)
_CUDA_RULES: tuple[tuple[str, str], ...] = (
    (r"accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|hitProp",
     "persisting-L2 access policy (it would survive the tester's L2 flush)"),
    (r"std::thread|pthread_create|std::async|std::jthread", "starts threads"),
    (r"\bfork\s*\(|\bvfork\s*\(|\bsystem\s*\(|\bpopen\s*\(|\bexecv\w*\s*\(|\bexecl\w*\s*\(|posix_spawn",
     "starts processes"),
    (r"\bfopen\s*\(|[io]?fstream\b|\bopen\s*\(\s*\"|/proc/|/dev/shm", "opens files"),
    (r"\bsocket\s*\(|\bconnect\s*\(|<sys/socket\.h>|<netinet/", "uses the network"),
    (r"\bgetenv\s*\(|\benviron\b", "reads the environment"),
    (r"\bdlopen\s*\(|\bdlsym\s*\(|\bmmap\s*\(|\bptrace\s*\(|process_vm_", "loads code or maps memory"),
    (r"cudaStreamCreate|getStreamFromPool|cuStreamCreate|getStreamFromExternal",
     "creates its own CUDA stream (work must run on the current stream)"),
    (r"cudaDeviceReset|cudaSetDevice\s*\(|cudaDeviceSetLimit|cudaCtxResetPersistingL2Cache",
     "changes device-wide state"),
)


@dataclass(frozen=True)
class Violation:
    tag: str
    message: str
    line: int = 0

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"[{self.tag}] {self.message}{where}"


def _reads_files_or_loads(path: str) -> bool:
    parts = path.split(".")
    return bool(FILE_AND_LIBRARY_NAMES.intersection(parts)) or any(
        path == prefix or path.startswith(prefix + ".") for prefix in FILE_AND_LIBRARY_PATHS)


def dotted_name(node: ast.AST) -> str:
    """``torch.cuda.Event`` for an attribute chain rooted at a name; empty otherwise."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.imported: dict[str, str] = {}  # local name -> module path
        self.os_uses: set[int] = set()  # ``os`` names read as ``os.<allowed attribute>``
        self.module_containers: set[str] = set()
        self.classes: set[str] = set()
        self.in_forward = 0  # inside a function that runs per call (anything but __init__)
        self.depth = 0  # nesting of function definitions
        self.method = "forward"
        self.tainted: set[str] = set()  # names holding the current per-call function's input data
        self.declared_global: set[str] = set()  # names the current function declares global

    def add(self, tag: str, message: str, node: ast.AST) -> None:
        self.violations.append(Violation(tag, message, getattr(node, "lineno", 0)))

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in ("os", "os.path"):
                self.imported[(alias.asname or alias.name).split(".")[0]] = "os"
                continue
            if alias.name not in ALLOWED_IMPORTS:
                self.add("import", f"`import {alias.name}` is not allowed (candidates may import "
                         f"{', '.join(sorted(ALLOWED_IMPORTS))}, and os for module-level "
                         f"{_OS_USES})", node)
            self.imported[(alias.asname or alias.name).split(".")[0]] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_IMPORTS:
            self.add("import", f"`from {'.' * node.level}{module} import ...` is not allowed", node)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*" or alias.name.startswith("_"):
                self.add("import", f"`from {module} import {alias.name}` is not allowed", node)
            elif _reads_files_or_loads(full):
                self.add("private", f"`{full}` is not allowed (it reads host files, loads libraries or opens "
                         "stores)", node)
            self.imported[alias.asname or alias.name] = full
        self.generic_visit(node)

    # names, calls, attributes
    def visit_Name(self, node: ast.Name) -> None:
        if self.imported.get(node.id) == "os" and id(node) not in self.os_uses:
            self.add("import", f"`{node.id}` (os) may only be used as "
                     f"{_OS_USES}", node)
        if node.id in FORBIDDEN_CALLS:
            self.add("call", f"`{node.id}` is not allowed (dynamic code, introspection, files or exits)", node)
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ("__name__", "__file__"):
            self.add("dunder", f"`{node.id}` is not allowed", node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
            self.add("dunder", f"attribute `{node.attr}` is not allowed", node)
        on_os = isinstance(node.value, ast.Name) and self.imported.get(node.value.id) == "os"
        if on_os:
            self.os_uses.add(id(node.value))
            if node.attr not in OS_ATTRIBUTES:
                self.add("import", f"`os.{node.attr}` is not allowed (os may be used for "
                         f"{_OS_USES})", node)
            elif self.depth > 0:
                self.add("import", f"`os.{node.attr}` inside a function: os is for module-level build "
                         "settings only", node)
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.add("import", f"attribute `.{node.attr}` reaches a module or frame the candidate may not use", node)
        dotted = dotted_name(node)
        root = dotted.split(".")[0] if dotted else ""
        if root and self.imported.get(root, "").split(".")[0] == "torch":
            path = self.imported[root] + dotted[len(root):]
            parts = path.split(".")
            if (len(parts) > 1 and (parts[1] in PRIVATE_TORCH or parts[1].startswith("_"))) \
                    or path.startswith(PRIVATE_TORCH_PATHS):
                self.add("private", f"`{path}` is not allowed (torch internals, introspection or I/O)", node)
            elif _reads_files_or_loads(path):
                self.add("private", f"`{path}` is not allowed (it reads host files, loads libraries or opens "
                         "stores)", node)
            if path in ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream",
                        "torch.cuda.set_stream"):
                self.add("stream", f"`{path}`: work must run on the current stream", node)
        if root and self.imported.get(root, "").startswith("cudarl") and any(
                part.startswith("_") for part in dotted.split(".")[1:]):
            self.add("private", f"`{dotted}`: only the public names of cudarl.nvrtc may be used", node)
        self.generic_visit(node)

    # definitions
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "Model":
            self.add("inherits-reference", "the candidate defines a class named `Model` (the reference's name)", node)
        if node.name == "ModelNew":
            for base in node.bases:
                if dotted_name(base).split(".")[-1] == "Model":
                    self.add("inherits-reference", "ModelNew derives from the reference `Model`", node)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name.startswith("__") and node.name.endswith("__") and node.name not in ALLOWED_DUNDERS:
            self.add("dunder", f"method `{node.name}` is not allowed (tensor subclasses, operator hooks)", node)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if isinstance(default, (ast.List, ast.Dict, ast.Set)):
                self.add("cache", f"`{node.name}` has a mutable default argument (state kept across calls)", node)
        # Every function but __init__ may run per call: state written there outlives the call.
        per_call = node.name != "__init__" and self.depth == 0 or self.in_forward
        self.depth += 1
        previous, self.method = self.method, (node.name if per_call and not self.in_forward else self.method)
        outer_taint, outer_globals = self.tainted, self.declared_global
        if per_call:
            self.tainted = tainted_names(node, outer_taint if self.in_forward else set())
            self.declared_global = {name for child in ast.walk(node) if isinstance(child, ast.Global | ast.Nonlocal)
                                    for name in child.names}
        self.in_forward += per_call
        self.generic_visit(node)
        self.in_forward -= per_call
        self.method, self.tainted, self.declared_global = previous, outer_taint, outer_globals
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    # assignments: patching and caching
    def _keeps_input_data(self, node: ast.AST) -> bool:
        """Whether a store keeps the inputs' data (or counts calls: ``+=`` on kept state).
        Compiled code, kernel handles and scratch buffers may be kept (``input_taint``)."""
        return isinstance(node, ast.AugAssign) or depends(getattr(node, "value", None), self.tainted)

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element, node)
            return
        if isinstance(target, ast.Name) and self.in_forward and target.id in self.declared_global \
                and self._keeps_input_data(node):
            self.add("cache", f"{self.method} keeps input-derived data in the global `{target.id}`", node)
            return
        if isinstance(target, ast.Attribute):
            dotted = dotted_name(target)
            root = dotted.split(".")[0] if dotted else ""
            full = self.imported.get(root, "") + dotted[len(root):] if root in self.imported else ""
            if root in self.imported and not full.startswith(PATCHABLE_PREFIXES):
                self.add("patch", f"assigns to `{dotted}` (patching imported code is not allowed)", node)
            elif self.in_forward and root == "self" and self._keeps_input_data(node):
                self.add("cache", f"{self.method} stores `{dotted}`, derived from its inputs, on the module (results "
                         "must not be kept across calls)", node)
            elif self.in_forward and root in self.classes and self._keeps_input_data(node):
                self.add("cache", f"{self.method} stores `{dotted}` on a class (state kept across calls)", node)
        elif isinstance(target, ast.Subscript):
            base = dotted_name(target.value)
            root = base.split(".")[0] if base else ""
            if self.in_forward and (root == "self" or root in self.module_containers or root in self.classes) \
                    and self._keeps_input_data(node):
                self.add("cache", f"{self.method} stores input-derived data into `{base}[...]`, which outlives "
                         "the call", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.in_forward and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "append", "extend", "update", "setdefault", "insert", "add"):
            base = dotted_name(node.func.value)
            root = base.split(".")[0] if base else ""
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            # ``.add`` only on known containers: ``self.ext.add(a, b)`` is a kernel named add.
            known = root in self.module_containers or (root == "self" and node.func.attr != "add")
            if known and any(depends(a, self.tainted) for a in arguments):
                self.add("cache", f"forward grows `{base}` with input-derived data, which outlives the call", node)
        self.generic_visit(node)


def _module_containers(tree: ast.Module) -> set[str]:
    """Module-level names bound to mutable containers (where a cache would live)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, (ast.Dict, ast.List, ast.Set, ast.Call)):
            if isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) not in (
                    "dict", "list", "set", "collections.OrderedDict", "OrderedDict"):
                continue
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return names


def check_python(tree: ast.Module) -> list[Violation]:
    """Every rule over the candidate's Python AST."""
    checker = _Checker()
    checker.module_containers = _module_containers(tree)
    checker.classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    checker.visit(tree)
    return checker.violations


def check_native_source(text: str) -> list[Violation]:
    """Text rules over the CUDA/C++ sources (comments stripped first)."""
    stripped = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    found: list[Violation] = []
    for pattern, what in _CUDA_RULES:
        match = re.search(pattern, stripped)
        if match:
            found.append(Violation("cuda-source", f"the CUDA/C++ source {what}: `{match.group(0).strip()}`"))
    return found


def kernel_names(text: str) -> set[str]:
    """Names of the ``__global__`` functions defined in a CUDA source (for the launch check)."""
    stripped = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    stripped = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", stripped)
    names = set()
    for match in re.finditer(r"__global__\b(.*?)\(", stripped, flags=re.S):
        words = re.findall(r"[A-Za-z_]\w*", re.sub(r"<[^<>]*>", " ", match.group(1)))
        if words:
            names.add(words[-1])
    return names
