"""The files each installed RECORD lists, normalised, kept between commands.

What a removal needs from the distributions that stay (which files they share with it, which
libraries they provide or need) is in their RECORDs, and reading and normalising every one of
them on every command grows with the environment. What a RECORD lists decides verdicts (which
files a removal takes from another distribution), so an entry is keyed by the sha256 of the
RECORD's bytes: each RECORD is read and hashed on every command (35 ms for the 235 RECORDs of an
ML venv), and only parsing and normalising its paths (more than a second there) is saved.

The cache file is untrusted input like every other file the tool reads: anything that is not
a well-formed entry for the RECORD's bytes as they are now (corrupt, truncated, a FIFO, too
large, from another environment, an index out of range) is ignored and the RECORD is parsed.
It only ever answers "which paths does this RECORD list"; the stash reads the RECORD again
itself, so what a removal keeps never comes from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, KeysView, Mapping
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.cachefile import CacheFile, RecordKeyed, digest
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.paths import normalise, real_folder
from safeuninstall.environment.records import paths_of, read_record_bytes

RECORD_CACHE_FILE = "record-cache.json"


class _Entry(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """One RECORD's paths: ``folders`` (normalised lexically, not resolved: symlinks are
    resolved on use), and for each path in RECORD order its folder's index and its name."""

    key: str  # the sha256 of the RECORD's bytes
    folders: list[str]
    index: list[int]
    names: list[str]


class RecordCache(RecordKeyed[_Entry]):
    """RECORD path -> the paths it lists, normalised (paths.normalise), by the RECORD's stat."""

    def __init__(self, cache_file: Path | None = None) -> None:
        super().__init__(None if cache_file is None else _file(cache_file))

    def files(self, dist: InstalledDistribution) -> tuple[str, ...]:
        """The normalised paths of ``dist.record()``, in its order; raises what it raises."""
        found = self.listing(dist)
        return found if isinstance(found, tuple) else _resolved(found)

    def listing(self, dist: InstalledDistribution) -> _Entry | tuple[str, ...]:
        """What ``dist``'s RECORD lists: its checked cache entry, whose folders are resolved
        when asked (Listings), or its normalised paths, read; raises what reading raises."""
        if dist.legacy:  # no RECORD: what uv would delete, worked out as it does
            return _normalised(str(dist.site_dir), (e.path for e in dist.record()))
        record = dist.dist_info / "RECORD"
        name = str(record)
        self._sites.add(str(dist.site_dir))
        raw = read_record_bytes(record)
        key = digest(raw)
        entry = self._stored.get(name)
        if entry is not None and entry.key == key and _well_formed(entry):
            self._used[name] = entry
            self.hits += 1
            return entry
        listed = paths_of(raw, record)
        site = str(dist.site_dir)
        self._used[name] = _entry(key, site, listed)
        self.changed = True
        return _normalised(site, listed)


def _file(path: Path) -> CacheFile[dict[str, _Entry]]:
    # A 235-distribution ML venv's is about 2 MB; more is not one of these files.
    return CacheFile(
        path, dict[str, _Entry], format="safeuninstall-record-cache", version=3, max_bytes=256 << 20
    )


def _well_formed(entry: _Entry) -> bool:
    """Whether the entry can be rebuilt into paths: indexes in range, absolute folders in
    normal form, names that are one path component each."""
    folders, index, names = entry.folders, entry.index, entry.names
    if len(index) != len(names):
        return False
    if index and (min(index) < 0 or max(index) >= len(folders)):
        return False
    if not _normal_folders(folders):
        for folder in folders:
            if not folder.startswith("/") or "\0" in folder or os.path.normpath(folder) != folder:
                return False
    return _component_names(names)


def _normal_folders(folders: list[str]) -> bool:
    """Whether every folder is absolute, in normal form and NUL-free, checked on one joined
    string (an ML venv has thousands of folders; a normpath each costs more than the check).
    False says "look at each one" (the root folder, ``/``, is one of those)."""
    joined = "\0" + "\0".join(folders) + "\0"
    return (
        joined.count("\0") == len(folders) + 1  # no NUL within a folder
        and joined.count("\0/") == len(folders)  # each starts with /
        and not any(part in joined for part in _NOT_NORMAL)
    )


# In a joined string of absolute folders: an empty, "." or ".." component, a trailing slash.
_NOT_NORMAL = ("//", "/./", "/../", "/.\0", "/..\0", "/\0")


def _component_names(names: list[str]) -> bool:
    """Whether each name is one path component: not empty, ``.`` or ``..``, without ``/`` or
    NUL (one joined string: the 63,000 names of an ML venv)."""
    if not names:
        return True
    joined = "\0" + "\0".join(names) + "\0"
    return (
        joined.count("\0") == len(names) + 1
        and "/" not in joined
        and not any(part in joined for part in _NOT_A_NAME)
    )


_NOT_A_NAME = ("\0\0", "\0.\0", "\0..\0")


def _resolved(entry: _Entry) -> tuple[str, ...]:
    """A well-formed entry's paths, normalised (its folders resolved now)."""
    reals = [_joinable(real_folder(folder)) for folder in entry.folders]
    # map, not a generator: 63,000 paths in an ML venv
    return tuple(map(str.__add__, map(reals.__getitem__, entry.index), entry.names))


_NO_NAME = ("", ".", "..")


def _joinable(folder: str) -> str:
    return folder if folder.endswith("/") else folder + "/"


def _normalised(site: str, paths: Iterable[str]) -> tuple[str, ...]:
    """``normalise(site/path)`` for each: the same strings, a folder resolved once."""
    reals: dict[str, str] = {}
    found = []
    for path in paths:
        folder, _, name = path.rpartition("/")
        if path.startswith("/") or "./" in path or "//" in path or name in _NO_NAME:
            found.append(normalise(os.path.join(site, path)))
            continue
        real = reals.get(folder)
        if real is None:
            real = reals[folder] = _joinable(
                real_folder(os.path.join(site, folder) if folder else site)
            )
        found.append(real + name)
    return tuple(found)


def _entry(key: str, site: str, paths: list[str]) -> _Entry:
    """What is stored: each path's folder normalised lexically (not resolved), its name."""
    folders: dict[str, int] = {}
    index, names = [], []
    for path in paths:
        folder, name = os.path.split(os.path.normpath(os.path.join(site, path)))
        index.append(folders.setdefault(folder, len(folders)))
        names.append(name)
    return _Entry(key, list(folders), index, names)


Listed = _Entry | tuple[str, ...]  # RecordCache.listing: a checked entry, or paths read
_Identity = tuple[int, int]  # a folder's device and inode: the same folder, whatever path
_Place = tuple[str, int]  # a distribution and one of its cache entry's folders (an index)


class Listings:
    """What the installed RECORDs list, resolved where it is asked about: a removal asks
    about its own distributions' files and who else lists them, not about every path the
    environment's RECORDs list.

    Built from ``RecordCache.listing`` of each distribution: a tuple of normalised paths (a
    RECORD read, a legacy install) or a checked cache entry whose folders, as written, are
    resolved only when one of its files is asked about. Who lists a path is answered as the
    whole ownership would answer it: every folder of every entry is stat'ed now (one stat per
    folder, the folder's device and inode, not cached between commands), and the entries
    whose folder is the path's folder, however reached (a symlink made since the cache was
    written included), are the candidates; a folder that can't be stat'ed is one for every
    question.
    """

    def __init__(self, listed: Mapping[str, Listed]) -> None:
        self._listed = listed
        self._rank = {key: rank for rank, key in enumerate(listed)}
        self._files: dict[str, tuple[str, ...]] = {}
        self._by_folder: dict[_Identity, list[_Place]] | None = None  # built on first ask
        self._unstatable: list[_Place] = []
        self._by_written: dict[str, list[_Place]] = {}  # a folder as an entry writes it
        self._names: dict[str, dict[int, dict[str, int]]] = {}  # key -> folder -> name -> count
        self._places: dict[str, list[_Place]] = {}  # a real folder asked about -> its places
        self._read: dict[str, tuple[str, ...]] | None = None  # path -> owners, of the tuples
        self._everything: dict[str, tuple[str, ...]] | None = None

    def keys(self) -> KeysView[str]:
        return self._listed.keys()

    def files(self, key: str) -> tuple[str, ...]:
        """The normalised paths ``key``'s RECORD lists, in its order (KeyError: not listed)."""
        found = self._files.get(key)
        if found is None:
            listed = self._listed[key]
            found = self._files[key] = listed if isinstance(listed, tuple) else _resolved(listed)
        return found

    def files_named(self, key: str, part: str, wanted: Callable[[str], bool]) -> list[str]:
        """The normalised paths of ``key``'s files whose name holds ``part`` and is
        ``wanted``: only their folders are resolved."""
        listed = self._listed[key]
        if isinstance(listed, tuple) or key in self._files:
            found = self.files(key)
            return [p for p in found if part in p and wanted(p.rpartition("/")[2])]
        folders = listed.folders
        pairs = zip(listed.index, listed.names, strict=True)
        # ``part`` first, one comparison in the loop: the 63,000 names of an ML venv
        named = [(at, name) for at, name in pairs if part in name]
        return [_joinable(real_folder(folders[at])) + name for at, name in named if wanted(name)]

    def owners(self, path: str) -> tuple[str, ...]:
        """The distributions that list ``path`` (normalised), in the installed set's order,
        one listed twice counted twice (as ``Ownership`` counts it)."""
        folder, _, name = path.rpartition("/")
        places = self._places.get(folder)  # a folder asked about before is one in normal form
        if places is None:
            if not folder.startswith("/") or os.path.normpath(folder) != folder:
                return self.everything().get(path, ())  # as the whole ownership answers it
            places = self._places_of(folder)
        if name in _NO_NAME:
            return self.everything().get(path, ())
        found = list(self._read_owners().get(path, ()))
        for key, at in places:
            count = self._names_in(key, at).get(name, 0)
            if count:
                found += [key] * count
        if len(found) > 1:
            found.sort(key=self._rank.__getitem__)
        return tuple(found)

    def everything(self) -> dict[str, tuple[str, ...]]:
        """Path -> who lists it, for every path (what iterating the owners needs)."""
        if self._everything is None:
            owners: dict[str, tuple[str, ...]] = {}
            for key in self._listed:
                for path in self.files(key):
                    owners[path] = (*owners.get(path, ()), key)
            self._everything = owners
        return self._everything

    def _read_owners(self) -> dict[str, tuple[str, ...]]:
        if self._read is None:
            self._read = {}
            for key, listed in self._listed.items():
                if isinstance(listed, tuple):
                    for path in listed:
                        self._read[path] = (*self._read.get(path, ()), key)
        return self._read

    def _places_of(self, folder: str) -> list[_Place]:
        """The entries' folders that are ``folder`` (a real path) now."""
        found = self._places.get(folder)
        if found is None:
            by_folder = self._stat_folders()
            # By identity as stat'ed at the first question, and by the folder as written: one
            # removed and made again since (a new inode) is still found where it is written.
            candidates = self._unstatable + self._by_written.get(folder, [])
            try:
                info = os.stat(folder)
            except OSError:
                pass
            else:
                candidates += by_folder.get((info.st_dev, info.st_ino), [])
            found = self._places[folder] = [
                (key, at)
                for key, at in dict.fromkeys(candidates)
                if real_folder(self._entry(key).folders[at]) == folder
            ]
        return found

    def _stat_folders(self) -> dict[_Identity, list[_Place]]:
        if self._by_folder is None:
            by_folder: dict[_Identity, list[_Place]] = {}
            seen: dict[str, _Identity | None] = {}
            for key, listed in self._listed.items():
                if isinstance(listed, tuple):
                    continue
                for at, folder in enumerate(listed.folders):
                    self._by_written.setdefault(folder, []).append((key, at))
                    if folder in seen:
                        identity = seen[folder]
                    else:
                        try:
                            info = os.stat(folder)
                        except OSError:
                            identity = None
                        else:
                            identity = (info.st_dev, info.st_ino)
                        seen[folder] = identity
                    if identity is None:
                        self._unstatable.append((key, at))
                    else:
                        by_folder.setdefault(identity, []).append((key, at))
            self._by_folder = by_folder
        return self._by_folder

    def _entry(self, key: str) -> _Entry:
        listed = self._listed[key]
        assert not isinstance(listed, tuple)
        return listed

    def _names_in(self, key: str, at: int) -> dict[str, int]:
        """The names ``key``'s entry lists in its folder ``at``, each with its count (all its
        folders' at the first ask: a removal of torch asks about 20,000 paths in 1,000)."""
        folders = self._names.get(key)
        if folders is None:
            entry = self._entry(key)
            folders = self._names[key] = {}
            for index, name in zip(entry.index, entry.names, strict=True):
                names = folders.get(index)
                if names is None:
                    names = folders[index] = {}
                names[name] = names.get(name, 0) + 1
        return folders.get(at, {})
