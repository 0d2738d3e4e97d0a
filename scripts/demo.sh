#!/usr/bin/env bash
# The main job on a fresh machine: set up, then grade the bundled sample class
# (examples/make_submissions.py) and its midterm (examples/make_exam_submissions.py)
# into grades.db and grading/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/make_submissions.py
# The midterm too, into the same gradebook: a demo secret (a real exam keeps
# its own, see README: Exams).
export GRADER_EXAM_SECRET=${GRADER_EXAM_SECRET:-demo-secret-not-for-a-real-exam}
.venv/bin/python examples/make_exam_submissions.py
.venv/bin/grader exam grade midterm examples/exam/submissions --roster examples/exam/roster.csv \
    --db grades.db --out grading/exam
# Last, so that the class report also shows the exam recorded in grades.db.
# 20 s per run: the slowest check (a short training run) needs a few seconds;
# dave's endless loop then costs 20 s instead of the course's 60.
.venv/bin/grader grade examples/submissions --db grades.db --out grading --timeout 20 "$@"
echo
echo "open grading/report/index.html (class, with the midterm's statistics at the end),"
echo "     grading/report/students/<id>.html (feedback) and grading/exam/report.html (the midterm)"
