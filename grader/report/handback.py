"""Feedback handed back to students outside the HTML report: the markdown
comment ``grader push nbgrader`` writes into nbgrader's gradebook (shown by
``nbgrader generate_feedback``) and the per-student folders of
``grader feedback OUT``.

Both say what a student's page says (grader/report/feedback.py): every
check with its points, the cause that broke the run, the confirmed
mistakes first and at most two possible ones, in English and Chinese.
Only recorded, student-facing fields are read (messages, reasons, hints),
never a verdict's ``instructor_detail``. nbgrader renders a comment as
markdown, which lets raw HTML through: every text is HTML-escaped here.
"""
from __future__ import annotations

import html
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course, Exercise
from grader.feedback import beyond_status, status_text
from grader.gradebook import Record
from grader.report.deductions import deductions, graded_points
from grader.report.exports import points_text


points = points_text   # at most two decimals, as every page writes them


def _esc(text: object) -> str:
    # Escaped for HTML, and markdown's emphasis/code marks made literal
    # (nbgrader renders the comment; a raw tag would be live there).
    return html.escape(str(text)).replace("*", "&#42;").replace("_", "&#95;").replace("`", "&#96;")


def _esc_file(text: object) -> str:
    # feedback.md is read as text as often as rendered: backslashes, readable both ways.
    escaped = html.escape(str(text), quote=False)
    for mark in ("\\", "*", "_", "`"):
        escaped = escaped.replace(mark, "\\" + mark)
    return escaped


def _message(verdict: dict) -> tuple[str, str]:
    message = verdict.get("message") or {}
    if isinstance(message, dict):
        return str(message.get("en", verdict["check_id"])), str(message.get("zh", ""))
    return str(message), ""


def exercise_markdown(course: Course, exercise: Exercise, record: Record, *, for_file: bool = False) -> str:
    """The feedback on one exercise as markdown: the score, the cause, the
    hints (confirmed, then possible) and every check with its points.
    ``for_file``: escaped for a .md file rather than for nbgrader's page."""
    from grader.report.feedback import exercise_feedback

    _esc = _esc_file if for_file else globals()["_esc"]  # noqa: N806 - one escaping for the whole text

    hints = {p.id: p.hint for p in course.pitfalls}
    words = status_text(record.status)
    lines = [f"**Course grader · 课程评分 (course version {_esc(course.course.version)})**: "
             f"{points(record.points)} / {points(record.max_points)} points · 分, {_esc(words.en)} · {_esc(words.zh)}"]
    if reason := beyond_status(record.status, record.reason):
        lines.append(f"\n{_esc(reason)}")
    if changes := deductions(record):
        # The pushed score already holds these: say each, so the parts add up (issue 34, item 1).
        lines.append(f"\n**Changes to your score · 分数变动** (graded by the checks · 检查得分: "
                     f"{points(graded_points(record))})\n")
        lines.extend(f"- {_esc(d.en)} · {_esc(d.zh)}: {d.points:+.2f}" + (f" — {_esc(d.reason)}" if d.reason else "")
                     + (f" ({_esc(d.by)})" if d.by else "") for d in changes)
        lines.append(f"- **= {points(record.points)} / {points(record.max_points)}**")
    view = exercise_feedback(record, hints)
    for mistake in view.confirmed:
        hint = hints[mistake.pitfall_id]
        lines.append(f"\n**Confirmed mistake · 已确认的错误** [{_esc(mistake.pitfall_id)}], on "
                     f"{_esc(', '.join(mistake.checks))}: {_esc(hint.en)}<br>{_esc(hint.zh)}")
    for mistake in view.possible:
        hint = hints[mistake.pitfall_id]
        lines.append(f"\n**Possible mistake · 可能的错误** [{_esc(mistake.pitfall_id)}] (fails "
                     f"{_esc(', '.join(mistake.checks))} the same way; it may not be yours · 不一定是你的错误): "
                     f"{_esc(hint.en)}<br>{_esc(hint.zh)}")
    if view.quiet:
        return "\n".join(lines) + "\n"
    lines.append("\n**Checks · 检查项**\n")
    for verdict in record.verdicts:
        en, zh = _message(verdict)
        mark = "✓ passed · 通过" if verdict["passed"] else "✗ failed · 未通过"
        line = (f"- {mark} — {_esc(en)}" + (f" · {_esc(zh)}" if zh else "")
                + f" ({_esc(verdict['check_id'])}: {points(verdict.get('points', 0.0))} / "
                f"{points(verdict.get('max_points', 0.0))})")
        if not verdict["passed"] and verdict.get("reason"):
            line += f"<br>{_esc(verdict['reason'])}"
        tags = [f"{'matches' if how == 'confirmed' else 'possibly'} [{p}]" for how, p in view.tags.get(verdict["check_id"], [])]
        if tags:
            line += f" ({_esc('; '.join(tags))})"
        lines.append(line)
    return "\n".join(lines) + "\n"


# --- grader feedback OUT: one folder (or zip) per student ----------------------

@dataclass
class HandBack:
    out: Path
    students: list[str] = field(default_factory=list)
    zips: list[Path] = field(default_factory=list)


def write_student_folders(course: Course, records: list[Record], out: Path, *, zipped: bool = False) -> HandBack:
    """``out/<student>/``: ``index.html`` (their page, figures inline),
    ``feedback.md`` (the same results in markdown, both languages); an exam's
    total row among ``records`` shows on the page. With ``zipped``,
    ``out/<student>.zip`` instead of the folder. Nothing of another student
    is in a folder: only class means, no names."""
    from grader.exams.records import is_exam_row
    from grader.report.html import page_name, write_html_report

    out.mkdir(parents=True, exist_ok=True)
    result = HandBack(out)
    by_student: dict[str, list[Record]] = {}
    for record in records:
        by_student.setdefault(record.key.student, []).append(record)
    work = out / ".build"
    shutil.rmtree(work, ignore_errors=True)
    # The whole class's rows give the class means on each page's figure;
    # only the students' own pages are written.
    write_html_report(course, records, work, students_only=sorted(by_student))
    exams = {exam.id: exam for exam in course.exams}
    for student, rows in sorted(by_student.items()):
        name = page_name(student)
        folder = out / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        shutil.copyfile(work / "students" / f"{name}.html", folder / "index.html")
        text = [f"# {student}: {course.course.title.en} · {course.course.title.zh}\n"]
        for record in sorted(rows, key=lambda r: r.key.exercise):
            if record.key.exercise in exams:
                text.append(exam_markdown(exams[record.key.exercise], record))
            elif not is_exam_row(course, record.key.exercise):
                exercise = course.exercise(record.key.exercise)
                text.append(f"## {exercise.id} · {exercise.title.en} · {exercise.title.zh}\n")
                text.append(exercise_markdown(course, exercise, record, for_file=True))
        (folder / "feedback.md").write_text("\n".join(text), encoding="utf-8")
        result.students.append(student)
        if zipped:
            archive = out / f"{name}.zip"
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
                for path in sorted(folder.rglob("*")):
                    zf.write(path, f"{name}/{path.relative_to(folder)}")
            shutil.rmtree(folder)
            result.zips.append(archive)
    shutil.rmtree(work, ignore_errors=True)
    return result


def exam_markdown(exam, record: Record) -> str:
    """An exam's total and its questions, as on the student's page (no answer key)."""
    _esc = _esc_file  # noqa: N806 - written to feedback.md
    words = status_text(record.status)
    lines = [f"## Exam · 考试: {_esc(exam.title.en)} · {_esc(exam.title.zh)}\n",
             f"{points(record.points)} / {points(record.max_points)} points · 分, {_esc(words.en)} · {_esc(words.zh)}"]
    if reason := beyond_status(record.status, record.reason):
        lines.append(f"\n{_esc(reason)}")
    if record.verdicts:
        lines.append("")
    for q in record.verdicts:
        mark = "✓" if q.get("correct") else "✗"
        given = _esc(q.get("given", "")) if q.get("answered") else "no answer · 未作答"
        lines.append(f"- {mark} {_esc(q.get('question_id', ''))}: {given} "
                     f"({points(q.get('points', 0.0))} / {points(q.get('max_points', 0.0))})")
    return "\n".join(lines) + "\n"


class HandBackError(Exception):
    """An input the instructor can fix (no gradebook, nothing recorded)."""


def hand_back(course: Course, grades_db: Path, out: Path, *, zipped: bool = False) -> HandBack:
    """``grader feedback OUT``: the newest results in ``grades_db`` (this
    course version), one folder or zip per student."""
    from grader.gradebook import Gradebook

    if not grades_db.is_file():
        raise HandBackError(f"{grades_db} does not exist: run `grader grade` first (or pass --db)")
    with Gradebook(grades_db) as book:
        records = list(book.records(course.course.version))
    if not records:
        raise HandBackError(f"{grades_db} holds no result of course version {course.course.version}")
    return write_student_folders(course, records, out, zipped=zipped)
