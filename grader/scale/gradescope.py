"""A Gradescope autograder for the course (``grader export gradescope``).

The zip is instructor-side: Gradescope unpacks it into
``/autograder/source`` and runs ``setup.sh`` once (building the image), then
``run_autograder`` per submission. It carries the course (``course.yaml``,
``coursekit/``, ``grader/``, ``solutions/``, ``exercises/``): never give it
to students. ``run_autograder`` grades ``/autograder/submission`` with the
same pipeline as ``grader grade`` (the submission is one student of a
one-student class; the sandbox hides the references from it) and writes
``/autograder/results/results.json``: one test per hidden check, with its
message and the pitfall hints in English and Chinese. Verdicts never hold
hidden inputs or expected values, so neither does the file.

``AUTOGRADER_ROOT`` replaces ``/autograder`` and ``AUTOGRADER_PYTHON`` the
interpreter (tests run the exported script against a temporary layout).
"""
from __future__ import annotations

import json
import stat
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml

from grader.checks.inputs import SECRET_FILE, load_grading_secret
from grader.course import Course, Exercise
from grader.feedback import beyond_status, status_text
from grader.gradebook import Record

CARRIED = ("pyproject.toml", "coursekit", "grader", "solutions", "exercises")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
# What the grader imports on Gradescope; pinned to the versions it was tested with here.
RUNTIME_PACKAGES = ("numpy", "pyyaml", "pytest", "pydantic", "typer", "rich", "jinja2")
TORCH_PIN = "torch==2.13.0"   # pyproject's pin; the CPU wheel index keeps CUDA out
VISIBILITIES = ("visible", "after_published", "after_due_date", "hidden")
MAX_POSSIBLE = 2  # unconfirmed hints per test, as on the student's page

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission. AUTOGRADER_ROOT / AUTOGRADER_PYTHON
# override /autograder and the interpreter (tests).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source" || exit 1
exec "$PYTHON" -m grader.scale.gradescope_run "$ROOT"
"""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, building the image (choose an Ubuntu 24.04 base:
# the grader needs Python >= 3.11).
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
python3 -c 'import sys; assert sys.version_info >= (3, 11), "the grader needs Python >= 3.11"'
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --extra-index-url https://download.pytorch.org/whl/cpu \\
    -r /autograder/source/requirements.txt
"""


def requirements() -> str:
    """``requirements.txt``: torch pinned as in pyproject, the rest as installed here."""
    lines = [TORCH_PIN]
    for name in RUNTIME_PACKAGES:
        try:
            lines.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            lines.append(name)
    return "\n".join(lines) + "\n"


def _course_without_exams(path: Path) -> str:
    """course.yaml without its exams: the zip grades exercises, and exam
    questions have no business on Gradescope's machines."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key in ("exam_settings", "exams"):
        data.pop(key, None)
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False, private: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = ((0o600 if private else 0o755 if executable else 0o644) | stat.S_IFREG) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def write_gradescope_zip(course: Course, root: Path, out: Path, exercises: list[Exercise],
                         *, visibility: str = "visible") -> list[str]:
    """Write the autograder zip for ``exercises`` to ``out``; return its member names."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}")
    config = {"course_version": course.course.version, "exercises": [e.id for e in exercises],
              "visibility": visibility}
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        _add(zf, "run_autograder", RUN_AUTOGRADER.encode(), executable=True)
        _add(zf, "setup.sh", SETUP_SH.encode(), executable=True)
        _add(zf, "requirements.txt", requirements().encode())
        _add(zf, "gradescope.json", json.dumps(config, indent=1).encode())
        _add(zf, "course.yaml", _course_without_exams(root / "course.yaml").encode())
        # The grading secret that hidden inputs are drawn from (grader/checks/inputs.py):
        # the zip is the instructor's, like solutions/; the sandbox hides both from the child.
        _add(zf, SECRET_FILE, load_grading_secret(root) + b"\n", private=True)
        for carried in CARRIED:
            path = root / carried
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for file in files:
                relative = file.relative_to(root)
                if SKIPPED_PARTS.intersection(relative.parts) or file.is_symlink():
                    continue
                _add(zf, relative.as_posix(), file.read_bytes())
        return zf.namelist()


def _check_output(course: Course, verdict: dict) -> str:
    """What a student reads under one test: the check, why it failed, the
    hints (confirmed ones first, possible ones marked). Fixed texts only:
    the verdict's ``instructor_detail`` is never read here."""
    lines = [verdict["message"]["en"], verdict["message"]["zh"]]
    if not verdict["passed"]:
        lines.append(f"Not passed / 未通过: {verdict['reason']}")
    confirmed = verdict.get("confirmed", [])
    possible = [p for p in verdict["pitfalls"] if p not in confirmed][:MAX_POSSIBLE]
    for pitfall_id in [*confirmed, *possible]:
        try:
            hint = course.pitfall(pitfall_id).hint
        except KeyError:
            continue
        if pitfall_id in confirmed:
            lines += [f"Hint (your result matches this mistake exactly): {hint.en}", f"提示（与此错误完全一致）：{hint.zh}"]
        else:
            lines += [f"Possibly (this mistake fails the check the same way): {hint.en}", f"可能的原因：{hint.zh}"]
    return "\n".join(lines)


def exercise_note(folder: str, status: str, reason: str) -> str:
    """One line per exercise that was not graded normally: its status in
    both languages, then the cause when it adds something."""
    words, reason = status_text(status), beyond_status(status, reason)
    return f"{folder}: {words.en} / {words.zh}" + (f": {reason}" if reason else "")


def results_json(course: Course, records: list[Record], *, visibility: str = "visible") -> dict:
    """Gradescope's ``results.json`` for one submission's records (the total
    is left to Gradescope: the sum of the tests' scores)."""
    tests, notes = [], []
    for record in sorted(records, key=lambda r: r.key.exercise):
        exercise = course.exercise(record.key.exercise)
        if record.status != "graded" or record.reason:
            notes.append(exercise_note(exercise.folder, record.status, record.reason))
        for verdict in record.verdicts:
            tests.append({
                "name": f"{exercise.folder}: {verdict['check_id']}",
                "score": round(verdict["points"], 6),
                "max_score": round(verdict["max_points"], 6),
                "status": "passed" if verdict["passed"] else "failed",
                "visibility": visibility,
                "output": _check_output(course, verdict),
            })
    result = {"tests": tests, "stdout_visibility": "hidden"}
    if notes:
        result["output"] = "\n".join(notes)
    return result
