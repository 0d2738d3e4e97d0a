#!/usr/bin/env bash
# Create .venv and install the course with the instructor's tools.
# Idempotent: rerunning only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# torch is pinned to 2.13.0 in pyproject.toml: a CPU build of exactly that
# version is on the course machines (pip's find-links).
# The grep drops pip's notes about index folders that this machine's pip
# configuration names but does not have; everything else still shows.
set -o pipefail
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]' 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
