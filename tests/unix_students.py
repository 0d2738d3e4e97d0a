"""Students as real unix users, running the real nbgrader as themselves
(root only: the tests create the users, as scripts/test-unprivileged.sh
does). Where ownership of an inbound folder is the proof of who handed it
in (grader/intake/identity.py), only the kernel can give a folder its owner,
so the tests need two real accounts.

Imported as ``unix_students`` (tests/conftest.py puts this folder on the path).
"""
from __future__ import annotations

import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.course import REPO_ROOT

PREFIX = "gwatch"   # the accounts' names: gwatch<name>


def _python() -> str:
    """An interpreter another user can run: the venv's may link into /root (0700)."""
    system = Path(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}")
    return str(system) if system.exists() else sys.executable


class UnixStudents:
    """A world-readable folder (``root``) for the exchange and the students'
    homes, and :meth:`run` to run ``python -m nbgrader ...`` as a student."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env
        self.python = _python()
        self.pythonpath = os.pathsep.join([*site.getsitepackages(), str(REPO_ROOT)])

    def user(self, name: str) -> str:
        """The unix account of student ``name`` (made if missing), with its home."""
        account = f"{PREFIX}{name}"[:32]
        for _ in range(20):   # tests in parallel workers may add users at once (passwd's lock)
            try:
                pwd.getpwnam(account)
                break
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                                "--shell", "/usr/sbin/nologin", account], capture_output=True)
                time.sleep(0.1)
        else:
            raise AssertionError(f"useradd {account} did not make the user")
        home = self.root / "homes" / account
        home.mkdir(parents=True, exist_ok=True)
        entry = pwd.getpwnam(account)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        return account

    def run(self, account: str, *args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
        entry = pwd.getpwnam(account)
        env = {**self.env, "HOME": str(self.root / "homes" / account), "USER": account,
               "PYTHONPATH": self.pythonpath}
        done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                               "--", self.python, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=600)
        if check:
            assert done.returncode == 0, f"{account} {args}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done

    def workdir(self, account: str) -> Path:
        """A folder the student owns, to fetch assignments into."""
        folder = self.root / "work" / account
        folder.mkdir(parents=True, exist_ok=True)
        entry = pwd.getpwnam(account)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        return folder


def unix_students_or_skip(env: dict[str, str]):
    """A context for :class:`UnixStudents` (its folder removed after), or a skip."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the test creates unix users for the students (CI runs as root)")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        pytest.skip("needs setpriv and useradd (util-linux, passwd)")
    root = Path(tempfile.mkdtemp(prefix="watch-students-"))
    root.chmod(0o755)
    students = UnixStudents(root, env)
    probe = students.run(students.user("probe"), "-c", "import nbgrader", cwd=root, check=False)
    if probe.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip("another user cannot import this venv's nbgrader (a checkout under a private folder); "
                    f"{probe.stderr[-300:]}")
    return students


@pytest.fixture
def nbgrader_class(tmp_path):
    """The attention assignment (exercise 01 only) released through a real
    nbgrader exchange that unix students can reach (tests/test_watch*.py);
    yields ``(world, students, hand_in, nbgrader)``: ``hand_in(account, code,
    student=id)`` fetches, answers and submits as that account, and
    ``nbgrader(account, *args, student=id)`` runs any student command."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbgrader")
    from grader.release.common import answer_cell_id
    from grader.release.nbgrader import write_course
    from grader.course import load_course
    from nbgrader_run import NbgraderWorld, cell_by_id

    course = load_course(check_files=False)
    world = NbgraderWorld(tmp_path)
    students = unix_students_or_skip(world.env)
    try:
        world.exchange = students.root / "exchange"
        world.exchange.mkdir(mode=0o777)
        world.exchange.chmod(0o777)
        attention = next(a for a in course.assignments if a.id == "attention")
        small = course.model_copy(update={"assignments": [attention.model_copy(update={"exercises": ["01"]})]})
        write_course(small, REPO_ROOT, world.course_dir, assignment_ids=["attention"], exchange=world.exchange)
        world.run("-m", "nbgrader", "generate_assignment", "attention", cwd=world.course_dir)
        world.run("-m", "nbgrader", "release_assignment", "attention", cwd=world.course_dir)
        course_id = course.release["nbgrader"]["course_id"]
        exercise = course.exercise("01")

        def nbgrader(account: str, *args: str, student: str) -> None:
            students.run(account, "-m", "nbgrader", *args, *world.exchange_args(course_id), f"--student={student}",
                         cwd=students.workdir(account))

        def hand_in(account: str, code: str, *, student: str) -> Path:
            work = students.workdir(account)
            if not (work / "attention").exists():
                nbgrader(account, "fetch_assignment", "attention", student=student)
            path = work / "attention" / f"{exercise.folder}.ipynb"
            notebook = nbformat.read(path, as_version=4)
            cell_by_id(notebook, answer_cell_id(exercise)).source = code
            nbformat.write(notebook, path)
            nbgrader(account, "submit", "attention", student=student)
            time.sleep(1.1)   # nbgrader's timestamps are to the second
            return work

        yield world, students, hand_in, nbgrader
    finally:
        shutil.rmtree(students.root, ignore_errors=True)
