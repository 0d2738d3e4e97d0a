#!/usr/bin/env bash
# The main job on a fresh machine: set up, then grade the bundled sample class
# (examples/make_submissions.py) into grades.db and grading/report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/make_submissions.py
# 20 s per run: the slowest check (a short training run) needs a few seconds;
# dave's endless loop then costs 20 s instead of the course's 60.
.venv/bin/grader grade examples/submissions --db grades.db --out grading --timeout 20 "$@"
echo
echo "open grading/report/index.html (class) and grading/report/students/<id>.html (feedback)"
