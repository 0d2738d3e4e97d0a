"""The real nbgrader in a throwaway world: HOME (with the kernel every
notebook names), an nbgrader course directory and an exchange, all under a
test's tmp_path (tests/test_release_nbgrader.py, tests/test_exam_nbgrader.py).
Imported as ``nbgrader_run`` (tests/conftest.py puts this folder on the path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grader.course import REPO_ROOT


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
