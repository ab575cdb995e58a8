"""Which values in a per-call function come from its inputs' data, for the ``[cache]`` rule.

Why: keeping state across calls is a reward hack only when the state is the inputs' data or
something computed from it (a cached result, a replayed output). Keeping compiled code, a kernel
handle, a launch configuration or a scratch buffer is ordinary engineering, and refusing it
rejected honest kernels (an extension compiled lazily on first call and stored on ``self``).
So a value is *tainted* when it is a parameter of the function (other than ``self``/``cls``),
or is computed from a tainted value, except through metadata: ``.shape``, ``.dtype``, ``.device``,
``.size()``, ``.numel()``, ``len()`` and the like, and the first argument of
``torch.empty_like`` and its siblings (a buffer of the input's shape holds none of its data).

Covered: assignments, augmented and annotated assignments, ``for`` targets, ``with ... as``
and walrus targets, to a fixed point (a later statement may taint an earlier name in a loop).
Not covered: taint through attributes of ``self`` read back later (the store is what the rule
refuses), through containers mutated in place, or through calls into helpers that stash their
arguments (helpers that keep state are refused by the rules on their own).
"""

from __future__ import annotations

import ast

_META_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "is_cuda", "layout", "itemsize", "T_shape"}
_META_METHODS = {"size", "numel", "dim", "stride", "is_contiguous", "element_size", "get_device", "nelement",
                 "new_empty", "new_zeros", "new_ones"}
_SHAPE_ALLOCATORS = {"empty_like", "zeros_like", "ones_like"}  # the first argument gives shape and dtype only
_META_FUNCTIONS = {"len", "isinstance"}


def depends(expression: ast.AST | None, tainted: set[str]) -> bool:
    """Whether ``expression`` reads the data of a tainted name."""
    if expression is None:
        return False
    if isinstance(expression, ast.Name):
        return expression.id in tainted
    if isinstance(expression, ast.Attribute):
        return expression.attr not in _META_ATTRIBUTES and depends(expression.value, tainted)
    if isinstance(expression, ast.Call):
        function = expression.func
        arguments = [*expression.args, *(keyword.value for keyword in expression.keywords)]
        if isinstance(function, ast.Attribute) and function.attr in _META_METHODS:
            return any(depends(argument, tainted) for argument in arguments)
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if isinstance(function, ast.Name) and name in _META_FUNCTIONS:
            return False
        if name in _SHAPE_ALLOCATORS:
            arguments = [*expression.args[1:], *(keyword.value for keyword in expression.keywords)]
            return any(depends(argument, tainted) for argument in arguments)
        return depends(function, tainted) or any(depends(argument, tainted) for argument in arguments)
    if isinstance(expression, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
        return False  # a definition reads nothing until called
    return any(depends(child, tainted) for child in ast.iter_child_nodes(expression))


def _names(target: ast.AST) -> set[str]:
    """Plain names bound by an assignment target (not ``self`` of ``self.x = ...``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_names(element) for element in target.elts))
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return set()


def tainted_names(function: ast.FunctionDef | ast.AsyncFunctionDef, outer: set[str] = frozenset()) -> set[str]:
    """Names in ``function`` that hold its inputs' data (``outer``: tainted names of enclosing
    functions, which a nested function reads through its closure)."""
    arguments = function.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    parameters += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    tainted = set(outer) | {a.arg for a in parameters if a.arg not in ("self", "cls")}
    while True:
        before = len(tainted)
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and depends(node.value, tainted):
                for target in node.targets:
                    tainted |= _names(target)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr) and depends(node.value, tainted):
                tainted |= _names(node.target)
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and depends(node.iter, tainted):
                tainted |= _names(node.target)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None \
                    and depends(node.context_expr, tainted):
                tainted |= _names(node.optional_vars)
        if len(tainted) == before:
            return tainted
