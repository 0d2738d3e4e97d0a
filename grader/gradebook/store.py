"""The gradebook: one SQLite file (WAL), schema-versioned.

A result is keyed by (student, exercise, content hash of the submitted
module, course version): rerunning after an interruption grades only what
is missing, and a changed submission or a new course version is graded
again. Each result is written in one transaction, so a ``kill -9`` at any
moment leaves either the whole result or none of it.

Nothing is overwritten: a result that is recorded again under the same key
(``grader grade --force``, a regrade) moves the old row to
``superseded_results`` in the same transaction. The instructor's manual
adjustments (``grader adjust``) are rows of ``adjustments``, never edits of
a result; the newest for a (student, exercise) is applied when results are
read for reports and exports (grader/gradebook/adjustments.py), so they survive
regrades and resumed runs.
"""
from __future__ import annotations

import json
import sqlite3
import uuid
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from grader.gradebook.adjustments import Adjustment, apply_adjustments
from grader.gradebook.records import Key, Record, apply_lateness, record_from_row

SCHEMA_VERSION = 3

# v3: the instructor's adjustments (one row per decision; the newest per
# student and exercise is in effect), the results a regrade replaced, and
# each submission's lateness (derived: recomputed by every grading run).
ADJUSTMENTS_TABLE = """CREATE TABLE IF NOT EXISTS adjustments (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    student        TEXT NOT NULL,
    exercise       TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('points', 'delta', 'clear')),
    value          REAL NOT NULL,
    reason         TEXT NOT NULL,
    made_by        TEXT NOT NULL,
    made_at        REAL NOT NULL,
    course_version TEXT NOT NULL,   -- what it was made against, for the history
    content_hash   TEXT NOT NULL
)"""
SUPERSEDED_TABLE = """CREATE TABLE IF NOT EXISTS superseded_results (
    student TEXT NOT NULL, exercise TEXT NOT NULL, content_hash TEXT NOT NULL, course_version TEXT NOT NULL,
    points REAL NOT NULL, max_points REAL NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL,
    verdicts TEXT NOT NULL, graded_at REAL NOT NULL, figures TEXT NOT NULL,
    superseded_at REAL NOT NULL
)"""
LATENESS_TABLE = """CREATE TABLE IF NOT EXISTS lateness (
    student TEXT NOT NULL, exercise TEXT NOT NULL, content_hash TEXT NOT NULL, course_version TEXT NOT NULL,
    lateness TEXT NOT NULL,   -- JSON: grader/course/late_policy.py's Lateness
    PRIMARY KEY (student, exercise, content_hash, course_version)
)"""
# One transaction: a grader killed while creating the file leaves no tables
# or all of them, with their version (an existing file keeps its version).
SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    student        TEXT NOT NULL,
    exercise       TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    course_version TEXT NOT NULL,
    points         REAL NOT NULL,
    max_points     REAL NOT NULL,
    status         TEXT NOT NULL,   -- graded, not_submitted, unreadable (handed in, not readable), or a run's
    reason         TEXT NOT NULL,
    verdicts       TEXT NOT NULL,   -- JSON list of verdicts
    graded_at      REAL NOT NULL,
    figures        TEXT NOT NULL DEFAULT '{{}}',  -- JSON: feedback figures on public inputs (v2)
    PRIMARY KEY (student, exercise, content_hash, course_version)
);
{ADJUSTMENTS_TABLE};
{SUPERSEDED_TABLE};
{LATENESS_TABLE};
INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');
COMMIT;
"""
# Each step takes the schema from version N to N + 1, in one transaction.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE results ADD COLUMN figures TEXT NOT NULL DEFAULT '{}'",),
    2: (ADJUSTMENTS_TABLE, SUPERSEDED_TABLE, LATENESS_TABLE),
}


class GradebookError(Exception):
    """The gradebook cannot be opened or written; the message says why."""


class Gradebook:
    """Results of one course, in ``path`` (created if missing)."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we open transactions explicitly.
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
            self._refuse_foreign()   # before anything is written into it (WAL mode included)
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL: a commit survives the grader's kill -9 (it is in
            # the WAL file when COMMIT returns); only a power cut can lose the
            # last ones. FULL paid an fsync per result (tests/hardening/test_faults.py).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            self._check_schema()
            # Who this gradebook is, wherever its file is moved or copied (an --out folder names it).
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('gradebook_id', ?)", (uuid.uuid4().hex,))
        except sqlite3.DatabaseError as exc:
            raise GradebookError(f"{self.path}: cannot open the gradebook: {exc}") from exc

    def _refuse_foreign(self) -> None:
        """An SQLite file of another program (an nbgrader gradebook, a
        browser's history) given as ``--db`` is refused, never filled with
        our tables: it is a gradebook only when empty or when its ``meta``
        table says so."""
        tables = sorted(row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        if not tables:
            return
        marked = "meta" in tables and self._db.execute(
            "SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone() is not None
        if not marked or "results" not in tables:
            shown = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
            self._db.close()
            raise GradebookError(f"{self.path}: an SQLite database with tables {shown}, not a gradebook of "
                                 "this grader; give another --db (a new file is created)")

    def _check_schema(self) -> None:
        version = int(self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise GradebookError(f"{self.path}: schema version {version}, this grader writes {SCHEMA_VERSION}")
        while version < SCHEMA_VERSION:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in MIGRATIONS[version]:
                self._db.execute(statement)
            version += 1
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
            self._db.execute("COMMIT")

    def left_behind(self, course_version: str) -> dict[str, list[str]]:
        """Students with results under another course version but none under
        ``course_version`` -> those versions: an export of this version alone
        would leave them out."""
        rows = self._db.execute(
            "SELECT student, group_concat(DISTINCT course_version) FROM results GROUP BY student "
            "HAVING sum(course_version = ?) = 0", (course_version,)).fetchall()
        return {student: sorted(versions.split(",")) for student, versions in rows}

    def mark_pushed(self, assignment: str) -> None:
        """Record that ``assignment``'s scores were pushed to nbgrader now (``grader push``)."""
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"pushed:{assignment}", str(time.time())))

    def pushed_at(self, assignment: str) -> float | None:
        """When ``assignment`` was last pushed to nbgrader, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (f"pushed:{assignment}",)).fetchone()
        return float(row[0]) if row else None

    @property
    def identity(self) -> str:
        return self._db.execute("SELECT value FROM meta WHERE key = 'gradebook_id'").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Gradebook":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def has(self, key: Key) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM results WHERE student=? AND exercise=? AND content_hash=? AND course_version=?",
            (key.student, key.exercise, key.content_hash, key.course_version),
        ).fetchone()
        return row is not None

    def record(self, key: Key, *, points: float, max_points: float, status: str, reason: str,
               verdicts: list[dict], figures: dict | None = None) -> None:
        """Store one result atomically. A result already under this key (a
        regrade) is moved to ``superseded_results`` in the same transaction."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO superseded_results SELECT *, ? FROM results "
                "WHERE student=? AND exercise=? AND content_hash=? AND course_version=?",
                (time.time(), key.student, key.exercise, key.content_hash, key.course_version))
            self._db.execute(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key.student, key.exercise, key.content_hash, key.course_version, points, max_points,
                 status, reason, json.dumps(verdicts, ensure_ascii=False), time.time(),
                 json.dumps(figures or {})),
            )
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise GradebookError(f"{self.path}: cannot record a result: {exc}") from exc

    def get(self, key: Key) -> Record | None:
        row = self._db.execute(
            "SELECT * FROM results WHERE student=? AND exercise=? AND content_hash=? AND course_version=?",
            (key.student, key.exercise, key.content_hash, key.course_version),
        ).fetchone()
        return None if row is None else record_from_row(row)

    def records(self, course_version: str, *, adjusted: bool = True,
                exercises: Callable[[str], bool] | None = None) -> Iterator[Record]:
        """The newest record of each (student, exercise) for this course
        version, with the instructor's adjustment in effect applied (unless
        ``adjusted`` is False); ``exercises``: only those whose exercise id
        it accepts (the others' verdicts are not even decoded)."""
        if adjusted:
            yield from self.finalise(list(self.records(course_version, adjusted=False, exercises=exercises)))
            return
        rows = self._db.execute(
            """SELECT * FROM results r WHERE course_version = ? AND graded_at = (
                   SELECT MAX(graded_at) FROM results s WHERE s.student = r.student
                   AND s.exercise = r.exercise AND s.course_version = r.course_version)
               ORDER BY student, exercise""",
            (course_version,),
        )
        for row in rows:
            if exercises is None or exercises(row[1]):
                yield record_from_row(row)

    def finalise(self, records: list[Record]) -> list[Record]:
        """``records`` as reports show them: the instructor's adjustment in
        effect applied, then the late policy (grader/gradebook/adjustments.py, grader/gradebook/records.py)."""
        lateness = {}
        for *key, text in self._db.execute("SELECT * FROM lateness"):
            lateness[Key(*key)] = json.loads(text)
        return apply_lateness(apply_adjustments(records, self.adjustments()), lateness)

    def set_lateness(self, assessed: dict[Key, dict]) -> None:
        """Record the lateness of these submissions (one transaction; replaces
        what an earlier run derived: extensions may have changed)."""
        if not assessed:
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR REPLACE INTO lateness VALUES (?, ?, ?, ?, ?)",
                                 [(k.student, k.exercise, k.content_hash, k.course_version, json.dumps(v))
                                  for k, v in assessed.items()])
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise GradebookError(f"{self.path}: cannot record lateness: {exc}") from exc

    def adjust(self, student: str, exercise: str, *, kind: str, value: float, reason: str, made_by: str,
               course_version: str, content_hash: str) -> None:
        """Record one adjustment (a new row: the history is kept)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO adjustments (student, exercise, kind, value, reason, made_by, made_at, course_version, "
                "content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (student, exercise, kind, value, reason, made_by, time.time(), course_version, content_hash))
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise GradebookError(f"{self.path}: cannot record the adjustment: {exc}") from exc

    def adjustments(self, student: str | None = None) -> list:
        """Every adjustment (of ``student``, when given), oldest first."""
        rows = self._db.execute(
            "SELECT student, exercise, kind, value, reason, made_by, made_at, course_version, content_hash, id "
            "FROM adjustments WHERE ? IS NULL OR student = ? ORDER BY made_at, id", (student, student))
        return [Adjustment(*row) for row in rows]

    def superseded(self, student: str | None = None) -> list[tuple[Record, float]]:
        """Results that a regrade replaced, with when: (record, superseded_at), oldest first."""
        rows = self._db.execute("SELECT * FROM superseded_results WHERE ? IS NULL OR student = ? "
                                "ORDER BY superseded_at", (student, student))
        return [(record_from_row(row[:11]), row[11]) for row in rows]

    def integrity_problems(self) -> list[str]:
        """SQLite's own integrity check plus ours: JSON that parses, points in range."""
        problems = [r[0] for r in self._db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        for student, exercise, points, max_points, verdicts in self._db.execute(
            "SELECT student, exercise, points, max_points, verdicts FROM results"
        ):
            if not 0 <= points <= max_points + 1e-9:
                problems.append(f"{student}/{exercise}: points {points} outside 0..{max_points}")
            try:
                json.loads(verdicts)
            except json.JSONDecodeError:
                problems.append(f"{student}/{exercise}: verdicts are not valid JSON")
        return problems
