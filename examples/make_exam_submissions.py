"""Regenerate the demo's exam: build the midterm for a small roster and write
what each student hands in.

    GRADER_EXAM_SECRET=... python examples/make_exam_submissions.py [OUT]

- examples/exam/roster.csv and examples/exam/built/: `grader exam build`'s
  output (one folder per student, each with their own sizes and numbers);
- examples/exam/submissions/<student>/: the folders handed back:
  - alice: both exercises right and every answer right, on time;
  - bob: the view-without-transpose mistake in 06 and two wrong answers,
    on time;
  - carol: answers only (no code), 20 minutes late.
"""
from __future__ import annotations

import json
import shutil
import sys
from datetime import timedelta
from pathlib import Path

import yaml

from grader.course import REPO_ROOT, load_course
from grader.exams.build import read_roster
from grader.exams.build_class import build_exam
from grader.exams.questions import answer_keys
from grader.exams.timing import METADATA_FILE
from grader.exams.variants import load_secret
from grader.course.pitfalls import load_variants

OUT = REPO_ROOT / "examples" / "exam"
EXAM = "midterm"
STUDENTS = ["alice", "bob", "carol"]


def main(out: Path = OUT) -> None:
    course = load_course()
    exam = course.exam(EXAM)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "roster.csv").write_text("student_id,name\n" + "".join(f"{s},{s.title()}\n" for s in STUDENTS))
    variants = build_exam(course, exam, read_roster(out / "roster.csv"), load_secret(course, REPO_ROOT),
                          out / "built", REPO_ROOT)
    keys = answer_keys(course, exam, variants, REPO_ROOT)
    due = exam.starts_at + timedelta(minutes=exam.time_limit_min)
    for variant in variants:
        student = variant.student
        folder = out / "submissions" / student
        shutil.copytree(out / "built" / student, folder)
        answers = {q: key.model_answer() for q, key in keys[student].items()}
        if student == "bob":  # two classic misunderstandings
            answers |= {"mha-parameters": 3 * variant.sizes["d_model"] ** 2, "causal-blocked-count": 0}
        (folder / "answers.yaml").write_text(yaml.safe_dump(answers, allow_unicode=True), encoding="utf-8")
        for item in exam.exercises if student != "carol" else []:
            exercise = course.exercise(item.id)
            source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text(encoding="utf-8")
            if student == "bob" and item.id == "06":
                source = load_variants(exercise, REPO_ROOT)["view-no-transpose"].source
            (folder / exercise.folder / exercise.module).write_text(source, encoding="utf-8")
        handed_in = due + timedelta(minutes=20) if student == "carol" else due - timedelta(minutes=15)
        (folder / METADATA_FILE).write_text(json.dumps({"submitted_at": handed_in.isoformat()}), encoding="utf-8")
    print(f"built {EXAM} for {', '.join(STUDENTS)} in {out / 'built'}; their submissions are in {out / 'submissions'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
