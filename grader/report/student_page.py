"""One student's page: the report's ``students/<id>.html`` and the page
``grader watch`` hands back (grader/watch/feedback.py) are this one render.

Figures come from the gradebook (grader/figures.py ``run_figures``, called by the judge): plain
numbers from the sandbox and the instructor's titles and axis labels. A
figure with ``axes`` is an attention map, drawn with its tokens
(attention_figures.py); the others are plain heat maps (svg.py).
"""
from __future__ import annotations

from markupsafe import Markup

from grader.course import Course, Exercise
from grader.feedback import status_text
from grader.gradebook import Record
from grader.report import svg
from grader.report.attention_figures import FigureDataError, student_attention
from grader.report.deductions import deductions, graded_points
from grader.report.feedback import exercise_feedback
from grader.report.templating import environment

ATTENTION_CAPTION = ("Your model's attention beside the reference's, on the same input.",
                     "你的模型与参考实现在同一输入上的注意力。")


def figure_markup(data: dict) -> Markup:
    """One recorded figure as inline SVG."""
    axes = data.get("axes")
    if isinstance(axes, list) and len(axes) == 2:
        try:
            return student_attention(data["student"], data["expected"], axes[0], axes[1], ATTENTION_CAPTION)
        except FigureDataError:
            pass  # a reference map that does not fit its labels: drawn plainly below
    return svg.side_by_side(data["student"], data["expected"], data["title"]["en"])


def exercise_pictures(rows: dict[str, Record]) -> dict[str, list[tuple[dict, Markup]]]:
    """exercise id -> [(title, figure)] for the exercises that recorded figures."""
    return {exercise_id: [(data["title"], figure_markup(data)) for data in record.figures.values()]
            for exercise_id, record in rows.items() if record.figures}


def render_student_page(course: Course, student: str, exercises: list[Exercise], rows: dict[str, Record],
                        class_mean: dict[str, float], *, exams: list | None = None, standalone: bool = False,
                        env=None) -> str:
    """The page of ``student`` for ``exercises``: points, the score chart
    next to ``class_mean`` (exercise id -> mean score 0..1), the exams'
    sections (``exams``: [(exam, its total row or None)]), figures and
    feedback. ``standalone``: no link back to the class report."""
    hints = {p.id: p.hint for p in course.pitfalls}
    figure = svg.score_bars(
        [e.id for e in exercises],
        [rows[e.id].points / rows[e.id].max_points if e.id in rows else 0.0 for e in exercises],
        [class_mean.get(e.id, 0.0) for e in exercises],
    ) if exercises else ""
    return (env or environment()).get_template("student.html").render(
        course=course, student=student, exercises=exercises, rows=rows,
        total=round(sum(r.points for r in rows.values()), 6),
        max_total=sum(e.points for e in exercises) or 1.0, hints=hints, figure=figure,
        pictures=exercise_pictures(rows), status_text=status_text,
        feedback={exercise_id: exercise_feedback(record, hints) for exercise_id, record in rows.items()},
        changes={exercise_id: deductions(record) for exercise_id, record in rows.items() if deductions(record)},
        graded_points=graded_points, exams=exams or [], standalone=standalone)
