"""Collecting submissions: every layout students use, and archives that try
to escape or explode, each with a clear problem and no crash."""
import os
import stat
import zipfile

import pytest

from grader.course import load_course
from grader.intake.submissions import MAX_ARCHIVE_BYTES, SubmissionError, collect, unpack_zip

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


def test_any_error_while_preparing_one_student_is_that_students_own(tmp_path, course, softmax_only, monkeypatch):
    """The per-student boundary: whatever raises while one student's files
    are read or prepared, that student is unreadable and the others are collected."""
    import grader.intake.submissions as submissions

    for student in ("ann", "bea"):
        (tmp_path / "subs" / student / "01_softmax").mkdir(parents=True)
        (tmp_path / "subs" / student / "01_softmax" / "softmax.py").write_text(MODULE + f"# {student}\n")
    real = submissions.assemble

    def exploding(exercise, source, *args, **kwargs):
        if b"# ann" in source:
            raise MemoryError("boom with the student's text")
        return real(exercise, source, *args, **kwargs)

    monkeypatch.setattr(submissions, "assemble", exploding)
    found = _grade_tree(tmp_path, course, softmax_only)
    ann, bea = found["ann"].exercises["01"], found["bea"].exercises["01"]
    assert ann.status == "unreadable" and "MemoryError" in ann.problem and "student's text" not in ann.problem
    assert bea.status == "" and bea.folder is not None


def test_one_student_with_two_sources_is_refused_once(tmp_path, course, softmax_only):
    (tmp_path / "subs" / "cal" / "01_softmax").mkdir(parents=True)
    (tmp_path / "subs" / "cal" / "01_softmax" / "softmax.py").write_text(MODULE)
    with zipfile.ZipFile(tmp_path / "subs" / "cal.zip", "w") as zf:
        zf.writestr("01_softmax/softmax.py", MODULE)
    found = collect(tmp_path / "subs", course, softmax_only, tmp_path / "work")
    assert [s.student for s in found] == ["cal"]
    part = found[0].exercises["01"]
    assert part.status == "unreadable" and part.problem == "two submissions: cal/ and cal.zip; hand in one"


def test_homework_comes_only_from_its_own_assignment_and_an_exam_only_from_its_folder(tmp_path, course):
    """nbgrader's submitted/<student>/<assignment>/: exercise 03 is homework of
    `attention` and code of the `midterm` exam."""
    masking = course.exercise("03")
    notebook = "03_masking.ipynb"
    student = tmp_path / "subs" / "dan"
    for folder in ("midterm-dan", "layers"):
        (student / folder).mkdir(parents=True)
        (student / folder / notebook).write_text("{}")
    homework = collect(tmp_path / "subs", course, [masking], tmp_path / "w1")[0].exercises["03"]
    assert homework.status == "" and homework.folder is None
    assert homework.problem.startswith("not submitted: 03_masking.ipynb is only in layers/")
    assert "taken from attention/ only" in homework.problem
    (student / "attention").mkdir()
    (student / "attention" / notebook).write_text("{}")
    homework = collect(tmp_path / "subs", course, [masking], tmp_path / "w2")[0].exercises["03"]
    assert homework.status == "unreadable" and "not a Jupyter notebook" in homework.problem   # found, in attention/
    exam = collect(tmp_path / "subs", course, [masking], tmp_path / "w3", exam="midterm")[0].exercises["03"]
    assert exam.status == "unreadable"   # the exam's own notebook, found in midterm-dan/
    (student / "midterm-dan" / notebook).unlink()
    exam = collect(tmp_path / "subs", course, [masking], tmp_path / "w4", exam="midterm")[0].exercises["03"]
    assert exam.problem.startswith("not submitted") and exam.folder is None   # never the homework in attention/


def test_bare_modules_and_explicit_sources(tmp_path, course, softmax_only):
    (tmp_path / "upload").mkdir()
    (tmp_path / "upload" / "softmax.py").write_text(MODULE)
    found = collect(tmp_path / "unused", course, softmax_only, tmp_path / "work",
                    sources={"submission": tmp_path / "upload"}, bare_modules=True)
    assert found[0].student == "submission" and found[0].exercises["01"].folder is not None
    plain = collect(tmp_path / "unused", course, softmax_only, tmp_path / "work2", sources={"submission": tmp_path / "upload"})
    assert plain[0].exercises["01"].folder is None


def test_hidden_folders_are_not_walked_and_a_non_utf8_name_gets_a_placeholder(tmp_path, course, softmax_only):
    student = tmp_path / "subs" / "eve"
    (student / "01_softmax").mkdir(parents=True)
    (student / "01_softmax" / "softmax.py").write_text(MODULE)
    (student / ".git").mkdir()
    os.symlink("/etc", student / ".git" / "link")          # never read: .git is not walked
    os.mkdir(os.fsencode(tmp_path / "subs") + b"/odd\xff")
    found = {s.student: s for s in collect(tmp_path / "subs", course, softmax_only, tmp_path / "work")}
    assert found["eve"].exercises["01"].folder is not None
    odd = [s for s in found.values() if s.student.startswith("unusable-id-")]
    assert len(odd) == 1 and "odd\\udcff" in odd[0].problems[0]


def test_untouched_stub_ignores_line_ends_bom_and_trailing_spaces(course):
    from grader.course import REPO_ROOT
    from grader.intake.submissions import _is_untouched_stub

    exercise = course.exercise("01")
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_bytes()
    for variant in (stub, stub.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + stub, stub.replace(b"\n", b" \t\n") + b"\n\n"):
        assert _is_untouched_stub(variant, exercise, REPO_ROOT)
    assert not _is_untouched_stub(stub + b"x = 1\n", exercise, REPO_ROOT)
    assert not _is_untouched_stub(None, exercise, REPO_ROOT)
