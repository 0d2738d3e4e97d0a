#!/usr/bin/env bash
# Create .venv and install the course with the instructor's tools.
# Idempotent: rerunning only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
started=$(date +%s)
say() { echo "setup: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
    say "creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
fi
# torch is pinned to 2.13.0 in pyproject.toml: a CPU build of exactly that
# version is on the course machines (pip's find-links). Elsewhere, install it
# first from PyTorch's CPU-only wheel index (README, "Installing elsewhere").
if .venv/bin/python -c "import torch, grader, nbgrader, dask" 2>/dev/null; then
    say "checking .venv (usually a few seconds when nothing is missing)"
else
    say "installing torch 2.13.0 (CPU), the grader and nbgrader's Jupyter stack into .venv:"
    say "about 1.5 min with the local torch wheel on 2 cores, 3-5 min when everything is downloaded"
fi
# The grep drops pip's notes about index folders that this machine's pip
# configuration names but does not have; everything else still shows.
set -o pipefail
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]' 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
# jupyter-events asks for jsonschema[format-nongpl], which brings
# rfc3987-syntax, and jsonschema imports it whenever it is installed; it
# builds a grammar at import: 1.2-2 s of every process that imports nbformat
# (each nbgrader command, `grader release`, nbgrader's autograde), measured
# 2.8 s against 1.2 s for `python -m nbgrader --version`
# (python-jsonschema/jsonschema#1392). jsonschema treats it as optional:
# without it only the "iri" formats go unchecked, and no schema of nbformat,
# nbgrader or Jupyter's events uses them.
.venv/bin/python -m pip uninstall --quiet --disable-pip-version-check -y rfc3987-syntax 2>/dev/null || true
# An editable install leaves the course's own packages uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set (as on the course machines) every run would
# compile their ~70 modules again: 0.1-0.15 s of each grader start-up
# (bench/startup.py). Compiled here once, as pip does for what it installs.
.venv/bin/python -m compileall -q grader coursekit > /dev/null
say "ready in $(( $(date +%s) - started )) s: $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)')"
