"""The names a module binds, read from its source without running it: the
names a stub asks for and those a submission defines, so that feedback can
say "your module does not define X" (grader/feedback.py, grader/judge.py)
without importing student code in the grader's process."""
from __future__ import annotations

import ast
import functools


def _bound_names(node: ast.AST) -> set[str]:
    names = set()
    for target in ast.walk(node):
        if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
            names.add(target.id)
    return names


def top_level_names(source: bytes) -> set[str] | None:
    """Names a module binds at its top level (functions, classes,
    assignments, imports, also inside top-level if/try/with), or None when
    they cannot be known statically (it does not parse, it defines a module
    ``__getattr__``, star-imports or writes ``globals()``)."""
    try:
        tree = compile(source, "<submission>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except Exception:  # noqa: BLE001 - any bytes at all: the grader goes on
        return None
    if any(isinstance(n, ast.Name) and n.id in ("globals", "vars", "setattr") for n in ast.walk(tree)):
        return None
    names: set[str] = set()
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                               ast.AsyncWith)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.items[i].optional_vars for i in range(len(node.items))] if isinstance(
                    node, (ast.With, ast.AsyncWith)) else [node.target]
            for target in targets:
                if target is not None:
                    names |= _bound_names(target)
            if isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                pending += node.body + getattr(node, "orelse", [])
        elif isinstance(node, ast.If):
            pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return None if "__getattr__" in names else names


def public_names(source: bytes) -> list[str]:
    """The functions and classes a stub asks for (its public top-level defs)."""
    return list(_public_names(source))


@functools.lru_cache(maxsize=64)  # the course's stubs, parsed once per grader, not once per submission
def _public_names(source: bytes) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    return tuple(n.name for n in tree.body
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_"))


def missing_names(submitted: bytes, stub: bytes) -> list[str]:
    """The stub's public names the submission does not define (empty when
    that cannot be known statically)."""
    defined = top_level_names(submitted)
    if defined is None:
        return []
    return [name for name in public_names(stub) if name not in defined]
