"""Where ``grader watch`` finds submissions, and what makes one new.

Two sources:

- a plain folder of ``<student>/`` folders or ``<student>.zip`` files (as
  ``grader grade`` reads): one submission per entry, graded again whenever
  its files change (and have stopped changing for one poll);
- nbgrader's exchange: ``<root>/<course>/inbound/<student>+<assignment>+<timestamp>+<random>/``
  as ``nbgrader submit`` writes it; each such folder is one submission,
  complete once its ``submission_secret.txt`` is there (written last).

Nothing here reads a file's contents but the secret (bounded, through no
link): change is detected by names, sizes and modification times, over at
most ``_MAX_ENTRIES`` files and folders, so a student's 100,000 folders cost
each poll no more than a plain submission. Each arrival carries its
identity (grader/intake/identity.py: what the hourly limit counts) and, when
the source cannot prove who handed it in, the refusal's reason.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.intake.bounded_read import read_bounded
from grader.intake.identity import Roster, identity, prove_owner

# nbgrader forbids "+" in ids; the folder name is split on it.
_INBOUND_RE = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<timestamp>[^+]+)(\+[^+]*)?$")
_MAX_ENTRIES = 2000   # files and folders looked at per submission when fingerprinting
_MAX_SECRET = 1024
_MAX_NOTEBOOKS = 200  # top-level entries looked at for notebooks in one inbound folder


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
    identity: str = ""    # what limits count by (grader/intake/identity.py)
    refusal: str = ""     # why it is not graded as this student's (no proof of who handed it in)


def fingerprint(path: Path) -> str:
    """A digest of the names, sizes and modification times under ``path``
    (links are not followed), and of each folder's own modification time
    (an entry added or removed changes it). At most ``_MAX_ENTRIES`` entries
    are read, in all: listing stops there, so a folder of 100,000 entries
    costs a poll no more than 2,000 (intake then refuses it, with its reason)."""
    digest = hashlib.sha256()
    if path.is_file() or path.is_symlink():
        st = path.lstat()
        digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return digest.hexdigest()
    budget = _MAX_ENTRIES
    folders = [(path, "")]
    while folders:
        folder, rel = folders.pop()
        entries = []
        try:
            digest.update(f"{rel}/\0{os.lstat(folder).st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
            with os.scandir(folder) as listing:
                for entry in listing:
                    budget -= 1
                    if budget < 0:
                        break
                    entries.append(entry)
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            name = f"{rel}/{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((Path(entry.path), name))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
        if budget < 0:   # intake refuses it or reads it bounded; here it costs no more
            digest.update(b"\0too many entries")
            break
    return digest.hexdigest()


class PlainFolder:
    """``<root>/<student>/`` or ``<root>/<student>.zip``; an entry is taken
    once its fingerprint is the same on two polls in a row (still copying
    files otherwise)."""

    def __init__(self, root: Path, *, settle: bool = True, roster: Roster | None = None) -> None:
        self.root = root
        self.settle = settle  # off: every entry is complete now (``--once``)
        self.roster = roster
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
                yield Arrival(f"folder:{entry.name}", student, entry, mark, identity=identity(student),
                              refusal=self._refusal(student))
        self._last = now

    def _refusal(self, student: str) -> str:
        """The instructor put these folders here: the name is the id. With a
        roster, an id not on it is refused (a look-alike of one above all)."""
        if self.roster is None or student in self.roster.users:
            return ""
        twin = self.roster.by_identity().get(identity(student))
        return (f"not on the roster, but looks like {twin!r}: not graded as either" if twin
                else "not on the roster")


class NbgraderInbound:
    """nbgrader's exchange inbound folder of one course."""

    def __init__(self, exchange_root: Path, course_id: str, roster: Roster | None = None) -> None:
        self.exchange = exchange_root / course_id
        self.inbound = self.exchange / "inbound"
        self.roster = roster
        self.last: dict[str, Arrival] = {}   # the latest poll's, by source id

    def poll(self) -> Iterator[Arrival]:
        found = list(self._poll())
        self.last = {a.source_id: a for a in found}
        return iter(found)

    def _poll(self) -> Iterator[Arrival]:
        if not self.inbound.is_dir():
            return
        for entry in sorted(self.inbound.iterdir()):
            match = _INBOUND_RE.match(entry.name)
            secret_file = entry / "submission_secret.txt"
            if not match or not entry.is_dir() or entry.is_symlink() or not secret_file.is_file() \
                    or secret_file.is_symlink():
                continue
            try:
                secret = read_bounded(secret_file, _MAX_SECRET)[:_MAX_SECRET].decode("ascii")
            except (OSError, UnicodeDecodeError):
                continue
            nb = NbgraderSubmission(self.exchange, match["assignment"], match["timestamp"], secret,
                                    _notebooks(entry))
            student = match["student"]
            yield Arrival(f"nbgrader:{entry.name}", student, entry, fingerprint(entry), nb,
                          identity=identity(student), refusal=prove_owner(student, entry, self.roster) or "")


def _notebooks(folder: Path) -> tuple[str, ...]:
    """The plain ``*.ipynb`` files at the top of ``folder`` (a bounded look)."""
    found = []
    try:
        with os.scandir(folder) as listing:
            for count, item in enumerate(listing):
                if count >= _MAX_NOTEBOOKS:
                    break
                if item.name.endswith(".ipynb") and item.is_file(follow_symlinks=False):
                    found.append(item.name[:-len(".ipynb")])
    except OSError:
        pass
    return tuple(sorted(found))
