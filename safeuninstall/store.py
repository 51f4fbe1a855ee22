"""Where snapshots and stashes live, and the lock that serialises operations on one environment.

Default: ``<venv>/.safe-uninstall/`` for a virtual environment (one filesystem with
site-packages, so stashing is a hard link), ``$XDG_STATE_HOME/safe-uninstall/<slug>/`` for a
non-virtual interpreter. ``--state-dir`` / ``SAFE_UNINSTALL_STATE_DIR`` override it. It must be
the invoking user's and writable by no one else (trust.py).

Layout::

    <state>/lock                      filelock; not uv's <venv>/.lock
    <state>/snapshots/0007/snapshot.toml
    <state>/snapshots/0007/stash/<name>-<version>/<path relative to the environment root>
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

from . import trust
from .atomicfile import write_atomically
from .environment import Interpreter
from .errors import LockBusy, SnapshotInvalid, SnapshotNotFound, StateDirError

if TYPE_CHECKING:
    from .plan import Holdings
    from .snapshot import Snapshot

# The snapshot format and the prune plan are imported where they are used: the baseline's head
# start needs this module (state_dir) before the rest of the tool, and starts its probe 2.2 ms
# sooner without them.

STATE_DIR_NAME = ".safe-uninstall"
OUTCOME_FILE = "outcome"
_ID = re.compile(r"\d{1,9}")
# An id as new_folder forms it (0007): at least four ASCII digits, at most the nine ids() lists.
# What a file of ours may name as a snapshot; nothing else may reach a path.
FORMED_ID = re.compile(r"[0-9]{4,9}")


def state_dir(chosen: str | None, interpreter: Interpreter, environ: Mapping[str, str]) -> Path:
    """The state folder: the one chosen (``--state-dir`` or the configuration), else the default."""
    if chosen:
        return Path(chosen).expanduser().absolute()
    return default_state_dir(interpreter, environ)


def default_state_dir(interpreter: Interpreter, environ: Mapping[str, str]) -> Path:
    override = environ.get("SAFE_UNINSTALL_STATE_DIR")
    if override:
        return Path(override).expanduser().absolute()
    if interpreter.is_venv:
        return Path(interpreter.prefix) / STATE_DIR_NAME
    base = Path(environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    import hashlib  # only for an interpreter outside a venv: 3.9-4.4 ms of import

    slug = hashlib.sha256(interpreter.prefix.encode()).hexdigest()[:12]
    return base / "safe-uninstall" / slug


class Store(Struct, frozen=True):
    """The state folder: snapshots, stashes, journal, caches and the lock."""

    root: Path

    @property
    def snapshots_dir(self) -> Path:
        return self.root / "snapshots"

    def folder(self, snapshot_id: str) -> Path:
        return self.snapshots_dir / snapshot_id

    def snapshot_path(self, snapshot_id: str) -> Path:
        from .snapshot import SNAPSHOT_FILE

        return self.folder(snapshot_id) / SNAPSHOT_FILE

    def check(self) -> None:
        """Refuse a state folder (or snapshots folder) that another user can change."""
        if os.path.lexists(self.root):
            trust.refuse_unless_private(self.root, "state folder", link_allowed=True)
        if os.path.lexists(self.snapshots_dir):
            trust.refuse_unless_private(self.snapshots_dir, "snapshots folder")

    def ids(self) -> list[str]:
        """Snapshot ids, oldest first."""
        try:
            names = [
                e.name for e in os.scandir(self.snapshots_dir) if e.is_dir(follow_symlinks=False)
            ]
        except FileNotFoundError:
            return []
        except OSError as err:
            raise StateDirError(f"cannot read {self.snapshots_dir}: {err.strerror}") from None
        return sorted((n for n in names if _ID.fullmatch(n)), key=int)

    def latest_id(self) -> str | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def new_folder(self) -> tuple[str, Path]:
        """Create the folder of the next snapshot, readable by the owner only."""
        self._create_root()
        try:
            self.snapshots_dir.mkdir(exist_ok=True, mode=0o700)
        except OSError as err:
            raise StateDirError(f"cannot create {self.snapshots_dir}: {err.strerror}") from None
        trust.refuse_unless_private(self.snapshots_dir, "snapshots folder")
        ids = self.ids()
        number = int(ids[-1]) + 1 if ids else 1
        while True:
            snapshot_id = f"{number:04d}"
            folder = self.folder(snapshot_id)
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                number += 1
                continue
            return snapshot_id, folder

    def resolve_id(self, text: str | None) -> str:
        """A user's snapshot reference (``7``, ``0007``, ``latest`` or None) to an existing id."""
        ids = self.ids()
        if text in (None, "latest"):
            if not ids:
                raise SnapshotNotFound(f"no snapshots in {self.snapshots_dir}")
            return ids[-1]
        assert text is not None
        if _ID.fullmatch(text):
            wanted = int(text)
            for existing in ids:
                if int(existing) == wanted:
                    return existing
        raise SnapshotNotFound(
            f"no snapshot {text!r} in {self.snapshots_dir} (have: {', '.join(ids[-5:]) or 'none'})"
        )

    def load(self, snapshot_id: str) -> Snapshot:
        from . import snapshot as snapshot_file

        loaded = snapshot_file.load(self.snapshot_path(snapshot_id))
        if loaded.id != snapshot_id:
            raise SnapshotInvalid(
                f"{self.snapshot_path(snapshot_id)}: id: {loaded.id!r} does not match its folder"
            )
        outcome = self._read_outcome(snapshot_id)
        return loaded.with_outcome(outcome) if outcome else loaded

    def save(self, snap: Snapshot) -> None:
        """Write snapshot.toml, durably; it is not rewritten afterwards."""
        from . import snapshot as snapshot_file

        snapshot_file.save(snap, self.snapshot_path(snap.id))

    def set_outcome(self, snapshot_id: str, outcome: str) -> None:
        """What the operation ended as, kept beside snapshot.toml (a note: no fsync, and the
        snapshot file itself is never rewritten, so a crash here can't damage it)."""
        with contextlib.suppress(OSError):  # a full disk must not turn a result into an error
            write_atomically(
                self.folder(snapshot_id) / OUTCOME_FILE, outcome.encode(), durable=False
            )

    def _read_outcome(self, snapshot_id: str) -> str | None:
        try:
            text = (self.folder(snapshot_id) / OUTCOME_FILE).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return text if re.fullmatch(r"[a-z0-9-]{1,64}", text) else None

    def iter_loadable(self) -> Iterator[tuple[str, Snapshot | SnapshotInvalid]]:
        """Every snapshot, newest first, or the error that prevents reading it."""
        for snapshot_id in reversed(self.ids()):
            try:
                yield snapshot_id, self.load(snapshot_id)
            except SnapshotInvalid as err:
                yield snapshot_id, err

    def holdings(self, ids: Sequence[str]) -> Holdings:
        """Every file of these snapshots by inode; an inode all of whose links are inside the
        snapshot folders is one that deleting snapshots can free."""
        from .plan import Holdings, Inode

        files: dict[str, dict[Inode, int]] = {}
        links_seen: dict[Inode, int] = {}
        nlink: dict[Inode, int] = {}
        for snapshot_id in ids:
            held = files.setdefault(snapshot_id, {})
            for folder, _, names in os.walk(self.folder(snapshot_id)):
                for name in names:
                    try:
                        info = os.lstat(os.path.join(folder, name))
                    except OSError:
                        continue
                    inode = (info.st_dev, info.st_ino)
                    held[inode] = info.st_size
                    links_seen[inode] = links_seen.get(inode, 0) + 1
                    nlink[inode] = info.st_nlink
        only = frozenset(i for i, count in links_seen.items() if nlink[i] <= count)
        return Holdings(files, only)

    def remove_unsaved(self) -> list[str]:
        """Delete snapshot folders whose snapshot.toml was never written (a process died while
        stashing). Only under the lock: then no live process is still filling one."""
        removed = []
        for snapshot_id in self.ids():
            if not self.snapshot_path(snapshot_id).exists():
                shutil.rmtree(self.folder(snapshot_id), ignore_errors=True)
                removed.append(snapshot_id)
        return removed

    @contextmanager
    def locked(
        self, timeout: float, *, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[bool]:
        """One operation at a time per environment: filelock's flock, which the kernel drops
        when its holder dies, so a lock of a dead process is free.

        Yields whether it had to wait: another operation may have changed the environment.
        """
        import filelock  # only commands that change something lock: 28.7 ms of import

        self._create_root()
        path = self.root / "lock"
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
                    on_wait(
                        "another safe-uninstall operation is running on this environment; "
                        f"waiting up to {timeout:g} s for it"
                    )
                lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise LockBusy(
                f"another safe-uninstall operation is running on this environment "
                f"(lock {path} still held after {timeout:g} s)"
            ) from None
        try:
            yield waited
        finally:
            lock.release()

    def _create_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as err:
            raise StateDirError(
                f"cannot create the state folder {self.root}: {err.strerror}"
            ) from None
        trust.refuse_unless_private(self.root, "state folder", link_allowed=True)
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise StateDirError(f"the state folder {self.root} is not writable")
