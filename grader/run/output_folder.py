"""Which gradebook a ``--out`` folder belongs to.

``grader grade`` rewrites ``grades.csv``, ``results.json`` and ``report/``
in its ``--out`` folder. Pointed at the folder of another class or another
gradebook, it would replace that output without a word; so the folder
records the gradebook it was written from (``.grader-output.json``: the
gradebook's own id, which moves and copies with its file), and a run from
another gradebook is refused before anything is graded.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

MARKER = ".grader-output.json"
OUTPUTS = ("grades.csv", "results.json", "report")


class OutputFolderTaken(ValueError):
    """``--out`` holds another gradebook's output; the message says whose."""


def _identity(db: Path) -> str | None:
    """The id recorded in the gradebook ``db``, read without creating or
    changing it; None when there is no such file or id."""
    if not db.is_file():
        return None
    try:
        with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'gradebook_id'").fetchone()
    except sqlite3.Error:
        return None   # not a gradebook: opening it says so, with its own message
    return row[0] if row else None


def check_owner(out: Path, db: Path) -> None:
    """Refuse ``out`` when it holds the output of a gradebook other than
    ``db``, or output of unknown origin (called before grading)."""
    marker = out / MARKER
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
        owner, where = str(recorded["gradebook_id"]), str(recorded.get("gradebook", "?"))
    except FileNotFoundError:
        if any((out / name).exists() for name in OUTPUTS):
            raise OutputFolderTaken(f"--out {out} already holds grading output that no gradebook claims; give "
                                    "another --out, or remove that folder's grades.csv, results.json and report/")
        return
    except (OSError, ValueError, KeyError, TypeError):
        raise OutputFolderTaken(f"--out {out}: its {MARKER} cannot be read; give another --out") from None
    if _identity(Path(db)) != owner:
        raise OutputFolderTaken(f"--out {out} holds the output of another gradebook (written from {where}), "
                                f"not of --db {db}; give another --out (its reports would be replaced), "
                                "or that gradebook")


def mark_owner(out: Path, db: Path, identity: str) -> None:
    """Record that ``out`` holds the output of the gradebook ``identity`` (at ``db``)."""
    (out / MARKER).write_text(json.dumps({"gradebook_id": identity, "gradebook": str(Path(db).resolve())}) + "\n",
                              encoding="utf-8")
