"""The student side never holds instructor code (issue 15, item 6).

Every environment the project tells someone to build for students (the
hub's kernel from ``nbgrader_config.py``, the students' repository from
``grader release student``) is built here as its instructions say, from a
wheel of the generated package, in a fresh virtual environment: ``coursekit``
is importable there, ``grader`` and ``solutions`` are not, and no file of
``grader/`` or ``solutions/`` is anywhere in it.

Cheap on purpose: the wheel is built with this interpreter's setuptools
(``--no-build-isolation``), installed with ``--no-deps`` (torch is not
reinstalled), and imports are looked up (``find_spec``), never executed.
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from grader.course import REPO_ROOT, load_course
from grader.release.nbgrader import KERNEL_KIT, write_course
from grader.release.student_repo import write_student_repo

pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")

# Files too generic to tell anything (empty __init__.py and the like).
MIN_BYTES = 64


@pytest.fixture(scope="module")
def course():
    return load_course(check_files=False)


def _instructor_files() -> dict[str, str]:
    """sha256 -> path, of every file of grader/ and solutions/ worth finding."""
    found = {}
    for folder in ("grader", "solutions"):
        for path in (REPO_ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.stat().st_size >= MIN_BYTES:
                found[hashlib.sha256(path.read_bytes()).hexdigest()] = str(path.relative_to(REPO_ROOT))
    return found


def _install_as_told(package: Path, tmp: Path) -> Path:
    """A fresh venv with ``package`` installed (no dependencies); its python."""
    wheels = tmp / "wheels"
    # This interpreter's setuptools builds the wheel when it can (>= 70.1, or
    # with `wheel`); else pip fetches one into an isolated build (slower).
    can_build = any(importlib.util.find_spec(m) for m in ("setuptools.command.bdist_wheel", "wheel"))
    isolation = ["--no-build-isolation", "--no-index"] if can_build else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
                    "-w", str(wheels), str(package)], check=True, capture_output=True, cwd=tmp)
    env_dir = tmp / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    *map(str, wheels.glob("*.whl"))], check=True, capture_output=True, cwd=tmp)
    return python


def _assert_student_only(python: Path, tmp: Path) -> None:
    probe = ("import importlib.util as u, json; "
             "print(json.dumps({m: u.find_spec(m) is not None for m in ('coursekit', 'grader', 'solutions')}))")
    # -I: neither the working directory nor PYTHONPATH (this repository) is on sys.path.
    found = subprocess.run([str(python), "-I", "-c", probe], check=True, capture_output=True, text=True, cwd=tmp)
    assert found.stdout.strip() == '{"coursekit": true, "grader": false, "solutions": false}', found.stdout
    instructor = _instructor_files()
    assert instructor, "nothing to look for"
    env_dir = python.parent.parent
    leaked = [f"{path.relative_to(env_dir)} is {instructor[digest]}"
              for path in env_dir.rglob("*") if path.is_file() and not path.is_symlink()
              and (digest := hashlib.sha256(path.read_bytes()).hexdigest()) in instructor]
    assert not leaked, leaked


def test_the_hub_kernel_built_as_nbgrader_config_says_holds_no_instructor_code(tmp_path, course):
    out = tmp_path / "course"
    write_course(course, REPO_ROOT, out, assignment_ids=["attention"])
    config = (out / "nbgrader_config.py").read_text(encoding="utf-8")
    told = re.findall(r"^#\s+pip install (\S+)", config, flags=re.M)
    assert told == [f"./{KERNEL_KIT}"], told                 # one instruction, the students' package
    assert "pip install attention-course" not in config.replace("Never install", "")
    python = _install_as_told(out / told[0], tmp_path)
    _assert_student_only(python, tmp_path)


def test_the_students_repository_installs_only_coursekit(tmp_path, course):
    out = tmp_path / "student"
    write_student_repo(course, REPO_ROOT, out, notebooks=False)
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^pip install -e \.", readme, flags=re.M)    # what students are told: this repository
    python = _install_as_told(out, tmp_path)
    _assert_student_only(python, tmp_path)
