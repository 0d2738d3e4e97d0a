"""The gradebook: keys, atomic records, schema version, broken files."""
import sqlite3

import pytest

from grader.gradebook import Gradebook, GradebookError, Key
from grader.gradebook.store import SCHEMA_VERSION

KEY = Key("alice", "01", "abc123", "2026.1")


def _record(book, key=KEY, points=7.5):
    book.record(key, points=points, max_points=10, status="graded", reason="",
                verdicts=[{"check_id": "01-x", "passed": True}])


def test_record_and_read_back(tmp_path):
    with Gradebook(tmp_path / "grades.db") as book:
        assert not book.has(KEY)
        _record(book)
        assert book.has(KEY)
        record = book.get(KEY)
    assert record.points == 7.5 and record.verdicts == [{"check_id": "01-x", "passed": True}]


def test_a_changed_submission_or_course_version_is_a_new_key(tmp_path):
    with Gradebook(tmp_path / "grades.db") as book:
        _record(book)
        assert not book.has(Key("alice", "01", "def456", "2026.1"))
        assert not book.has(Key("alice", "01", "abc123", "2026.2"))


def test_results_survive_reopening(tmp_path):
    with Gradebook(tmp_path / "grades.db") as book:
        _record(book)
    with Gradebook(tmp_path / "grades.db") as book:
        assert book.has(KEY) and book.integrity_problems() == []


def test_newer_schema_is_refused(tmp_path):
    with Gradebook(tmp_path / "grades.db"):
        pass
    db = sqlite3.connect(tmp_path / "grades.db")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(GradebookError, match="schema version 99"):
        Gradebook(tmp_path / "grades.db")


def test_a_corrupted_file_is_a_clear_error_and_is_not_overwritten(tmp_path):
    path = tmp_path / "grades.db"
    path.write_bytes(b"this is not a database" * 100)
    before = path.read_bytes()
    with pytest.raises(GradebookError, match="cannot open the gradebook"):
        Gradebook(path)
    assert path.read_bytes() == before


def test_a_foreign_sqlite_database_is_refused_and_left_unchanged(tmp_path):
    """Issue 34, item 8: another program's SQLite file given as --db was filled with our tables."""
    path = tmp_path / "nbgrader.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE student (id TEXT PRIMARY KEY, first_name TEXT)")
    db.execute("INSERT INTO student VALUES ('s1', 'Ana')")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(GradebookError, match="tables student, not a gradebook"):
        Gradebook(path)
    assert path.read_bytes() == before
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["student"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_a_locked_gradebook_is_a_clear_error(tmp_path):
    path = tmp_path / "grades.db"
    with Gradebook(path):
        pass
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        book = Gradebook.__new__(Gradebook)
        with pytest.raises(GradebookError):
            book.__init__(path, busy_timeout_s=0.2)
            _record(book)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_integrity_check_finds_impossible_points(tmp_path):
    with Gradebook(tmp_path / "grades.db") as book:
        _record(book, points=12)
        assert any("outside 0..10" in p for p in book.integrity_problems())


def test_a_version_1_gradebook_is_migrated_in_place(tmp_path):
    path = tmp_path / "grades.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE results (student TEXT NOT NULL, exercise TEXT NOT NULL, content_hash TEXT NOT NULL,
            course_version TEXT NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL, status TEXT NOT NULL,
            reason TEXT NOT NULL, verdicts TEXT NOT NULL, graded_at REAL NOT NULL,
            PRIMARY KEY (student, exercise, content_hash, course_version));
        INSERT INTO results VALUES ('alice', '01', 'abc123', '2026.1', 7.5, 10, 'graded', '', '[]', 1.0);
    """)
    db.commit()
    db.close()
    with Gradebook(path) as book:
        assert book.get(KEY).points == 7.5 and book.get(KEY).figures == {}
        book.record(Key("bob", "01", "h", "2026.1"), points=1, max_points=10, status="graded", reason="",
                    verdicts=[], figures={"weights": {"student": [[1.0]]}})
        assert book.get(Key("bob", "01", "h", "2026.1")).figures == {"weights": {"student": [[1.0]]}}
    assert sqlite3.connect(path).execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)


def test_recording_a_key_again_keeps_the_old_result(tmp_path):
    """A regrade (grader grade --force) never overwrites: the old row moves to the history."""
    with Gradebook(tmp_path / "grades.db") as book:
        _record(book, points=7.5)
        _record(book, points=9)
        assert book.get(KEY).points == 9
        [(old, _)] = book.superseded("alice")
        assert old.key == KEY and old.points == 7.5
        assert [r.points for r in book.records("2026.1")] == [9]


def test_adjustments_are_a_history_and_the_newest_is_in_effect(tmp_path):
    with Gradebook(tmp_path / "grades.db") as book:
        _record(book, points=7.5)
        common = dict(made_by="prof", course_version="2026.1", content_hash="abc123")
        book.adjust("alice", "01", kind="delta", value=1, reason="partial credit", **common)
        [record] = book.records("2026.1")
        assert (record.points, record.graded_points, record.adjustment["reason"]) == (8.5, 7.5, "partial credit")
        book.adjust("alice", "01", kind="points", value=20, reason="typo", **common)
        assert [r.points for r in book.records("2026.1")] == [10]      # kept within 0..max
        book.adjust("alice", "01", kind="clear", value=0, reason="withdrawn", **common)
        [record] = book.records("2026.1")
        assert (record.points, record.adjustment) == (7.5, None)
        assert [a.kind for a in book.adjustments("alice")] == ["delta", "points", "clear"]
        _record(book, points=5)                                        # a regrade: the adjustment survives it
        book.adjust("alice", "01", kind="delta", value=-1, reason="late fix", **common)
        assert [r.points for r in book.records("2026.1")] == [4]
        assert [r.points for r in book.records("2026.1", adjusted=False)] == [5]


def test_a_version_2_gradebook_gains_the_history_tables(tmp_path):
    path = tmp_path / "grades.db"
    with Gradebook(path) as book:
        _record(book)
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE adjustments; DROP TABLE superseded_results; "
                     "UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    db.close()
    with Gradebook(path) as book:
        _record(book, points=3)
        assert [old.points for old, _ in book.superseded()] == [7.5]
        assert book.adjustments() == []


def test_records_can_be_limited_to_some_exercises_and_an_exam_s_rows_are_found(tmp_path, course):
    """`grader grade` reads back only the exams' rows for their statistics
    (the class's own results are already in hand)."""
    from grader.exams.records import SEPARATOR, exam_record_ids

    exam = course.exams[0].id
    ids = ["01", "02", exam, f"{exam}{SEPARATOR}01", f"{exam}x", f"x{exam}"]
    with Gradebook(tmp_path / "grades.db") as book:
        for n, exercise in enumerate(ids):
            _record(book, Key("alice", exercise, "h", "2026.1"), points=n)
        everything = list(book.records("2026.1"))
        exams = list(book.records("2026.1", exercises=exam_record_ids(course)))
    assert sorted(r.key.exercise for r in everything) == sorted(ids)
    assert sorted(r.key.exercise for r in exams) == sorted([exam, f"{exam}{SEPARATOR}01"])
    assert [r.points for r in exams] == [r.points for r in everything if r.key.exercise in {r.key.exercise for r in exams}]
