"""The intake attack corpus (build.py), end to end: every attack is one
student of a single `grader grade` run, beside three correct control
students (a folder, a zip, an nbgrader notebook). Each attack gets exactly
its expected outcome; the controls are graded in full; grades.csv names
every student once per exercise; and nothing a folder name holds reaches
the instructor's terminal as an escape sequence or as Rich markup."""
from __future__ import annotations

import csv
import os
import zipfile
from pathlib import Path

import pytest

from classrun import results
from grader.intake.names import placeholder_id
from redteam.corpus import assert_outcome, grade_folder
from redteam.intake.build import ATTACKS, EXERCISE_FOLDER, MODULE, REFERENCE, ROOT, notebook

CONTROLS = {"control": "folder", "control-zip": "zip", "control-nb": "nbgrader notebook"}
BUILT = [a for a in ATTACKS if ROOT or not a.needs_root]


def _student(attack) -> str:
    return placeholder_id(attack.folder_name) if attack.folder_name else attack.name


def _controls(subs: Path) -> None:
    (subs / "control" / EXERCISE_FOLDER).mkdir(parents=True)
    (subs / "control" / EXERCISE_FOLDER / MODULE).write_bytes(REFERENCE)
    with zipfile.ZipFile(subs / "control-zip.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"course-main/exercises/{EXERCISE_FOLDER}/{MODULE}", REFERENCE)
    (subs / "control-nb" / "attention").mkdir(parents=True)   # nbgrader's submitted/<student>/<assignment>/
    (subs / "control-nb" / "attention" / f"{EXERCISE_FOLDER}.ipynb").write_bytes(notebook(REFERENCE))


def _restore_modes(folder: Path) -> None:
    """Mode-000 folders readable again, so pytest can remove them (links are
    left alone: a chmod through one would change what it points at)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            os.chmod(entry.path, 0o755, follow_symlinks=False)
            _restore_modes(Path(entry.path))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("intake")
    subs, scratch = root / "submissions", root / "scratch"
    subs.mkdir()
    scratch.mkdir()
    _controls(subs)
    for attack in list(BUILT):
        try:
            attack.build(subs, scratch)
        except PermissionError:
            if not attack.needs_root:
                raise
            BUILT.remove(attack)   # root without CAP_MKNOD (some containers): no device to build
    try:
        by_key, output = grade_folder(subs, root, "--timeout", "20")
    finally:
        _restore_modes(subs)
    return {student: r for (student, _), r in by_key.items()}, root, output


def test_the_corpus_covers_every_class():
    classes = {}
    for attack in ATTACKS:
        classes.setdefault(attack.klass, []).append(attack.name)
    assert set(classes) == {"links", "archives", "reads", "sources", "names"}
    assert all(len(names) >= 2 for names in classes.values()) and len(ATTACKS) >= 30
    assert len({_student(a) for a in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_gets_its_expected_outcome(graded, attack):
    if attack not in BUILT:
        pytest.skip("building it needs root (and CAP_MKNOD)")
    by_student, _, _ = graded
    result = by_student[_student(attack)]
    assert result["exercise"] == "01" and result["max_points"] == 10
    assert_outcome(result, attack.expected)


def test_controls_are_graded_in_full_and_every_student_is_in_grades_csv(graded):
    by_student, root, _ = graded
    for control in CONTROLS:
        assert by_student[control]["status"] == "graded" and by_student[control]["points"] == 10, control
    rows = list(csv.DictReader((root / "out" / "grades.csv").open(encoding="utf-8")))
    expected = sorted([*CONTROLS, *(_student(a) for a in BUILT)])
    assert sorted(r["student"] for r in rows) == expected   # one row each: never two for one student
    assert sorted(by_student) == expected
    assert len(results(root / "grades.db")) == len(expected)  # integrity check included
    unreadable = [r for r in rows if r["status"] == "unreadable"]
    assert unreadable and all(r["reason"] and r["points"] == "0" for r in unreadable)


def test_nothing_from_a_folder_name_reaches_the_terminal_raw(graded):
    _, _, output = graded
    assert "\x1b" not in output and "\x07" not in output and "\r" not in output and "\u202e" not in output
    assert "\\x1b]52" in output            # the OSC 52 name is shown, visibly escaped
    assert "[bold red]n03" in " ".join(output.split())   # markup printed as text (rich wraps lines)
    assert "not a usable student id" in output


def test_nothing_was_read_whole_or_unpacked_outside(graded):
    _, root, _ = graded
    assert not (root.parent / EXERCISE_FOLDER).exists()
    prepared = [p for p in root.rglob(MODULE) if "submissions" not in p.parts and "scratch" not in p.parts]
    assert all(p.stat().st_size < 1 << 20 for p in prepared)
