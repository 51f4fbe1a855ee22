"""The files of a snapshot folder, for ``Store.holdings``: walked, or through the stash index.

The bytes a stash alone keeps are those of its inodes linked from nowhere else, so every
listing needs each stashed file's inode, size and link count. The link count changes whenever
the environment's copy of a file is removed or put back: it is read afresh every time, with one
lstat per inode. What the index keeps is only what is in each folder of a stash (the names and
their inodes): that changes only when an entry is added, removed or renamed, which sets the
folder's mtime and ctime. A folder's record is used while the folder has the stamp recorded
(base/cachefile.FileStamp); any difference, or a record that is not well formed, and the whole
stash is walked again. A folder changed less than two seconds before it was walked is not
recorded: a timestamp is coarse, and a second change in the same tick would leave it as it
was. Symbolic links are looked at afresh each time (whether one is listed depends on its
target), and so is everything in the snapshot folder outside its stash.

The index is ``<state>/stash-index.json``, a cache: its loss costs a walk, nothing else.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.cachefile import CacheFile, FileStamp
from safeuninstall.state.layout import STASH  # the folder of a snapshot that the index covers

INDEX_FILE = "stash-index.json"
_SETTLED_NS = 2_000_000_000
_NOT_NAMES = frozenset(("", ".", ".."))

Inode = tuple[int, int]  # (st_dev, st_ino)
Entry = tuple[Inode, int, int]  # a listed file: its inode, st_size, st_nlink


class Folder(Struct, frozen=True, array_like=True):
    """One folder of a stash as it was walked."""

    path: str  # below the snapshot folder, "/"-separated: "stash", "stash/rich-14.0.0/rich"
    key: FileStamp
    files: tuple[tuple[str, int], ...]  # (name, st_ino) of its entries that are files
    links: tuple[str, ...]  # its symbolic links


class Holdings(Struct, frozen=True):
    """What each snapshot's files are, by inode, and which inodes only snapshots link to."""

    files: Mapping[str, Mapping[Inode, int]]  # snapshot id -> {inode: size}
    only_in_snapshots: frozenset[Inode]  # no link outside the snapshot folders
    alone: Mapping[str, int] = {}  # snapshot id -> bytes linked from that snapshot only

    def held(self, ids: Iterable[str]) -> int:
        """Bytes these snapshots keep on disk once every other snapshot is gone: a file still
        installed in the environment costs nothing, one shared by two snapshots counts once."""
        union: dict[Inode, int] = {}
        for snapshot_id in ids:
            union.update(self.files.get(snapshot_id, {}))
        return sum(size for inode, size in union.items() if inode in self.only_in_snapshots)


def _index_file(root: Path) -> CacheFile[dict[str, tuple[Folder, ...]]]:
    return CacheFile(
        root / INDEX_FILE,
        dict[str, tuple[Folder, ...]],
        format="safeuninstall-stash-index",
        version=2,
        max_bytes=64 * 1024 * 1024,
    )


def read_index(root: Path) -> dict[str, tuple[Folder, ...]]:
    """The index of the state folder ``root``: {snapshot id: its stash's folders}; empty when
    there is none or it can't be read."""
    return _index_file(root).read() or {}


def write_index(root: Path, snapshots: Mapping[str, tuple[Folder, ...]]) -> None:
    _index_file(root).write(dict(snapshots))


def walk(top: str) -> Iterator[Entry]:
    """Every entry under ``top`` that is not a folder (nor a link to one), as ``os.walk``
    lists them; what can't be read is passed over."""
    entries, _ = _walk(top, "", record=False)
    return iter(entries)


class Lister:
    """Lists snapshot folders through the index where it holds, and keeps the index of each
    stash as it is now (``recorded``). One lstat per inode per listing."""

    def __init__(self, index: Mapping[str, tuple[Folder, ...]]) -> None:
        self._index = index
        self.recorded: dict[str, tuple[Folder, ...]] = {}
        self._seen: dict[Inode, tuple[int, int]] = {}  # inode: (size, nlink), this listing

    def entries(self, snapshot_id: str, folder: str) -> list[Entry]:
        """Every entry of the snapshot folder that is not a folder, as ``walk`` lists them."""
        listed: list[Entry] = []
        stash = False
        try:
            with os.scandir(folder) as top:
                for entry in top:
                    if entry.name == STASH and entry.is_dir(follow_symlinks=False):
                        stash = True
                    elif not _is_dir(entry):
                        listed += _lstat(entry.path)
                    elif not entry.is_symlink():
                        listed += _walk(entry.path, "", record=False)[0]
        except OSError:
            return listed
        if not stash:
            return listed
        indexed = self._index.get(snapshot_id)
        from_index = None if indexed is None else self._through(folder, indexed)
        if from_index is not None:
            assert indexed is not None
            self.recorded[snapshot_id] = indexed
            return listed + from_index
        walked, folders = _walk(os.path.join(folder, STASH), STASH, record=True)
        if folders is not None:
            self.recorded[snapshot_id] = tuple(folders)
        return listed + walked

    def _through(self, folder: str, indexed: tuple[Folder, ...]) -> list[Entry] | None:
        """The stash's entries from its index, each inode's size and link count read now;
        None when a folder is not as it was recorded."""
        listed: list[Entry] = []
        if not indexed or indexed[0].path != STASH:
            return None
        for record in indexed:
            if not _is_path(record.path):
                return None
            path = f"{folder}/{record.path}"
            try:
                info = os.lstat(path)
            except OSError:
                return None
            if not stat.S_ISDIR(info.st_mode) or FileStamp.of(info) != record.key:
                return None
            for name, ino in record.files:
                inode = (info.st_dev, ino)
                known = self._seen.get(inode)
                if known is None:
                    if not _is_name(name):
                        return None
                    try:
                        now = os.lstat(f"{path}/{name}")
                    except OSError:
                        return None
                    if (now.st_dev, now.st_ino) != inode:
                        return None
                    known = self._seen[inode] = (now.st_size, now.st_nlink)
                listed.append((inode, *known))
            for name in record.links:
                if not _is_name(name):
                    return None
                link = f"{path}/{name}"
                if not os.path.isdir(link):
                    listed += _lstat(link)
        return listed


def _walk(top: str, relative: str, *, record: bool) -> tuple[list[Entry], list[Folder] | None]:
    """The entries under ``top``, and (``record``) its folders' records, None when one can't
    be recorded: unreadable, or changed too recently to be told from a later change."""
    listed: list[Entry] = []
    folders: list[Folder] | None = [] if record else None
    settled = time.time_ns() - _SETTLED_NS
    pending = [(top, relative)]
    while pending:
        path, name = pending.pop()
        files: list[tuple[str, int]] = []
        links: list[str] = []
        try:
            # Its key before its entries: a change while they are read moves its ctime on.
            info = os.lstat(path)
            with os.scandir(path) as entries:
                for entry in entries:
                    if _is_dir(entry):
                        if not entry.is_symlink():
                            pending.append((entry.path, f"{name}/{entry.name}"))
                        else:  # unlisted while it leads to a folder: looked at afresh
                            links.append(entry.name)
                        continue
                    try:
                        now = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    listed.append(((now.st_dev, now.st_ino), now.st_size, now.st_nlink))
                    if stat.S_ISLNK(now.st_mode):
                        links.append(entry.name)
                    else:
                        files.append((entry.name, now.st_ino))
        except OSError:
            folders = None
            continue
        if folders is None:
            continue
        if info.st_ctime_ns >= settled:  # set by every change of an entry (mtime can be set)
            folders = None
            continue
        folders.append(Folder(name, FileStamp.of(info), tuple(files), tuple(links)))
    return listed, folders


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """As os.walk tells a folder: following a link; one that can't be followed is a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _lstat(path: str) -> list[Entry]:
    try:
        info = os.lstat(path)
    except OSError:
        return []
    return [((info.st_dev, info.st_ino), info.st_size, info.st_nlink)]


def _is_name(part: str) -> bool:
    """One path component: nothing that climbs out of or past the folder it is in."""
    return part not in _NOT_NAMES and "/" not in part and "\0" not in part


def _is_path(path: str) -> bool:
    """A folder of a stash, below its snapshot folder: ``stash`` and names under it."""
    parts = path.split("/")
    return parts[0] == STASH and "\0" not in path and _NOT_NAMES.isdisjoint(parts)
