"""Namespaces for the child: no network, and a filesystem view that holds
only the allow-list.

``enter`` unshares the network, mount and IPC namespaces (plus a user
namespace with an identity map when not root, which is what lets an
ordinary user do it). ``build_base`` then builds a new root in a tmpfs and
bind-mounts each readable path read-only at its own path; ``finish_view``
adds a read-only *copy* of the module's folder and a size-limited tmpfs
scratch at theirs, and pivots into it: ``solutions/``, ``grader/``, the gradebook and every
other path are simply absent. The view's directories are tmpfs directories
(mode 0755), which also fixes the 0700 ``/root`` that holds the pyenv
interpreter when the child drops to an unprivileged uid (research §2).
"""
from __future__ import annotations

import os
import stat

from grader.sandbox import syscalls
from grader.sandbox.syscalls import MS_BIND, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT

SNAPSHOT_MAX_FILES = 2000
SNAPSHOT_MAX_MB = 64
# statvfs flag -> mount flag; a user namespace may not change these on a bind
# (they are "locked"), so a read-only remount must repeat them.
_LOCKED = {1024: 1024, 2048: 2048, 4096: 1 << 21, 8: 8}  # NOATIME, NODIRATIME, RELATIME, NOEXEC
_MS_STRICTATIME = 1 << 24


class SnapshotError(Exception):
    """The module's folder could not be copied (too large, unreadable)."""


def enter(as_root: bool) -> tuple[bool, bool, str]:
    """Unshare; returns (network cut, private mount namespace, note)."""
    base = syscalls.CLONE_NEWNET | syscalls.CLONE_NEWNS | syscalls.CLONE_NEWIPC
    if as_root:
        syscalls.unshare(base)
        return True, True, "net, mount, ipc"
    uid, gid = os.getuid(), os.getgid()
    syscalls.unshare(base | syscalls.CLONE_NEWUSER)
    # Identity maps: files keep their owners; "deny" must precede gid_map.
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return True, True, "user (identity map), net, mount, ipc"


def build_base(root: str, read: list[str], devices: list[str]) -> None:
    """Stage 1, before the run is known (in the spare child): a tmpfs on
    ``root`` holding every readable path, bind-mounted read-only at its own
    path, and the device files. Needs CAP_SYS_ADMIN over the mount
    namespace: root, or the fresh user namespace."""
    syscalls.mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing leaks back to the host
    syscalls.mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    for path in sorted(set(read), key=len):
        _bind_readonly(root, path)
    for dev in devices:
        if os.path.exists(dev):
            syscalls.mount(dev, _mountpoint(root, dev, is_dir=False), None, MS_BIND)


def finish_view(root: str, module_dir: str, scratch: str, owner: tuple[int, int], scratch_mb: int) -> int:
    """Stage 2, for one run: a read-only copy of the module's folder and a
    tmpfs scratch, both owned by ``owner``; then pivot into ``root`` and
    make it read-only. Returns the number of files copied."""
    uid, gid = owner
    target = _mountpoint(root, module_dir, is_dir=True)
    syscalls.mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={SNAPSHOT_MAX_MB}m,nr_inodes={SNAPSHOT_MAX_FILES + 16},mode=0755,uid={uid},gid={gid}")
    copied = _snapshot(module_dir, target, uid, gid)
    syscalls.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    target = _mountpoint(root, scratch, is_dir=True)
    syscalls.mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={scratch_mb}m,nr_inodes=1000,mode=0700,uid={uid},gid={gid}")
    old = os.path.join(root, ".old-root")
    os.mkdir(old)
    syscalls.syscall("pivot_root", root.encode(), old.encode())
    os.chdir("/")
    syscalls.umount2("/.old-root", syscalls.MNT_DETACH)
    os.rmdir("/.old-root")
    syscalls.mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return copied


def _mountpoint(new: str, path: str, is_dir: bool) -> str:
    """Create ``path`` inside the new root (directory or empty file)."""
    target = new + path
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    return target


def _bind_readonly(new: str, path: str) -> None:
    """Bind ``path`` at the same place in the new root, read-only; symlinks
    on the way (``/lib -> usr/lib``) are recreated as symlinks."""
    if not os.path.lexists(path):
        return
    _mirror_symlinks(new, path)
    real = os.path.realpath(path)
    target = _mountpoint(new, real, is_dir=os.path.isdir(real))
    syscalls.mount(real, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    f_flag = os.statvfs(real).f_flag
    for st_flag, ms_flag in _LOCKED.items():
        if f_flag & st_flag:
            flags |= ms_flag
    if not f_flag & (1024 | 4096):
        flags |= _MS_STRICTATIME
    syscalls.mount(None, target, None, flags)


def _mirror_symlinks(new: str, path: str) -> None:
    """For every symlink among ``path``'s ancestors (or itself), create the
    same symlink in the new root, so both spellings of the path work."""
    parts = path.strip("/").split("/")
    current = ""
    for part in parts:
        current = f"{current}/{part}"
        if os.path.islink(current):
            link = new + current
            if not os.path.lexists(link):
                os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
                os.symlink(os.readlink(current), link)
            current = os.path.realpath(current)


def _snapshot(source: str, target: str, uid: int, gid: int) -> int:
    """Copy ``source`` into ``target``: regular files and folders, symlinks
    recreated as symlinks (never followed: a link to a protected file stays
    a dangling link in the view). Files 0444, folders 0555."""
    count, size = 0, 0
    stack = [(source, target)]
    while stack:
        src, dst = stack.pop()
        try:
            entries = list(os.scandir(src))
        except OSError as exc:
            raise SnapshotError(f"cannot read {src}: {exc.strerror}") from None
        for entry in entries:
            count += 1
            if count > SNAPSHOT_MAX_FILES:
                raise SnapshotError(f"the module's folder has more than {SNAPSHOT_MAX_FILES} files")
            out = os.path.join(dst, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), out)
                os.lchown(out, uid, gid)
            elif entry.is_dir(follow_symlinks=False):
                os.mkdir(out, 0o755)
                stack.append((entry.path, out))
            elif entry.is_file(follow_symlinks=False):
                size += _copy_file(entry.path, out, SNAPSHOT_MAX_MB * 2**20 - size)
                os.chown(out, uid, gid)
                os.chmod(out, 0o444)
    for dirpath, dirnames, _ in os.walk(target):
        for name in dirnames:
            os.chown(os.path.join(dirpath, name), uid, gid)
            os.chmod(os.path.join(dirpath, name), 0o555)
    return count


def _copy_file(src: str, dst: str, budget: int) -> int:
    # O_NONBLOCK: a FIFO swapped in for a file must not hang the copy.
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd_in).st_mode):
            return 0
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        copied = 0
        try:
            while chunk := os.read(fd_in, 1 << 20):
                copied += len(chunk)
                if copied > budget:
                    raise SnapshotError(f"the module's folder is larger than {SNAPSHOT_MAX_MB} MiB")
                os.write(fd_out, chunk)
        finally:
            os.close(fd_out)
        return copied
    finally:
        os.close(fd_in)
