"""The locks an operation that changes something takes.

1. The environment's own lock: one per environment, whatever ``--state-dir`` says, so that two
   runs on one environment with different state folders still take turns (see
   ``store.own_files`` for where it is).
2. Then the state folder's (``<state>/lock``): several environments may keep their snapshots
   in one folder, and what prune and the clean-up of half-made snapshots delete there must not
   be what a run on another environment is writing.

Both are filelock's flock, which the kernel drops when the holder dies: a lock of a dead process
is free. The order is always this one, so two runs never wait for each other in a circle.

uv's own lock, ``<venv>/.lock``, is uv's business: uv takes it while it changes the venv.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LockBusy, StateDirError


@contextmanager
def hold(
    path: Path,
    timeout: float,
    *,
    busy: str,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[bool]:
    """``path`` locked for the block; yields whether it had to wait.

    ``busy`` says who holds it (``another safe-uninstall operation is running on ...``): the
    message while waiting, and the error (LockBusy) after ``timeout`` seconds.
    """
    import filelock  # only commands that change something lock: 28.7 ms of import

    lock = filelock.FileLock(path, mode=0o600)
    waited = False
    try:
        try:
            lock.acquire(blocking=False)
        except filelock.Timeout:
            waited = True
            if timeout <= 0:
                raise
            if on_wait is not None:
                on_wait(f"{busy}; waiting up to {timeout:g} s for it")
            lock.acquire(timeout=timeout)
    except filelock.Timeout:
        raise LockBusy(f"{busy} (lock {path} still held after {timeout:g} s)") from None
    except OSError as err:  # a link or a folder where the lock file should be, permissions
        raise StateDirError(f"cannot lock {path}: {err.strerror or err}") from None
    try:
        yield waited
    finally:
        lock.release()


def create_lock_file(path: Path) -> None:
    """Create the lock file ``path`` if it is missing, usable by whoever may write to its folder
    (filelock opens it for writing): owned like the folder when root makes it in a user's venv,
    writable by the group when the folder is. Never follows a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return
    except OSError as err:
        raise StateDirError(f"cannot create the lock file {path}: {err.strerror}") from None
    try:
        folder = os.stat(path.parent)
        if folder.st_mode & stat.S_IWGRP:
            os.fchmod(fd, 0o660)
        if os.geteuid() == 0 and folder.st_uid != 0:
            os.fchown(fd, folder.st_uid, folder.st_gid)
    except OSError:
        pass  # then it is usable by its creator (and root), which is all that is lost
    finally:
        os.close(fd)
