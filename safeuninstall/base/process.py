"""The one way this tool runs a subprocess.

argv lists only (never a shell); the caller's virtualenv and PYTHONPATH do not leak into the
target; output is captured but bounded (head and tail kept); a timeout kills the child's whole
process group, grandchildren included; and once the child has ended, nothing it started is left
running, not even a daemon that left its process group and session (setsid).

How those are found: every child gets a variable whose name is unique to its run, and every
process it starts inherits it, at any depth, in any session, reparented or not. After the child
ends, the processes whose environment (/proc/PID/environ) holds that variable are killed. The
limit: a descendant that replaces its whole environment when it starts a program (``env -i``,
or a service manager starting it for the child) carries no variable and is not found; only a
cgroup would hold it. Such a process still can't keep the run waiting: once the child is gone
its pipes are read for at most ``_GRACE`` seconds more.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from msgspec import Struct

from safeuninstall.base import interrupts

# Kept per stream: the first and the last part. A probe that prints megabytes costs this much.
_HEAD_BYTES = 32 * 1024
_TAIL_BYTES = 32 * 1024

# How long the pipes are still read once the child and what it left behind are gone. Only a
# process that escaped the kill (see the module) can hold them open that long.
_GRACE = 1.0
# How long the processes a child left behind may take to die once killed.
_KILL_WAIT = 5.0

# The prefix of the variable that marks a run's processes (a leading "_": not a setting, which
# the configuration would take for a misspelt SAFE_UNINSTALL_ variable).
MARKER_PREFIX = "_SAFE_UNINSTALL_RUN_"

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


class _Capture:
    """One stream of the child: the first and last bytes kept, the rest counted."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._echo = echo
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> None:
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

    def text(self) -> str:
        head = self._head.decode(errors="replace")
        tail = self._tail.decode(errors="replace")
        if self._dropped:
            return f"{head}\n[... {self._dropped} bytes of output not kept ...]\n{tail}"
        return head + tail


class _Pump(threading.Thread):
    """Drains the child's pipes into their captures until each reaches its end, or until
    ``finish`` gives up on them: a process that escaped the kill may hold them open for ever,
    and a thread blocked in read() would not notice that they were closed."""

    def __init__(self, streams: Iterable[tuple[IO[bytes], _Capture]]) -> None:
        super().__init__(daemon=True)
        self._streams = {stream.fileno(): (stream, capture) for stream, capture in streams}
        self._wake_read, self._wake_write = os.pipe()

    def run(self) -> None:
        poller = select.poll()
        for fd in [*self._streams, self._wake_read]:
            poller.register(fd, select.POLLIN)
        reading = set(self._streams)
        while reading:
            for fd, _ in poller.poll():
                if fd == self._wake_read:
                    return
                # As soon as the child wrote it, for live output under -v.
                chunk = os.read(fd, 65536)
                if chunk:
                    self._streams[fd][1].feed(chunk)
                else:
                    poller.unregister(fd)
                    reading.discard(fd)

    def finish(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the ends of the pipes, then stop reading."""
        self.join(grace)
        if self.is_alive():
            os.write(self._wake_write, b"x")
            self.join()
        for stream, _ in self._streams.values():
            stream.close()
        os.close(self._wake_read)
        os.close(self._wake_write)


def new_marker() -> str:
    """A marker of its own for one run: what secrets.token_hex(8) returns (os.urandom), without
    importing secrets (hmac, hashlib and OpenSSL) on every command."""
    return MARKER_PREFIX + os.urandom(8).hex()


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without SCRUBBED_VARIABLES: the base of every child's environment."""
    return {k: v for k, v in environ.items() if k not in SCRUBBED_VARIABLES}


class Watch(NamedTuple):
    """Who follows a child while it runs."""

    # receives the child as it starts, so that another thread can kill its group (``kill``)
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None
    # receives its output (both streams) as it comes, besides the bounded capture
    echo: Callable[[str], None] | None = None
    # the variable that marks the child and all it starts (new_marker), when the caller chose
    # it, to find them later (a journal records it before the child starts); else one of its own
    marker: str | None = None


UNWATCHED = Watch()


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float | None = None,
    cwd: Path | None = None,
    watch: Watch = UNWATCHED,
) -> Completed:
    """Run ``argv`` to completion. Raises FileNotFoundError/PermissionError if it can't start.

    The wait itself blocks in waitpid: a timer kills the group on timeout, so the end of the
    child is seen at once (Popen.wait(timeout) would poll, up to 50 ms late). Whatever the
    child started is killed when it ends (see the module): a run lasts at most ``timeout``
    plus ``_GRACE``, and the time its leftovers take to die.
    """

    started = time.monotonic()
    marker = watch.marker or new_marker()
    pump = None
    proc = None
    # From the fork on: a Ctrl-C that comes before the wait must not leave the child running.
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, marker: "1"},
            cwd=cwd,
            start_new_session=True,  # its own process group, so a timeout can kill all of it
        )
        if watch.on_start is not None:
            watch.on_start(proc)
        assert proc.stdout is not None and proc.stderr is not None
        captures = (_Capture(watch.echo), _Capture(watch.echo))
        reader = _Pump([(proc.stdout, captures[0]), (proc.stderr, captures[1])])
        with interrupts.deferred():  # started whole, or not at all: then it can be finished
            reader.start()
            pump = reader
        timed_out = _wait(proc, timeout)
    finally:
        if proc is not None and proc.returncode is None:
            # Left before its wait ended (an interrupt): its group is killed by its pid, known
            # here. The marker alone could miss it: while it is still being exec'ed, its
            # /proc/PID/environ reads empty.
            kill(proc)
            proc.wait()
        kill_marked(marker)
        if pump is not None:
            pump.finish(_GRACE)
    return Completed(
        argv=tuple(argv),
        returncode=proc.returncode,
        stdout=captures[0].text(),
        stderr=captures[1].text(),
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


def marked_processes(marker: str) -> list[int]:
    """Live processes, other than this one, whose environment holds the variable ``marker``.

    A zombie's environment reads empty, so a process killed and not yet reaped is not listed;
    nor is a process of another user whose environment this one may not read.
    """
    wanted = os.fsencode(marker) + b"="
    found = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return []  # no /proc: nothing to find
    with entries:
        for entry in entries:
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    environ = handle.read()
            except OSError:  # gone meanwhile, or another user's
                continue
            if any(item.startswith(wanted) for item in environ.split(b"\0")):
                found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> None:
    """SIGKILL every process marked with ``marker`` and wait until they are gone: again and
    again, since one may have started another between the look and the kill."""
    deadline = time.monotonic() + _KILL_WAIT
    while pids := marked_processes(marker):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return  # unkillable (in uninterruptible sleep on a hung mount): not ours to wait for
        time.sleep(0.005)  # SIGKILL is delivered asynchronously; look again shortly


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (/proc/PID/stat): with the pid,
    what names one process, where the pid alone may have been given to another since. None when
    there is no such process, or it has ended (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()  # the name may hold anything
        return None if fields[0] in (b"Z", b"X") else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def stop_left(marker: str, pid: int = 0, ticks: int = 0) -> tuple[list[str], list[int]]:
    """Stop what a process that has died left running: the child it started with ``marker``
    (``pid`` and ``ticks``: that child, when known) and all that child started. SIGKILL, then
    a wait for them to end, of at most about ``_KILL_WAIT`` seconds. Only processes that carry
    ``marker`` in their environment, and process ``pid`` if it started at ``ticks``, are
    touched: a pid given to another process since is not. Returns those stopped (``uv (pid
    4242)``), and the pids still running after the wait."""
    found = {p: _name(p) for p in marked_processes(marker)}
    leader = _opened_if_started(pid, ticks) if pid else None
    try:
        if leader is not None:
            found.setdefault(pid, _name(pid))
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(leader, signal.SIGKILL)
        kill_marked(marker)
        if leader is not None:
            select.select([leader], [], [], _KILL_WAIT)  # readable once it has ended
    finally:
        if leader is not None:
            os.close(leader)
    running = marked_processes(marker)
    if pid and start_ticks(pid) == ticks and pid not in running:
        running.append(pid)
    return [f"{name} (pid {p})" for p, name in sorted(found.items())], running


def _opened_if_started(pid: int, ticks: int) -> int | None:
    """A pidfd of process ``pid`` if it is the one that started at ``ticks``: opened first and
    checked after, so that what it refers to cannot change in between. None where the kernel
    has no pidfd (before Linux 5.3, or not Linux): the marker then finds the child."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone, or no pidfd in this kernel
        return None
    if start_ticks(pid) == ticks:
        return fd
    os.close(fd)
    return None


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or "process"
    except OSError:
        return "process"


def guard_marker(prefix: str, snapshot_id: str) -> str:
    """The variable that marks the processes of a command guarded by ``run`` in the environment
    at ``prefix`` under snapshot ``snapshot_id``: a ``recover`` after the guard was killed finds
    and stops what the command left running, at any depth, before it restores."""

    key = f"{os.path.realpath(prefix)}\0{snapshot_id}".encode()
    return MARKER_PREFIX + "guard_" + hashlib.sha256(key).hexdigest()[:16]


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdout: int | None = None,
    marker: str | None = None,
) -> tuple[int, list[int]]:
    """Run a user's command to its end, its output not captured but passed through (its
    standard output to ``stdout``, a file descriptor, else this process's), with no standard
    input. Returns its exit status (negative: the signal that ended it) and the signals passed
    on to it.

    It runs in a process group of its own; Ctrl-C, SIGTERM and a hang-up that reach this process
    meanwhile are passed on to that group, and the third kills it (a command that ignores
    them must not hold the restore back for ever). Once it has ended, nothing it started is left
    running (see the module): those it started carry ``marker`` (default: one of its own).
    Called from the main thread (signal handlers are set there).
    """

    marker = marker or new_marker()
    passed: list[int] = []
    started: list[subprocess.Popen[bytes]] = []

    def pass_on(signum: int, frame: object) -> None:
        passed.append(signum)
        if started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(started[0].pid, signal.SIGKILL if len(passed) >= 3 else signum)

    previous = {
        signum: signal.signal(signum, pass_on)
        for signum in interrupts.SIGNALS
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            env={**env, marker: "1"},
            cwd=cwd,
            start_new_session=True,  # its own group: a signal reaches it once, from here
        )
        started.append(proc)
        if passed:  # one came while it started
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, passed[-1])
        proc.wait()
    finally:
        try:
            # Still under pass_on: a Ctrl-C now is noted, and cannot cut this short and leave
            # what the command started running while its change is undone.
            kill_marked(marker)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    return proc.returncode, passed
