"""Student ids from folder names, and student text made safe for the
instructor's terminal.

A folder name is a student id only when it is plain (letters, digits,
``._@-``, at most 64 characters, not starting with a dot or dash). Any
other name (control characters, terminal escape sequences, Rich markup
brackets, path separators, empty, too long) is refused: its submission is
recorded under a placeholder id that names no real student
(:func:`placeholder_id`), and the name is shown to the instructor only
through :func:`shown`.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

from rich.markup import escape

STUDENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
PLACEHOLDER_PREFIX = "unusable-id-"
SHOWN_CHARS = 80


def usable_student_id(name: str) -> bool:
    """Whether ``name`` (a folder or zip name without ``.zip``) can be a student id."""
    return bool(STUDENT_ID_RE.match(name)) and not name.startswith(PLACEHOLDER_PREFIX)


def placeholder_id(name: str) -> str:
    """The id a submission with an unusable name is recorded under: stable
    for one name, distinct across names, and plain text."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{PLACEHOLDER_PREFIX}{digest}"


def visible(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` with every control or format character (ESC, BEL, CR,
    bidi overrides, ...) written as an escape (``\\x1b``), and cut to
    ``limit`` characters: nothing in it moves the cursor or changes a terminal."""
    out = []
    for char in text:
        if char.isprintable() and unicodedata.category(char) not in ("Cf", "Zl", "Zp"):
            out.append(char)
        else:
            out.append(char.encode("unicode_escape", "backslashreplace").decode("ascii"))
    shown = "".join(out)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` safe to print with Rich: control characters visible, markup escaped."""
    return escape(visible(text, limit))
