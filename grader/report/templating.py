"""The report's Jinja2 templates (grader/report/templates), autoescaped,
with the filters they use; shared by the class report, the students' pages
and the exams' report."""
from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader, select_autoescape

from grader.feedback import beyond_status
from grader.report.deductions import deductions
from grader.report.exports import points_text


def environment() -> Environment:
    """The report templates (grader/report/templates), autoescaped, with
    their filters: ``pct``, ``pts``, ``beyond_status``, ``placeholders`` and
    ``changes`` (a record's changes after grading, one line, for a cell's title)."""
    env = Environment(loader=PackageLoader("grader.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["pct"] = lambda x: f"{100 * x:.0f}%"
    env.filters["pts"] = points_text
    env.filters["beyond_status"] = lambda record: beyond_status(record.status, record.reason)
    # An exam question's {size}: each student saw their own number there.
    env.filters["placeholders"] = lambda text: re.sub(r"\{(\w+)\}", "⟨\\1⟩", text)
    env.filters["changes"] = lambda record: "; ".join(
        f"{d.en}: {d.points:+.2f}" + (f" ({d.reason})" if d.reason else "") for d in deductions(record))
    return env
