"""The course model: the base every other stage stands on.

In:  ``course.yaml``, the question bank it names (``exams/questions.yaml``)
     and the pitfall variants (``grader/pitfalls/NN_slug.yaml``).
Out: a validated :class:`Course` (exercises, pitfalls, assignments, exams,
     questions, limits), or a :class:`CourseError` naming each bad field.

It imports nothing above it. A feature that adds to the course (the exams)
registers its own check with :func:`register_course_check`.

- ``model.py``        the course's models and ``load_course``
- ``exam_schema.py``  the models of exams, exam settings and the question bank
- ``late_policy.py``  a late policy (shared by homework and exams) and its rule
- ``schema_base.py``  the strict pydantic base and bilingual ``Text``
- ``pitfalls.py``     pitfall variants: the reference with one known mistake
"""
from grader.course.model import (
    DEFAULT_COURSE_FILE, REPO_ROOT, Assignment, Course, CourseError, CourseMeta, Exercise, ExercisePitfall,
    GradingLimits, Pitfall, WatchSettings, load_course, register_course_check, shipped_copies,
)
from grader.course.schema_base import Text

__all__ = ["DEFAULT_COURSE_FILE", "REPO_ROOT", "Assignment", "Course", "CourseError", "CourseMeta", "Exercise",
           "ExercisePitfall", "GradingLimits", "Pitfall", "Text", "WatchSettings", "load_course",
           "register_course_check", "shipped_copies"]
