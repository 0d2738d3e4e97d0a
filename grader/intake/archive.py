"""A student's zip, read into the same index as a folder, with every
member checked before a byte is unpacked.

Refused, each as the student's own ``unreadable`` reason: member links
and other non-plain kinds (the Unix mode in ``external_attr``), paths that
are absolute or climb out with ``..``, names longer than 255 bytes, two
members of one name or a file and a folder of one name, encrypted members,
compression other than stored or deflate, more members than the limit, a
declared size over the limit, a compression ratio that only a zip bomb
has. Unpacking is bounded by the declared sizes (Python's ``zipfile``
never yields more than a member declares and checks its CRC at the end),
and any error of the archive library, whatever it is, is one of these
reasons.
"""
from __future__ import annotations

import os
import stat
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from grader.intake.errors import Unreadable, plain_path
from grader.intake.tree import Blob, IntakeLimits, Parts, SubmissionTree, kind_refused

SUPPORTED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
RATIO_FLOOR_BYTES = 1 << 20   # small members may compress as well as they like


def _member_parts(name: str, limits: IntakeLimits) -> Parts:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise Unreadable("the zip holds an unsafe path (absolute, or climbing out with ..); zip the folder itself")
    parts = tuple(p for p in path.parts if p != ".")
    if any(len(p.encode("utf-8", "surrogateescape")) > limits.name_bytes for p in parts):
        raise Unreadable(f"the zip holds a name longer than {limits.name_bytes} bytes")
    if any("\0" in p for p in parts):
        raise Unreadable("the zip holds a name with a NUL byte")
    return parts


def _check_member(info: zipfile.ZipInfo, parts: Parts, limits: IntakeLimits) -> None:
    mode = info.external_attr >> 16
    if stat.S_IFMT(mode):
        refused = kind_refused(mode, parts)
        if refused is not None:
            raise refused
    if info.flag_bits & 0x1:
        raise Unreadable(f"the zip holds an encrypted file ({plain_path(parts)}); hand in a zip without a password")
    if info.compress_type not in SUPPORTED_COMPRESSION:
        raise Unreadable(f"the zip uses compression method {int(info.compress_type)}, which the grader does "
                         "not read; make a plain zip (stored or deflate)")
    if info.file_size > RATIO_FLOOR_BYTES and info.file_size > limits.ratio * max(info.compress_size, 1):
        raise Unreadable(f"the zip holds a file that unpacks to {info.file_size // max(info.compress_size, 1)} "
                         "times its packed size (a zip bomb?)")


def _index(members: list[zipfile.ZipInfo], limits: IntakeLimits) -> tuple[SubmissionTree, list]:
    """Every member checked and placed: the tree (sizes only), and the
    regular files with their paths."""
    if len(members) > limits.entries:
        raise Unreadable(f"the zip holds {len(members)} files (at most {limits.entries})")
    if sum(m.file_size for m in members) > limits.submission_bytes:
        raise Unreadable(f"the zip unpacks to more than {limits.submission_bytes >> 20} MiB")
    tree = SubmissionTree()
    files: list[tuple[zipfile.ZipInfo, Parts]] = []
    for info in members:
        parts = _member_parts(info.filename, limits)
        _check_member(info, parts, limits)
        if not parts:
            continue
        if len(parts) > limits.depth + 1:
            raise Unreadable(f"the zip has folders more than {limits.depth} deep")
        folders = [parts[:i] for i in range(1, len(parts) if not info.is_dir() else len(parts) + 1)]
        for folder in folders:
            if folder in tree.files:
                raise Unreadable(f"the zip holds a file and a folder of the same name ({plain_path(folder)})")
            tree.dirs.add(folder)
        if info.is_dir():
            continue
        if parts in tree.dirs:
            raise Unreadable(f"the zip holds a file and a folder of the same name ({plain_path(parts)})")
        if parts in tree.files:
            raise Unreadable(f"the zip holds two files named {plain_path(parts)}")
        tree.files[parts] = Blob(info.file_size)
        files.append((info, parts))
    return tree, files


def _unpacked(zf: zipfile.ZipFile, info: zipfile.ZipInfo, keep: bool):
    """The member's bytes (``None`` when not kept), reading no more than it declares."""
    chunks, total = [], 0
    with zf.open(info) as member:
        while chunk := member.read(1 << 20):
            total += len(chunk)
            if total > info.file_size:   # zipfile stops at the declared size; never trust it blindly
                raise Unreadable(f"the zip holds a file larger than it declares ({plain_path(info.filename)})")
            if keep:
                chunks.append(chunk)
    return b"".join(chunks) if keep else None


def _library_error(exc: Exception) -> Unreadable:
    if isinstance(exc, Unreadable):
        return exc
    if isinstance(exc, zipfile.BadZipFile):
        return Unreadable("not a valid zip file (damaged, or not a zip at all); make the zip again")
    if isinstance(exc, (zlib.error, EOFError)):
        return Unreadable("not a valid zip file: a compressed file inside is damaged; make the zip again")
    if isinstance(exc, NotImplementedError):
        return Unreadable("the zip uses a feature the grader does not read; make a plain zip (stored or deflate)")
    if isinstance(exc, PermissionError):
        return Unreadable("the zip cannot be read (permission denied); hand in a file everyone can read")
    return Unreadable(f"the zip cannot be read ({type(exc).__name__}); make the zip again")


def _open(archive: Path, limits: IntakeLimits) -> zipfile.ZipFile:
    info = os.lstat(archive)
    if stat.S_ISLNK(info.st_mode):
        raise Unreadable("the .zip is a symbolic link: links are not followed; hand in the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise kind_refused(info.st_mode, (archive.name,)) or Unreadable("the .zip is not a plain file")
    if info.st_nlink > 1:
        raise Unreadable("the .zip is a hard link: hand in a plain copy")
    if info.st_size > 2 * limits.submission_bytes:   # stored members are as large packed as unpacked
        raise Unreadable(f"the .zip is {info.st_size >> 20} MiB (at most {2 * limits.submission_bytes >> 20} MiB)")
    fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(fd, "rb")
    try:
        return zipfile.ZipFile(handle)
    except BaseException:
        handle.close()
        raise


def read_zip(archive: Path, wanted: Mapping[str, int], limits: IntakeLimits = IntakeLimits()) -> SubmissionTree:
    """The index of ``archive``; members whose file name is in ``wanted`` are
    kept when within their cap. Every member is unpacked once (in memory,
    bounded) so that a damaged one is found here, not later."""
    try:
        with _open(archive, limits) as zf:
            tree, files = _index(zf.infolist(), limits)
            for info, parts in files:
                cap = wanted.get(parts[-1])
                blob = tree.files[parts]
                keep = cap is not None and info.file_size <= cap
                blob.too_large = cap is not None and not keep
                blob.data = _unpacked(zf, info, keep)
            return tree
    except Exception as exc:  # noqa: BLE001 - any error of the archive is this student's own
        raise _library_error(exc) from None


def unpack_zip_checked(archive: Path, target: Path, limits: IntakeLimits = IntakeLimits()) -> None:
    """Unpack ``archive`` into ``target`` (an exam's answers and files), with
    the same checks as :func:`read_zip`."""
    try:
        with _open(archive, limits) as zf:
            tree, files = _index(zf.infolist(), limits)
            for folder in sorted(tree.dirs, key=len):
                target.joinpath(*folder).mkdir(parents=True, exist_ok=True)
            for info, parts in files:
                target.joinpath(*parts).write_bytes(_unpacked(zf, info, True))
    except Exception as exc:  # noqa: BLE001 - any error of the archive is this student's own
        raise _library_error(exc) from None
