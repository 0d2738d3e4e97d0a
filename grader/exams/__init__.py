"""Exams: per-student variants, questions, building the students' folders,
grading answers and code, time limits and statistics.

In:  the course (its ``exams``, ``exam_settings`` and question bank: the
     models are in grader/course/exam_schema.py), the exam secret, a roster,
     the students' collected exams.
Out: each student's exam folder (and nbgrader assignments), graded answers
     and code in the gradebook, the exam's report and statistics.

- ``variants.py``     the exam secret and each student's variant (sizes, question
                      parameters, choice orders), derived with HMAC-SHA256
- ``expr.py``         the small arithmetic language of sizes and answers
- ``questions.py``    a question as a student sees it, and its answer key
- ``reference_calc.py`` numeric answers computed by running the references
                      (in a subprocess: nothing here imports a student's file)
- ``answers_file.py`` reading ``answers.yaml`` with bounds (size, no aliases, depth)
- ``answers.py``      grading the answers
- ``intake.py``       which files are a student's exam: one source, the exam's own folder, bounded copies
- ``build.py``        one student's exam folder, and reading the roster
- ``build_class.py``  ``grader exam build``: every student's folder (and the nbgrader course)
- ``nbgrader.py``     ``grader exam build --nbgrader``: one nbgrader assignment per student
- ``timing.py``       collection timestamps, deadlines and the late policy
- ``checks.py``       variant-aware hidden checks and the per-student judge
- ``grading.py``      ``grade_exam``: grade a class (the entry point for the pipeline)
- ``session.py``      ``run_exam_grading``: options in, files out, an exit code (``grader exam grade``)
- ``stats.py``        per-question and per-exercise statistics (plain dicts)
- ``copying.py``      signs of copying to look at: answers on another student's key
                      or their own wrong answers, alike code (never a verdict)
- ``report.py``       results.json, grades.csv and the exam's HTML report
- ``validate.py``     the exams' check, which ``load_course`` runs (registered below)

The ``grader exam`` commands are in grader/cli/exam.py. Nothing in this
package is shipped to students; ``exams/questions.yaml``
(the bank, with its answers) must never be either.
"""
from __future__ import annotations

from pathlib import Path

from grader.course import Course, register_course_check


def _check_exams(course: Course, root: Path, check_files: bool) -> list[tuple[str, str]]:
    # Imported when a course is loaded, not when the package is: the checks
    # draw sample variants, which need most of this package.
    from grader.exams.validate import check_exams

    return check_exams(course, root, check_files)


register_course_check("exams", _check_exams)
