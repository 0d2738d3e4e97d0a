"""Probes that read a module's source instead of running it."""
from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType


def forbidden_uses(module: ModuleType, names: list[str]) -> list[dict]:
    """Attribute accesses (``torch.softmax``, ``x.softmax``) and
    ``from ... import`` of any of ``names``, with their line numbers.

    A function the student defines under the same name is allowed: only uses
    of someone else's implementation count.
    """
    source = Path(module.__file__).read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append({"name": node.attr, "line": node.lineno})
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in names:
                    found.append({"name": alias.name, "line": node.lineno})
    return sorted(found, key=lambda use: use["line"])
