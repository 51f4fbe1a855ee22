"""Reading a file that someone else controls: never more than a limit, never a wait on open.

Every file the tool reads from an environment (RECORD, METADATA, INSTALLER, direct_url.json)
or from the command line (``-r FILE``) may be anything: a FIFO, whose plain ``open`` blocks
until a writer comes; ``/dev/zero``, which a plain ``read()`` reads into memory without end
(and, being one C call that never gets EINTR, without running a signal handler); a RECORD of
gigabytes. Here a file is opened with ``O_NONBLOCK`` and read in chunks up to a limit, so an
interrupt is obeyed between two chunks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_CHUNK = 64 * 1024
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Unusable(OSError):
    """A file that is there but is not one the tool can use: too big, not a regular file,
    not what its format says. An OSError, as a file that cannot be read is: every caller
    treats the two alike. ``str()`` is the message, naming the file."""


def limit_text(count: int) -> str:
    """``16 MiB``, ``64 KiB``: a limit, for a message."""
    if count >= 1024 * 1024:
        return f"{count // (1024 * 1024)} MiB"
    return f"{count // 1024} KiB"


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file (a symbolic link to one too).

    Raises Unusable for a FIFO, a device or a socket, before reading a byte of it.
    """
    fd = os.open(path, _FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unusable(f"{path}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(
    path: str | Path, limit: int, *, regular_only: bool = True, follow_links: bool = True
) -> bytes:
    """The bytes of ``path``; Unusable if there are more than ``limit``.

    ``regular_only=False`` also reads a pipe, a FIFO or a character device (``<(cmd)``,
    ``/dev/stdin``), up to ``limit``. Its open does not wait for a writer: a FIFO that has
    none reads as empty. Its reads do wait for data, as ``cat`` would; Ctrl-C ends the wait.
    ``follow_links=False``: a symbolic link (as the last part of the path) is an OSError.
    """
    fd = os.open(path, _FLAGS if follow_links else _FLAGS | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            size = info.st_size
            if size > limit:
                raise Unusable(f"{path}: {size} bytes, over the limit of {limit_text(limit)}")
        elif regular_only:
            raise Unusable(f"{path}: not a regular file")
        else:
            os.set_blocking(fd, True)  # O_NONBLOCK was for the open only
        return read_fd(fd, limit, name=str(path))
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int, *, name: str) -> bytes:
    """Read ``fd`` to its end in chunks, at most ``limit`` bytes; Unusable beyond that."""
    chunks = []
    total = 0
    while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise Unusable(f"{name}: more than {limit_text(limit)}, the limit")
    return b"".join(chunks)
