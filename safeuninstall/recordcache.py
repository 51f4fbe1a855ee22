"""The files each installed RECORD lists, normalised, kept between commands.

What a removal needs from the distributions that stay (which files they share with it, which
libraries they provide or need) is in their RECORDs. Reading and normalising every RECORD of a
CUDA torch venv (29 files, 16,136 paths) took 0.23 s of a 1.2 s removal; read from this cache
it takes 6 ms (docs/performance.md). A RECORD changes only when its distribution is
reinstalled, so an entry is used while the RECORD's stat is the one it was read with: device,
inode, size, mtime and ctime, all of them (uv writes a new RECORD, a new inode, on every
install; ctime is set by the kernel on any change, and no one can set it back).

The cache file is untrusted input like every other file the tool reads: anything that is not
a well-formed entry for the RECORD as it is now (corrupt, truncated, a FIFO, too large, from
another environment, another inode, an index out of range) is ignored and the RECORD is read.
It only ever answers "which paths does this RECORD list"; the stash reads the RECORD again
itself, so what a removal keeps never comes from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from msgspec import Struct

from .cachefile import RecordKeyed, Stored
from .environment import InstalledDistribution
from .paths import normalise, real_folder

RECORD_CACHE_FILE = "record-cache.json"
_FORMAT = "safeuninstall-record-cache"
_VERSION = 1
# A 235-distribution ML venv's cache is about 2 MB; more is not one of these files.
_MAX_CACHE_BYTES = 256 * 1024 * 1024

StatKey = tuple[int, int, int, int, int]  # dev, inode, size, mtime_ns, ctime_ns


def stat_key(info: os.stat_result) -> StatKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class _Entry(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """One RECORD's paths: ``folders`` (normalised lexically, not resolved: symlinks are
    resolved on use), and for each path in RECORD order its folder's index and its name."""

    key: StatKey
    folders: list[str]
    index: list[int]
    names: list[str]


class RecordCache(RecordKeyed[_Entry]):
    """RECORD path -> the paths it lists, normalised (paths.normalise), by the RECORD's stat."""

    def __init__(self, cache_file: Path | None = None) -> None:
        super().__init__(cache_file, Stored[_Entry], _FORMAT, _VERSION, _MAX_CACHE_BYTES)

    def files(self, dist: InstalledDistribution) -> tuple[str, ...]:
        """The normalised paths of ``dist.record()``, in its order; raises what it raises."""
        if dist.legacy:  # no RECORD: what uv would delete, worked out as it does
            return _normalised(str(dist.site_dir), (e.path for e in dist.record()))
        record = dist.dist_info / "RECORD"
        name = str(record)
        self._sites.add(str(dist.site_dir))
        before = os.stat(record)
        key = stat_key(before)
        entry = self._stored.get(name)
        if entry is not None and entry.key == key:
            paths = _rebuilt(entry)
            if paths is not None:
                self._used[name] = entry
                self.hits += 1
                return paths
        entries = dist.record()
        site = str(dist.site_dir)
        paths = _normalised(site, (e.path for e in entries))
        # Kept only if the RECORD did not change while it was read.
        if stat_key(os.stat(record)) == key:
            self._used[name] = _entry(key, site, [e.path for e in entries])
            self.changed = True
        return paths


def _rebuilt(entry: _Entry) -> tuple[str, ...] | None:
    """The entry's paths, normalised; None when it is not a well-formed entry."""
    folders, index, names = entry.folders, entry.index, entry.names
    if len(index) != len(names):
        return None
    if index and (min(index) < 0 or max(index) >= len(folders)):
        return None
    for folder in folders:
        if not folder.startswith("/") or "\0" in folder or os.path.normpath(folder) != folder:
            return None
    if not _NO_NAME.isdisjoint(names):
        return None
    joined = "".join(names)
    if "/" in joined or "\0" in joined:
        return None
    reals = [_joinable(real_folder(folder)) for folder in folders]
    # map, not a generator: 63,000 paths in an ML venv
    return tuple(map(str.__add__, map(reals.__getitem__, index), names))


_NO_NAME = frozenset({"", ".", ".."})


def _joinable(folder: str) -> str:
    return folder if folder.endswith("/") else folder + "/"


def _normalised(site: str, paths: Iterable[str]) -> tuple[str, ...]:
    """``normalise(site/path)`` for each: the same strings, a folder resolved once."""
    reals: dict[str, str] = {}
    found = []
    for path in paths:
        folder, _, name = path.rpartition("/")
        if path.startswith("/") or "./" in path or "//" in path or name in ("", ".", ".."):
            found.append(normalise(os.path.join(site, path)))
            continue
        real = reals.get(folder)
        if real is None:
            real = reals[folder] = _joinable(
                real_folder(os.path.join(site, folder) if folder else site)
            )
        found.append(real + name)
    return tuple(found)


def _entry(key: StatKey, site: str, paths: list[str]) -> _Entry:
    """What is stored: each path's folder normalised lexically (not resolved), its name."""
    folders: dict[str, int] = {}
    index, names = [], []
    for path in paths:
        folder, name = os.path.split(os.path.normpath(os.path.join(site, path)))
        index.append(folders.setdefault(folder, len(folders)))
        names.append(name)
    return _Entry(key, list(folders), index, names)
