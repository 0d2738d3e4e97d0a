"""Which gradebook a ``--out`` folder belongs to.

``grader grade`` rewrites ``grades.csv``, ``results.json`` and ``report/``
in its ``--out`` folder. Pointed at the folder of another class or another
gradebook, it would replace that output without a word; so the folder
records the gradebook it was written from (``.grader-output.json``), and a
run from another gradebook is refused before anything is graded.
"""
from __future__ import annotations

import json
from pathlib import Path

MARKER = ".grader-output.json"
OUTPUTS = ("grades.csv", "results.json", "report")


class OutputFolderTaken(ValueError):
    """``--out`` holds another gradebook's output; the message says whose."""


def check_owner(out: Path, db: Path) -> None:
    """Refuse ``out`` when it holds the output of a gradebook other than
    ``db``, or output of unknown origin (called before grading)."""
    gradebook = str(Path(db).resolve())
    marker = out / MARKER
    try:
        owner = json.loads(marker.read_text(encoding="utf-8")).get("gradebook")
    except FileNotFoundError:
        owner = None
    except (OSError, ValueError, AttributeError):
        owner = "an unreadable record"
    if owner is None and any((out / name).exists() for name in OUTPUTS):
        raise OutputFolderTaken(f"--out {out} already holds grading output that no gradebook claims; "
                                "give another --out, or remove that folder's grades.csv, results.json and report/")
    if owner is not None and owner != gradebook:
        raise OutputFolderTaken(f"--out {out} holds the output of the gradebook {owner}, not of --db {gradebook}; "
                                "give another --out (its reports would be replaced), or the same --db")


def mark_owner(out: Path, db: Path) -> None:
    """Record that ``out`` holds ``db``'s output (called as the reports are written)."""
    (out / MARKER).write_text(json.dumps({"gradebook": str(Path(db).resolve())}) + "\n", encoding="utf-8")
