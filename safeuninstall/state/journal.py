"""The transaction journal: what a mutating operation intends, written before it does it.

One file per environment, kept with the environment whatever the state folder
(``<venv>/.safe-uninstall.journal.toml``, see store.own_files): a run with another
``--state-dir`` still finds it, and it names the state folder that holds its snapshot. It
exists exactly while an operation that can change the environment is under way: created (and
fsynced) before the first mutating step, updated before each further step, removed once the
outcome is verified. A journal found by the next call (under the lock, so its writer is gone)
means that writer died half way; ``recover`` brings the environment back to the snapshot the
journal names.

It also names the child processes the step under way started (the installer): each one's
marker (process.run), written before it starts, and its pid and start time once it has. The
children run in sessions of their own and outlive a SIGKILL of the tool: ``recover`` stops
them, and what they started, before it compares anything.

A journal is read only if every field is one this tool writes: a known operation and step, a
snapshot id of the form the store gives (``0007``), a pid, a start time, the absolute path of a
state folder, at most a few children each with a marker of the form process.run gives, a pid
and a start time, and nothing else, in a regular file (not a symbolic link) of at most 64 KiB.
Anything else is an unreadable journal: ``recover`` then acts on nothing it names (a snapshot
of ``"."`` or ``"/home"`` would be a folder to delete) and says how to go on by hand.

``checkpoint`` is also where the fault-injection suite kills or signals the process: with
``SAFE_UNINSTALL_FAULT=<step>:<KILL|INT|TERM|ENOSPC|RAISE>`` the process sends itself that
signal, fails as on a full disk, or raises as a bug of ours would, when it reaches ``<step>``.
``file_fault`` is the same inside a per-file loop: ``SAFE_UNINSTALL_FAULT=stash-file:3:KILL``
fires after the third file stashed (``restore-file``: linked back) of one distribution.
The variable is for tests; nothing else reads it.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import re
import shlex
import signal
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import tomli_w
from msgspec import Struct

from safeuninstall.base import tomlfile
from safeuninstall.base.atomicfile import leftover_temps, write_atomically
from safeuninstall.base.errors import JournalUnreadable, UnfinishedTransaction
from safeuninstall.base.process import MARKER_PREFIX
from safeuninstall.state.snapshot import FORMED_ID

FAULT_VARIABLE = "SAFE_UNINSTALL_FAULT"
_SIGNALS = {"KILL": signal.SIGKILL, "INT": signal.SIGINT, "TERM": signal.SIGTERM}

# "try": a try --state (a try of a removal or a command is journaled as that change is).
OPERATIONS = frozenset({"uninstall", "rollback", "run", "bisect", "try"})
# Every step an operation records (core.py, and transaction.restore's "restore-reinstall");
# a recover that is itself interrupted records its own under "recover:".
_RECOVERED_STEPS = ("stash", "uninstall", "restore", "restore-reinstall", "verify")
STEPS = frozenset(
    {"stash", "command", "uninstall", "probe", "restore", "restore-reinstall", "verify", "recover"}
    | {f"recover:{step}" for step in _RECOVERED_STEPS}
)
MAX_BYTES = 64 * 1024  # a journal holds a few short fields; anything bigger is not one of ours
MAX_PATH = 4096  # PATH_MAX: the longest state folder a journal may name
MAX_CHILDREN = 8  # a step starts one installer at a time
_MARKER = re.compile(re.escape(MARKER_PREFIX) + "[0-9a-f]{16}")  # process.new_marker's


class Child(Struct, frozen=True):
    """A process the step under way started (process.run), as the journal records it."""

    marker: str  # the variable it and all it starts carry (process.new_marker)
    pid: int = 0  # 0: about to start
    started: int = 0  # its start time (process.start_ticks): a pid reused since is not it


class Entry(Struct, frozen=True):
    """The operation in progress, as recorded in the journal."""

    operation: str  # one of OPERATIONS
    snapshot: str  # the snapshot that recover returns to
    step: str  # the step that was about to run, or the last one done
    pid: int
    started: str
    state: str  # the state folder that holds the snapshot (absolute)
    children: tuple[Child, ...] = ()  # started by this step, and perhaps running still

    def describe(self) -> str:
        return (
            f"a {self.operation} (pid {self.pid}, started {self.started[:19]}) stopped at step "
            f"{self.step!r}; its snapshot is {self.snapshot}"
        )


class Journal:
    """The journal at ``path`` of one environment, as seen by a command whose snapshots are in
    the state folder ``state_dir``; ``suggest(*args)`` builds the command lines it tells the
    user to run (Context.suggest)."""

    def __init__(
        self, path: Path, state_dir: Path, suggest: Callable[..., str] | None = None
    ) -> None:
        self.path = path
        self.state_dir = state_dir
        self._suggest = suggest or (lambda *args: shlex.join(["safe-uninstall", *args]))

    def read(self) -> Entry | None:
        """The operation in progress, None when there is none.

        Raises JournalUnreadable when the file is there but is not a journal this tool wrote
        (a journal is written atomically, so that is damage from outside): a transaction whose
        state is unknown, of which nothing it names may be acted on.
        """
        raw = self._read_bounded()
        if raw is None:
            return None
        try:
            data = tomlfile.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise self._unreadable("it is not UTF-8 text") from None
        except ValueError as err:  # TOMLDecodeError
            raise self._unreadable(f"it is not valid TOML ({err})") from None
        problem = _problem(data)
        if problem is not None:
            raise self._unreadable(problem)
        return msgspec.convert(data, Entry)

    def _read_bounded(self) -> bytes | None:
        """The file's bytes, if it is a regular file (not a link to one) of at most MAX_BYTES."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._unreadable(f"cannot examine it: {err.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            raise self._unreadable("it is a symbolic link, not the file this tool writes")
        if not stat.S_ISREG(info.st_mode):
            raise self._unreadable("it is not a regular file")
        if info.st_size > MAX_BYTES:
            raise self._unreadable(f"it holds {info.st_size} bytes; a journal holds a few hundred")
        # O_NOFOLLOW and O_NONBLOCK: replaced by a link or a FIFO since the lstat, it is refused
        # rather than followed or waited on.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._unreadable(f"cannot open it: {err.strerror}") from None
        try:
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    raise self._unreadable("it is not a regular file")
                raw = handle.read(MAX_BYTES + 1)
        except OSError as err:
            raise self._unreadable(f"cannot read it: {err.strerror}") from None
        if len(raw) > MAX_BYTES:
            raise self._unreadable(f"it holds more than {MAX_BYTES} bytes")
        return raw

    def _unreadable(self, why: str) -> JournalUnreadable:
        return JournalUnreadable(
            f"the journal {self.path} of an operation that did not finish cannot be used: {why}. "
            "Nothing it names was touched. To go on by hand: move it aside "
            f"({shlex.join(['mv', str(self.path), f'{self.path}.unreadable'])}), find the "
            f"snapshot to return to with `{self._suggest('snapshots')}`, and run "
            f"`{self._suggest('rollback', 'ID')}`"
        )

    def refuse_if_unfinished(self, suggest: Callable[..., str]) -> None:
        """``suggest(*args)``: a command line for this environment (Context.suggest)."""
        entry = self.read()
        if entry is not None:
            raise UnfinishedTransaction(
                f"an earlier operation on this environment did not finish: {entry.describe()}. "
                f"Run `{self.recover_command(entry, suggest)}` first."
            )

    def elsewhere(self, entry: Entry) -> bool:
        """Whether ``entry``'s snapshot is in another state folder than this command's."""
        return os.path.realpath(entry.state) != os.path.realpath(self.state_dir)

    def recover_command(self, entry: Entry, suggest: Callable[..., str]) -> str:
        if self.elsewhere(entry):
            return suggest("recover", state_dir=entry.state)
        return suggest("recover")

    def refuse_if_elsewhere(self, entry: Entry, suggest: Callable[..., str]) -> None:
        """recover acts only on a journal whose snapshot is in its own state folder."""
        if self.elsewhere(entry):
            raise UnfinishedTransaction(
                f"an earlier operation on this environment did not finish: {entry.describe()}, "
                f"in the state folder {entry.state}, not {self.state_dir}. Run "
                f"`{self.recover_command(entry, suggest)}`."
            )

    def begin(self, operation: str, snapshot: str, step: str) -> Entry:
        entry = Entry(
            operation=operation,
            snapshot=snapshot,
            step=step,
            pid=os.getpid(),
            started=datetime.datetime.now(datetime.timezone.utc).isoformat(),
            state=str(self.state_dir),
        )
        self._write(entry)
        checkpoint(step)
        return entry

    def step(
        self, entry: Entry, step: str, *, durable: bool = True, must_write: bool = True
    ) -> Entry:
        """Record that ``step`` is about to run, then pass the fault-injection point. The
        children of the step before have ended by then (process.run returns once they have).

        ``durable=False`` for a step that changes nothing (the probe): the note may be lost
        in a power cut, the previous durable step still tells ``recover`` what to do.
        ``must_write=False`` inside a restore: a full disk must not stop the restore itself;
        the journal then still names an earlier step, which ``recover`` handles the same way.
        """
        updated = msgspec.structs.replace(entry, step=step, children=())
        try:
            self._write(updated, durable=durable)
        except OSError:
            if must_write:
                raise
        checkpoint(step)
        return updated

    def child(self, entry: Entry, child: Child) -> Entry:
        """Record a child of the step under way: its marker before it starts, then again with
        its pid and start time. Not fsynced: a power cut ends it too, and a SIGKILL of this
        process leaves what was written in the page cache. A write that fails (a full disk)
        does not stop the step: ``recover`` then does not know of this child."""
        children = [c for c in entry.children if c.marker != child.marker][-MAX_CHILDREN + 1 :]
        updated = msgspec.structs.replace(entry, children=(*children, child))
        with contextlib.suppress(OSError):
            self._write(updated, durable=False)
        return updated

    def leftovers(self) -> list[Path]:
        """The temp files a process killed while it wrote the journal left beside it."""
        return leftover_temps(self.path)

    def finish(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return

    def _write(self, entry: Entry, *, durable: bool = True) -> None:
        data = msgspec.to_builtins(entry)
        if not data["children"]:
            del data["children"]  # as a journal without any reads
        problem = _problem(data)
        if problem is not None:  # a step added to core.py but not to STEPS, say
            raise ValueError(f"refusing to write a journal that could not be read back: {problem}")
        write_atomically(self.path, tomli_w.dumps(data).encode("utf-8"), durable=durable)


_FIELDS: dict[str, type] = {
    "operation": str,
    "snapshot": str,
    "step": str,
    "pid": int,
    "started": str,
    "state": str,
}


def _problem(data: Mapping[str, Any]) -> str | None:
    """What makes ``data`` something other than a journal this tool writes, or None."""
    for key, kind in _FIELDS.items():
        if key not in data:
            return f"{key}: missing"
        value = data[key]
        # bool is an int to isinstance; a TOML true is no pid
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{key}: {type(value).__name__} {_shown(value)}, not {kind.__name__}"
    unknown = sorted(set(data) - {*_FIELDS, "children"})
    if unknown:
        return f"{unknown[0]}: not a journal key"
    children = _children_problem(data.get("children", []))
    if children is not None:
        return children
    if data["operation"] not in OPERATIONS:
        return f"operation: {_shown(data['operation'])} is not an operation this tool records"
    if data["step"] not in STEPS:
        return f"step: {_shown(data['step'])} is not a step this tool records"
    if not FORMED_ID.fullmatch(data["snapshot"]):  # recover deletes the folder it names
        return f"snapshot: {_shown(data['snapshot'])} is not a snapshot id (like 0007)"
    if data["pid"] <= 0:
        return f"pid: {data['pid']} is not a process id"
    state = data["state"]
    if not os.path.isabs(state) or "\0" in state or len(state) > MAX_PATH:
        return f"state: {_shown(state)} is not the absolute path of a state folder"
    return None


_CHILD_FIELDS: dict[str, type] = {"marker": str, "pid": int, "started": int}


def _children_problem(children: object) -> str | None:
    """What makes ``children`` other than the children this tool records, or None."""
    if not isinstance(children, (list, tuple)) or len(children) > MAX_CHILDREN:
        return f"children: not a list of at most {MAX_CHILDREN} processes"
    for i, child in enumerate(children):
        where = f"children[{i}]"
        if not isinstance(child, dict) or set(child) != set(_CHILD_FIELDS):
            return f"{where}: not a table of {', '.join(_CHILD_FIELDS)}"
        for key, kind in _CHILD_FIELDS.items():
            value = child[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                return f"{where}.{key}: {type(value).__name__} {_shown(value)}, not {kind.__name__}"
        if not _MARKER.fullmatch(child["marker"]):
            return f"{where}.marker: {_shown(child['marker'])} is not a marker this tool gives"
        if child["pid"] < 0 or child["started"] < 0:
            return f"{where}: a negative pid or start time"
    return None


def _shown(value: object) -> str:
    """A value for a message: quoted, and short (a hostile file may hold anything)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checkpoint(step: str) -> None:
    """A step boundary; the fault-injection suite can make the process die or be signalled here."""
    fault = os.environ.get(FAULT_VARIABLE)
    if not fault:
        return
    wanted, _, kind = fault.rpartition(":")
    if wanted == step:
        _fire(kind, step)


def file_fault(loop: str) -> Callable[[], None] | None:
    """The fault point of a per-file loop (``stash-file``, ``restore-file``), or None.

    With ``SAFE_UNINSTALL_FAULT=<loop>:<N>:<KIND>``: a function for the loop to call after
    each file, which fires after the N-th. The variable is read here, once per loop; when it
    names no such point the loop's only cost is a test for None per file.
    """
    fault = os.environ.get(FAULT_VARIABLE)
    if not fault:
        return None
    wanted, _, kind = fault.rpartition(":")
    name, _, count = wanted.rpartition(":")
    if name != loop or not (count.isascii() and count.isdigit()) or int(count) < 1:
        return None
    remaining = int(count)

    def after_file() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            _fire(kind, wanted)

    return after_file


def _fire(kind: str, where: str) -> None:
    if kind in _SIGNALS:
        os.kill(os.getpid(), _SIGNALS[kind])
    elif kind == "ENOSPC":  # the disk fills up here
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "(fault injected)")
    elif kind == "RAISE":  # a bug of ours here
        raise RuntimeError(f"fault injected at {where}")
