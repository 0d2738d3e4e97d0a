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
        try:
            pwd.getpwnam(account)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", account], check=True, capture_output=True)
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
