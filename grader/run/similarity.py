"""``grader similarity SUBMISSIONS``: collect a class as ``grader grade``
does (same intake rules), then list each exercise's suspiciously alike
pairs (:mod:`grader.report.similarity`) on the terminal and, with
``--json``, in a file."""
from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict
from typing import TYPE_CHECKING
from pathlib import Path

from grader.course import REPO_ROOT, Course, CourseError, Exercise, load_course
from grader.intake.submissions import Submission, collect

if TYPE_CHECKING:
    from grader.report.similarity import SimilarityReport


def given_code(exercise: Exercise, root: Path = REPO_ROOT) -> list[str]:
    """What every student got in the exercise's folder: the stub and the
    modules it ships from earlier exercises (public tests excluded)."""
    folder = root / "exercises" / exercise.folder
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")) if not p.name.startswith("test_")]


def class_similarity(course: Course, exercises: list[Exercise], submissions: Path, threshold: float,
                     root: Path = REPO_ROOT, limit: int | None = None) -> list[SimilarityReport]:
    """One report per exercise, over every student who handed in its module."""
    with tempfile.TemporaryDirectory(prefix="similarity-") as workdir:
        found = collect(submissions, course, exercises, Path(workdir), root)
        sources = handed_in(exercises, found)
    return similarity_of(exercises, sources, threshold, root, limit)


def handed_in(exercises: list[Exercise], found: list[Submission]) -> dict[str, dict[str, str]]:
    """Exercise id -> student -> the text of the module they handed in,
    read from collected submissions (their folders may not outlive this)."""
    sources: dict[str, dict[str, str]] = {}
    for exercise in exercises:
        texts = sources[exercise.id] = {}
        for submission in found:
            part = submission.exercises.get(exercise.id)
            if part is not None and part.folder is not None:
                texts[submission.student] = (part.folder / exercise.module).read_text(encoding="utf-8",
                                                                                      errors="replace")
    return sources


def similarity_of(exercises: list[Exercise], sources: dict[str, dict[str, str]], threshold: float,
                  root: Path = REPO_ROOT, limit: int | None = None) -> list[SimilarityReport]:
    """One report per exercise from :func:`handed_in`'s texts."""
    from grader.report.similarity import similar_pairs  # copydetect: imported when used

    return [similar_pairs(e.id, sources.get(e.id, {}), given_code(e, root), threshold, limit=limit)
            for e in exercises]


def write_json(reports: list[SimilarityReport], out: Path) -> None:
    out.write_text(json.dumps([{**asdict(r), "pairs": [{**asdict(p), "similarity": p.similarity} for p in r.pairs]}
                               for r in reports], indent=1))


# The class report lists this many pairs per exercise, the most alike
# first, and counts the rest (`grader similarity` lists them all).
REPORT_PAIRS = 100


def for_report(course: Course, exercises: list[Exercise], submissions: Path | dict[str, dict[str, str]],
               root: Path = REPO_ROOT, threshold: float = 0.7) -> tuple[list[SimilarityReport], str]:
    """The class report's similarity section: (reports, "") or ([], why not),
    from the submissions folder or from :func:`handed_in`'s texts of a
    class already collected. Never raises: similarity is a list to look at,
    and grading is done."""
    try:
        if isinstance(submissions, dict):
            return similarity_of(exercises, submissions, threshold, root, REPORT_PAIRS), ""
        return class_similarity(course, exercises, submissions, threshold, root, REPORT_PAIRS), ""
    except ImportError as exc:   # copydetect is in the [grader] extra
        return [], f"similarity not computed: {exc.name or exc} is not installed"
    except Exception as exc:  # noqa: BLE001 - the grades are written; say why this part is missing
        return [], f"similarity not computed: {type(exc).__name__}: {exc}"


def run_similarity(submissions: Path, exercise_ids: list[str], threshold: float, json_out: Path | None,
                   course_path: Path) -> int:
    """``grader similarity``: each exercise's alike pairs on the terminal
    (and as JSON at ``json_out``); 0, or 2 for bad input."""
    from rich.console import Console
    from rich.markup import escape

    try:
        course = load_course(course_path, check_files=False)
        chosen = [course.exercise(i) for i in exercise_ids] if exercise_ids else list(course.exercises)
    except (CourseError, KeyError) as exc:
        print(f"similarity: {exc}", file=sys.stderr)
        return 2
    reports = class_similarity(course, chosen, submissions, threshold, root=course_path.resolve().parent)
    console = Console(highlight=False)
    # An exercise nobody handed in (another assignment's) has nothing to
    # compare: one line names them all, instead of "0 pair(s) of 0 compared" each.
    if empty := [r.exercise for r in reports if len(r.compared) < 2 and not r.pairs]:
        console.print(f"{', '.join(empty)}: fewer than two submissions of the module, nothing to compare"
                      + ("" if exercise_ids else " (choose exercises with -e)"))
    for report in (r for r in reports if r.exercise not in empty):
        line = (f"{report.exercise}: {len(report.pairs)} pair(s) at or above {threshold:.0%} either way "
                f"of {len(report.compared)} compared")
        if report.too_short:
            line += f"; {len(report.too_short)} too short to judge"
        console.print(line)
        for pair in report.pairs:
            # Both shares: 100 % one way and little the other is a copy padded with code of its own.
            console.print(f"  {escape(repr(pair.first))} ~ {escape(repr(pair.second))}: {pair.first_covered:.0%} / "
                          f"{pair.second_covered:.0%} of each one's own code found in the other")
    if json_out is not None:
        write_json(reports, json_out)
        console.print(f"{json_out}: written")
    return 0
