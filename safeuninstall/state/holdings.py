"""What the files of a snapshot folder are, for ``Store.holdings``: by inode, walked.

The bytes a stash alone keeps are those of its inodes linked from nowhere else, so every
listing needs each stashed file's inode, size and link count. The link count changes whenever
the environment's copy of a file is removed or put back, so it is read afresh every time: one
walk of the snapshot folder, one lstat per entry. Nothing of it is kept between commands (an
index of each folder's names saved only the listing of the folders, not the lstats: under a
tenth of `snapshots`, with 50 snapshots or with one that stashed torch).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping

from msgspec import Struct

from safeuninstall.environment.sizes import entries_under

Inode = tuple[int, int]  # (st_dev, st_ino)
Entry = tuple[Inode, int, int]  # a listed file: its inode, st_size, st_nlink


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


def walk(top: str) -> Iterator[Entry]:
    """Every entry under ``top`` that is not a folder (nor a link to one), as ``os.walk``
    lists them; what can't be read is passed over. One lstat per entry, relative to its
    folder's descriptor (sizes.entries_under): a stash's files lie some ten folders deep."""
    for _, entry in entries_under(top):
        if entry.is_symlink() and _is_dir(entry):
            continue  # a link to a folder: neither listed nor followed
        try:
            now = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        yield ((now.st_dev, now.st_ino), now.st_size, now.st_nlink)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """As os.walk tells a folder: following a link; one that can't be followed is a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False
