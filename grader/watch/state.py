"""What ``grader watch`` has seen and done, kept beside the results in the
gradebook's SQLite file (its own table, its own connection), so a restarted
watch resumes: every submission is graded once per content, and the
per-student hourly limit counts the gradings before the restart too.

The queue is this table: the pending rows. It is bounded by the submissions
on disk, not by memory, and :meth:`WatchState.next_pending` picks fairly:
the student served longest ago first, so one student's fifty submissions
wait behind everyone else's first. The ``student`` column holds the
identity (grader/intake/identity.py), so ``Mallory`` and ``mallory.`` share
one hourly limit and one place in the queue.

``watch_pages`` remembers the digest of every feedback page watch wrote, so
it never replaces a page it did not write (nbgrader's released feedback).
"""
from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS watch_submissions (
    source_id   TEXT PRIMARY KEY,
    student     TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      TEXT NOT NULL,      -- pending, done, superseded, refused (not proved to be the student's)
    seen_at     REAL NOT NULL,      -- when this fingerprint was first seen
    done_at     REAL,
    counted     INTEGER NOT NULL DEFAULT 0,  -- it used one of the student's graded submissions
    note        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS watch_by_student ON watch_submissions (student, status, done_at);
CREATE TABLE IF NOT EXISTS watch_gradings (     -- one row per graded submission: the hourly limit's log
    student TEXT NOT NULL,
    done_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS watch_gradings_by_student ON watch_gradings (student, done_at);
CREATE TABLE IF NOT EXISTS watch_pages (        -- the feedback pages watch wrote, by content
    path   TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (path, digest)
);
"""
HOUR_S = 3600.0


@dataclass(frozen=True)
class Pending:
    source_id: str
    student: str
    fingerprint: str
    seen_at: float


class WatchState:
    """The ``watch_submissions`` table of a gradebook file."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def seen(self, source_id: str, student: str, fingerprint: str, now: float | None = None) -> bool:
        """Note a submission as found; True when it is new or changed (it is
        then pending, whatever it was before)."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._db.execute("SELECT fingerprint FROM watch_submissions WHERE source_id = ?",
                                   (source_id,)).fetchone()
            if row is not None and row[0] == fingerprint:
                return False
            if row is None:
                self._db.execute("INSERT INTO watch_submissions (source_id, student, fingerprint, status, seen_at) "
                                 "VALUES (?, ?, ?, 'pending', ?)", (source_id, student, fingerprint, now))
            else:
                self._db.execute("UPDATE watch_submissions SET fingerprint = ?, status = 'pending', seen_at = ? "
                                 "WHERE source_id = ?", (fingerprint, now, source_id))
            return True

    def finish(self, source_id: str, fingerprint: str, *, counted: bool, status: str = "done", note: str = "",
               now: float | None = None) -> bool:
        """Mark a submission done, unless it changed while it was graded
        (then it stays pending, to be graded again). True when marked."""
        now = time.time() if now is None else now
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(
                    "UPDATE watch_submissions SET status = ?, done_at = ?, counted = ?, note = ? "
                    "WHERE source_id = ? AND fingerprint = ?",
                    (status, now, int(counted), note, source_id, fingerprint))
                if counted:  # graded, whether or not it changed since: it used one of the hour's
                    self._db.execute("INSERT INTO watch_gradings SELECT student, ? FROM watch_submissions "
                                     "WHERE source_id = ?", (now, source_id))
            finally:
                self._db.execute("COMMIT")
            return cursor.rowcount == 1

    def graded_in_last_hour(self, student: str, now: float | None = None) -> list[float]:
        """When this student's counted gradings of the last hour were done, oldest first."""
        now = time.time() if now is None else now
        with self._lock:
            rows = self._db.execute("SELECT done_at FROM watch_gradings WHERE student = ? AND done_at > ? "
                                    "ORDER BY done_at", (student, now - HOUR_S)).fetchall()
        return [r[0] for r in rows]

    def pending(self) -> list[Pending]:
        """Every pending submission, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT source_id, student, fingerprint, seen_at FROM watch_submissions "
                                    "WHERE status = 'pending' ORDER BY seen_at, source_id").fetchall()
        return [Pending(*row) for row in rows]

    def last_served(self) -> dict[str, float]:
        """Each student's latest finished submission."""
        with self._lock:
            rows = self._db.execute("SELECT student, MAX(done_at) FROM watch_submissions "
                                    "WHERE done_at IS NOT NULL GROUP BY student").fetchall()
        return {student: at for student, at in rows}

    def wrote_page(self, path: str, digest: str) -> bool:
        """Whether the page at ``path`` holding ``digest`` is one watch wrote."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM watch_pages WHERE path = ? AND digest = ?",
                                   (path, digest)).fetchone()
        return row is not None

    def record_page(self, path: str, digest: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO watch_pages (path, digest) VALUES (?, ?)", (path, digest))

    def refused(self) -> list[tuple[str, str]]:
        """The submissions not graded as the student their name says: (source, why)."""
        with self._lock:
            rows = self._db.execute("SELECT source_id, note FROM watch_submissions WHERE status = 'refused' "
                                    "ORDER BY seen_at, source_id").fetchall()
        return [(source, note) for source, note in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM watch_submissions GROUP BY status").fetchall()
        return dict(rows)


def fair_order(pending: list[Pending], last_served: dict[str, float], busy: set[str]) -> list[Pending]:
    """The order to grade in: each student's oldest pending submission,
    students served longest ago (or never) first; a student with a
    submission in flight waits for it (so theirs finish in order)."""
    first: dict[str, Pending] = {}
    for item in pending:
        if item.student not in busy:
            first.setdefault(item.student, item)
    return sorted(first.values(), key=lambda p: (last_served.get(p.student, 0.0), p.seen_at, p.source_id))
