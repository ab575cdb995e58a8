"""Archived kernels (the Sakana AI CUDA Engineer archive) as candidates in cudarl's inline format.

An archive row holds a whole ``.cu`` file whose ``PYBIND11_MODULE`` exports ``forward`` with the
signature of the row's *functional* PyTorch code (``module_fn(x, weight, ...)``), and that code's
``Model`` holds the parameters and calls ``fn(x, self.weight, ...)``. A policy must answer with a
``ModelNew`` that takes the task's own constructor and ``forward`` arguments, so the warm start
needs the row rewritten as one: the ``.cu`` built by ``load_inline`` (no ``functions=``: the file
binds itself), the functional ``Model`` kept under another name with its PyTorch ``module_fn``
removed, and ``ModelNew`` calling that ``Model``'s ``forward`` with the extension's ``forward``
as ``fn``. What the kernel computes is unchanged. Covered: the archive's usual layout (one
``module_fn``, one ``Model`` whose ``forward`` has an ``fn=module_fn`` default). Not covered:
rows that bind no ``forward`` or whose ``Model`` does not take ``fn`` (returned as ``None``
with the reason, and counted by the caller).
"""

from __future__ import annotations

import ast
import hashlib
import re

_BINDS_FORWARD = re.compile(r"PYBIND11_MODULE\s*\([^)]*\)[^{]*\{[^}]*\"forward\"", re.S)
_WRAPPED = "_ArchiveModel"


class NotConvertible(ValueError):
    """The row's code is not in the layout this module rewrites."""


def _functional_model(functional_code: str) -> str:
    """The functional code with ``module_fn`` and the input helpers removed and ``Model``
    renamed, its ``fn`` default set to None (the caller always passes the extension's)."""
    try:
        tree = ast.parse(functional_code)
    except SyntaxError as exc:
        raise NotConvertible(f"the functional code does not parse (line {exc.lineno}: {exc.msg})") from exc
    body: list[ast.stmt] = []
    found = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("module_fn", "get_inputs", "get_init_inputs"):
            continue
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            arguments = forward.args if forward else None
            names = [a.arg for a in arguments.args] if arguments else []
            if "fn" not in names:
                raise NotConvertible("the functional Model's forward takes no fn argument")
            defaults = arguments.defaults
            index = names.index("fn") - (len(names) - len(defaults))
            if index >= 0:
                defaults[index] = ast.Constant(None)
            node.name = _WRAPPED
            for inner in ast.walk(node):  # super(Model, self) and the like
                if isinstance(inner, ast.Name) and inner.id == "Model":
                    inner.id = _WRAPPED
            found = True
        body.append(node)
    if not found:
        raise NotConvertible("the functional code defines no class Model")
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree))


def archive_candidate(cuda_code: str, functional_code: str, name_hint: str) -> str:
    """The row as a candidate module (inline format); raises ``NotConvertible`` with the reason."""
    if not _BINDS_FORWARD.search(cuda_code):
        raise NotConvertible("the CUDA code binds no forward function (PYBIND11_MODULE ... \"forward\")")
    if '"""' in cuda_code:
        raise NotConvertible("the CUDA code contains a triple quote")
    model = _functional_model(functional_code)
    digest = hashlib.sha1(cuda_code.encode()).hexdigest()[:10]
    name = "archive_" + re.sub(r"\W", "_", name_hint)[:40] + f"_{digest}"  # a module name: an identifier
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
{cuda_code.strip()}
"""

extension = load_inline(name="{name}", cpp_sources="", cuda_sources=cuda_source, extra_cuda_cflags=["-O3"])

{model}


class ModelNew({_WRAPPED}):
    def forward(self, *args):
        return super().forward(*args, fn=extension.forward)
'''
