"""A tiny, safe arithmetic language for sizes, question parameters and
numeric answers in course.yaml and the question bank: ``"seq_len + 2"``,
``"heads * head_dim"``, ``"1 / (1 - p)"``, ``"sqrt(head_dim)"``.

Parsed with :mod:`ast` and evaluated node by node: only numbers, names of
the environment, + - * / // % **, unary minus and a few functions. Never
``eval``: the bank is data, and data should not be able to run code.
"""
from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

Number = int | float

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUNCTIONS = {"sqrt": math.sqrt, "min": min, "max": max, "abs": abs, "round": round, "exp": math.exp,
              "log": math.log, "sin": math.sin, "cos": math.cos}


class ExprError(ValueError):
    """An expression is malformed, uses an unknown name, or cannot be evaluated."""


def _parse(text: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"not an expression: {text!r}") from exc


def names(text: str) -> set[str]:
    """The variable names an expression uses (functions excluded)."""
    found = set()
    for node in ast.walk(_parse(text)):
        if isinstance(node, ast.Name) and node.id not in _FUNCTIONS:
            found.add(node.id)
    return found


def evaluate(text: str | Number, env: Mapping[str, Number]) -> Number:
    """The value of ``text`` with the names of ``env``; a number is itself."""
    if isinstance(text, bool):
        raise ExprError(f"not a number: {text!r}")
    if isinstance(text, (int, float)):
        return text
    return _eval(_parse(text), env, text)


def _eval(node: ast.expr, env: Mapping[str, Number], text: str) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"unknown name {node.id!r} in {text!r} (known: {', '.join(sorted(env)) or 'none'})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ExprError(f"exponent too large in {text!r}")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise ExprError(f"division by zero in {text!r}") from exc
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, env, text)
        return -value if isinstance(node.op, ast.USub) else value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and not node.keywords):
        args = [_eval(arg, env, text) for arg in node.args]
        try:
            return _FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise ExprError(f"{node.func.id}() failed in {text!r}: {exc}") from exc
    raise ExprError(f"not allowed in an expression: {ast.unparse(node)!r} in {text!r}")


def as_int(value: Number, what: str) -> int:
    """``value`` as an int, if it is a whole number (sizes must be)."""
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{what} must be a whole number, got {value}")
        return int(value)
    return value
