"""Collecting submissions: every layout students use, and archives that try
to escape or explode, each with a clear problem and no crash."""
import os
import stat
import zipfile

import pytest

from grader.course import load_course
from grader.submissions import MAX_ARCHIVE_BYTES, SubmissionError, collect, unpack_zip

MODULE = "def softmax(x, dim=-1):\n    return x\n"


@pytest.fixture
def course():
    return load_course(check_files=False)


@pytest.fixture
def softmax_only(course):
    return [course.exercise("01")]


def _grade_tree(tmp_path, course, exercises):
    return {s.student: s for s in collect(tmp_path / "subs", course, exercises, tmp_path / "work")}


def test_exercise_folders_checkout_and_zip_are_all_found(tmp_path, course, softmax_only):
    subs = tmp_path / "subs"
    (subs / "alice" / "01_softmax").mkdir(parents=True)
    (subs / "alice" / "01_softmax" / "softmax.py").write_text(MODULE)
    (subs / "bob" / "exercises" / "01_softmax").mkdir(parents=True)
    (subs / "bob" / "exercises" / "01_softmax" / "softmax.py").write_text(MODULE)
    with zipfile.ZipFile(subs / "carol.zip", "w") as zf:
        zf.writestr("course-main/exercises/01_softmax/softmax.py", MODULE)
        zf.writestr("course-main/README.md", "extra files are ignored")
    found = _grade_tree(tmp_path, course, softmax_only)
    assert sorted(found) == ["alice", "bob", "carol"]
    hashes = {s.exercises["01"].content_hash for s in found.values()}
    assert len(hashes) == 1 and "" not in hashes
    for submission in found.values():
        prepared = submission.exercises["01"].folder
        assert (prepared / "softmax.py").read_text() == MODULE


def test_missing_exercise_is_not_submitted(tmp_path, course, softmax_only):
    (tmp_path / "subs" / "dave" / "02_attention_weights").mkdir(parents=True)
    part = _grade_tree(tmp_path, course, softmax_only)["dave"].exercises["01"]
    assert part.folder is None and part.problem == "not submitted"


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil.py", "a/../../evil.py", "C:/evil.py"])
def test_zip_with_escaping_path_is_refused(tmp_path, name):
    archive = tmp_path / "x.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(name, "boom")
    with pytest.raises(SubmissionError, match="unsafe path"):
        unpack_zip(archive, tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()


def test_zip_with_symlink_is_refused(tmp_path):
    archive = tmp_path / "x.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("01_softmax/softmax.py")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(SubmissionError, match="symbolic link"):
        unpack_zip(archive, tmp_path / "out")


def test_zip_bomb_is_refused_before_unpacking(tmp_path):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", b"\0" * (MAX_ARCHIVE_BYTES + 1))
    assert archive.stat().st_size < 1 << 20  # small on disk, huge unpacked
    with pytest.raises(SubmissionError, match="more than"):
        unpack_zip(archive, tmp_path / "out")


def test_broken_zip_is_a_problem_not_a_crash(tmp_path, course, softmax_only):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "erin.zip").write_bytes(b"PK\x03\x04 not really a zip")
    submission = _grade_tree(tmp_path, course, softmax_only)["erin"]
    assert "not a valid zip file" in submission.problems[0]
    assert submission.exercises["01"].folder is None and submission.exercises["01"].status == "unreadable"


def test_symlinked_module_is_not_followed(tmp_path, course, softmax_only):
    folder = tmp_path / "subs" / "frank" / "01_softmax"
    folder.mkdir(parents=True)
    os.symlink("/etc/passwd", folder / "softmax.py")
    part = _grade_tree(tmp_path, course, softmax_only)["frank"].exercises["01"]
    assert part.folder is None and part.status == "unreadable" and "symbolic link" in part.problem


def test_odd_student_folder_names_are_reported(tmp_path, course, softmax_only):
    (tmp_path / "subs" / "bad name;rm -rf").mkdir(parents=True)
    (tmp_path / "subs" / "notes.txt").mkdir()
    found = {s.source.name: s for s in collect(tmp_path / "subs", course, softmax_only, tmp_path / "work")}
    odd = found["bad name;rm -rf"]
    assert "not a usable student id" in odd.problems[0] and odd.student.startswith("unusable-id-")
    assert odd.exercises["01"].status == "unreadable" and "not a usable student id" in odd.exercises["01"].problem


def test_unknown_layout_says_where_the_module_was_found(tmp_path, course, softmax_only):
    (tmp_path / "subs" / "gina" / "hw" / "ex1").mkdir(parents=True)
    (tmp_path / "subs" / "gina" / "hw" / "ex1" / "softmax.py").write_text(MODULE)
    (tmp_path / "subs" / "hal" / "06_multihead").mkdir(parents=True)  # another exercise's folder: not misplaced
    (tmp_path / "subs" / "hal" / "06_multihead" / "softmax.py").write_text(MODULE)
    found = _grade_tree(tmp_path, course, softmax_only)
    assert "found hw/ex1/softmax.py" in found["gina"].exercises["01"].problem
    assert found["hal"].exercises["01"].problem == "not submitted"
