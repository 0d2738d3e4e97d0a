"""Turn a submitted notebook into the exercise's module file.

Students may hand in an exercise as a notebook: nbgrader's collected
``submitted/<student>/<assignment>/NN_slug.ipynb``, or the ``NN_slug.ipynb``
of their repository. The module is the notebook's answer cell (nbgrader
metadata ``solution: true`` and ``grade_id`` ``exNN_answer``), exactly as
written; the grader then treats it like any ``.py`` submission.

This reads JSON only (no nbformat, no Jupyter) and never runs anything.
Every way a notebook can be broken gives a :class:`NotebookError` whose
message tells the student what is wrong, never a crash.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from grader.course import Exercise
from grader.release.common import answer_cell_id

MAX_NOTEBOOK_BYTES = 16 << 20    # outputs (plots) make notebooks large; 16 MiB is far beyond any answer
# IPython-only lines (magics, shell escapes) are not Python: they become
# comments, so the line numbers of errors still match the cell's.
_IPYTHON_LINE_RE = re.compile(r"^(\s*)([%!].*)$")


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


def _without_ipython_syntax(source: str) -> str:
    return "\n".join(_IPYTHON_LINE_RE.sub(r"\1# (IPython only, ignored by the grader) \2", line)
                     for line in source.split("\n"))


def answer_from_notebook(data: bytes, exercise: Exercise, name: str = "notebook") -> str:
    """The module source in a notebook's answer cell.

    Raises :class:`NotebookError` for invalid JSON, a notebook without
    cells, an answer cell that is missing (deleted, or its metadata
    stripped by another tool), duplicated (a copied cell), or not code."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{name} is {len(data) >> 20} MiB (at most {MAX_NOTEBOOK_BYTES >> 20} MiB): clear the outputs")
    try:
        notebook = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{name} is not UTF-8 text: {exc.reason}") from exc
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name} is not a valid notebook (broken JSON at line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError(f"{name} is not a Jupyter notebook (no list of cells)")
    if notebook.get("nbformat") != 4:
        raise NotebookError(f"{name} has notebook format {notebook.get('nbformat')!r}; Jupyter's current format 4 is needed")
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
    return _without_ipython_syntax(_source(answer)).rstrip("\n") + "\n"


def extract_module(notebook: Path, exercise: Exercise) -> bytes:
    """The bytes of the module file the notebook's answer cell gives."""
    try:
        data = notebook.read_bytes()
    except OSError as exc:
        raise NotebookError(f"{notebook.name} cannot be read: {exc.strerror}") from exc
    return answer_from_notebook(data, exercise, notebook.name).encode("utf-8")
