"""Which installed distributions miss a file their RECORD lists (hollow), with a cache of those
found whole, kept between commands.

Telling that every file is there is one lstat per file (63,000 in an ML venv: 0.2-0.28 s of
``doctor``). A folder's mtime and ctime change whenever an entry in it is created, removed or
renamed, so a distribution found whole stays whole while its RECORD is the same file (the same
list) and each folder of its files has the stat it had when they were all seen there: one stat
per folder (5,800) instead of one per file.

The kernel stamps a folder with a coarse clock: a removal in the same tick as the look would
leave the stamp as it was. So a folder changed less than ``_SETTLED_NS`` before the look is not
vouched for (its distribution is looked at file by file next time too), as git does with racy
index entries. The cache file is untrusted input like every other file the tool reads: anything
that is not a well-formed entry for the RECORD and folders as they are now is ignored, and the
folders each file needs are worked out from the file list, never taken from the cache.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.cachefile import RecordKeyed, Stored
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.recordcache import StatKey, stat_key

PRESENCE_CACHE_FILE = "presence-cache.json"
_FORMAT = "safeuninstall-presence-cache"
_VERSION = 2  # 2: the entries under "entries", as record-cache.json has them (cachefile.py)
_MAX_CACHE_BYTES = 64 * 1024 * 1024  # an ML venv's is about 0.5 MB
_SETTLED_NS = 2_000_000_000  # a folder changed in the last 2 s is not vouched for

FolderKey = tuple[int, int, int, int]  # dev, inode, mtime_ns, ctime_ns


def _folder_key(info: os.stat_result) -> FolderKey:
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)


class _Whole(Struct, frozen=True, forbid_unknown_fields=True):
    """A distribution all of whose files were there: its RECORD's stat, and the stat of each
    folder of its files at that time."""

    record: StatKey
    folders: dict[str, FolderKey]


class PresenceCache(RecordKeyed[_Whole]):
    """RECORD path -> the distribution was whole, while its RECORD and folders are unchanged."""

    def __init__(self, cache_file: Path | None = None) -> None:
        super().__init__(cache_file, Stored[_Whole], _FORMAT, _VERSION, _MAX_CACHE_BYTES)

    def hollow(
        self, files: Mapping[str, tuple[str, ...]], installed: Mapping[str, InstalledDistribution]
    ) -> list[str]:
        """The installed distributions some of whose files (``files``: name -> its RECORD
        paths, normalised) are gone, compiled caches aside."""
        listings = _Listings()
        hollow = []
        for key, paths in files.items():
            dist = installed.get(key)
            if dist is None:
                continue
            record = None if dist.legacy else str(dist.dist_info / "RECORD")
            self._sites.add(str(dist.site_dir))
            folders = {p.rpartition("/")[0] for p in paths}
            if record is not None and self._still_whole(record, folders):
                continue
            # Stats taken before the look: a removal after them changes them.
            before = _record_key(record)
            settled = _settled_keys(folders) if before is not None else None
            now = settled or {}
            if any(not p.endswith(".pyc") and not listings.lexists(p, now) for p in paths):
                hollow.append(key)
            elif settled is not None and before is not None and _record_key(record) == before:
                assert record is not None
                self._used[record] = _Whole(before, settled)
                self.changed = True
        return sorted(hollow)

    def _still_whole(self, record: str, folders: Iterable[str]) -> bool:
        entry = self._stored.get(record)
        if entry is None or _record_key(record) != entry.record:
            return False
        stored = entry.folders
        for folder in folders:
            key = stored.get(folder)
            if key is None:
                return False
            try:
                if _folder_key(os.stat(folder or "/")) != key:
                    return False
            except (OSError, ValueError):
                return False
        self._used[record] = entry
        self.hits += 1
        return True


def _settled_keys(folders: Iterable[str]) -> dict[str, FolderKey] | None:
    """Each folder's stat, or None when one can't be taken or changed too recently to vouch
    for (see _SETTLED_NS)."""
    settled = time.time_ns() - _SETTLED_NS
    keys: dict[str, FolderKey] = {}
    for folder in folders:
        try:
            info = os.stat(folder or "/")
        except (OSError, ValueError):
            return None
        if info.st_mtime_ns > settled or info.st_ctime_ns > settled:
            return None
        keys[folder] = _folder_key(info)
    return keys


def _record_key(record: str | None) -> StatKey | None:
    if record is None:
        return None
    try:
        return stat_key(os.stat(record))
    except (OSError, ValueError):
        return None


class _Listings:
    """``os.path.lexists`` answered from one listing of each folder: an ML venv's 63,000
    RECORD files are in 5,800 folders, and listing a folder costs about what one lstat does.
    A name the listing lacks is looked up itself, so the answer is lexists' own wherever the
    listing does not vouch for the name (a folder that can't be listed, another spelling).

    A listing serves a distribution only while its folder has the stat it had just before the
    listing, settled (see _SETTLED_NS): a folder several distributions share (site-packages,
    ``nvidia/``) may change between the first one's look and a later one's, and a later one
    found whole is then cached on the folder's new stat."""

    def __init__(self) -> None:
        self._names: dict[str, tuple[FolderKey | None, frozenset[str]]] = {}

    def lexists(self, path: str, now: Mapping[str, FolderKey]) -> bool:
        """``now``: the folders' stats the caller took before this look."""
        folder, _, name = path.rpartition("/")
        known = self._names.get(folder)
        if known is None or (folder in now and known[0] != now[folder]):
            known = self._names[folder] = _listing(folder)
        return name in known[1] or os.path.lexists(path)


def _listing(folder: str) -> tuple[FolderKey | None, frozenset[str]]:
    """The folder's names and its stat before them; no stat when it changed too recently to
    vouch that the names are still those (a change in the same clock tick keeps the stat)."""
    try:
        info = os.stat(folder or "/")
        names = frozenset(os.listdir(folder or "/"))
    except (OSError, ValueError):
        return None, frozenset()
    settled = time.time_ns() - _SETTLED_NS
    if info.st_mtime_ns > settled or info.st_ctime_ns > settled:
        return None, names
    return _folder_key(info), names
