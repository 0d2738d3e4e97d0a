"""The intake attack corpus: submissions that attack what the grader READS
(links, special files, archives, modes, sizes, folder names), not the
sandbox. Git cannot store most of them (links, FIFOs, sockets, modes,
600 MiB files, malformed zips), so each attack is built here, in a test's
temporary folder, by a small function.

Every attack answers wrongly or not at all on its own merits: any point it
earns is undeserved. Each has its class (issue 13's numbering, and issue 18
for what breaks a read) and its expected outcome, held by
tests/redteam/corpus.py's ``assert_outcome``:
  max_points: the most it may score; status: the result's status;
  reason: a substring of the result's reason.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT
from grader.release.common import answer_cell_id

EXERCISE_FOLDER, MODULE, GRADE_ID = "01_softmax", "softmax.py", "ex01_answer"
REFERENCE = (REPO_ROOT / "solutions" / EXERCISE_FOLDER / MODULE).read_bytes()
WRONG = b"import torch\n\ndef softmax(x, dim=-1):\n    return torch.zeros_like(x)\n"
SPARSE_BYTES = 600 << 20
ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Attack:
    name: str
    klass: str                                  # "links", "archives", "reads", "sources", "names"
    build: Callable[[Path, Path], None]         # (the submissions folder, a scratch folder outside it)
    expected: dict = field(default_factory=dict)
    needs_root: bool = False                    # building it needs root (a device node)
    folder_name: str | None = None              # the entry's name when it is not the attack's name


def unreadable(reason: str) -> dict:
    return {"max_points": 0, "status": "unreadable", "reason": reason}


def notebook(source: bytes) -> bytes:
    """A course notebook for exercise 01 whose answer cell holds ``source``."""
    cell = {"cell_type": "code", "source": source.decode(), "outputs": [], "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": GRADE_ID, "solution": True, "grade": False}}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}).encode()


def _exercise(entry: Path) -> Path:
    folder = entry / EXERCISE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write_zip(path: Path, *members: tuple[str | zipfile.ZipInfo, bytes],
               compression: int = zipfile.ZIP_DEFLATED) -> None:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members:
            zf.writestr(name, data)


# --- class 1: links and special files, wherever they are ---------------------------------------

def exercise_folder_links_to_solutions(subs: Path, scratch: Path) -> None:
    (subs / "l01").mkdir()
    os.symlink(REPO_ROOT / "solutions" / EXERCISE_FOLDER, subs / "l01" / EXERCISE_FOLDER)


def student_folder_is_a_link(subs: Path, scratch: Path) -> None:
    _exercise(scratch / "elsewhere").joinpath(MODULE).write_bytes(REFERENCE)
    os.symlink(scratch / "elsewhere", subs / "l02")


def module_links_to_passwd(subs: Path, scratch: Path) -> None:
    os.symlink("/etc/passwd", _exercise(subs / "l03") / MODULE)


def checkout_exercises_links_to_solutions(subs: Path, scratch: Path) -> None:
    (subs / "l04").mkdir()
    os.symlink(REPO_ROOT / "solutions", subs / "l04" / "exercises")


def module_hard_links_a_reference(subs: Path, scratch: Path) -> None:
    copy = scratch / "reference.py"   # a hard link needs one filesystem: a copy of the reference beside
    copy.write_bytes(REFERENCE)
    os.link(copy, _exercise(subs / "l05") / MODULE)


def module_is_a_fifo(subs: Path, scratch: Path) -> None:
    os.mkfifo(_exercise(subs / "l06") / MODULE)


def module_is_a_socket(subs: Path, scratch: Path) -> None:
    folder = _exercise(subs / "l07")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    os.chdir(folder)   # a relative name: AF_UNIX paths are limited to 108 bytes
    try:
        server.bind(MODULE)
    finally:
        os.chdir(cwd)
        server.close()   # the socket file stays


def fifo_beside_a_correct_module(subs: Path, scratch: Path) -> None:
    _exercise(subs / "l08").joinpath(MODULE).write_bytes(REFERENCE)
    (subs / "l08" / "notes").mkdir()
    os.mkfifo(subs / "l08" / "notes" / "read-me-and-hang")


def nbgrader_notebook_links_outside(subs: Path, scratch: Path) -> None:
    (scratch / "answers.ipynb").write_bytes(notebook(REFERENCE))
    (subs / "l09" / "attention").mkdir(parents=True)
    os.symlink(scratch / "answers.ipynb", subs / "l09" / "attention" / f"{EXERCISE_FOLDER}.ipynb")


def module_is_a_device(subs: Path, scratch: Path) -> None:
    os.mknod(_exercise(subs / "l10") / MODULE, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers


def module_link_climbs_out_relatively(subs: Path, scratch: Path) -> None:
    os.symlink("../../../" + "../" * 8 + "etc/hostname", _exercise(subs / "l11") / MODULE)


# --- class 2: archives that are malformed, hostile or lie ---------------------------------------

def zip_member_is_a_link(subs: Path, scratch: Path) -> None:
    info = zipfile.ZipInfo(f"{EXERCISE_FOLDER}/{MODULE}")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    _write_zip(subs / "z01.zip", (info, str(REPO_ROOT / "solutions" / EXERCISE_FOLDER / MODULE).encode()))


def zip_member_climbs_out(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z02.zip", (f"../../{EXERCISE_FOLDER}/{MODULE}", WRONG), (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))


def _patch_headers(path: Path, local_offset: int, central_offset: int, value: int) -> None:
    """Set a 2-byte field of every member's local and central header (zipfile
    itself writes only what it can read)."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = 0
        while (start := data.find(signature, start)) != -1:
            data[start + offset:start + offset + 2] = value.to_bytes(2, "little")
            start += 4
    path.write_bytes(bytes(data))


def zip_member_is_encrypted(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z03.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG), compression=zipfile.ZIP_STORED)
    _patch_headers(subs / "z03.zip", 6, 8, 0x1)   # general purpose flag bit 0: "encrypted"


def zip_unknown_compression(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z04.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG), compression=zipfile.ZIP_STORED)
    _patch_headers(subs / "z04.zip", 8, 10, 99)   # compression method 99: none the grader knows


def zip_corrupt_deflate(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z05.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG * 50))
    data = bytearray((subs / "z05.zip").read_bytes())
    body = data.find(MODULE.encode()) + len(MODULE) + 4   # inside the compressed stream
    data[body:body + 16] = b"\xff" * 16
    (subs / "z05.zip").write_bytes(bytes(data))


def zip_bomb_by_ratio(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z06.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG), ("padding.bin", b"\0" * (40 << 20)))


def zip_file_and_folder_of_one_name(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z07.zip", (EXERCISE_FOLDER, b"a file"), (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))


def zip_name_longer_than_255_bytes(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z08.zip", ("n" * 300 + ".py", b"x = 1\n"), (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))


def zip_member_is_a_fifo(subs: Path, scratch: Path) -> None:
    info = zipfile.ZipInfo(f"{EXERCISE_FOLDER}/{MODULE}")
    info.external_attr = (stat.S_IFIFO | 0o644) << 16
    _write_zip(subs / "z09.zip", (info, b""))


def zip_with_too_many_members(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z10.zip", *((f"f/{i}", b"") for i in range(20_001)), compression=zipfile.ZIP_STORED)


def zip_two_members_of_one_name(subs: Path, scratch: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # zipfile warns about the duplicate: that is the attack
        _write_zip(subs / "z11.zip", (f"{EXERCISE_FOLDER}/{MODULE}", REFERENCE), (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))


def zip_that_is_a_link(subs: Path, scratch: Path) -> None:
    _write_zip(scratch / "good.zip", (f"{EXERCISE_FOLDER}/{MODULE}", REFERENCE))
    os.symlink(scratch / "good.zip", subs / "z12.zip")


def zip_of_600_mib(subs: Path, scratch: Path) -> None:
    _write_zip(subs / "z13.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))
    with open(subs / "z13.zip", "r+b") as fh:   # sparse padding before the zip's own bytes would be read
        data = fh.read()
        fh.seek(0)
        fh.truncate(SPARSE_BYTES)
        fh.seek(SPARSE_BYTES - len(data))
        fh.write(data)


# --- reads that fail or would never end: modes, sizes -----------------------------------------

def module_mode_000(subs: Path, scratch: Path) -> None:
    module = _exercise(subs / "r01") / MODULE
    module.write_bytes(WRONG)
    module.chmod(0)


def exercise_folder_mode_000(subs: Path, scratch: Path) -> None:
    folder = _exercise(subs / "r02")
    (folder / MODULE).write_bytes(WRONG)
    folder.chmod(0)


def sparse_600_mib_module(subs: Path, scratch: Path) -> None:
    with open(_exercise(subs / "r03") / MODULE, "wb") as fh:
        fh.truncate(SPARSE_BYTES)   # sparse: costs no disk, and must cost no memory either


def sparse_600_mib_notebook(subs: Path, scratch: Path) -> None:
    (subs / "r04").mkdir()
    with open(subs / "r04" / f"{EXERCISE_FOLDER}.ipynb", "wb") as fh:
        fh.write(notebook(WRONG)[:-1])
        fh.truncate(SPARSE_BYTES)


def folder_nested_too_deep(subs: Path, scratch: Path) -> None:
    deep = subs / "r05"
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    _exercise(subs / "r05").joinpath(MODULE).write_bytes(WRONG)


# --- class 3: one student, two sources --------------------------------------------------------

def folder_and_zip_of_one_student(subs: Path, scratch: Path) -> None:
    _exercise(subs / "t01").joinpath(MODULE).write_bytes(REFERENCE)
    _write_zip(subs / "t01.zip", (f"{EXERCISE_FOLDER}/{MODULE}", WRONG))


def folder_and_upper_case_zip(subs: Path, scratch: Path) -> None:
    _exercise(subs / "t02").joinpath(MODULE).write_bytes(WRONG)
    _write_zip(subs / "t02.ZIP", (f"{EXERCISE_FOLDER}/{MODULE}", REFERENCE))


# --- class 7: folder names that attack the instructor's terminal -------------------------------

def _named(name: str) -> Callable[[Path, Path], None]:
    def build(subs: Path, scratch: Path) -> None:
        _exercise(subs / name).joinpath(MODULE).write_bytes(REFERENCE)
    return build


OSC52 = "n01\x1b]52;c;cm0gLXJmIH4=\x07"           # writes the instructor's clipboard
CURSOR = "n02\x1b[2J\x1b[1;1Hgraded 10 of 10\x1b[K"   # clears the screen, prints a fake line
MARKUP = "[bold red]n03[blink][link=https:evil.example]y"   # no "/": a folder name cannot hold one
CONTROL = "n04\rcarriage\x08\x7f"
TOO_LONG = "n05" + "x" * 70
BIDI = "n06\u202eexe.py"

ATTACKS = [
    Attack("l01", "links", exercise_folder_links_to_solutions, unreadable("symbolic link")),
    Attack("l02", "links", student_folder_is_a_link, unreadable("symbolic link")),
    Attack("l03", "links", module_links_to_passwd, unreadable("symbolic link")),
    Attack("l04", "links", checkout_exercises_links_to_solutions, unreadable("symbolic link")),
    Attack("l05", "links", module_hard_links_a_reference, unreadable("hard link")),
    Attack("l06", "links", module_is_a_fifo, unreadable("named pipe")),
    Attack("l07", "links", module_is_a_socket, unreadable("socket")),
    Attack("l08", "links", fifo_beside_a_correct_module, unreadable("named pipe")),
    Attack("l09", "links", nbgrader_notebook_links_outside, unreadable("symbolic link")),
    Attack("l10", "links", module_is_a_device, unreadable("device"), needs_root=True),
    Attack("l11", "links", module_link_climbs_out_relatively, unreadable("symbolic link")),
    Attack("z01", "archives", zip_member_is_a_link, unreadable("symbolic link")),
    Attack("z02", "archives", zip_member_climbs_out, unreadable("unsafe path")),
    Attack("z03", "archives", zip_member_is_encrypted, unreadable("encrypted")),
    Attack("z04", "archives", zip_unknown_compression, unreadable("compression method 99")),
    Attack("z05", "archives", zip_corrupt_deflate, unreadable("not a valid zip file")),
    Attack("z06", "archives", zip_bomb_by_ratio, unreadable("zip bomb")),
    Attack("z07", "archives", zip_file_and_folder_of_one_name, unreadable("a file and a folder of the same name")),
    Attack("z08", "archives", zip_name_longer_than_255_bytes, unreadable("longer than 255 bytes")),
    Attack("z09", "archives", zip_member_is_a_fifo, unreadable("named pipe")),
    Attack("z10", "archives", zip_with_too_many_members, unreadable("20001 files")),
    Attack("z11", "archives", zip_two_members_of_one_name, unreadable("two files named")),
    Attack("z12", "archives", zip_that_is_a_link, unreadable("symbolic link")),
    Attack("z13", "archives", zip_of_600_mib, unreadable("the .zip is 600 MiB")),
    # As root, mode 000 bites nothing: the file is read and graded (wrong, 0 points).
    Attack("r01", "reads", module_mode_000,
           {"max_points": 0, "status": "graded"} if ROOT else unreadable("permission denied")),
    Attack("r02", "reads", exercise_folder_mode_000,
           {"max_points": 0, "status": "graded"} if ROOT else unreadable("permission denied")),
    Attack("r03", "reads", sparse_600_mib_module, unreadable("at most 1024 KiB")),
    Attack("r04", "reads", sparse_600_mib_notebook, unreadable("at most 16 MiB")),
    Attack("r05", "reads", folder_nested_too_deep, unreadable("deep")),
    Attack("t01", "sources", folder_and_zip_of_one_student, unreadable("two submissions: t01/ and t01.zip; hand in one")),
    Attack("t02", "sources", folder_and_upper_case_zip, unreadable("two submissions")),
    *(Attack(f"n0{i}", "names", _named(name), unreadable("not a usable student id"), folder_name=name)
      for i, name in enumerate((OSC52, CURSOR, MARKUP, CONTROL, TOO_LONG, BIDI), start=1)),
]
