"""Reading a module's source instead of running it: which forbidden names
it uses.

The grader calls :func:`scan` in its own process on the bytes it collected
(never inside the student's process, where ``__file__`` and the scanner's
own code could be changed under it); a public test calls
:func:`forbidden_uses` on the student's file. Both decode the bytes the way
Python does (PEP 263), so a ``# coding:`` line cannot show the reader other
text than the interpreter runs; a source encoding other than UTF-8 is
refused outright, since the course's files are UTF-8 and the odd codecs
(UTF-7 above all) exist here only to hide code.
"""
from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

UTF8_ENCODINGS = ("utf-8", "utf-8-sig")
# Names no exercise needs and that reach into the probes observing the
# code (the course's own package, the dispatcher's and the profiler's
# switches, the innards of functions): a module using one is treated like
# one using a forbidden built-in.
REACHING_IN = ("coursekit", "_python_dispatch", "_DisableTorchDispatch", "_disable_profiler",
               "_set_dispatch_mode", "_push_mode", "_pop_mode", "__code__", "__globals__",
               "__defaults__", "__kwdefaults__", "__closure__")
_REACHING_IN = frozenset(REACHING_IN)
# Calls that look an attribute up by a string: getattr(torch, "softmax").
_LOOKUPS = {"getattr", "attrgetter", "methodcaller", "__getattribute__", "__getattr__"}


@dataclass
class SourceScan:
    """What a scan found: uses of forbidden names (``{"name", "line"}``),
    or why the source could not be read (``refused``: a fixed text)."""

    uses: list[dict] = field(default_factory=list)
    refused: str | None = None
    reaching_in: list[dict] = field(default_factory=list)


def decode(data: bytes) -> str:
    """The text Python compiles from ``data``: the encoding of its BOM or
    ``# coding:`` line, UTF-8 when it has neither. Raises ``ValueError``
    (with a fixed message) for any encoding other than UTF-8 and for bytes
    that do not decode."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown codec, or bytes of the first lines that are not UTF-8
        if "unknown encoding" in str(exc):
            raise ValueError("declares a source encoding Python does not know") from None
        raise ValueError("is not valid UTF-8") from None
    if encoding not in UTF8_ENCODINGS:
        raise ValueError("declares a source encoding other than UTF-8 (a `# coding:` line); save it as UTF-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise ValueError("is not valid UTF-8") from None


def _lookup_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def uses_in(text: str, names: list[str]) -> list[dict]:
    """Uses of ``names`` in ``text``: attribute accesses (``torch.softmax``,
    ``x.softmax``), imports (``from torch import softmax``, ``import
    torch.nn.functional.softmax``) and string look-ups (``getattr(torch,
    "softmax")``), each with its line. A function the student defines under
    the same name is allowed: only uses of someone else's implementation
    count. Raises ``SyntaxError`` for text that does not parse."""
    return _uses(ast.parse(text), set(names))[0]


def _uses(tree: ast.AST, wanted: set[str], bare: frozenset[str] = frozenset()) -> tuple[list[dict], list[dict]]:
    """(:func:`uses_in` on a parsed tree, the bare names of ``bare`` in it:
    ``ast.Name`` nodes), in one walk."""
    found, names = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in bare:
                names.append({"name": node.id, "line": node.lineno})
        elif isinstance(node, ast.Attribute) and node.attr in wanted:
            found.append({"name": node.attr, "line": node.lineno})
        elif isinstance(node, ast.ImportFrom):
            found += [{"name": a.name, "line": node.lineno} for a in node.names if a.name in wanted]
        elif isinstance(node, ast.Import):
            found += [{"name": part, "line": node.lineno}
                      for a in node.names for part in a.name.split(".") if part in wanted]
        elif isinstance(node, ast.Call) and _lookup_name(node.func) in _LOOKUPS:
            found += [{"name": arg.value, "line": node.lineno} for arg in node.args
                      if isinstance(arg, ast.Constant) and arg.value in wanted]
    return sorted(found, key=lambda use: (use["line"], use["name"])), names


def scan(data: bytes, names: list[str]) -> SourceScan:
    """Decode ``data`` as Python would and find the uses of ``names`` and
    of :data:`REACHING_IN` (as names, attributes, imports or look-ups)."""
    try:
        tree = ast.parse(decode(data))  # once: the forbidden names and the reaching-in ones in one walk
        found, bare = _uses(tree, set(names) | _REACHING_IN, bare=_REACHING_IN)
        reaching_in = [use for use in found if use["name"] in _REACHING_IN] + bare
        uses = [use for use in found if use["name"] in names]
        return SourceScan(uses=uses, reaching_in=sorted(reaching_in, key=lambda u: u["line"]))
    except ValueError as exc:
        return SourceScan(refused=str(exc))
    except SyntaxError:
        return SourceScan(refused="does not parse as Python")


def forbidden_uses(module: ModuleType, names: list[str]) -> list[dict]:
    """Uses of ``names`` in the file ``module`` was loaded from (public
    tests); a file that cannot be read as UTF-8 Python counts as one use on
    line 1, named by the reason."""
    found = scan(Path(module.__file__).read_bytes(), names)
    if found.refused is not None:
        return [{"name": f"(the file {found.refused})", "line": 1}]
    return sorted(found.uses + found.reaching_in, key=lambda use: use["line"])
