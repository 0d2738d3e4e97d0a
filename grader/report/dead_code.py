"""A module's code without what never runs or is never read, for the
similarity fingerprints (grader/report/similarity.py) only; nothing is run.

A copy hidden by dead code in between its statements (``unused = len(...)``
after every line, an ``if False:`` block, statements after a ``return``)
breaks the k-grams that winnowing compares: one such line after each
statement took a copy of exercise 06 from 100 % to 57 %. Removed here, up
to a fixed point (a store read only by removed code is dead too):

- assignments whose targets are all plain names that nothing in the module reads;
- ``if``/``while`` on a constant that is false (their ``else`` stays), the
  body of ``if`` on a constant that is true stands for the whole ``if``;
- statements after ``return``, ``raise``, ``break`` or ``continue`` in the same block;
- expressions that are a bare constant or name (not a docstring);
- functions and classes defined inside a function that nothing reads.

Code that does not parse is returned as it is.
"""
from __future__ import annotations

import ast

_ROUNDS = 8           # each round can only remove; a handful reach the fixed point in practice
_TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def without_dead_code(source: str) -> str:
    """``source`` with its dead code removed (see the module), as ``ast.unparse`` writes it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    try:
        for _ in range(_ROUNDS):
            loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
                      and not isinstance(node.ctx, ast.Store)}
            loaded |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
            remover = _Remover(loaded)
            tree = remover.visit(tree)
            if not remover.changed:
                break
        return ast.unparse(ast.fix_missing_locations(tree))
    except (RecursionError, MemoryError, ValueError):
        return source


class _Remover(ast.NodeTransformer):
    def __init__(self, loaded: set[str]):
        self.loaded = loaded
        self.changed = False
        self.depth = 0        # inside a function: nested definitions that nothing reads are dead

    def _block(self, statements: list[ast.stmt], empty_ok: bool = False) -> list[ast.stmt]:
        """The statements kept; ``pass`` where a body must hold one."""
        kept: list[ast.stmt] = []
        for statement in statements:
            result = self.visit(statement)
            for node in result if isinstance(result, list) else [result] if result is not None else []:
                kept.append(node)
            if kept and isinstance(kept[-1], _TERMINAL):
                self.changed |= statement is not statements[-1]
                break
        return kept or ([] if empty_ok else [ast.Pass()])

    def generic_visit(self, node: ast.AST) -> ast.AST:
        # Only blocks of statements are rewritten; expressions are never touched.
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                docstring = block[:1] if name == "body" and _is_docstring(node, block[0]) else []
                setattr(node, name, docstring + self._block(block[len(docstring):], empty_ok=name != "body" or
                                                            bool(docstring)))
        for handler in getattr(node, "handlers", []):
            handler.body = self._block(handler.body)
        for case in getattr(node, "cases", []):
            case.body = self._block(case.body)
        return node

    def _dead(self, node: ast.AST) -> None:
        self.changed = True

    def visit_FunctionDef(self, node: ast.FunctionDef):
        if self.depth and node.name not in self.loaded:
            return self._dead(node)
        self.depth += 1
        node = self.generic_visit(node)
        self.depth -= 1
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef):
        if self.depth and node.name not in self.loaded:
            return self._dead(node)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign):
        if all(isinstance(t, ast.Name) and t.id not in self.loaded for t in node.targets):
            return self._dead(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if isinstance(node.target, ast.Name) and node.target.id not in self.loaded and node.value is not None:
            return self._dead(node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign):
        if isinstance(node.target, ast.Name) and node.target.id not in self.loaded:
            return self._dead(node)
        return node

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, (ast.Constant, ast.Name)):
            return self._dead(node)
        return node

    def visit_If(self, node: ast.If):
        test = _constant(node.test)
        if test is None:
            return self.generic_visit(node)
        self.changed = True
        chosen = node.body if test else node.orelse
        return self._block(chosen, empty_ok=True) or None

    def visit_While(self, node: ast.While):
        if _constant(node.test) is False:
            self.changed = True
            return self._block(node.orelse, empty_ok=True) or None
        return self.generic_visit(node)


def _is_docstring(owner: ast.AST, first: ast.stmt) -> bool:
    """A docstring is kept: independent solutions share the stub's, which is
    boilerplate anyway, and each one's own says what it wrote."""
    return (isinstance(owner, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str))


def _constant(test: ast.expr) -> bool | None:
    """The truth of a test that is a constant (``False``, ``0``, ``""``,
    ``not True``), None otherwise."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _constant(test.operand)
        return None if inner is None else not inner
    return None
