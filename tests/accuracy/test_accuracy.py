"""The accuracy corpus: submissions written against the contract and the
exercise READMEs, each labelled with the grade it deserves, graded by the
real Judge (one sandbox, reference and variant results computed once per
exercise) and held to its label.

``tests/accuracy/NN/*.py`` are submissions of exercise NN's module. Each
starts with its label, one ``key: value`` a line after ``#:`` (lists in
YAML's flow style):

    #: expect: full | loses
    #: fails: [check-id, ...]      (loses) at least one of these checks fails
    #: hint: [pitfall-id, ...]     (loses) at least one of these hints is shown
    #: all_hints: [pitfall-id, ...] (loses, several mistakes) every one is shown
    #: not_hint: [pitfall-id, ...] (loses) hints that would point away from the mistake
    #: about: what the code does differently, or its bug
    #: known_issue: "14: ..."      a known grader miss: the test is xfail(strict)

``ok_*`` files are correct in some other style and must get full marks;
``bug_*`` files hold one realistic mistake outside the pitfall catalogue
(or a new pitfall's first examples) and must lose points where the label
says, with the hint that helps. A known grader miss is labelled with the
truth and marked ``known_issue``: the test fails today and turns into an
unexpected pass (a failure under strict xfail) once the grader is fixed,
which is when the mark comes off.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from grader.course import load_course
from grader.judge import ExerciseResult, Judge
from grader.intake.submissions import assemble

CORPUS = Path(__file__).resolve().parent
LABEL_KEYS = {"expect", "fails", "hint", "all_hints", "not_hint", "about", "known_issue"}
LIST_KEYS = ("fails", "hint", "all_hints", "not_hint")
# Two threads share one judge: CI has two cores, and each exercise's
# reference and variants still run once (the judge caches them).
JOBS = 2


@dataclass(frozen=True)
class Entry:
    """One labelled submission of the corpus."""

    exercise_id: str
    path: Path
    label: dict

    @property
    def name(self) -> str:
        return f"{self.exercise_id}/{self.path.stem}"


def _as_list(value: object) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def read_label(path: Path) -> dict:
    """The ``#:`` header of a corpus file, as a checked dict: one ``key: value``
    a line; lists (``fails``, ``hint``) in YAML's flow style, other values
    taken as they are written (they may contain colons)."""
    label: dict = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#:"):
            key, _, value = line[2:].strip().partition(":")
            value = value.strip()
            label[key.strip()] = yaml.safe_load(value) if key.strip() in LIST_KEYS else value.strip('"')
    if label.get("expect") not in ("full", "loses"):
        raise ValueError(f"{path}: the label needs 'expect: full' or 'expect: loses'")
    if not path.stem.startswith({"full": "ok_", "loses": "bug_"}[label["expect"]]):
        raise ValueError(f"{path}: correct submissions are named ok_*, buggy ones bug_*")
    if unknown := set(label) - LABEL_KEYS:
        raise ValueError(f"{path}: unknown label keys {sorted(unknown)}")
    if not label.get("about"):
        raise ValueError(f"{path}: say what the submission does ('about')")
    if label["expect"] == "full" and any(label.get(key) for key in LIST_KEYS):
        raise ValueError(f"{path}: a full-marks entry has no failing check or hint")
    return label


def load_entries() -> list[Entry]:
    entries = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir() and p.name.isdigit()):
        for path in sorted(folder.glob("*.py")):
            entries.append(Entry(folder.name, path, read_label(path)))
    return entries


ENTRIES = load_entries()


def _param(entry: Entry):
    marks = []
    if issue := entry.label.get("known_issue"):
        marks.append(pytest.mark.xfail(strict=True, reason=f"known grader miss: {issue}"))
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.fixture(scope="module")
def graded(course, judge: Judge, tmp_path_factory) -> dict[str, ExerciseResult]:
    """Every entry's result, graded once, by one judge and one sandbox
    (conftest's session judge: references and variants already run by
    other tests are not run again)."""
    work = tmp_path_factory.mktemp("accuracy")

    def grade(entry: Entry) -> ExerciseResult:
        exercise = course.exercise(entry.exercise_id)
        folder = assemble(exercise, entry.path.read_bytes(), work / "submissions" / entry.name, course)
        return judge.grade(exercise, folder, work / "judge")

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = list(pool.map(grade, ENTRIES))
    return {entry.name: result for entry, result in zip(ENTRIES, results)}


def _summary(result: ExerciseResult) -> str:
    failed = [f"{v.check_id} ({v.reason}; hints {v.pitfalls})" for v in result.verdicts if not v.passed]
    return f"{result.points:g}/{result.max_points:g}, status {result.status}, failed: {failed or 'none'}"


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_graded_as_labelled(entry: Entry, graded):
    result = graded[entry.name]
    label = entry.label
    summary = _summary(result)
    assert result.status == "graded", summary
    if label["expect"] == "full":
        assert result.points == pytest.approx(result.max_points), summary
        # Nor does a correct submission in another style get a mistake confirmed (issue 31).
        assert not [v.confirmed for v in result.verdicts if v.confirmed], summary
        return
    assert result.points < result.max_points - 1e-9, f"loses no points: {summary}"
    failed = {v.check_id for v in result.verdicts if not v.passed}
    if wanted := _as_list(label.get("fails")):
        assert failed & set(wanted), f"none of {wanted} fails: {summary}"
    if hints := _as_list(label.get("hint")):
        assert set(result.pitfalls) & set(hints), f"none of the hints {hints} is shown: {summary}"
    missing = set(_as_list(label.get("all_hints"))) - set(result.pitfalls)
    assert not missing, f"the hints {sorted(missing)} are not shown: {summary}"
    misleading = set(_as_list(label.get("not_hint"))) & set(result.pitfalls)
    assert not misleading, f"the hints {sorted(misleading)} point away from the mistake: {summary}"


def test_the_corpus_is_large_and_spread_over_every_exercise():
    course = load_course(check_files=False)
    ids = {e.id for e in course.exercises}
    full = [e for e in ENTRIES if e.label["expect"] == "full"]
    loses = [e for e in ENTRIES if e.label["expect"] == "loses"]
    assert len(full) >= 30 and len(loses) >= 40, (len(full), len(loses))
    assert {e.exercise_id for e in full} == ids and {e.exercise_id for e in loses} == ids


def test_labels_name_real_checks_and_pitfalls(course):
    from grader.checks import checks_for

    for entry in ENTRIES:
        exercise = course.exercise(entry.exercise_id)
        check_ids = {c.id for c in checks_for(exercise)}
        unknown = set(_as_list(entry.label.get("fails"))) - check_ids
        assert not unknown, f"{entry.name}: no such check {sorted(unknown)}"
        for pitfall_id in [p for key in ("hint", "all_hints", "not_hint") for p in _as_list(entry.label.get(key))]:
            course.pitfall(pitfall_id)  # KeyError names a hint that does not exist
