"""A student's folder, read into an index without following anything.

The walk opens every folder relative to its parent's descriptor with
``O_NOFOLLOW`` and looks at every entry with ``lstat``: a symbolic link,
a hard link (a regular file with more than one name), a FIFO, a socket or
a device anywhere in the walked tree makes the whole submission
unreadable. A file is read only when the grader wants it (a module or
notebook name), only after its size is checked, through a descriptor
opened with ``O_NOFOLLOW | O_NONBLOCK`` whose ``fstat`` must still show the
same plain file. Hidden folders (``.git``, ``.ipynb_checkpoints``) and
caches are not walked: nothing in them is ever read.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

from grader.intake.errors import Unreadable, plain_path

Parts = tuple[str, ...]
# Never walked, never searched: caches, environments, macOS resource forks.
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "__MACOSX"})
_KINDS = {stat.S_IFIFO: "named pipe (FIFO)", stat.S_IFSOCK: "socket", stat.S_IFCHR: "device",
          stat.S_IFBLK: "device"}


@dataclass(frozen=True)
class IntakeLimits:
    """What one submission may hold. Per-file caps are the caller's (``wanted``)."""
    submission_bytes: int = 64 << 20   # the files kept (read, or unpacked from a zip), in all
    entries: int = 20_000              # files and folders walked, or zip members
    depth: int = 24                    # folders inside folders
    name_bytes: int = 255              # one name (a path component), as Linux allows
    ratio: int = 200                   # a zip member's unpacked size over its compressed size


@dataclass
class Blob:
    """One plain file: its size, and its bytes when the grader wanted them
    and they were within the cap (``None`` otherwise; ``too_large`` says which)."""
    size: int
    data: bytes | None = None
    too_large: bool = False


@dataclass
class SubmissionTree:
    """The plain files and folders of one submission, by path parts."""
    files: dict[Parts, Blob] = field(default_factory=dict)
    dirs: set[Parts] = field(default_factory=lambda: {()})

    def is_dir(self, parts: Parts) -> bool:
        return parts in self.dirs

    def file(self, parts: Parts) -> Blob | None:
        return self.files.get(parts)

    def subdirs(self, parts: Parts = ()) -> list[str]:
        """Names of the folders directly inside ``parts``, sorted."""
        return sorted(d[-1] for d in self.dirs if len(d) == len(parts) + 1 and d[:-1] == parts)


def kind_refused(mode: int, where: Parts) -> Unreadable | None:
    """The refusal for an entry that is no plain file or folder (``None`` if it is one)."""
    if stat.S_ISLNK(mode):
        return Unreadable(f"the submission holds a symbolic link ({plain_path(where)}): links are not "
                          "followed; hand in the files themselves")
    kind = _KINDS.get(stat.S_IFMT(mode))
    if kind is None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = "special file"
    if kind is not None:
        return Unreadable(f"the submission holds a {kind} ({plain_path(where)}); hand in plain files only")
    return None


def _os_error(exc: OSError, where: Parts) -> Unreadable:
    if isinstance(exc, PermissionError):
        return Unreadable(f"part of the submission cannot be read ({plain_path(where) if where else 'its folder'}: "
                          "permission denied); hand in files everyone can read")
    if exc.errno == errno.ELOOP:   # O_NOFOLLOW met a link that appeared after the walk looked
        return kind_refused(stat.S_IFLNK, where)  # type: ignore[return-value]
    name = errno.errorcode.get(exc.errno or 0, "OSError")
    return Unreadable(f"part of the submission cannot be read ({plain_path(where) if where else 'its folder'}: {name})")


def _read_bounded(fd: int, cap: int) -> bytes:
    chunks, total = [], 0
    while total <= cap:
        chunk = os.read(fd, min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class _Walk:
    def __init__(self, wanted: Mapping[str, int], limits: IntakeLimits):
        self.wanted, self.limits = wanted, limits
        self.tree = SubmissionTree()
        self.entries = 0
        self.kept = 0

    def folder(self, dir_fd: int, parts: Parts) -> None:
        if len(parts) > self.limits.depth:
            raise Unreadable(f"the submission has folders more than {self.limits.depth} deep")
        try:
            with os.scandir(dir_fd) as listing:
                names = sorted(entry.name for entry in listing)
        except OSError as exc:
            raise _os_error(exc, parts) from None
        for name in names:
            self.entry(dir_fd, parts + (name,))

    def entry(self, dir_fd: int, parts: Parts) -> None:
        name = parts[-1]
        self.entries += 1
        if self.entries > self.limits.entries:
            raise Unreadable(f"the submission holds more than {self.limits.entries} files and folders; "
                             "hand in the exercises only")
        if len(os.fsencode(name)) > self.limits.name_bytes:
            raise Unreadable(f"the submission holds a name longer than {self.limits.name_bytes} bytes")
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise _os_error(exc, parts) from None
        refused = kind_refused(info.st_mode, parts)
        if refused is not None:
            raise refused
        if stat.S_ISDIR(info.st_mode):
            if name.startswith(".") or name in SKIPPED_FOLDERS:
                return   # never read: not walked
            self.tree.dirs.add(parts)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError as exc:
                raise _os_error(exc, parts) from None
            try:
                self.folder(fd, parts)
            finally:
                os.close(fd)
            return
        if info.st_nlink > 1:
            raise Unreadable(f"the submission holds a hard link ({plain_path(parts)}): a file with a second name "
                             "elsewhere; hand in plain copies")
        blob = Blob(info.st_size)
        self.tree.files[parts] = blob
        cap = self.wanted.get(name)
        if cap is None:
            return
        if info.st_size > cap:
            blob.too_large = True
            return
        blob.data = self.read(dir_fd, parts, info, cap)
        blob.size = len(blob.data)
        blob.too_large = blob.size > cap
        if blob.too_large:
            blob.data = None

    def read(self, dir_fd: int, parts: Parts, seen: os.stat_result, cap: int) -> bytes:
        self.kept += seen.st_size
        if self.kept > self.limits.submission_bytes:
            raise Unreadable(f"the submission's files add up to more than {self.limits.submission_bytes >> 20} MiB")
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise _os_error(exc, parts) from None
        try:
            now = os.fstat(fd)
            # Whatever the name points at now must be the file the walk looked at.
            if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino) or not stat.S_ISREG(now.st_mode) \
                    or now.st_nlink > 1:
                raise Unreadable(f"part of the submission changed while it was read ({plain_path(parts)})")
            return _read_bounded(fd, cap)
        except OSError as exc:
            raise _os_error(exc, parts) from None
        finally:
            os.close(fd)


def read_folder(path: os.PathLike | str, wanted: Mapping[str, int],
                limits: IntakeLimits = IntakeLimits()) -> SubmissionTree:
    """The index of the folder ``path``; files named in ``wanted`` are read
    (when within their cap: file name -> most bytes).

    Raises :class:`Unreadable` when the folder is a link, holds anything
    that is no plain file or folder, or breaks a limit."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise _os_error(exc, ()) from None
    if stat.S_ISLNK(info.st_mode):
        raise Unreadable("the submission folder is a symbolic link: links are not followed; "
                         "hand in the folder itself")
    if not stat.S_ISDIR(info.st_mode):
        raise Unreadable("the submission is neither a folder nor a .zip")
    walk = _Walk(wanted, limits)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, ()) from None
    try:
        walk.folder(fd, ())
    finally:
        os.close(fd)
    return walk.tree
