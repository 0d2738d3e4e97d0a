"""Read the parts of ``course.yaml`` that students' tools need: exercises and
pitfall hints. Validation lives in ``grader.course``; this reader stays small
and fast because it runs at the start of every ``pytest exercises/NN``.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

COURSE_FILE = "course.yaml"
EXERCISE_DIR_RE = re.compile(r"^(\d\d)_[a-z0-9_]+$")


@dataclass(frozen=True)
class Hint:
    pitfall: str
    en: str
    zh: str


def find_course_file(start: Path | None = None) -> Path:
    """``$COURSE_YAML``, else the nearest ``course.yaml`` above ``start``,
    else the one next to this package (the repository's own)."""
    if env := os.environ.get("COURSE_YAML"):
        return Path(env)
    if start is not None:
        for folder in [start, *start.parents]:
            if (folder / COURSE_FILE).is_file():
                return folder / COURSE_FILE
    return Path(__file__).resolve().parent.parent / COURSE_FILE


@functools.lru_cache(maxsize=4)
def load_course(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


def exercise_id_of(folder: Path) -> str | None:
    """``.../03_masking`` -> ``"03"``; None for folders that are no exercise."""
    match = EXERCISE_DIR_RE.match(folder.name)
    return match.group(1) if match else None


class CourseInfo:
    """The student-facing view of the course: exercises and hints."""

    def __init__(self, data: dict):
        self._exercises = {str(e["id"]): e for e in data.get("exercises", [])}
        self._pitfalls = {p["id"]: p for p in data.get("pitfalls", [])}

    @classmethod
    def near(cls, start: Path | None = None) -> "CourseInfo":
        return cls(load_course(find_course_file(start)))

    def exercise(self, exercise_id: str) -> dict | None:
        return self._exercises.get(exercise_id)

    def hint(self, pitfall_id: str) -> Hint | None:
        pitfall = self._pitfalls.get(pitfall_id)
        if pitfall is None:
            return None
        return Hint(pitfall_id, pitfall["hint"]["en"], pitfall["hint"]["zh"])

    def pitfalls_matching_error(self, exercise_id: str, error_text: str) -> list[str]:
        """Pitfalls of this exercise whose ``error_patterns`` match an
        exception's text (for failures that are errors, not assertions)."""
        exercise = self._exercises.get(exercise_id) or {}
        found = []
        for entry in exercise.get("pitfalls", []):
            pitfall = self._pitfalls.get(entry["id"], {})
            for pattern in pitfall.get("error_patterns", []):
                if re.search(pattern, error_text):
                    found.append(entry["id"])
                    break
        return found
