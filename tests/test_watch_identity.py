"""Who handed it in (issue 37, items 1 and 3; issue 34, items 2 and 7): one
identity rule (grader/intake/identity.py) for `grader watch` and `grader
grade`; nbgrader inbound folders proved by their owner, through the real
nbgrader run as two unix users; limits per identity; released feedback never
replaced."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import REPO_ROOT, load_course
from grader.gradebook import Gradebook
from grader.intake.identity import RosterError, identity, lookalike_groups, prove_owner, read_roster
from unix_students import nbgrader_class  # noqa: F401 - a fixture

REFERENCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_text()
STUB = (REPO_ROOT / "exercises" / "01_softmax" / "softmax.py").read_text()
LOOKALIKES = ["mallory", "Mallory", "MALLORY", "mallory.", "mallory-", "mal_lory", "mаllory", "ｍａｌｌｏｒｙ"]


def _watch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "grader", "watch", "--once", "-e", "01", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _graded(db: Path) -> dict[str, float]:
    with Gradebook(db) as book:
        return {r.key.student: r.points for r in book.records(load_course().course.version)}


# -- the rule --------------------------------------------------------------------------------


def test_ids_that_differ_only_in_case_punctuation_or_lookalikes_are_one_identity():
    assert {identity(s) for s in LOOKALIKES} == {"mallory"}   # Cyrillic а, fullwidth letters
    assert identity("mallory2") != identity("mallory") and identity("s1") != identity("s10")
    assert lookalike_groups(["S1", "s1", "s2", "bob"]) == [["S1", "s1"]]


def test_a_roster_with_two_ids_of_one_identity_or_a_bad_user_is_refused(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,unix_user\nbob,bob\nBob.,bobby\n")
    with pytest.raises(RosterError, match="one identity"):
        read_roster(roster)
    roster.write_text("student_id,unix_user\nbob,bob;rm\n")
    with pytest.raises(RosterError, match="unix_user"):
        read_roster(roster)
    roster.write_text("name\nbob\n")
    with pytest.raises(RosterError, match="student_id"):
        read_roster(roster)
    (tmp_path / "subs").mkdir()
    done = subprocess.run([sys.executable, "-m", "grader", "watch", str(tmp_path / "subs"), "--once", "--roster",
                           str(roster), "--db", str(tmp_path / "g.db")], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--roster" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_ownership_is_the_proof_and_no_unix_user_is_a_refusal(tmp_path):
    import os
    import pwd

    folder = tmp_path / "bob+a+t"
    folder.mkdir()
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert prove_owner(me, folder, None) is None          # nbgrader's check_owner rule: owner == id
    assert "no unix user" in prove_owner("nosuchstudent-xyz", folder, None)
    roster = tmp_path / "roster.csv"
    roster.write_text(f"student_id,unix_user\nbob,{me}\nann,{me}\n")
    assert "several students" in prove_owner("bob", folder, read_roster(roster))   # one uid for all: no proof
    roster.write_text(f"student_id,unix_user\nbob,{me}\n")
    assert prove_owner("bob", folder, read_roster(roster)) is None
    assert "looks like 'bob'" in prove_owner("Bob", folder, read_roster(roster))
    assert "not on the roster" in prove_owner("mallory2", folder, read_roster(roster))


# -- a plain folder: one limit per identity ------------------------------------------------------


def test_a_plain_folders_lookalike_ids_share_one_hourly_limit(tmp_path):
    subs, db, feedback = tmp_path / "subs", tmp_path / "grades.db", tmp_path / "feedback"
    for student in LOOKALIKES[:5]:
        (subs / student / "01_softmax").mkdir(parents=True)
        (subs / student / "01_softmax" / "softmax.py").write_text(REFERENCE)
    done = _watch(str(subs), "--db", str(db), "--feedback", str(feedback), "--per-hour", "1")
    assert len(_graded(db)) == 1, done.stderr        # one of the five: the others wait for her hour
    assert "4 queued (1 held by the hourly limit), 0 grading, 1 graded" in done.stderr
    assert "one identity" in done.stderr


def test_a_plain_folder_with_a_roster_refuses_ids_not_on_it(tmp_path):
    from grader.watch.sources import PlainFolder

    for student in ("bob", "Bob.", "mallory2"):
        (tmp_path / "subs" / student).mkdir(parents=True)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id\nbob\n")
    found = {a.student: a for a in PlainFolder(tmp_path / "subs", settle=False, roster=read_roster(roster)).poll()}
    assert found["bob"].refusal == "" and {a.identity for a in found.values()} == {"bob", "mallory2"}
    assert "looks like 'bob'" in found["Bob."].refusal and found["mallory2"].refusal == "not on the roster"


def test_grade_flags_ids_of_one_identity(tmp_path):
    subs = tmp_path / "subs"
    for student in ("S1", "s1"):
        (subs / student / "01_softmax").mkdir(parents=True)
        (subs / student / "01_softmax" / "softmax.py").write_text(REFERENCE)
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "-e", "01", "--db",
                           str(tmp_path / "g.db"), "--out", str(tmp_path / "out")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert "S1, s1" in done.stdout + done.stderr and "one identity" in done.stdout + done.stderr, done.stdout


# -- nbgrader, as two unix users ---------------------------------------------------------------------


def test_a_forged_inbound_folder_is_refused_and_never_touches_the_real_students_work(nbgrader_class, tmp_path):
    world, students, hand_in, nbgrader = nbgrader_class
    bob, mallory = students.user("bob"), students.user("mallory")
    roster = tmp_path / "roster.csv"
    roster.write_text(f"student_id,unix_user\nbob,{bob}\nmallory,{mallory}\n")
    hand_in(bob, REFERENCE, student="bob")
    hand_in(mallory, STUB, student="bob")        # later: nbgrader itself lets her name bob
    hand_in(mallory, STUB, student="mallory2")   # a fresh id, not on the roster
    hand_in(mallory, STUB, student="Bob")        # a look-alike of bob's

    db = tmp_path / "grades.db"
    done = _watch("--exchange", str(world.exchange), "--db", str(db), "--roster", str(roster), "--per-hour", "1",
                  env=world.env)
    exercise = load_course().exercise("01")
    assert _graded(db) == {"bob": exercise.points}, done.stderr   # not superseded, not zero, not held
    assert done.stderr.count("watch: refused bob+attention") == 1 and f"belongs to {mallory}" in done.stderr
    assert "refused mallory2+attention" in done.stderr and "not on the roster" in done.stderr
    assert "refused Bob+attention" in done.stderr and "looks like 'bob'" in done.stderr
    assert "3 refused" in done.stderr
    inbound = world.exchange / load_course().release["nbgrader"]["course_id"] / "inbound"
    assert len(list(inbound.iterdir())) == 4                        # every one kept for the instructor
    feedback_pages = list((inbound.parent / "feedback").glob("*.html"))
    assert len(feedback_pages) == 1                                 # bob's only: nothing for what she sent
    nbgrader(bob, "fetch_feedback", "attention", student="bob")
    (page,) = (students.workdir(bob) / "attention" / "feedback").glob("*/*.html")
    assert "Graded at" in page.read_text()


def test_watch_started_after_nbgrader_released_feedback_overwrites_nothing(nbgrader_class, tmp_path):
    world, students, hand_in, nbgrader = nbgrader_class
    ann = students.user("ann")
    roster = tmp_path / "roster.csv"
    roster.write_text(f"student_id,unix_user\nann,{ann}\n")
    hand_in(ann, REFERENCE, student="ann")
    # The instructor's term: collect, autograde, generate and release the feedback.
    world.install_kernel()
    for step in (["collect", "attention"], ["autograde", "attention", "--force"],
                 ["generate_feedback", "attention", "--force"], ["release_feedback", "attention"]):
        world.run("-m", "nbgrader", *step, f"--Exchange.root={world.exchange}", cwd=world.course_dir)
    feedback = world.exchange / load_course().release["nbgrader"]["course_id"] / "feedback"
    released = {p: p.read_bytes() for p in feedback.glob("*.html")}
    assert released
    done = _watch("--exchange", str(world.exchange), "--db", str(tmp_path / "grades.db"), "--roster", str(roster),
                  env=world.env)
    assert {p: p.read_bytes() for p in feedback.glob("*.html")} == released, done.stderr
    assert "final feedback for attention has been released" in done.stderr
    nbgrader(ann, "fetch_feedback", "attention", student="ann")
    (page,) = (students.workdir(ann) / "attention" / "feedback").glob("*/*.html")
    assert page.read_bytes() in released.values()
