"""Why a submission cannot be read, in the grader's own words."""
from __future__ import annotations

import re

UNREADABLE = "unreadable"   # the status of a result whose submission could not be read
# A path from the student's tree may be named in a reason only when it is
# plain: letters, digits and ``._-/``, short. Anything else is left out.
_PLAIN_PATH_RE = re.compile(r"^[A-Za-z0-9._/-]{1,120}$")


class Unreadable(Exception):
    """A submission (or one exercise of it) cannot be read.

    ``reason`` is built from fixed texts only (at most a plain path of the
    student's tree): it reaches the student's page and the gradebook."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def plain_path(parts: tuple[str, ...] | str) -> str:
    """``parts`` joined with ``/`` when that is plain text, else a fixed placeholder."""
    text = parts if isinstance(parts, str) else "/".join(parts)
    return text if _PLAIN_PATH_RE.match(text) and ".." not in text.split("/") else "a file with an unusual name"


def internal_reason(exc: BaseException) -> str:
    """A fixed reason for an unexpected exception while reading a submission:
    the exception's class (the grader's own or Python's, never the student's),
    not its message (which may quote the student's files)."""
    return f"the submission could not be read ({type(exc).__name__}); the instructor has the details"
