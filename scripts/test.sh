#!/usr/bin/env bash
# Set up the environment and run the repository's own tests.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "setup failed" >&2; exit 1; }
.venv/bin/python -m pytest tests -ra --durations=15 "$@"
status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure of the suite" >&2
    exit 1
fi
exit "$status"
