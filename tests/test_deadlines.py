"""Homework deadlines, late policy and extensions (issue 15, item 1).

The rule is the exams' (grader/course/late_policy.py); the submission time comes
only from a record that means it (a timestamps CSV, nbgrader's
timestamp.txt, a git commit), never from file times; without one lateness
is unknown and said so."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT, Assignment
from grader.course.late_policy import LatePolicy
from grader.run.deadlines import (
    DeadlineInputError, HomeworkTimes, Extension, due_for, read_extensions, read_timestamps, submission_time, unknown_students,
)
from grader.exams import timing
from grader.course import late_policy

DUE = datetime(2026, 3, 20, 23, 59, tzinfo=timezone(timedelta(hours=8)))
POLICY = {"action": "penalty", "grace_min": 10, "penalty_per_min": 0.001, "max_late_min": 1440}


def _assignment(**extra) -> Assignment:
    return Assignment(id="attention", title={"en": "A", "zh": "A"}, exercises=["01"], due=DUE,
                      late_policy=LatePolicy(**POLICY), **extra)


def test_exams_and_homework_share_one_policy_and_rule():
    assert timing.LatePolicy is late_policy.LatePolicy and timing.late_factor is late_policy.late_factor
    from grader.course.exam_schema import LatePolicy as ExamLatePolicy
    assert ExamLatePolicy is late_policy.LatePolicy


def test_a_due_time_needs_a_timezone_and_a_weight_must_be_positive():
    with pytest.raises(ValueError, match="timezone"):
        Assignment(id="a", title={"en": "A", "zh": "A"}, exercises=["01"], due="2026-03-20T23:59:00")
    with pytest.raises(ValueError):
        _assignment(weight=0)


def _csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return path


def test_extensions_move_the_deadline_per_student(course, tmp_path):
    extensions = read_extensions(_csv(tmp_path / "ext.csv", [
        ["student_id", "assignment", "extra_min", "due"],
        ["eve", "attention", "90", ""],
        ["fay", "01", "", "2026-03-25T12:00:00+08:00"],
    ]), course)
    times = HomeworkTimes(extensions=extensions)
    assert due_for(_assignment(), "01", "eve", times) == DUE + timedelta(minutes=90)
    assert due_for(_assignment(), "01", "fay", times) == datetime(2026, 3, 25, 12, tzinfo=DUE.tzinfo)
    assert due_for(_assignment(), "01", "gus", times) == DUE


@pytest.mark.parametrize("row, said", [
    (["eve", "nope", "90", ""], "no assignment or exercise 'nope'"),
    (["eve", "attention", "90", "2026-03-25T12:00:00+08:00"], "give exactly one of extra_min, due"),
    (["eve", "attention", "-5", ""], "extra_min must be 0 or more"),
    (["eve", "attention", "", "next friday"], "due: not an ISO time"),
])
def test_a_wrong_extension_row_is_refused_with_its_line(course, tmp_path, row, said):
    path = _csv(tmp_path / "ext.csv", [["student_id", "assignment", "extra_min", "due"], row])
    with pytest.raises(DeadlineInputError, match=f"line 2: {said}"):
        read_extensions(path, course)


def test_the_submission_time_comes_only_from_a_record(course, tmp_path):
    times = HomeworkTimes(timestamps=read_timestamps(_csv(tmp_path / "t.csv", [
        ["student_id", "submitted_at", "assignment"], ["ana", "2026-03-20T15:00:00Z", "attention"]]), course))
    folder = tmp_path / "ana"
    (folder / "01_softmax").mkdir(parents=True)
    assert submission_time(folder, "ana", _assignment(), times)[:2] == (
        datetime(2026, 3, 20, 15, tzinfo=timezone.utc), "timestamps")
    # Files, however fresh or old, say nothing: no record, no time.
    os.utime(folder / "01_softmax", (0, 0))
    assert submission_time(folder, "ben", _assignment(), times) == (None, "none", "")
    # nbgrader's timestamp.txt in its collected layout.
    (folder / "attention").mkdir()
    (folder / "attention" / "timestamp.txt").write_text("2026-03-20 16:30:00.123456 UTC")
    when, source, _ = submission_time(folder, "ben", _assignment(), times)
    assert (when.hour, when.minute, source) == (16, 30, "nbgrader")
    # A link planted in place of the record is not followed: lateness unknown, said.
    (folder / "attention" / "timestamp.txt").unlink()
    (folder / "attention" / "timestamp.txt").symlink_to("/etc/hostname")
    assert submission_time(folder, "ben", _assignment(), times)[1:] == (
        "none", "timestamp.txt is not a regular file we can read; lateness unknown")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_checkout_gives_its_commit_date_and_runs_no_hook(tmp_path):
    folder = tmp_path / "cy"
    folder.mkdir()
    env = {**os.environ, "GIT_COMMITTER_DATE": "2026-03-21T02:00:00+08:00", "GIT_AUTHOR_DATE": "2026-03-21T02:00:00+08:00",
           "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=c", "-c", "user.email=c@x", "commit", "-q",
                                                  "--allow-empty", "-m", "done"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True, env=env)
    marker = tmp_path / "hook-ran"
    hooks = folder / ".git" / "hooks"
    for name in ("post-checkout", "reference-transaction", "pre-auto-gc"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    for key, value in (("core.pager", f"touch {marker}"), ("log.showSignature", "true"),
                       ("gpg.program", str(hooks / "post-checkout"))):
        subprocess.run(["git", "-C", str(folder), "config", key, value], check=True)
    when, source, problem = submission_time(folder, "cy", _assignment(), HomeworkTimes())
    assert (when, source, problem) == (datetime(2026, 3, 20, 18, tzinfo=timezone.utc), "git", "")
    assert not marker.exists()


# ---------------------------------------------------------------- end to end: grader grade with a due time

def _course_with_due(tmp_path: Path) -> Path:
    """course.yaml with a due time and late policy on the first assignment,
    beside links to the repository's exercises, solutions and grader."""
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    data.pop("exams", None), data.pop("exam_settings", None)
    data["assignments"][0].update(due=DUE.isoformat(), late_policy=POLICY)
    root = tmp_path / "course"
    root.mkdir()
    for name in ("exercises", "solutions", "grader"):
        (root / name).symlink_to(REPO_ROOT / name)
    (root / "course.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return root / "course.yaml"


def test_grading_applies_the_late_policy_beside_the_unpenalised_score(course, tmp_path):
    course_file = _course_with_due(tmp_path)
    exercise = course.exercise("01")
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
    klass = tmp_path / "class"
    for student in ("ontime", "late", "extended", "nbg", "nobody-knows"):
        (klass / student / exercise.folder).mkdir(parents=True)
        (klass / student / exercise.folder / exercise.module).write_bytes(reference)
    (klass / "nbg" / "attention").mkdir()
    (klass / "nbg" / "attention" / "timestamp.txt").write_text("2026-03-20 16:09:00 UTC")  # 10 min late: grace
    stamps = _csv(tmp_path / "stamps.csv", [["student_id", "submitted_at"],
                                            ["ontime", "2026-03-20T20:00:00+08:00"],
                                            ["late", "2026-03-21T01:59:00+08:00"],       # 120 min late
                                            ["extended", "2026-03-21T01:59:00+08:00"]])
    extensions = _csv(tmp_path / "ext.csv", [["student_id", "assignment", "extra_min"], ["extended", "attention", "180"]])
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(klass), "-e", "01", "-j", "1",
                          "--course", str(course_file), "--db", str(tmp_path / "g.db"), "--out", str(tmp_path / "out"),
                          "--timestamps", str(stamps), "--extensions", str(extensions)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 late student(s), 1 with lateness unknown" in run.stderr.replace("\n", " ")  # late, nbg (in grace)
    rows = {r["student"]: r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8"))}
    full = f"{exercise.points:g}"
    assert {s: r["unpenalised_points"] for s, r in rows.items()} == dict.fromkeys(rows, full)
    assert rows["late"]["late_factor"] == "0.89" and rows["late"]["late_min"] == "120"   # 110 min after the grace
    assert float(rows["late"]["points"]) == pytest.approx(exercise.points * 0.89)
    assert rows["ontime"]["lateness"] == "on time" and rows["ontime"]["points"] == full
    assert rows["extended"]["lateness"] == "on time (extended deadline)" and rows["extended"]["points"] == full
    assert "grace period" in rows["nbg"]["lateness"] and rows["nbg"]["points"] == full
    assert rows["nobody-knows"]["lateness"].startswith("lateness unknown") and rows["nobody-knows"]["late_min"] == ""
    assert rows["nobody-knows"]["points"] == full
    results = {r["student"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert results["late"]["lateness"]["source"] == "timestamps" and results["nbg"]["lateness"]["source"] == "nbgrader"
    assert results["nobody-knows"]["lateness"]["known"] is False
    # export csv reads the same from the gradebook alone.
    assert subprocess.run([sys.executable, "-m", "grader", "export", "csv", str(tmp_path / "e.csv"), "--db",
                           str(tmp_path / "g.db"), "--course", str(course_file)], cwd=REPO_ROOT).returncode == 0
    exported = {r["student"]: r for r in csv.DictReader(open(tmp_path / "e.csv", encoding="utf-8"))}
    assert exported["late"]["points"] == rows["late"]["points"] and exported["late"]["unpenalised_points"] == full


def test_an_unknown_student_in_the_extensions_or_timestamps_is_an_error_naming_the_nearest_id(course, tmp_path):
    """Issue 34, item 4: ``s22`` for ``s2`` was silently ignored and s2 penalised."""
    times = HomeworkTimes(extensions={("s22", "attention"): Extension(extra_min=60)},
                          timestamps={("ana", None): datetime(2026, 3, 20, tzinfo=timezone.utc),
                                      ("zed", None): datetime(2026, 3, 20, tzinfo=timezone.utc)})
    problems = unknown_students(times, {"s2", "ana", "ben"})
    assert len(problems) == 2
    assert "'s22' in the extensions" in problems[0] and "did you mean 's2'?" in problems[0]
    assert "'zed' in the timestamps" in problems[1] and "did you mean" not in problems[1]

    course_file = _course_with_due(tmp_path)
    exercise = course.exercise("01")
    (tmp_path / "class" / "extended" / exercise.folder).mkdir(parents=True)
    (tmp_path / "class" / "extended" / exercise.folder / exercise.module).write_bytes(
        (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes())
    extensions = _csv(tmp_path / "ext.csv", [["student_id", "assignment", "extra_min"], ["extendd", "attention", "180"]])
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "-e", "01", "-j", "1",
                          "--course", str(course_file), "--db", str(tmp_path / "g.db"), "--out", str(tmp_path / "out"),
                          "--extensions", str(extensions)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "'extendd' in the extensions" in run.stderr and "did you mean 'extended'?" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out" / "grades.csv").exists()
