#!/usr/bin/env bash
# Set up the environment and run the repository's own tests.
#
# Two pytest-xdist workers by default (TEST_WORKERS=N for another number,
# 0 for one process); --dist loadgroup keeps each test file on one worker and
# the tests that share a session result (one judge, one graded class) together
# (tests/conftest.py). SKIP_SETUP=1: the venv is known to be ready (.ci/run).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${SKIP_SETUP:-0}" != 1 ]; then
    bash scripts/setup.sh || { echo "setup failed" >&2; exit 1; }
fi
workers=${TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 0 ] && .venv/bin/python -c "import xdist" 2>/dev/null; then
    parallel=(-n "$workers" --dist loadgroup)
fi
.venv/bin/python -m pytest tests -ra --durations=15 "${parallel[@]}" "$@"
status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure of the suite" >&2
    exit 1
fi
exit "$status"
