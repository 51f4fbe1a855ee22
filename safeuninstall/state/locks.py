"""The locks an operation that changes something takes, and uv's.

1. The environment's own lock: one per environment, whatever ``--state-dir`` says, so that two
   runs on one environment with different state folders still take turns (see
   ``store.own_files`` for where it is).
2. Then the state folder's (``<state>/lock``): several environments may keep their snapshots
   in one folder, and what prune and the clean-up of half-made snapshots delete there must not
   be what a run on another environment is writing.

Both are filelock's flock, which the kernel drops when the holder dies: a lock of a dead process
is free. The order is always this one, so two runs never wait for each other in a circle.

uv's own lock, ``<venv>/.lock``, is uv's business while uv runs (the tool's own uv calls take
it); ``installer_lock`` takes it too while the tool itself writes into a venv (linking files
back from a stash, taking back a half-done restore), so that a uv started by someone else
meanwhile waits, as it would for another uv. It is never held while the tool runs uv.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from safeuninstall.base.errors import LockBusy, StateDirError

UV_LOCK = ".lock"  # uv's lock file in a venv (uv: PythonEnvironment::lock)


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
    import filelock  # deferred: only commands that change something lock (docs/performance.md)

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


def held_elsewhere(path: Path) -> bool:
    """Whether another process holds the lock ``path`` now: a look, not a wait (a shared lock
    tried and let go at once; filelock takes an exclusive one). A missing or unopenable file
    is no lock held. For a read-only command, which takes no lock, to tell an operation under
    way from one that died."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing lets go of the shared lock, if taken
    return False


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


@contextmanager
def installer_lock(
    venv: str | None, timeout: float, on_wait: Callable[[str], None] | None = None
) -> Iterator[str | None]:
    """uv's lock on ``venv``, for a block in which the tool itself writes into it.

    Yields None when it holds the lock (or there is none to take: an interpreter outside a venv
    has uv's lock in a temporary folder, under a hash of uv's own), else why not, as a note for
    the user: the block runs either way, since a restore must not fail for want of a lock.
    uv's file is created as uv creates it (mode 0666, so that any user's uv can open it) and
    locked through a read-only descriptor, never through a link; polled up to ``timeout`` s.
    """
    if venv is None:
        yield None
        return
    path = os.path.join(venv, UV_LOCK)
    try:
        fd = _open_uv_lock(path)
    except OSError as err:
        yield f"uv's lock {path} could not be taken ({err.strerror}); went on without it"
        return
    try:
        try:
            held = _flock(fd, timeout, path, on_wait)
        except OSError as err:
            held, why = False, f"uv's lock {path} could not be taken ({err.strerror})"
        else:
            why = f"uv's lock {path} was still held after {timeout:g} s"
        if not held:
            yield f"{why}; went on without it"
            return
        try:
            yield None
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_uv_lock(path: str) -> int:
    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o666)
    except FileExistsError:
        return os.open(path, os.O_RDONLY | nofollow)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # as uv leaves it, whatever the umask
    return fd


def _flock(fd: int, timeout: float, path: str, on_wait: Callable[[str], None] | None) -> bool:
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if not told and on_wait is not None:
            told = True
            on_wait(
                f"uv is changing this environment ({path} is locked); waiting up to {timeout:g} s"
            )
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # as filelock polls: flock has no timeout of its own
