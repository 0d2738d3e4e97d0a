"""Reading a student's ``answers.yaml``, with bounds: the student wrote it.

- The file is opened without following links and only if it is a regular
  file (a named pipe would block the grader), and at most
  :data:`MAX_ANSWERS_BYTES` are read, whatever its size claims to be.
- The YAML loader refuses anchors and aliases (a "billion laughs" list
  expands exponentially once turned into text), refuses nesting deeper
  than :data:`MAX_DEPTH` (PyYAML composes recursively), keeps dates as the
  text written (a bad date raises in PyYAML) and integers of more than
  :data:`MAX_INT_DIGITS` digits as text (Python refuses to convert huge ones).
- A file with more than :data:`MAX_YAML_MARKS` structural marks (lines,
  commas, brackets) is not given to PyYAML at all: its time grows with them.
- Any failure to load falls back to reading the file line by line
  (``id: answer``) with a linear-time match, so one odd answer never costs
  the others.
- Each answer comes back as a bounded value: a scalar, or a short flat list
  of scalars (a shape, several letters); text is cut to
  :data:`MAX_ANSWER_CHARS`.

Problems are fixed texts naming the file, never the student's text.
"""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import yaml

from grader.intake.bounded_read import read_bounded  # noqa: F401  (moved; the exam modules import it from here)

MAX_ANSWERS_BYTES = 256 << 10
MAX_DEPTH = 20
MAX_INT_DIGITS = 100
MAX_ANSWER_CHARS = 2000
MAX_LIST_ITEMS = 64
MAX_KEY_CHARS = 100
MAX_ANSWERS = 1000            # answers kept from one file (an exam has a few dozen questions)
# PyYAML's pure-Python loader (the C one composes recursively in C: no depth
# bound) takes ~0.1 ms per node: 120,000 list items in 240 KB took 16 s. A
# file with more structure than this is read line by line instead.
MAX_YAML_MARKS = 2000
# Linear: anchored, and no two unbounded groups compete for the same characters.
_LINE = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_-]*)\s*:(.*)")
_INT = re.compile(r"[-+]?[0-9_]+")


class AnswersRefused(yaml.YAMLError):
    """answers.yaml uses a YAML feature the grader does not read (aliases, deep nesting)."""


class _AnswersLoader(yaml.SafeLoader):
    """SafeLoader without anchors or aliases, with a depth bound, dates as
    text and huge integers as text."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise AnswersRefused("aliases are not read")
        if self.peek_event().anchor is not None:
            raise AnswersRefused("anchors are not read")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise AnswersRefused(f"nested more than {MAX_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | str:
    text = loader.construct_scalar(node)
    if len(text.replace("_", "")) > MAX_INT_DIGITS:
        return text
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:           # what PyYAML's resolver calls an int, Python may not read
        return text


def _construct_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


_AnswersLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_AnswersLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)


def _scalar(value: object) -> object:
    """A YAML scalar as the grader keeps it: numbers and None as they are, anything else as bounded text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, bytes):                 # !!binary
        return "<binary>"
    return _clean(value if isinstance(value, str) else str(value))


def _clean(text: str) -> str:
    """Cut to MAX_ANSWER_CHARS; an unpaired surrogate (YAML's ``"\\ud800"``)
    becomes ``?``, so the text can be written as UTF-8 (results.json, the gradebook)."""
    return text[:MAX_ANSWER_CHARS].encode("utf-8", "replace").decode("utf-8")


def bounded_answer(value: object) -> object:
    """One answer as a bounded value: a scalar, or a flat list of at most
    :data:`MAX_LIST_ITEMS` scalars. Deeper structures become bounded text
    (they are wrong answers; no alias can make their text large, and the
    file itself is bounded)."""
    if isinstance(value, (list, tuple)):
        if len(value) <= MAX_LIST_ITEMS and not any(isinstance(v, (list, tuple, dict, set)) for v in value):
            return [_scalar(v) for v in value]
        return _clean(str(value))
    if isinstance(value, (dict, set)):
        return _clean(str(value))
    return _scalar(value)


def _by_line(text: str) -> dict[str, object]:
    """``id: answer`` per line; a ``#`` starts a comment, as in YAML."""
    found: dict[str, object] = {}
    for line in text.splitlines():
        if (match := _LINE.match(line)) is not None:
            found[match.group(1)[:MAX_KEY_CHARS]] = match.group(2).split("#", 1)[0].strip()[:MAX_ANSWER_CHARS]
    return found


def read_answers(path: Path | None) -> tuple[dict[str, object], list[str]]:
    """(answers by question id, problems worth telling the instructor)."""
    name = path.name if path is not None else "answers.yaml"
    if path is None or not os.path.lexists(path):
        return {}, [f"{name} is missing"]
    try:
        data = read_bounded(path, MAX_ANSWERS_BYTES)
    except OSError as exc:
        why = "is a link" if exc.errno == errno.ELOOP else "is not a regular file" if exc.errno in (
            errno.EINVAL, errno.EISDIR) else "cannot be read"
        return {}, [f"{name} {why}"]
    if len(data) > MAX_ANSWERS_BYTES:
        return {}, [f"{name} is larger than {MAX_ANSWERS_BYTES >> 10} KiB; not read"]
    text = data.decode("utf-8", errors="replace")
    loaded = None
    if sum(text.count(mark) for mark in "\n,[]{}") <= MAX_YAML_MARKS:
        try:
            loaded = yaml.load(text, Loader=_AnswersLoader)  # noqa: S506 (a SafeLoader, made stricter)
        # YAMLError: not YAML, or refused above; the others: PyYAML's own
        # conversions (a float beyond range, a bad base64) on odd input.
        except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            loaded = None
    if isinstance(loaded, dict):
        return {_clean(str(k)[:MAX_KEY_CHARS]): bounded_answer(v) for k, v in list(loaded.items())[:MAX_ANSWERS]}, []
    if loaded is None and not text.strip():
        return {}, []
    # Not YAML (an unquoted ': ' in an answer, a tab, an alias, too much structure...): one answer per line.
    found = {k: bounded_answer(v) for k, v in list(_by_line(text).items())[:MAX_ANSWERS]}
    return found, [f"{name} is not valid YAML (or uses aliases, deep nesting or too many entries); "
                   f"read line by line ({len(found)} answers)"]
