"""Who handed a submission in: one rule for the whole grader (watch, grade,
exams).

Two parts:

- :func:`identity` folds an id to the key that limits and duplicates are
  counted by: NFKC, case folded, Unicode look-alikes of Latin letters
  folded to them, separators (``.``, ``-``, ``_``, spaces...) dropped. So
  ``mallory``, ``Mallory``, ``MALLORY``, ``mallory.``, ``mal-lory`` and
  ``mаllory`` (Cyrillic а) are one identity: they share one hourly limit,
  and two folders of one identity are flagged (:func:`lookalike_groups`).
- :func:`prove_owner`: a submission in nbgrader's exchange belongs to the
  student its folder name says only when the folder's owner (a uid the
  student cannot forge: only the kernel sets it, as the student's own
  ``nbgrader submit`` creates the folder) is that student's unix user: the
  roster's ``unix_user`` when a roster is given, else the id itself (the
  rule of nbgrader's own ``CollectApp.check_owner``). nbgrader's
  ``submission_secret`` is no proof: the student who submits writes it, and
  nbgrader keeps no copy that a forger could not make. Where no proof can
  be had (every student is one uid, as ``jovyan`` on some hubs; an id that
  is no unix user), the answer is a refusal with its reason, never a grade.
"""
from __future__ import annotations

import csv
import os
import pwd
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.intake.names import STUDENT_ID_RE, visible

# Look-alikes of Latin letters that NFKC leaves alone (Unicode's confusables,
# the Cyrillic, Greek and IPA letters that render as a Latin one).
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j",
    "к": "k", "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s", "т": "t", "ц": "u",
    "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ᴢ": "z",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ʏ": "y", "ı": "i", "ȷ": "j", "ℓ": "l",
})
# What separates parts of a name without making it another name.
_SEPARATORS = re.compile(r"[\s._\-·‐‑‒–—―'’`]+")
_ROSTER_ID_COLUMNS = ("student_id", "student", "id")


def identity(student_id: str) -> str:
    """The key two ids are one student by: folded as the module says."""
    text = unicodedata.normalize("NFKC", student_id).casefold()
    text = unicodedata.normalize("NFKD", text.translate(_CONFUSABLES))
    text = "".join(c for c in text if not unicodedata.combining(c))   # é -> e
    return _SEPARATORS.sub("", text.translate(_CONFUSABLES)) or student_id


def lookalike_groups(student_ids: Iterable[str]) -> list[list[str]]:
    """The ids that share one identity with another id, in groups (sorted)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for student in sorted(set(student_ids)):
        groups[identity(student)].append(student)
    return [ids for ids in groups.values() if len(ids) > 1]


def lookalike_note(ids: list[str]) -> str:
    """What the instructor is told about one such group."""
    return (f"{', '.join(visible(s) for s in ids)}: ids that differ only in case, punctuation or look-alike "
            "letters are one identity; check which is the student's and rename or remove the others")


class RosterError(Exception):
    """The roster cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Roster:
    """Student ids and the unix user each hands in as (``unix_user``:
    the id itself unless the roster says otherwise)."""

    users: dict[str, str]

    def by_identity(self) -> dict[str, str]:
        return {identity(s): s for s in self.users}


def read_roster(path: Path) -> Roster:
    """A CSV with a header: ``student_id`` (or ``student``/``id``) and,
    optionally, ``unix_user`` (the account the student runs ``nbgrader
    submit`` as)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"--roster {path}: cannot read: {exc}") from None
    if not rows:
        raise RosterError(f"--roster {path}: no students")
    column = next((c for c in _ROSTER_ID_COLUMNS if c in rows[0]), None)
    if column is None:
        raise RosterError(f"--roster {path}: no column named {' or '.join(_ROSTER_ID_COLUMNS)} "
                          f"(found: {', '.join(visible(c or '') for c in rows[0])})")
    users: dict[str, str] = {}
    keys: dict[str, str] = {}
    for line, row in enumerate(rows, start=2):
        student = (row.get(column) or "").strip()
        user = (row.get("unix_user") or "").strip() or student
        if not STUDENT_ID_RE.match(student):
            raise RosterError(f"--roster {path}, line {line}: {visible(student)!r} is not a usable student id")
        if not STUDENT_ID_RE.match(user):
            raise RosterError(f"--roster {path}, line {line}: unix_user {visible(user)!r} is not a usable user name")
        twin = keys.get(identity(student))
        if twin is not None:
            raise RosterError(f"--roster {path}, line {line}: {student!r} and {twin!r} are one identity "
                              "(they differ only in case, punctuation or look-alike letters)")
        keys[identity(student)] = student
        users[student] = user
    return Roster(users)


def _owner_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def prove_owner(student: str, folder: Path, roster: Roster | None) -> str | None:
    """``None`` when ``folder`` (in nbgrader's inbound) is proved to be
    ``student``'s; otherwise why not, in words for the instructor."""
    if not STUDENT_ID_RE.match(student):
        return "the folder's student id is not a usable id"
    expected = student
    if roster is not None:
        if student not in roster.users:
            twin = roster.by_identity().get(identity(student))
            if twin is not None:
                return f"{visible(student)!r} is not on the roster, but looks like {twin!r}: not graded as either"
            return f"{visible(student)!r} is not on the roster"
        expected = roster.users[student]
        if sum(user == expected for user in roster.users.values()) > 1:
            return (f"the roster gives several students the unix user {expected!r}, so the folder's owner "
                    "proves nothing")
    try:
        owner_uid = os.lstat(folder).st_uid
    except OSError as exc:
        return f"its owner cannot be read ({exc.strerror})"
    try:
        expected_uid = pwd.getpwnam(expected).pw_uid
    except KeyError:
        return (f"no unix user {expected!r} on this machine, so who handed it in cannot be proved (give --roster "
                "with a unix_user column)")
    if owner_uid != expected_uid:
        owner = _owner_name(owner_uid) or f"uid {owner_uid}"
        return f"the folder belongs to {owner}, not to {expected} ({visible(student)}'s unix user)"
    return None
