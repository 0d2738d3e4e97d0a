"""``load_course``: the course, read once per process.

One command asks for the course several times (its option checks, the
grading, the forbidden-call rules of the checks); reading and validating
it each time cost ~0.3 s of start-up per call with PyYAML's pure-Python
parser. The course read is kept while the files it was read from are
unchanged on disk.
"""
from __future__ import annotations

from pathlib import Path

from grader.course.model import DEFAULT_COURSE_FILE, Course, read_course

# Courses loaded by this process: (resolved course.yaml, files checked) ->
# (fingerprint of the files the load read, the course). One command asks
# for the course several times (option checks, grading, forbidden-call
# rules); it is read once while none of those files changes.
_loaded: dict[tuple[Path, bool], tuple[tuple, Course]] = {}


def load_course(path: Path | str = DEFAULT_COURSE_FILE, *, check_files: bool = True) -> Course:
    """Read, validate and return the course. Raises :class:`CourseError`
    listing every problem found, each with its field path.

    Loaded once per process: a later call returns the same course as long
    as course.yaml, the pitfall variants, the modules and the question bank
    it names are unchanged on disk (a course checked with its files also
    answers a call that does not check them). Treat it as read-only."""
    path = Path(path)
    resolved = path.resolve()
    for key in ((resolved, check_files), (resolved, True)):
        cached = _loaded.get(key)
        if cached is not None and cached[0] == _fingerprint(resolved, cached[1]):
            return cached[1]
    course = read_course(path, check_files=check_files)
    _loaded[(resolved, check_files)] = (_fingerprint(resolved, course), course)
    return course


def _fingerprint(path: Path, course: Course | None) -> tuple:
    """What a load of ``path`` read, as (file, mtime, size, inode): a
    change to any of them (or its appearing or going) reloads the course."""
    root = path.parent
    files = [path]
    if course is not None:
        for exercise in course.exercises:
            files += [root / "grader" / "pitfalls" / f"{exercise.folder}.yaml",
                      root / "solutions" / exercise.folder / exercise.module,
                      root / "exercises" / exercise.folder / exercise.module]
        if course.exam_settings.questions:
            files.append(root / course.exam_settings.questions)
    stamps = []
    for file in files:
        try:
            st = file.stat()
            stamps.append((str(file), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            stamps.append((str(file), None))
    return tuple(stamps)
