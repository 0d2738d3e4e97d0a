"""Turn a submitted notebook into the exercise's module file.

Students may hand in an exercise as a notebook: nbgrader's collected
``submitted/<student>/<assignment>/NN_slug.ipynb``, or the ``NN_slug.ipynb``
of their repository. The module is the notebook's answer cell (nbgrader
metadata ``solution: true`` and ``grade_id`` ``exNN_answer``), exactly as
written; the grader then treats it like any ``.py`` submission.

This reads JSON only (no nbformat, no Jupyter) and never runs anything.
Parsing is bounded: the size is checked before (the caller reads at most
:data:`MAX_NOTEBOOK_BYTES`), nesting deeper than Python's recursion limit
and integers longer than :data:`MAX_INT_DIGITS` are refused by the parser.
Every way a notebook can be broken gives a :class:`NotebookError` whose
message, built from fixed texts, tells the student what is wrong; never a
crash, never the student's own text.
"""
from __future__ import annotations

import io
import json
import os
import tokenize
from pathlib import Path

from grader.course import Exercise
from grader.release.common import answer_cell_id

MAX_NOTEBOOK_BYTES = 16 << 20    # outputs (plots) make notebooks large; 16 MiB is far beyond any answer
MAX_INT_DIGITS = 400             # no notebook field needs a longer integer
# Each JSON array or object costs Python ~60 bytes for 2 bytes of text: a
# 16 MiB notebook of "[]" would need ~500 MB. A course notebook has a few thousand.
MAX_JSON_CONTAINERS = 200_000
IPYTHON_ONLY = "# (IPython only, ignored by the grader) "
IPYTHON_MAX_LINES, IPYTHON_MAX_MAGICS = 1_000, 24
MAX_ANSWER_CHARS = 1 << 20       # an answer cell longer than a module may be is refused before any parsing


class NotebookError(Exception):
    """The notebook cannot give a module; the message says why."""


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError("a cell's source is neither text nor a list of lines")


def _nbgrader(cell: dict) -> dict:
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer too long")
    return int(text)


def _statement_starts(source: str) -> set[int]:
    """The indexes of the lines where a statement starts: not inside
    brackets or a string, not after a backslash (the fallback rule, when
    IPython is missing: where IPython's own tokenizer looks for escapes).
    One pass of Python's tokenizer; after a tokenizing error, no later line
    counts (it stays as written, and fails as Python would)."""
    starts: set[int] = set()
    at_start, depth = True, 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                at_start = True   # NL inside brackets is no statement's end
                continue
            if token.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER) \
                    or (token.type == tokenize.ERRORTOKEN and token.string.isspace()):
                continue
            if at_start:
                starts.add(token.start[0] - 1)
                at_start = False
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError):
        pass
    return starts


def _ipython_lines(source: str, lines: list[str]) -> tuple[set[int], list[str]]:
    """Which lines IPython runs as magics or shell escapes, and the cell as
    IPython's own cleanup leaves it (prompts and a common indent removed)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        TransformerManager = None
    candidates = sum(line.lstrip()[:1] in ("%", "!") or line.rstrip().endswith("?") for line in lines)
    # IPython's transformers re-tokenize the whole cell once per magic they find: seconds for
    # a few hundred. An answer cell is far smaller; a larger one gets the (linear) fallback rule.
    if TransformerManager is not None and len(lines) <= IPYTHON_MAX_LINES and candidates <= IPYTHON_MAX_MAGICS:
        # transform_cell ends the cell with a newline; compare like with like.
        ended = "\n".join(lines) + "\n"
        transformed = TransformerManager().transform_cell(ended)[:-1].split("\n")
        if len(transformed) == len(lines):
            flagged = {i for i, (old, new) in enumerate(zip(lines, transformed))
                       if old != new and "get_ipython()" in new}
            return flagged, transformed
    # IPython missing, or a cell magic / multi-line escape changed the line count: the exact
    # conservative rule: a line starting a statement with % or ! (not !=, %=) is IPython's.
    starts = _statement_starts("\n".join(lines))
    flagged = {i for i in starts if lines[i].lstrip()[:1] in ("%", "!") and lines[i].lstrip()[:2] not in ("!=", "%=")}
    return flagged, lines


def _without_ipython_syntax(source: str) -> str:
    """IPython-only lines (magics, shell escapes) are not Python: they become
    comments (``pass`` where a block needs a statement), so the line numbers
    of errors still match the cell's. Which lines are IPython's follows
    IPython's own input transformers, so ``(a\\n!= b)`` stays Python."""
    lines = source.split("\n")
    flagged, cleaned = _ipython_lines(source, lines)
    out = []
    for i, line in enumerate(cleaned):
        if i not in flagged:
            out.append(line)
            continue
        original = lines[i]
        indent = original[:len(original) - len(original.lstrip())]
        out.append(f"{indent}pass  {IPYTHON_ONLY}{original.strip()}" if indent else IPYTHON_ONLY + original.strip())
    return "\n".join(out)


def _parse(data: bytes, name: str):
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{name} is {len(data) >> 20} MiB (at most {MAX_NOTEBOOK_BYTES >> 20} MiB): clear the outputs")
    if data.count(b"[") + data.count(b"{") > MAX_JSON_CONTAINERS:   # counted in strings too: an upper bound
        raise NotebookError(f"{name} is not a valid notebook (more than {MAX_JSON_CONTAINERS} JSON lists and "
                            "objects): clear the outputs")
    try:
        return json.loads(data.decode("utf-8"), parse_int=_bounded_int)
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{name} is not UTF-8 text: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name} is not a valid notebook (broken JSON at line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise NotebookError(f"{name} is not a valid notebook (its JSON is nested too deeply)") from None
    except (ValueError, OverflowError):
        raise NotebookError(f"{name} is not a valid notebook (it holds a number too large to read)") from None


def answer_from_notebook(data: bytes, exercise: Exercise, name: str = "notebook") -> str:
    """The module source in a notebook's answer cell.

    Raises :class:`NotebookError` for invalid or oversized JSON, a notebook
    without cells, an answer cell that is missing (deleted, or its metadata
    stripped by another tool), duplicated (a copied cell), not code, or not
    encodable as UTF-8 (an unpaired surrogate)."""
    notebook = _parse(data, name)
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError(f"{name} is not a Jupyter notebook (no list of cells)")
    if notebook.get("nbformat") != 4:
        shown = notebook.get("nbformat") if isinstance(notebook.get("nbformat"), int) else "unknown"
        raise NotebookError(f"{name} has notebook format {shown}; Jupyter's current format 4 is needed")
    wanted = answer_cell_id(exercise)
    cells = [c for c in notebook["cells"] if isinstance(c, dict)]
    answers = [c for c in cells if _nbgrader(c).get("grade_id") == wanted]
    if not answers:
        if not any(_nbgrader(c) for c in cells):
            raise NotebookError(f"{name} has no answer cell: its cells lost their metadata (was the notebook "
                                "re-created or converted by another tool?); copy your code into the course's notebook")
        raise NotebookError(f"{name} has no answer cell {wanted!r} (deleted?); copy your code into the course's notebook")
    if len(answers) > 1:
        raise NotebookError(f"{name} has the answer cell {wanted!r} {len(answers)} times (a copied cell?): "
                            "keep one and put all your code in it")
    answer = answers[0]
    if answer.get("cell_type") != "code" or not _nbgrader(answer).get("solution"):
        raise NotebookError(f"{name}: the answer cell {wanted!r} is no longer a code answer cell")
    source = _source(answer).replace("\r\n", "\n").replace("\r", "\n")
    if len(source) > MAX_ANSWER_CHARS:
        raise NotebookError(f"{name}: the answer cell is {len(source) >> 10} K characters long "
                            f"(at most {MAX_ANSWER_CHARS >> 10} K)")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise NotebookError(f"{name}: the answer cell holds a character that is not valid text "
                            "(an unpaired surrogate); retype the line it is on") from None
    return _without_ipython_syntax(source).rstrip("\n") + "\n"


def extract_module(notebook: Path, exercise: Exercise) -> bytes:
    """The bytes of the module file the notebook's answer cell gives
    (the file is read without following a link, and at most
    :data:`MAX_NOTEBOOK_BYTES` + 1 bytes of it)."""
    try:
        fd = os.open(notebook, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_NOTEBOOK_BYTES + 1)
    except OSError as exc:
        raise NotebookError(f"{notebook.name} cannot be read: {exc.strerror}") from None
    return answer_from_notebook(data, exercise, notebook.name).encode("utf-8")
