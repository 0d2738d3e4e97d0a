"""One exam class with every hostile file kind, graded end to end by
`grader exam grade` (with the sandbox, and again `--answers-only
--trust-file-times`): the run exits 0, writes grades.csv with a row per
student, the control students are graded in full, each hostile student gets
their own status and a bounded, escaped reason, and nothing a student wrote
reaches the terminal as markup or control characters.
(test_exam_hostile.py tests each kind on its own.)"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from datetime import timedelta, timezone
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from grader.exams.build import RosterEntry
from grader.exams.build_class import build_exam
from grader.exams.questions import answer_keys

pytest.importorskip("grader.sandbox")

SECRET = "test-secret-not-for-real-exams-0123"
CONTROLS = ["ctrl1", "ctrl2"]
MARKUP = "[bold red]PWNED[blink]\x1b[2J\x1b]52;c;aGk=\x07"          # no "/": it names one folder


def _billion_laughs() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\nsqrt-dk-why: *a8\n"


# Each hostile student: what their folder holds. Numeric questions get the hostile expressions.
HOSTILE_ANSWERS = {
    "h-date": "sqrt-dk-why: 2026-13-45\ncausal-weight: 2026-02-30 25:61:00\n",
    "h-bigint": "mha-parameters: 1" + "0" * 5000 + "\n",
    "h-deep": "mha-parameters: " + "[" * 20_000 + "]" * 20_000 + "\n",
    "h-bomb": _billion_laughs(),
    "h-power": "mha-parameters: ((((9**64)**64)**64)**64)**64\ncausal-weight: '" + "9" * 400
               + "'\npe-value: (-1)**0.5\ncausal-blocked-count: " + "+".join(["1"] * 1500) + "\n",
    "h-longline": "sqrt-dk-why: b" + " " * 250_000 + "x\n\tbroken: [\n",
    "h-surrogate": 'sqrt-dk-why: "\\ud800"\n',
}


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)


def _reference(folder: Path, course, midterm) -> None:
    for item in midterm.exercises:
        exercise = course.exercise(item.id)
        shutil.copyfile(REPO_ROOT / "solutions" / exercise.folder / exercise.module,
                        folder / exercise.folder / exercise.module)


@pytest.fixture(scope="module")
def hostile_class(course, midterm, tmp_path_factory):
    """The submissions folder: two controls and one student per hostile kind."""
    base = tmp_path_factory.mktemp("exam-class")
    built = base / "built"
    students = [*CONTROLS, "h-fresh", "h-fifo"]
    variants = build_exam(course, midterm, [RosterEntry(s) for s in students], SECRET.encode(), built, REPO_ROOT)
    keys = answer_keys(course, midterm, variants, REPO_ROOT)
    solved = {s: yaml.safe_dump({q: k.model_answer() for q, k in keys[s].items()}, allow_unicode=True) for s in keys}
    due = midterm.starts_at + timedelta(minutes=midterm.time_limit_min)
    subs = base / "submissions"

    # ctrl1: the built folder, solved, with the collector's record, on time.
    shutil.copytree(built / "ctrl1", subs / "ctrl1")
    _reference(subs / "ctrl1", course, midterm)
    _write(subs / "ctrl1" / "answers.yaml", solved["ctrl1"])
    _write(subs / "ctrl1" / ".submission.json", json.dumps({"submitted_at": (due - timedelta(minutes=5)).isoformat()}))
    # ctrl2: nbgrader's collected layout, its homework beside the exam; nbgrader's timestamp.txt.
    own = subs / "ctrl2" / "midterm-ctrl2"
    shutil.copytree(built / "ctrl2", own)
    _reference(own, course, midterm)
    _write(own / "answers.yaml", solved["ctrl2"])
    _write(own / "timestamp.txt", (due - timedelta(minutes=1)).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    _write(subs / "ctrl2" / "attention" / "03_masking" / "attention.py", "homework that must not be graded\n")

    # Answers that PyYAML or the expression evaluator cannot take.
    for student, text in HOSTILE_ANSWERS.items():
        _write(subs / student / "answers.yaml", text)
    # A freshly built exam handed back untouched: no record of its time.
    shutil.copytree(built / "h-fresh", subs / "h-fresh")
    # Named pipes where files belong, in the exam folder.
    shutil.copytree(built / "h-fifo", subs / "h-fifo")
    for name in ("03_masking/attention.py", "answers.yaml", "pipe", ".submission.json"):
        (subs / "h-fifo" / name).unlink(missing_ok=True)
        os.mkfifo(subs / "h-fifo" / name)
    # Timestamps: 16 MiB, markup and escapes, no regular file, unreadable (to a non-root grader).
    for student, stamp in [("h-stamp16", b"2026-04-20 02:55:01 UTC" + b"[bold]x[/bold]" * (16 << 20 // 14)),
                           ("h-markup", MARKUP.encode()), ("h-stampfifo", None), ("h-stamp000", b"2026-04-20 02:55:01 UTC")]:
        folder = subs / student / f"midterm-{student}"
        _write(folder / "answers.yaml", "sqrt-dk-why: b\n")
        if stamp is None:
            os.mkfifo(folder / "timestamp.txt")
        else:
            _write(folder / "timestamp.txt", stamp)
    os.chmod(subs / "h-stamp000" / "midterm-h-stamp000" / "timestamp.txt", 0)
    # A file time no datetime holds (used only with --trust-file-times).
    _write(subs / "h-mtime" / "answers.yaml", "sqrt-dk-why: b\n")
    os.utime(subs / "h-mtime" / "answers.yaml", (2 ** 40, 2 ** 40))
    # One student, two sources.
    _write(subs / "h-both" / "answers.yaml", solved["ctrl1"])
    with zipfile.ZipFile(subs / "h-both.zip", "w") as zf:
        zf.writestr("answers.yaml", "sqrt-dk-why: b\n")
    # Homework beside an exam never handed in (nbgrader collects it).
    _write(subs / "h-homework" / "attention" / "03_masking.ipynb", "{}")
    shutil.copytree(REPO_ROOT / "solutions" / "03_masking", subs / "h-homework" / "attention" / "03_masking",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # A corrupt zip, a link to another student's folder, a name that is no student id.
    _write(subs / "h-badzip.zip", b"PK\x03\x04 not really a zip" * 10)
    (subs / "h-link").symlink_to(subs / "ctrl1")
    _write(subs / MARKUP.replace("\x07", "") / "answers.yaml", "sqrt-dk-why: b\n")
    return subs


def _grade(subs: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict, dict, Path]:
    env = {**os.environ, "GRADER_EXAM_SECRET": SECRET}
    run = subprocess.run([sys.executable, "-m", "grader", "exam", "grade", "midterm", str(subs), "--out", str(out),
                          "--db", str(out / "grades.db"), "--jobs", "2", *extra],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    results = {r["student"]: r for r in json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]}
    return run, rows, results, out


@pytest.fixture(scope="module")
def sandboxed(hostile_class, tmp_path_factory):
    subs = hostile_class
    return _grade(subs, tmp_path_factory.mktemp("graded"))


@pytest.fixture(scope="module")
def answers_only(hostile_class, tmp_path_factory):
    subs = hostile_class
    return _grade(subs, tmp_path_factory.mktemp("answers-only"), "--answers-only", "--trust-file-times")


EXPECTED = {*CONTROLS, *HOSTILE_ANSWERS, "h-fresh", "h-fifo", "h-stamp16", "h-markup", "h-stampfifo", "h-stamp000",
            "h-mtime", "h-both", "h-homework", "h-badzip", "h-link"}


def _check_run(run, rows, results):
    if os.environ.get("SHOW_EXAM_RUN"):
        print(run.stdout, run.stderr, *rows.values(), sep="\n")
    assert set(rows) == EXPECTED                                  # every student has a row; the bad name none
    for student in CONTROLS:
        row = rows[student]
        assert row["status"] == "graded" and row["lateness"] == "on time", row
        assert row["questions"] == row["questions_max"] and float(row["points"]) == float(row["max_points"]), row
    output = " ".join((run.stdout + run.stderr).split())               # rich wraps long lines
    assert "\x1b" not in output and "\x07" not in output                # no terminal sequence
    assert "skipped '[bold red]PWNED[blink]\\x1b[2J\\x1b]52;c;aGk=': not a usable student id" in output  # as text
    for student in EXPECTED - set(CONTROLS):
        for text in (results[student].get("error", ""), *results[student]["problems"]):
            assert len(text) < 400 and "\x1b" not in text and "[bold]x" not in text, (student, text)


def test_the_controls_are_graded_in_full_with_the_sandbox(sandboxed, midterm):
    run, rows, results, _ = sandboxed
    _check_run(run, rows, results)
    for student in CONTROLS:
        assert float(rows[student]["03"]) == 30 and float(rows[student]["06"]) == 40, results[student]["exercises"]


def test_each_hostile_student_gets_their_own_status(sandboxed):
    run, rows, results, out = sandboxed
    assert rows["h-both"]["status"] == "unreadable" and "two sources" in rows["h-both"]["late_note"]
    assert rows["h-badzip"]["status"] == "unreadable" and rows["h-link"]["status"] == "unreadable"
    assert rows["h-homework"]["status"] == "not_submitted" and rows["h-homework"]["late_note"] == "not handed in"
    for student in ("h-both", "h-badzip", "h-link"):          # nothing timed, nothing multiplied
        assert (rows[student]["lateness"], rows[student]["late_min"], rows[student]["late_factor"]) == ("", "", "1")
    assert rows["h-homework"]["03"] in ("", "0") and float(rows["h-homework"]["points"]) == 0   # never its homework
    assert float(rows["ctrl2"]["03"]) == 30                     # its exam, not the homework beside it
    for student in ("h-fresh", "h-stamp16", "h-markup", "h-stampfifo", *HOSTILE_ANSWERS):
        assert rows[student]["lateness"] == "unknown" and rows[student]["late_min"] == "", (student, rows[student])
        assert rows[student]["late_factor"] == "1"
    if os.geteuid() != 0:                                       # root reads a mode-000 file
        assert rows["h-stamp000"]["lateness"] == "unknown"
    for student in ("h-power", "h-bigint", "h-deep"):
        assert float(rows[student]["questions"]) == 0
    assert results["h-fifo"]["exercises"]["03"]["status"] == "not_submitted"
    assert any("not a regular file" in p for p in results["h-fifo"]["problems"])
    output = " ".join(run.stdout.split())
    assert "with lateness unknown" in output and "unreadable (grades.csv column status)" in output
    summary = json.loads((out / "stats.json").read_text())["summary"]
    assert summary["unreadable"] == 3 and summary["lateness_unknown"] >= 11
    report = " ".join((out / "report.html").read_text(encoding="utf-8").split())
    assert "3 unreadable" in report and "with lateness unknown" in report and "<b>unknown</b>" in report
    assert "[bold]x" not in report and "\x1b" not in report


def test_the_gradebook_keeps_each_students_status(sandboxed, course, midterm):
    from grader.exams.records import exam_results
    from grader.exams.stats import exam_stats
    from grader.gradebook import Gradebook

    _, rows, _, out = sandboxed
    with Gradebook(out / "grades.db") as book:
        records = list(book.records(course.course.version))
    totals = {r.key.student: r for r in records if r.key.exercise == "midterm"}
    assert {s: r.status for s, r in totals.items()} == {s: row["status"] for s, row in rows.items()}
    assert "two sources" in totals["h-both"].reason and "lateness unknown" in totals["h-fresh"].reason
    rebuilt = exam_stats(course, midterm, exam_results(course, midterm, records))["summary"]
    summary = json.loads((out / "stats.json").read_text())["summary"]
    assert (rebuilt["unreadable"], rebuilt["lateness_unknown"]) == (summary["unreadable"], summary["lateness_unknown"])


def test_results_stay_small(sandboxed, hostile_class):
    _, _, results, _ = sandboxed
    assert len(json.dumps(results)) < 2_000_000


def test_answers_only_with_file_times(answers_only):
    run, rows, results, _ = answers_only
    _check_run(run, rows, results)
    assert rows["h-mtime"]["lateness"] == "unknown" and any("out of range" in p for p in results["h-mtime"]["problems"])
    assert rows["h-fresh"]["time_source"] == "mtime"            # asked for: file times of the folder as copied


def test_grader_grade_exam_takes_the_same_class(hostile_class, tmp_path):
    """`grader grade --exam` (the sandbox, no options of its own) over the same folder."""
    env = {**os.environ, "GRADER_EXAM_SECRET": SECRET}
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(hostile_class), "--exam", "midterm",
                          "--out", str(out), "--db", str(tmp_path / "grades.db"), "--jobs", "2"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    _check_run(run, rows, {r["student"]: r for r in json.loads((out / "results.json").read_text())["results"]})
    assert float(rows["ctrl2"]["06"]) == 40 and rows["h-both"]["status"] == "unreadable"
