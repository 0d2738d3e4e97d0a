"""Nothing one student hands in slows another (issue 37, item 4): `grader
watch` reads a submission with intake's bounded readers in a worker, never
copies it: a FIFO ends as that student's recorded reason (and `--once`
ends), a 4 GiB sparse file is never written out, 30,000 folders are cut at
intake's entry budget; the student beside them is graded as usual."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from grader.course import REPO_ROOT, load_course
from grader.gradebook import Gradebook

REFERENCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_text()
FILE_SIZE_LIMIT = 256 << 20   # what the watch may write in one file: a copy of the sparse file breaks it


def _module(subs: Path, student: str) -> Path:
    folder = subs / student / "01_softmax"
    folder.mkdir(parents=True)
    (folder / "softmax.py").write_text(REFERENCE)
    return folder


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def test_a_fifo_a_sparse_file_and_many_folders_end_as_reasons_and_slow_no_one(tmp_path):
    subs, db, feedback = tmp_path / "subs", tmp_path / "grades.db", tmp_path / "feedback"
    _module(subs, "alice")
    os.mkfifo(_module(subs, "fifo") / "notes")
    with open(_module(subs, "sparse") / "data.bin", "wb") as fh:   # 4 GiB of holes beside the module
        fh.truncate(4 << 30)
    with open(_module(subs, "sparse2") / "softmax_big.py", "wb") as fh:
        fh.truncate(4 << 30)
    (subs / "sparsemod" / "01_softmax").mkdir(parents=True)
    with open(subs / "sparsemod" / "01_softmax" / "softmax.py", "wb") as fh:   # the module itself
        fh.truncate(4 << 30)
    many = _module(subs, "folders").parent
    for i in range(30_000):
        (many / f"d{i}").mkdir()
    done = subprocess.run([sys.executable, "-m", "grader", "watch", "--once", "-e", "01", str(subs), "--db", str(db),
                           "--feedback", str(feedback)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cannot copy" not in done.stderr
    points = load_course().exercise("01").points
    with Gradebook(db) as book:
        rows = {r.key.student: r for r in book.records(load_course().course.version)}
    assert rows["alice"].points == points and rows["sparse"].points == points and rows["sparse2"].points == points
    assert rows["fifo"].status == "unreadable" and "named pipe (FIFO)" in rows["fifo"].reason
    assert rows["sparsemod"].status == "unreadable" and "4096 MiB" in rows["sparsemod"].reason
    assert rows["folders"].status == "unreadable" and "more than 20000 files and folders" in rows["folders"].reason
    fifo_page = (feedback / "fifo" / "feedback.html").read_text()
    assert "named pipe (FIFO)" in fifo_page and "hand in plain files only" in fifo_page   # what to fix
