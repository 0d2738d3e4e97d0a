"""A tiny, safe arithmetic language for sizes, question parameters and
numeric answers in course.yaml and the question bank: ``"seq_len + 2"``,
``"heads * head_dim"``, ``"1 / (1 - p)"``, ``"sqrt(head_dim)"``; students'
numeric answers (``1/4``, ``sqrt(2)/2``) are read with it too.

Parsed with :mod:`ast` and evaluated node by node: only numbers, names of
the environment, + - * / // % **, unary minus and a few functions. Never
``eval``: the bank is data, and data should not be able to run code.

Students write these, so everything is bounded before it is computed: the
text's length, the number of nodes and their nesting (checked by an
iterative walk, so the evaluator's recursion never goes deeper than
:data:`MAX_DEPTH`), and every value's size: an integer may have at most
:data:`MAX_INT_BITS` bits, a power is refused *before* it is computed when
its result would be larger, and a float must be finite. Every arithmetic
error (overflow, division by zero, a complex result such as ``(-1)**0.5``)
becomes an :class:`ExprError`.
"""
from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

Number = int | float

MAX_CHARS = 500          # longer than any size formula or hand-written answer
MAX_NODES = 300
MAX_DEPTH = 100
MAX_INT_BITS = 256       # 10**77: far beyond any size, parameter count or answer
MAX_ROUND_DIGITS = 20    # round(x, -10**18) would compute 10**(10**18)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUNCTIONS = {"sqrt": math.sqrt, "min": min, "max": max, "abs": abs, "round": round, "exp": math.exp,
              "log": math.log, "sin": math.sin, "cos": math.cos}


class ExprError(ValueError):
    """An expression is malformed, uses an unknown name, or cannot be evaluated."""


def _short(text: str) -> str:
    """The expression as error messages quote it: bounded."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _parse(text: str) -> ast.expr:
    text = text.strip()
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval").body
    # SyntaxError: also "too many nested parentheses" and integer literals
    # beyond Python's digit limit; ValueError: a NUL byte; the others: the
    # parser's own limits on pathological input.
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise ExprError(f"not an expression: {_short(text)}") from exc
    _check_shape(tree, text)
    return tree


def _check_shape(tree: ast.expr, text: str) -> None:
    """Refuse too many nodes or too deep a nesting (an iterative walk: the
    check itself cannot overflow the stack)."""
    stack, count = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ExprError(f"expression with more than {MAX_NODES} parts: {_short(text)}")
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested more than {MAX_DEPTH} deep: {_short(text)}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def names(text: str) -> set[str]:
    """The variable names an expression uses (functions excluded)."""
    found = set()
    for node in ast.walk(_parse(text)):
        if isinstance(node, ast.Name) and node.id not in _FUNCTIONS:
            found.add(node.id)
    return found


def evaluate(text: str | Number, env: Mapping[str, Number]) -> Number:
    """The value of ``text`` with the names of ``env``; a number is itself
    (and must be a bounded int or a finite float)."""
    if isinstance(text, bool):
        raise ExprError(f"not a number: {text!r}")
    if isinstance(text, (int, float)):
        return _bounded(text, "the number")
    text = str(text)
    return _eval(_parse(text), env, text)


def _bounded(value: object, text: str) -> Number:
    """``value`` if it is a real number within the bounds, else ExprError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError(f"not a real number in {_short(text)}")     # complex: (-1)**0.5
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ExprError(f"a number larger than 2**{MAX_INT_BITS} in {_short(text)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExprError(f"not a finite number in {_short(text)}")
    return value


def _power_fits(base: Number, exponent: Number) -> bool:
    """Whether ``base ** exponent`` stays within the bounds, judged before
    computing it (an int power's bit length is about bits(base) * exponent;
    a float power overflows on its own, which is caught)."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        return (abs(base).bit_length() - 1) * exponent <= MAX_INT_BITS
    return True


def _eval(node: ast.expr, env: Mapping[str, Number], text: str) -> Number:
    # Recursion is bounded by _check_shape's MAX_DEPTH.
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value, text)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"unknown name {node.id!r} in {_short(text)} (known: {', '.join(sorted(env)) or 'none'})")
        return _bounded(env[node.id], text)
    try:
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = _eval(node.left, env, text), _eval(node.right, env, text)
            if isinstance(node.op, ast.Pow) and not _power_fits(left, right):
                raise ExprError(f"a power larger than 2**{MAX_INT_BITS} in {_short(text)}")
            return _bounded(_BINARY[type(node.op)](left, right), text)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = _eval(node.operand, env, text)
            return -value if isinstance(node.op, ast.USub) else value
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                and not node.keywords):
            args = [_eval(arg, env, text) for arg in node.args]
            if node.func.id == "round" and len(args) > 1 and abs(args[1]) > MAX_ROUND_DIGITS:
                raise ExprError(f"round() to more than {MAX_ROUND_DIGITS} digits in {_short(text)}")
            return _bounded(_FUNCTIONS[node.func.id](*args), text)
    except ZeroDivisionError as exc:
        raise ExprError(f"division by zero in {_short(text)}") from exc
    # OverflowError: float powers, exp(1000), an int too large for a float;
    # TypeError/ValueError: sqrt(-1), log(0), round(1.5, 0.5), min() of nothing.
    except (OverflowError, TypeError, ValueError, MemoryError) as exc:
        if isinstance(exc, ExprError):
            raise
        raise ExprError(f"cannot compute {_short(text)} ({type(exc).__name__})") from exc
    raise ExprError(f"not allowed in an expression: {_short(ast.unparse(node))} in {_short(text)}")


def as_int(value: Number, what: str) -> int:
    """``value`` as an int, if it is a whole number (sizes must be)."""
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{what} must be a whole number, got {value}")
        return int(value)
    return value
