"""The report's Jinja2 templates (grader/report/templates), autoescaped,
with the filters they use; shared by the class report, the students' pages
and the exams' report."""
from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader, select_autoescape

from grader.feedback import beyond_status


def environment() -> Environment:
    """The report templates (grader/report/templates), autoescaped, with
    their filters: ``pct``, ``pts``, ``beyond_status`` and ``placeholders``."""
    env = Environment(loader=PackageLoader("grader.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["pct"] = lambda x: f"{100 * x:.0f}%"
    env.filters["pts"] = lambda x: f"{x:.2f}".rstrip("0").rstrip(".")
    env.filters["beyond_status"] = lambda record: beyond_status(record.status, record.reason)
    # An exam question's {size}: each student saw their own number there.
    env.filters["placeholders"] = lambda text: re.sub(r"\{(\w+)\}", "⟨\\1⟩", text)
    return env
