"""The malformed-input table: each case builds one student's entry in a
submissions folder, and says where its message must appear and what it
must contain. test_malformed_input.py grades them all in one run."""
from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.course import REPO_ROOT
from grader.release.common import answer_cell_id

REFERENCE = (REPO_ROOT / "solutions" / "01_softmax" / "softmax.py").read_text()


@dataclass(frozen=True)
class Case:
    student: str
    build: Callable[[Path, object], None]   # (the student's path without suffix, the exercise)
    reason: str                             # a substring of the message
    where: str = "result"                   # "result": results.json's reason; "log": the grader's output


def _module(source: str | bytes, *parts: str) -> Callable[[Path, object], None]:
    def build(entry: Path, exercise) -> None:
        path = entry.joinpath(*(parts or ("01_softmax", "softmax.py")))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.encode() if isinstance(source, str) else source)
    return build


def _notebook(cells: Callable[[str], list] | None = None, raw: bytes | None = None):
    def build(entry: Path, exercise) -> None:
        entry.mkdir(parents=True)
        grade_id = answer_cell_id(exercise)
        data = raw if raw is not None else json.dumps(
            {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells(grade_id)}).encode()
        (entry / "01_softmax.ipynb").write_bytes(data)
    return build


def _answer(grade_id: str) -> dict:
    return {"cell_type": "code", "source": REFERENCE, "outputs": [], "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": grade_id, "solution": True, "grade": False}}}


def _zip(*members: tuple[str | zipfile.ZipInfo, bytes]):
    def build(entry: Path, exercise) -> None:
        with zipfile.ZipFile(entry.with_name(entry.name + ".zip"), "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return build


def _zip_symlink(target: str):
    info = zipfile.ZipInfo("01_softmax/softmax.py")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return _zip((info, target.encode()))


def _symlinked_module(target: Path):
    def build(entry: Path, exercise) -> None:
        (entry / "01_softmax").mkdir(parents=True)
        os.symlink(target, entry / "01_softmax" / "softmax.py")
    return build


def _symlinked_student(target: Path):
    def build(entry: Path, exercise) -> None:
        os.symlink(target, entry)
    return build


def _mkdir(*parts: str):
    def build(entry: Path, exercise) -> None:
        entry.joinpath(*parts).mkdir(parents=True)
    return build


def _file(data: bytes, suffix: str = ""):
    def build(entry: Path, exercise) -> None:
        entry.with_name(entry.name + suffix).write_bytes(data)
    return build


CASES = [
    Case("m01-syntax-error", _module("def softmax(x, dim=-1)\n    return x\n"), "syntax error on line 1"),
    Case("m02-wrong-name", _module("def soft_max(x, dim=-1):\n    return x.softmax(dim)\n"), "softmax.py defines no 'softmax'"),
    Case("m03-wrong-signature", _module("def softmax(x):\n    return x.softmax(-1)\n"), "TypeError"),
    # The error's own text may quote hidden inputs: only its (builtin) type is shown.
    Case("m04-raises-at-import", _module("raise RuntimeError('my setup failed')\n"), "importing softmax.py raised RuntimeError"),
    Case("m05-not-utf8", _module(b'NAME = "caf\xe9"\ndef softmax(x, dim=-1):\n    return x\n'), "can't decode byte 0xe9"),
    Case("m06-null-bytes", _module(b"def softmax(x, dim=-1):\n    return x\0\n"), "null bytes"),
    Case("m07-huge-module", _module("# padding\n" * 200_000), "at most 1024 KiB"),
    Case("m08-empty-student-folder", _mkdir(), "not submitted"),
    Case("m09-empty-exercise-folder", _mkdir("01_softmax"), "not submitted"),
    Case("m10-notebook-invalid-json", _notebook(raw=b'{"cells": [ {"cell_type": '), "broken JSON"),
    Case("m11-notebook-missing-metadata",
         _notebook(lambda gid: [{"cell_type": "code", "source": REFERENCE, "metadata": {}, "outputs": []}]),
         "lost their metadata"),
    Case("m12-notebook-duplicated-cell", _notebook(lambda gid: [_answer(gid), _answer(gid)]), "2 times"),
    Case("m13-zip-dotdot", _zip(("../../escaped.py", b"x = 1\n"), ("01_softmax/softmax.py", REFERENCE.encode())),
         "unsafe path"),
    Case("m14-zip-absolute", _zip(("/tmp/escaped.py", b"x = 1\n")), "unsafe path"),
    Case("m15-zip-symlink-passwd", _zip_symlink("/etc/passwd"), "symbolic link"),
    Case("m16-zip-symlink-solutions", _zip_symlink(str(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py")),
         "symbolic link"),
    Case("m17-symlink-to-solutions", _symlinked_module(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py"),
         "symbolic link"),
    Case("m18-symlink-to-passwd", _symlinked_module(Path("/etc/passwd")), "symbolic link"),
    Case("m19-student-is-symlink", _symlinked_student(REPO_ROOT / "solutions"), "symbolic link"),
    Case("m20-zip-bomb", _zip(("01_softmax/softmax.py", b"\0" * (65 << 20))), "more than 64 MiB"),
    Case("m21-broken-zip", _file(b"PK\x03\x04 this is not really a zip", ".zip"), "not a valid zip file"),
    Case("m22-unknown-layout", _module(REFERENCE, "homework", "ex1", "softmax.py"), "homework/ex1/softmax.py"),
    Case("m23-not-folder-or-zip", _file(b"my answers are in the email\n"), "neither a folder nor a .zip"),
    Case("bad student id!", _mkdir("01_softmax"), "not a usable student id", where="log"),
    Case("m25-empty-module", _module(""), "softmax.py defines no 'softmax'"),
]
