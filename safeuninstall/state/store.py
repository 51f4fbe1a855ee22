"""Where snapshots and stashes live (the state folder), and where an environment's own lock and
journal live (beside the environment, whatever the state folder).

State folder, default: ``<venv>/.safe-uninstall/`` for a virtual environment (one filesystem
with site-packages, so stashing is a hard link), ``$XDG_STATE_HOME/safe-uninstall/<slug>/`` for
a non-virtual interpreter. ``--state-dir`` / ``SAFE_UNINSTALL_STATE_DIR`` override it; several
environments may share one. It must be the invoking user's and writable by no one else
(trust.py), and every snapshot in it names the environment it was taken of: an environment
sees, prunes and returns to its own snapshots only.

Layout::

    <state>/lock                      the state folder's lock (locks.py)
    <state>/snapshots/0007/           a snapshot's folder (layout.py: what is in it)

The environment's own files (``own_files``), which ``--state-dir`` never moves::

    <venv>/.safe-uninstall.lock           its lock; not uv's <venv>/.lock
    <venv>/.safe-uninstall.journal.toml   the operation under way (journal.py)

and for an interpreter outside a venv (or a venv the user may not write to), the same two
files as ``$XDG_STATE_HOME/safe-uninstall/environments/<hash of the real prefix>.lock`` and
``.journal.toml``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec
from msgspec import Struct

from safeuninstall.base import bounded, trust
from safeuninstall.base.atomicfile import write_atomically
from safeuninstall.base.errors import SnapshotInvalid, SnapshotNotFound, StateDirError
from safeuninstall.base.outcome import Note, parse_note
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.state import locks, stashindex
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state.layout import SNAPSHOTS, SnapshotFolder
from safeuninstall.state.snapshot import Snapshot

STATE_DIR_NAME = ".safe-uninstall"
# A venv's own lock and journal, in the venv itself (own_files)
VENV_LOCK = f"{STATE_DIR_NAME}.lock"
VENV_JOURNAL = f"{STATE_DIR_NAME}.journal.toml"
_MAX_HEAD_BYTES = 1024 * 1024
_ID = re.compile(r"\d{1,9}")


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
    return _user_state(environ) / _digest(interpreter.prefix)[:12]


def _user_state(environ: Mapping[str, str]) -> Path:
    return (
        Path(environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "safe-uninstall"
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class OwnFiles(Struct, frozen=True):
    """The lock and the journal of one environment: where they are whatever the state folder."""

    lock: Path
    journal: Path
    # the per-user folder that holds them, checked like a state folder; None: the venv itself
    folder: Path | None = None

    def prepare(self) -> None:
        """Make their folder (owner-only) and the lock file; refuse a folder others can change."""
        if self.folder is not None:
            try:
                self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as err:
                raise StateDirError(f"cannot create {self.folder}: {err.strerror}") from None
            trust.refuse_unless_private(self.folder, "folder of environment locks")
        locks.create_lock_file(self.lock)


def own_files(interpreter: Interpreter, environ: Mapping[str, str]) -> OwnFiles:
    """Keyed by the environment's real prefix, so every path to it finds the same files.

    In a venv they are files of the venv itself (whoever may change it may lock it; a venv
    deleted takes them along). Outside a venv, or in a venv this user can't write to (where no
    operation of theirs can change anything), under the user's state folder instead, by a hash
    of the real prefix: nothing of ours goes into /usr.
    """
    real = os.path.realpath(interpreter.prefix)
    if interpreter.is_venv and os.access(real, os.W_OK | os.X_OK):
        base = Path(real)
        return OwnFiles(base / VENV_LOCK, base / VENV_JOURNAL)
    folder = _user_state(environ) / "environments"
    key = _digest(real)[:16]
    return OwnFiles(folder / f"{key}.lock", folder / f"{key}.journal.toml", folder)


class SnapshotHead(Struct, frozen=True, forbid_unknown_fields=True):
    """What a listing needs of a snapshot, kept beside its snapshot.toml (``head.json``):
    parsing the TOML of a torch venv's snapshot for each line would make `snapshots` with 50 of
    them slow (docs/performance.md). Valid while snapshot.toml has the stat it was made from
    (device, inode, size, mtime, ctime: the file is written once and never changed); anything
    else is read from the TOML."""

    key: tuple[int, int, int, int, int]
    id: str
    created: str
    command: tuple[str, ...]
    operation: str
    removed: tuple[str, ...]
    outcome: str
    packages: int
    prefix: str

    @classmethod
    def of(cls, snap: Snapshot, key: tuple[int, int, int, int, int]) -> SnapshotHead:
        return cls(
            key=key,
            id=snap.id,
            created=snap.created,
            command=snap.command,
            operation=snap.operation,
            removed=snap.removed,
            outcome=snap.outcome,
            packages=len(snap.packages),
            prefix=snap.target.prefix,
        )


class _Twin(Struct, frozen=True, forbid_unknown_fields=True):
    """snapshot.json: snapshot.toml's table, and the stat of the snapshot.toml it is of."""

    key: tuple[int, int, int, int, int]
    snapshot: dict[str, object]


_MAX_TWIN_BYTES = 256 << 20  # as snapshot.toml's own limit


def _file_key(path: str | Path) -> tuple[int, int, int, int, int]:
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class Store(Struct, frozen=True):
    """The state folder: snapshots, stashes, caches and its lock.

    ``prefix``: the real path of the environment it is opened for. Its snapshots are those taken
    of that environment; the others in a shared folder are not listed, pruned or returned to.
    None (tests, tools): every snapshot counts as this environment's.
    """

    root: Path
    prefix: str | None = None

    @property
    def snapshots_dir(self) -> Path:
        return self.root / SNAPSHOTS

    def folder(self, snapshot_id: str) -> SnapshotFolder:
        return SnapshotFolder(self.root / SNAPSHOTS / snapshot_id)

    def stash_pruned(self, snapshot_id: str) -> str | None:
        """Why the snapshot's stash was dropped (the mark's text), or None when it was not (or
        the mark is no regular file: a FIFO there must not stop the command)."""
        try:
            with bounded.open_regular(self.folder(snapshot_id).pruned_mark) as mark:
                return mark.read(500).decode("utf-8", "replace").strip() or "pruned"
        except OSError:
            return None

    def snapshot_path(self, snapshot_id: str) -> Path:
        return self.folder(snapshot_id).snapshot_file

    def check(self) -> None:
        """Refuse a state folder (or snapshots folder) that another user can change."""
        if os.path.lexists(self.root):
            trust.refuse_unless_private(self.root, "state folder", link_allowed=True)
        if os.path.lexists(self.snapshots_dir):
            trust.refuse_unless_private(self.snapshots_dir, "snapshots folder")

    def ids(self) -> list[str]:
        """Snapshot ids of every environment, oldest first."""
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
        """The newest snapshot of any environment: a newer one means that something ran."""
        ids = self.ids()
        return ids[-1] if ids else None

    def is_ours(self, snap: Snapshot | SnapshotHead) -> bool:
        """Whether ``snap`` was taken of this store's environment."""
        prefix = snap.prefix if isinstance(snap, SnapshotHead) else snap.target.prefix
        return self.prefix is None or os.path.realpath(prefix) == self.prefix

    def new_folder(self) -> SnapshotFolder:
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
                folder.path.mkdir(mode=0o700)
            except FileExistsError:
                number += 1
                continue
            return folder

    def resolve(self, text: str | None) -> Snapshot:
        """A user's snapshot reference (``7``, ``0007``, ``latest`` or None), loaded.

        ``latest`` is this environment's newest. A newer snapshot that can't be read stops the
        search (it may be this environment's): the user names the one to use instead.
        """
        ids = self.ids()
        if text in (None, "latest"):
            for _, snap in self.iter_loadable():
                if isinstance(snap, SnapshotInvalid):
                    raise SnapshotInvalid(
                        f"{snap.message}; it is the newest snapshot in {self.snapshots_dir}, "
                        "name the one to use instead (`safe-uninstall snapshots` lists them)"
                    )
                return snap
            raise SnapshotNotFound(f"no snapshots of this environment in {self.snapshots_dir}")
        assert text is not None
        if _ID.fullmatch(text):
            wanted = int(text)
            for existing in ids:
                if int(existing) == wanted:
                    return self.load(existing)
        have = ", ".join(ids[-5:]) or "none"
        if len(ids) > 5:
            have = f"the newest 5 of {len(ids)}: {have}; `snapshots` lists them all"
        raise SnapshotNotFound(f"no snapshot {text!r} in {self.snapshots_dir} (have: {have})")

    def load(self, snapshot_id: str, *, keep_twin: bool = False) -> Snapshot:
        """The snapshot; ``keep_twin``: write its JSON twin when it had none that holds."""
        loaded = self._load_file(snapshot_id, keep_twin=keep_twin)
        note = self._read_outcome(snapshot_id)
        loaded = loaded.with_outcome(note) if note is not None else loaded
        removed = self._read_removed(snapshot_id, loaded.removed)
        return loaded if removed is None else loaded.with_removed(removed)

    def _load_file(self, snapshot_id: str, *, keep_twin: bool = False) -> Snapshot:
        """snapshot.toml as written (its outcome is the operation's at the time: see
        set_outcome), from its JSON twin where that is the one of the file as it is."""
        loaded = self._load_twin(snapshot_id)
        if loaded is None:
            path = self.snapshot_path(snapshot_id)
            try:
                key = _file_key(path)  # before the parse: a file replaced during it differs
            except OSError:
                key = None
            loaded = snapshot_file.load(path)
            if keep_twin and loaded.id == snapshot_id and key is not None:
                self._save_twin(loaded, key)
        if loaded.id != snapshot_id:
            raise SnapshotInvalid(
                f"{self.snapshot_path(snapshot_id)}: id: {loaded.id!r} does not match its folder"
            )
        return loaded

    def save(self, snap: Snapshot) -> None:
        """Write snapshot.toml, durably; it is not rewritten afterwards."""
        snapshot_file.save(snap, self.snapshot_path(snap.id))
        self._save_head(snap)
        self._save_twin(snap)

    def _save_twin(
        self, snap: Snapshot, parsed: tuple[int, int, int, int, int] | None = None
    ) -> None:
        """Its snapshot.json: the same table as snapshot.toml, which a command that reads every
        snapshot decodes in a fraction of the TOML's time (docs/performance.md). Keyed by
        snapshot.toml's stat, as head.json is; one that can't be written costs a TOML parse per
        read. ``parsed``: the stat the file had when ``snap`` was parsed from it; no twin if it
        has changed since."""
        with contextlib.suppress(OSError):
            key = _file_key(self.snapshot_path(snap.id))
            if parsed is not None and key != parsed:
                return
            twin = _Twin(key=key, snapshot=snap.to_dict())
            write_atomically(
                self.folder(snap.id).twin_file, msgspec.json.encode(twin), durable=False
            )

    def _load_twin(self, snapshot_id: str) -> Snapshot | None:
        """The snapshot from its snapshot.json, when that is the twin of snapshot.toml as it is
        now (the same stat) and holds a valid snapshot; else None: the TOML is read. It is
        untrusted like the TOML: validated the same way (snapshot.from_data)."""
        path = self.folder(snapshot_id).twin_file
        try:
            key = _file_key(self.snapshot_path(snapshot_id))
            twin = msgspec.json.decode(
                bounded.read_bytes(path, _MAX_TWIN_BYTES, follow_links=False), type=_Twin
            )
        except (OSError, ValueError, msgspec.DecodeError, RecursionError):
            return None
        if twin.key != key:
            return None
        try:
            loaded = snapshot_file.from_data(twin.snapshot, path)
        except SnapshotInvalid:
            return None
        return loaded if loaded.id == snapshot_id else None

    def _save_head(self, snap: Snapshot) -> SnapshotHead | None:
        """Its head.json; a head that can't be written costs a TOML parse per listing."""
        try:
            head = SnapshotHead.of(snap, _file_key(self.snapshot_path(snap.id)))
            write_atomically(
                self.folder(snap.id).head_file, msgspec.json.encode(head), durable=False
            )
        except OSError:
            return None
        return head

    def head(self, snapshot_id: str) -> SnapshotHead:
        """What a listing needs of the snapshot, from its head.json when that is the one of
        its snapshot.toml as it is, else from the TOML (and head.json written for the next
        time). Raises SnapshotInvalid as ``load`` does."""
        key = (0, 0, 0, 0, 0)
        folder = self.folder(snapshot_id)
        try:
            key = _file_key(folder.snapshot_file)
            stored = msgspec.json.decode(
                bounded.read_bytes(folder.head_file, _MAX_HEAD_BYTES, follow_links=False),
                type=SnapshotHead,
            )
        except (OSError, ValueError, msgspec.DecodeError, RecursionError):
            stored = None
        if stored is None or stored.key != key or stored.id != snapshot_id:
            snap = self._load_file(snapshot_id)
            stored = self._save_head(snap) or SnapshotHead.of(snap, key)
        note = self._read_outcome(snapshot_id)
        stored = msgspec.structs.replace(stored, outcome=note.id) if note is not None else stored
        removed = self._read_removed(snapshot_id, stored.removed)
        return stored if removed is None else msgspec.structs.replace(stored, removed=removed)

    def set_outcome(self, snapshot_id: str, note: Note) -> None:
        """What the operation ended as, kept beside snapshot.toml (a note: no fsync, and the
        snapshot file itself is never rewritten, so a crash here can't damage it)."""
        with contextlib.suppress(OSError):  # a full disk must not turn a result into an error
            write_atomically(self.folder(snapshot_id).outcome_file, note.id.encode(), durable=False)

    def set_removed(self, snapshot_id: str, names: Sequence[str]) -> None:
        """What stayed removed, when it is less than the snapshot's ``removed`` (what the
        operation set out to remove: --keep-needed keeps some). A note, as the outcome is."""
        with contextlib.suppress(OSError):
            text = "".join(f"{name}\n" for name in names)
            write_atomically(self.folder(snapshot_id).removed_file, text.encode(), durable=False)

    def _read_removed(self, snapshot_id: str, planned: Sequence[str]) -> tuple[str, ...] | None:
        """The note of set_removed, trusted only as a part of ``planned`` (read bounded, a
        regular file only: it is on disk, so untrusted)."""
        try:
            data = bounded.read_bytes(self.folder(snapshot_id).removed_file, _MAX_HEAD_BYTES)
            names = data.decode("utf-8").split()
        except (OSError, ValueError):
            return None
        if not set(names) <= set(planned):
            return None
        return tuple(name for name in planned if name in names)

    def _read_outcome(self, snapshot_id: str) -> Note | None:
        """The outcome note (set_outcome), None while there is none; SnapshotInvalid when it
        says what this tool never writes: whether its change was undone cannot be told."""
        path = self.folder(snapshot_id).outcome_file
        try:
            data = bounded.read_bytes(path, _MAX_HEAD_BYTES)
        except OSError:
            return None
        try:
            return parse_note(data.decode("utf-8", "replace").strip())
        except ValueError as err:
            raise SnapshotInvalid(f"{path}: {err}") from None

    def iter_loadable(
        self, *, keep_twins: bool = False
    ) -> Iterator[tuple[str, Snapshot | SnapshotInvalid]]:
        """This environment's snapshots, newest first, and the error of every one that can't be
        read (whose it is can't be told). Unsaved folders (no snapshot.toml) are left out.
        ``keep_twins``: write the JSON twin of each that had none that holds (``load``)."""
        for snapshot_id in reversed(self.ids()):
            if not os.path.lexists(self.snapshot_path(snapshot_id)):
                continue
            try:
                snap = self.load(snapshot_id, keep_twin=keep_twins)
            except SnapshotInvalid as err:
                yield snapshot_id, err
                continue
            if self.is_ours(snap):
                yield snapshot_id, snap

    def iter_heads(self) -> Iterator[tuple[str, SnapshotHead | SnapshotInvalid]]:
        """``iter_loadable``, with each snapshot's head instead of the whole of it."""
        for snapshot_id in reversed(self.ids()):
            if not os.path.lexists(self.snapshot_path(snapshot_id)):
                continue
            try:
                head = self.head(snapshot_id)
            except SnapshotInvalid as err:
                yield snapshot_id, err
                continue
            if self.is_ours(head):
                yield snapshot_id, head

    def of_another_environment(self, snapshot_id: str) -> bool:
        """Whether the snapshot is known to be another environment's (one that can't be read,
        or was never saved, may be this one's)."""
        try:
            return not self.is_ours(self.load(snapshot_id))
        except SnapshotInvalid:
            return False

    def holdings(self, ids: Sequence[str], *, indexed: bool = False) -> stashindex.Holdings:
        """Every file of these snapshots by inode; an inode all of whose links are inside the
        snapshot folders is one that deleting snapshots can free. ``indexed``: through the
        stash index, kept up to date (stashindex.py); the same result, fewer system calls."""
        index = stashindex.read_index(self.root) if indexed else {}
        lister = stashindex.Lister(index) if indexed else None
        files: dict[str, dict[stashindex.Inode, int]] = {}
        links_seen: dict[stashindex.Inode, int] = {}
        nlink: dict[stashindex.Inode, int] = {}
        alone: dict[str, int] = {}
        for snapshot_id in ids:
            held = files.setdefault(snapshot_id, {})
            links_here: dict[stashindex.Inode, int] = {}
            folder = str(self.folder(snapshot_id).path)
            listed = (
                stashindex.walk(folder) if lister is None else lister.entries(snapshot_id, folder)
            )
            for inode, size, links in listed:
                held[inode] = size
                links_here[inode] = links_here.get(inode, 0) + 1
                links_seen[inode] = links_seen.get(inode, 0) + 1
                nlink[inode] = links
            alone[snapshot_id] = sum(
                held[inode] for inode, count in links_here.items() if nlink[inode] <= count
            )
        only = frozenset(i for i, count in links_seen.items() if nlink[i] <= count)
        if lister is not None:
            self._keep_index(index, ids, lister.recorded)
        return stashindex.Holdings(files, only, alone)

    def _keep_index(
        self,
        before: Mapping[str, tuple[stashindex.Folder, ...]],
        listed: Sequence[str],
        recorded: Mapping[str, tuple[stashindex.Folder, ...]],
    ) -> None:
        """The stash index with what a listing of ``listed`` recorded (a listed snapshot not
        recorded is dropped: its record did not hold), and without the snapshots that are
        gone; written only when that changes it."""
        kept = set(self.ids()).difference(listed)
        after = {i: f for i, f in before.items() if i in kept}
        after |= recorded
        if after != dict(before):
            stashindex.write_index(self.root, after)

    def remove_unsaved(self) -> list[str]:
        """Delete snapshot folders whose snapshot.toml was never written (a process died while
        stashing). Only under the lock: then no live process is still filling one."""

        removed = []
        for snapshot_id in self.ids():
            if not self.snapshot_path(snapshot_id).exists():
                shutil.rmtree(self.folder(snapshot_id).path, ignore_errors=True)
                removed.append(snapshot_id)
        return removed

    @contextmanager
    def locked(
        self, timeout: float, *, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[bool]:
        """This state folder to one operation at a time (see locks.py); yields whether it had
        to wait. Under it no live process is filling a snapshot folder here."""
        self._create_root()
        with locks.hold(
            self.root / "lock",
            timeout,
            busy=f"another safe-uninstall operation is running with the state folder {self.root}",
            on_wait=on_wait,
        ) as waited:
            yield waited

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
