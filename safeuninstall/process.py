"""The one way this tool runs a subprocess.

argv lists only (never a shell); the caller's virtualenv and PYTHONPATH do not leak into the
target; output is captured but bounded (head and tail kept); a timeout kills the child's whole
process group, grandchildren included.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from msgspec import Struct

# Kept per stream: the first and the last part. A probe that prints megabytes costs this much.
_HEAD_BYTES = 32 * 1024
_TAIL_BYTES = 32 * 1024

# Variables that would make a child act on another environment than the target: another
# interpreter's packages on sys.path, another install location for pip, code run at start-up.
# (pipx's _fix_subprocess_env drops PYTHONPATH and __PYVENV_LAUNCHER__ for the same reason.)
SCRUBBED_VARIABLES = (
    "VIRTUAL_ENV",  # set again to the target by the caller when the target is a venv
    "CONDA_PREFIX",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONSAFEPATH",
    "PYTHONEXECUTABLE",
    "__PYVENV_LAUNCHER__",
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_ROOT",
    "PIP_USER",
)


class Completed(Struct, frozen=True):
    """A finished subprocess: exit status, bounded output and wall time."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def output(self) -> str:
        """stdout and stderr as one text, for messages."""
        return "\n".join(part for part in (self.stdout.strip(), self.stderr.strip()) if part)


class _BoundedReader(threading.Thread):
    """Drains a pipe, keeping the first and last bytes and counting what was dropped."""

    def __init__(self, stream: IO[bytes], echo: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._echo = echo
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def run(self) -> None:
        # read1: hand on what the child wrote as soon as it wrote it, for live output under -v.
        while chunk := self._stream.read1(65536):  # type: ignore[attr-defined]
            if self._echo is not None:
                self._echo(self._decoder.decode(chunk))
            room = _HEAD_BYTES - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            self._tail += chunk
            excess = len(self._tail) - _TAIL_BYTES
            if excess > 0:
                del self._tail[:excess]
                self._dropped += excess
        self._stream.close()

    def text(self) -> str:
        head = self._head.decode(errors="replace")
        tail = self._tail.decode(errors="replace")
        if self._dropped:
            return f"{head}\n[... {self._dropped} bytes of output not kept ...]\n{tail}"
        return head + tail


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without SCRUBBED_VARIABLES: the base of every child's environment."""
    return {k: v for k, v in environ.items() if k not in SCRUBBED_VARIABLES}


class Watch(NamedTuple):
    """Who follows a child while it runs."""

    # receives the child as it starts, so that another thread can kill its group (``kill``)
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None
    # receives its output (both streams) as it comes, besides the bounded capture
    echo: Callable[[str], None] | None = None


_UNWATCHED = Watch()


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float | None = None,
    cwd: Path | None = None,
    watch: Watch = _UNWATCHED,
) -> Completed:
    """Run ``argv`` to completion. Raises FileNotFoundError/PermissionError if it can't start.

    The wait itself blocks in waitpid: a timer kills the group on timeout, so the end of the
    child is seen at once (Popen.wait(timeout) would poll, up to 50 ms late).
    """
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,  # its own process group, so a timeout can kill all of it
    )
    if watch.on_start is not None:
        watch.on_start(proc)
    assert proc.stdout is not None and proc.stderr is not None
    readers = [_BoundedReader(proc.stdout, watch.echo), _BoundedReader(proc.stderr, watch.echo)]
    for reader in readers:
        reader.start()
    timed_out = _wait(proc, timeout)
    # A child can leave a daemon behind that still holds the pipes: don't wait for it forever.
    for reader in readers:
        reader.join(timeout=5)
    if any(reader.is_alive() for reader in readers):
        kill(proc)
        for reader in readers:
            reader.join(timeout=5)
    return Completed(
        argv=tuple(argv),
        returncode=proc.returncode,
        stdout=readers[0].text(),
        stderr=readers[1].text(),
        seconds=time.monotonic() - started,
        timed_out=timed_out,
    )


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for ``proc``; kill its group after ``timeout`` or on an interrupt. True when it
    was killed for taking too long."""
    expired = threading.Event()
    timer = None
    if timeout is not None:

        def expire() -> None:
            expired.set()
            kill(proc)

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
    try:
        proc.wait()
    except BaseException:
        # Interrupted (Ctrl-C): don't leave the child running behind us.
        kill(proc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
    return expired.is_set()


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group (grandchildren too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
