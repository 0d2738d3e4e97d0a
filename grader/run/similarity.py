"""``grader similarity SUBMISSIONS``: collect a class as ``grader grade``
does (same intake rules), then list each exercise's suspiciously alike
pairs (:mod:`grader.report.similarity`) on the terminal and, with
``--json``, in a file."""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from typing import TYPE_CHECKING
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.intake.submissions import collect

if TYPE_CHECKING:
    from grader.report.similarity import SimilarityReport


def given_code(exercise: Exercise, root: Path = REPO_ROOT) -> list[str]:
    """What every student got in the exercise's folder: the stub and the
    modules it ships from earlier exercises (public tests excluded)."""
    folder = root / "exercises" / exercise.folder
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")) if not p.name.startswith("test_")]


def class_similarity(course: Course, exercises: list[Exercise], submissions: Path, threshold: float,
                     root: Path = REPO_ROOT) -> list[SimilarityReport]:
    """One report per exercise, over every student who handed in its module."""
    from grader.report.similarity import similar_pairs  # copydetect: imported when used

    with tempfile.TemporaryDirectory(prefix="similarity-") as workdir:
        found = collect(submissions, course, exercises, Path(workdir), root)
        reports = []
        for exercise in exercises:
            sources = {}
            for submission in found:
                part = submission.exercises.get(exercise.id)
                if part is not None and part.folder is not None:
                    sources[submission.student] = (part.folder / exercise.module).read_text(
                        encoding="utf-8", errors="replace")
            reports.append(similar_pairs(exercise.id, sources, given_code(exercise, root), threshold))
    return reports


def write_json(reports: list[SimilarityReport], out: Path) -> None:
    out.write_text(json.dumps([{**asdict(r), "pairs": [{**asdict(p), "similarity": p.similarity} for p in r.pairs]}
                               for r in reports], indent=1))


def for_report(course: Course, exercises: list[Exercise], submissions: Path, root: Path = REPO_ROOT,
               threshold: float = 0.7) -> tuple[list[SimilarityReport], str]:
    """The class report's similarity section: (reports, "") or ([], why not).
    Never raises: similarity is a list to look at, and grading is done."""
    try:
        return class_similarity(course, exercises, submissions, threshold, root), ""
    except ImportError as exc:   # copydetect is in the [grader] extra
        return [], f"similarity not computed: {exc.name or exc} is not installed"
    except Exception as exc:  # noqa: BLE001 - the grades are written; say why this part is missing
        return [], f"similarity not computed: {type(exc).__name__}: {exc}"
