"""Files that are either fully written or not there at all."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Temp file in the same folder, fsync, rename over ``path``, fsync the folder.

    The temp file is written without a name where the filesystem allows (O_TMPFILE) and given
    one only to be renamed: a process killed while it writes or fsyncs leaves nothing behind;
    only a kill between those two calls leaves a temp file (``leftover_temps``).

    ``durable=False`` skips both fsyncs (each a wait for the disk): for caches and notes whose
    loss after a power cut costs only time, never a package.
    """

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_file(path, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
            if tmp is None:
                tmp = _named(handle.fileno(), path)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def _temp_file(path: Path, mode: int) -> tuple[int, str | None]:
    """An open file for ``path``'s new bytes, in its folder, and its name: None while it has
    none (O_TMPFILE: Linux, on most local filesystems), else a temp file's (mkstemp)."""
    flags = getattr(os, "O_TMPFILE", 0)
    if flags and os.path.isdir("/proc/self/fd"):  # where it is named from
        try:
            return os.open(path.parent, flags | os.O_WRONLY | os.O_CLOEXEC, mode), None
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def _named(fd: int, path: Path) -> str:
    """Give the unnamed file ``fd`` a temp file's name beside ``path`` (as mkstemp names it)."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(100):
            name = f".{path.name}.{''.join(random.choices(_TEMP_ALPHABET, k=8))}.tmp"
            try:
                # linkat with AT_SYMLINK_FOLLOW (a folder's fd makes os.link call linkat), as
                # open(2) gives an O_TMPFILE file a name
                os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=folder, follow_symlinks=True)
            except FileExistsError:
                continue
            return os.path.join(path.parent, name)
    finally:
        os.close(folder)
    raise FileExistsError(errno.EEXIST, "no unused temp file name", str(path.parent))


# tempfile.mkstemp's names: the prefix, eight of these characters, the suffix
_TEMP_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"
_TEMP_CHARACTERS = frozenset(_TEMP_ALPHABET)


def leftover_temps(path: Path) -> list[Path]:
    """The temp files ``write_atomically(path, ...)`` left when its process was killed between
    writing one and renaming it: regular files named exactly as it names them, nothing else."""
    import stat

    head, tail = f".{path.name}.", ".tmp"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    found = []
    for name in names:
        middle = name[len(head) : -len(tail)]
        if not (name.startswith(head) and name.endswith(tail) and len(middle) == 8):
            continue
        if not set(middle) <= _TEMP_CHARACTERS:
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path.parent / name).st_mode):
                found.append(path.parent / name)
    return sorted(found)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
