"""The real nbgrader in a throwaway world: HOME (with the kernel every
notebook names), an nbgrader course directory and an exchange, all under a
test's tmp_path (tests/test_release_nbgrader.py, tests/test_exam_nbgrader.py).
Imported as ``nbgrader_run`` (tests/conftest.py puts this folder on the path)."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from grader.course import REPO_ROOT


def visible_text(path: Path) -> str:
    """A feedback page as a reader sees it: tags stripped, entities decoded
    (syntax highlighting splits code lines into many spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def leaks_nothing(feedback: dict, course, stub_pages: list[tuple]) -> None:
    """No hidden check id on any feedback page ({(student, folder): text}),
    and no reference line on the pages of untouched stubs ([(exercise, text)])."""
    from grader.release.student_repo import hidden_check_ids, secret_lines

    check_ids = hidden_check_ids(REPO_ROOT)
    assert check_ids, "no hidden check ids found to search for"
    for (student, folder), page in feedback.items():
        assert not [c for c in check_ids if c in page], f"hidden check id in {student}/{folder}"
    secrets = secret_lines(course, REPO_ROOT)
    for exercise, page in stub_pages:
        lines = secrets[f"solutions/{exercise.folder}/{exercise.module}"]
        assert lines and not [line for line in lines if line in page], f"reference lines in {exercise.folder}"


def nbgrader_meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def cell_by_id(notebook, grade_id: str):
    """The one cell of ``notebook`` whose nbgrader ``grade_id`` is ``grade_id``."""
    (cell,) = [c for c in notebook.cells if nbgrader_meta(c).get("grade_id") == grade_id]
    return cell


class NbgraderWorld:
    """``home``, ``course_dir`` and ``exchange`` folders, and :meth:`run` to
    call ``python -m ...`` (nbgrader, ipykernel) with HOME pointing there."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.home, self.course_dir, self.exchange = tmp_path / "home", tmp_path / "course", tmp_path / "exchange"
        for folder in (self.home, self.exchange):
            folder.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "COURSE_YAML"))}
        # PYTHONPATH: the kernel imports this checkout's coursekit, whatever is installed.
        env.update(HOME=str(self.home), PYTHONPATH=str(REPO_ROOT), USER="instructor", PYTHONDONTWRITEBYTECODE="1",
                   # nbgrader runs `alembic` to create its gradebook: the venv's scripts first.
                   PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        self.env = env

    def run(self, *args: str, cwd: Path) -> str:
        done = subprocess.run([sys.executable, *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    def install_kernel(self) -> None:
        """The kernel every notebook names ("python3") is this venv's python."""
        self.run("-m", "ipykernel", "install", "--user", "--name", "python3", "--display-name", "Python 3 (course)",
                 cwd=self.home)
        spec = json.loads((self.home / ".local/share/jupyter/kernels/python3/kernel.json").read_text())
        assert spec["argv"][0] == sys.executable

    def exchange_args(self, course_id: str) -> list[str]:
        """What a student's nbgrader command needs to find the course."""
        return [f"--Exchange.root={self.exchange}", f"--course={course_id}"]

    def round_trip(self, course, assignment_id: str, answers: dict[str, dict[str, str]]) -> tuple[dict, float]:
        """The whole trip through the real nbgrader for ``course``'s
        assignment (written by ``grader release nbgrader``'s code):
        generate, release; each student of ``answers`` fetches, writes their
        code ({exercise id: module source}; the rest stays the stub) into the
        answer cells and submits; collect, autograde, generate_feedback.
        Returns each (student, folder)'s feedback page as visible text, and
        autograde's seconds."""
        import nbformat

        from grader.release.common import answer_cell_id
        from grader.release.nbgrader import course_id, write_course

        assignment = next(a for a in course.assignments if a.id == assignment_id)
        exercises = [course.exercise(i) for i in assignment.exercises]
        self.install_kernel()
        write_course(course, REPO_ROOT, self.course_dir, assignment_ids=[assignment_id], exchange=self.exchange)
        self.run("-m", "nbgrader", "generate_assignment", assignment_id, cwd=self.course_dir)
        self.run("-m", "nbgrader", "release_assignment", assignment_id, cwd=self.course_dir)
        exchange_args = self.exchange_args(course_id(course))
        for student, code in answers.items():
            workdir = self.tmp_path / "students" / student
            workdir.mkdir(parents=True)
            self.run("-m", "nbgrader", "fetch_assignment", assignment_id, *exchange_args, cwd=workdir)
            for exercise in exercises:
                path = workdir / assignment_id / f"{exercise.folder}.ipynb"
                notebook = nbformat.read(path, as_version=4)
                if exercise.id in code:
                    cell_by_id(notebook, answer_cell_id(exercise)).source = code[exercise.id]
                nbformat.write(notebook, path)
            self.run("-m", "nbgrader", "submit", assignment_id, *exchange_args, f"--student={student}", cwd=workdir)
        self.run("-m", "nbgrader", "collect", assignment_id, cwd=self.course_dir)
        started = time.monotonic()
        self.run("-m", "nbgrader", "autograde", assignment_id, cwd=self.course_dir)
        autograde_s = time.monotonic() - started
        self.run("-m", "nbgrader", "generate_feedback", assignment_id, cwd=self.course_dir)
        feedback = {(s, e.folder): visible_text(self.course_dir / "feedback" / s / assignment_id / f"{e.folder}.html")
                    for s in answers for e in exercises}
        return feedback, autograde_s
