"""Files that are either fully written or not there at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Temp file in the same folder, fsync, rename over ``path``, fsync the folder.

    ``durable=False`` skips both fsyncs (each a wait for the disk): for caches and notes whose
    loss after a power cut costs only time, never a package.
    """

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


# tempfile.mkstemp's names: the prefix, eight of these characters, the suffix
_TEMP_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


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
