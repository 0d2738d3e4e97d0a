"""Where ``grader watch`` finds submissions, and what makes one new.

Two sources:

- a plain folder of ``<student>/`` folders or ``<student>.zip`` files (as
  ``grader grade`` reads): one submission per entry, graded again whenever
  its files change (and have stopped changing for one poll);
- nbgrader's exchange: ``<root>/<course>/inbound/<student>+<assignment>+<timestamp>+<random>/``
  as ``nbgrader submit`` writes it; each such folder is one submission,
  complete once its ``submission_secret.txt`` is there (written last).

Nothing here reads a file's contents but the secret: change is detected by
names, sizes and modification times.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# nbgrader forbids "+" in ids; the folder name is split on it.
_INBOUND_RE = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<timestamp>[^+]+)(\+[^+]*)?$")
_MAX_ENTRIES = 2000   # files looked at per submission when fingerprinting
_MAX_SECRET = 1024


@dataclass(frozen=True)
class NbgraderSubmission:
    """What feedback for an nbgrader submission needs."""

    exchange: Path        # <root>/<course>
    assignment: str
    timestamp: str
    secret: str
    notebooks: tuple[str, ...]   # notebook ids (file names without .ipynb)


@dataclass(frozen=True)
class Arrival:
    """A submission as found: not yet read, copied or graded."""

    source_id: str        # stable across polls and restarts
    student: str
    path: Path            # a folder or a zip
    fingerprint: str
    nbgrader: NbgraderSubmission | None = None


def fingerprint(path: Path) -> str:
    """A digest of the names, sizes and modification times under ``path``
    (links are not followed)."""
    digest = hashlib.sha256()
    if path.is_file() or path.is_symlink():
        st = path.lstat()
        digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return digest.hexdigest()
    seen = 0
    for folder, dirs, files in os.walk(path, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            seen += 1
            if seen > _MAX_ENTRIES:
                return digest.hexdigest()
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            rel = os.path.relpath(os.path.join(folder, name), path)
            digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class PlainFolder:
    """``<root>/<student>/`` or ``<root>/<student>.zip``; an entry is taken
    once its fingerprint is the same on two polls in a row (still copying
    files otherwise)."""

    def __init__(self, root: Path, *, settle: bool = True) -> None:
        self.root = root
        self.settle = settle  # off: every entry is complete now (``--once``)
        self._last: dict[str, str] = {}

    def poll(self) -> Iterator[Arrival]:
        now: dict[str, str] = {}
        for entry in sorted(self.root.iterdir()):
            if entry.name.startswith(".") or not (entry.is_dir() or entry.suffix == ".zip"):
                continue
            mark = fingerprint(entry)
            now[entry.name] = mark
            if not self.settle or self._last.get(entry.name) == mark:
                student = entry.name.removesuffix(".zip") if entry.suffix == ".zip" else entry.name
                yield Arrival(f"folder:{entry.name}", student, entry, mark)
        self._last = now


class NbgraderInbound:
    """nbgrader's exchange inbound folder of one course."""

    def __init__(self, exchange_root: Path, course_id: str) -> None:
        self.exchange = exchange_root / course_id
        self.inbound = self.exchange / "inbound"

    def poll(self) -> Iterator[Arrival]:
        if not self.inbound.is_dir():
            return
        for entry in sorted(self.inbound.iterdir()):
            match = _INBOUND_RE.match(entry.name)
            secret_file = entry / "submission_secret.txt"
            if not match or not entry.is_dir() or entry.is_symlink() or not secret_file.is_file() \
                    or secret_file.is_symlink():
                continue
            try:
                secret = secret_file.read_text(encoding="ascii")[:_MAX_SECRET]
            except (OSError, UnicodeDecodeError):
                continue
            notebooks = tuple(sorted(p.stem for p in entry.glob("*.ipynb") if p.is_file() and not p.is_symlink()))
            nb = NbgraderSubmission(self.exchange, match["assignment"], match["timestamp"], secret, notebooks)
            yield Arrival(f"nbgrader:{entry.name}", match["student"], entry, fingerprint(entry), nb)
