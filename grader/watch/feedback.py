"""Feedback pages of ``grader watch``, written where the student fetches them.

- nbgrader: ``<exchange>/<course>/feedback/<md5(secret + notebook id)>.html``,
  one page per notebook (its exercise), the file ``nbgrader fetch_feedback``
  copies into the student's ``<assignment>/feedback/<timestamp>/``;
- a plain folder: ``<feedback dir>/<student>/feedback.html`` for the whole
  submission.

Graded pages are the report's student page (grader/report/templates/
student.html: per-check results and the pitfalls' hints in English and
Chinese); a submission held by the hourly limit or superseded gets a short
page that says so. Pages are written to a temporary name and renamed, so a
student never fetches half a page. A page is written only where there is
none, or where the page is one watch wrote (its digest is in the watch
state, or its second line is :data:`WATCH_MARK`): nbgrader's released feedback, or anything else put there, is never
replaced (issue 34).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from markupsafe import Markup, escape

from grader.course import Course, Exercise
from grader.gradebook import Record
from grader.intake.bounded_read import read_bounded
from grader.watch.sources import Arrival

_MAX_PAGE = 64 << 20   # bigger than any page watch writes: something else's
# The line after the doctype of every page watch writes: a page with it is
# watch's own even when the state that recorded its digest is gone (a new
# --db). nbconvert's pages (nbgrader's feedback) start with their own head,
# so no text of a student's notebook can stand there.
WATCH_MARK = "<!-- written by grader watch -->"


def nbgrader_feedback_path(arrival: Arrival, notebook_id: str) -> Path:
    """Where nbgrader looks for this notebook's feedback (its ``notebook_hash``
    with the submission's secret)."""
    assert arrival.nbgrader is not None
    digest = hashlib.md5(arrival.nbgrader.secret.encode() + notebook_id.encode()).hexdigest()  # noqa: S324 - nbgrader's
    return arrival.nbgrader.exchange / "feedback" / f"{digest}.html"


def plain_feedback_path(feedback_dir: Path, student: str) -> Path:
    from grader.report.html import page_name

    return feedback_dir / page_name(student) / "feedback.html"


def graded_page(course: Course, student: str, exercises: list[Exercise], rows: dict[str, Record],
                class_mean: dict[str, float], note: str) -> str:
    """The report's student page for these exercises, with ``note`` (when
    it was graded, the hourly allowance) above it."""
    from grader.report.student_page import render_student_page

    html = render_student_page(course, student, exercises, rows, class_mean, standalone=True)
    return html.replace("<h1>", f'<p class="sub">{escape(note)}</p>\n<h1>', 1)


def note_page(student: str, title: str, note: str) -> str:
    """A short page: the submission is queued, or was superseded."""
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{escape(title)}</title></head>"
            f"<body><h1>{escape(title)}</h1><p>{escape(student)}</p><p>{escape(note)}</p></body></html>\n")


def write_page(path: Path, html: str | Markup) -> None:
    """Write atomically, readable by the student (nbgrader copies it as them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(str(html), encoding="utf-8")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ours_or_absent(path: Path, state) -> bool:
    """Whether ``path`` holds nothing, or a page watch wrote (``state``:
    the :class:`~grader.watch.state.WatchState` that recorded it)."""
    if not os.path.lexists(path):
        return True
    try:
        data = read_bounded(path, _MAX_PAGE)
    except OSError:
        return False
    if len(data) > _MAX_PAGE:
        return False
    lines = data.split(b"\n", 2)
    return (len(lines) > 1 and lines[1] == WATCH_MARK.encode()) or state.wrote_page(str(path), _digest(data))


def _marked(html: str) -> str:
    first, _, rest = html.partition("\n")
    return f"{first}\n{WATCH_MARK}\n{rest}"


def write_owned_page(path: Path, html: str | Markup, state) -> bool:
    """:func:`write_page`, where :func:`ours_or_absent`; False (nothing
    written) otherwise."""
    if not ours_or_absent(path, state):
        return False
    text = _marked(str(html))
    state.record_page(str(path), _digest(text.encode("utf-8")))   # before: a crash between leaves it ours
    write_page(path, text)
    return True
