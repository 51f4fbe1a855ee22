"""Shared libraries: who owns which file, which ELF objects lose or change a DT_NEEDED library
when files disappear, and what a probe process really loaded.

The loader is simulated twice, once as the environment is and once without the files a removal
deletes; an object whose needed library resolved to a deleted file then either resolves to
nothing (it breaks) or to another file (it drifts: the loader silently picks up another copy).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import msgspec
from msgspec import Struct

from .elf import (
    ElfCache,
    ElfInfo,
    Loader,
    is_elf_candidate,
    ld_cache_flags,
    read_elf,
    read_ld_cache,
    split_ld_library_path,
)
from .environment import InstalledDistribution
from .paths import normalise

ELF_CACHE_FILE = "elf-cache.json"


class Ownership(Struct, frozen=True):
    """Which installed distributions list each file in their RECORD (paths normalised)."""

    owners: Mapping[str, tuple[str, ...]]
    files: Mapping[str, tuple[str, ...]]  # dist key -> its files
    # dist key -> why its RECORD, which is there, can't be read (naming the file): what that
    # distribution owns is unknown
    unreadable: Mapping[str, str] = {}

    def shared_paths(self) -> set[str]:
        """Paths that more than one distribution lists."""
        return {path for path, owners in self.owners.items() if len(owners) > 1}

    def owner_of(self, path: str | None) -> str | None:
        if path is None:
            return None
        found = self.owners.get(normalise(path))
        return found[0] if found else None


def ownership(installed: Mapping[str, InstalledDistribution]) -> Ownership:
    owners: dict[str, list[str]] = {}
    files: dict[str, tuple[str, ...]] = {}
    unreadable: dict[str, str] = {}
    for key, dist in installed.items():
        try:
            entries = dist.record()
        except FileNotFoundError:  # none written (some installers): as before, nothing known
            files[key] = ()
            continue
        except OSError as err:  # there, but broken: said where it matters
            files[key] = ()
            unreadable[key] = str(err)
            continue
        site = str(dist.site_dir)
        paths = tuple(normalise(os.path.join(site, e.path)) for e in entries)
        files[key] = paths
        for path in paths:
            owners.setdefault(path, []).append(key)
    return Ownership({p: tuple(o) for p, o in owners.items()}, files, unreadable)


class LibraryChange(Struct, frozen=True):
    """``consumer`` needs ``soname``; it resolves to ``before`` now and to ``after`` later."""

    consumer: str
    consumer_dist: str | None
    soname: str
    before: str
    before_dist: str | None
    after: str | None
    after_dist: str | None

    @property
    def breaks(self) -> bool:
        return self.after is None

    def to_dict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)


class LibraryIndex:
    """The ELF objects of an environment and a loader to resolve their needs, with a cache."""

    def __init__(self, environ: Mapping[str, str], cache_file: Path | None = None) -> None:
        self.cache = ElfCache()
        self.cache_file = cache_file
        if cache_file is not None:
            self.cache.load(cache_file)
        self._ld_library_path = split_ld_library_path(environ.get("LD_LIBRARY_PATH"))
        self._ld_cache = _LazyLdCache()

    def loader(self, gone: Collection[str] = ()) -> Loader:
        """A loader for the environment as it is, or as it will be without ``gone`` files."""

        def exists(path: str) -> bool:
            return os.path.isfile(path) and (not gone or normalise(path) not in gone)

        return Loader(self._ld_library_path, self._ld_cache, exists=exists, reader=self.cache.get)

    def objects(self, paths: Iterable[str]) -> list[ElfInfo]:
        found = []
        for path in paths:
            if not is_elf_candidate(os.path.basename(path)):
                continue
            info = self.cache.get(path)
            if info is not None:
                found.append(info)
        return found

    def save(self) -> None:
        """Store the ELF cache, if a file was read that it did not hold."""
        if self.cache_file is not None and self.cache.changed:
            # A cache that can't be written only costs time on the next run.
            with contextlib.suppress(OSError):
                self.cache.save(self.cache_file)


class _LazyLdCache(Mapping[str, Sequence[str]]):
    """/etc/ld.so.cache, parsed the first time the loader model looks outside the environment:
    a removal whose files no ELF object names never does (3 ms saved)."""

    def __init__(self) -> None:
        self._data: Mapping[str, Sequence[str]] | None = None

    def _loaded(self) -> Mapping[str, Sequence[str]]:
        if self._data is None:
            self._data = read_ld_cache(flags=_host_flags())
        return self._data

    def __getitem__(self, soname: str) -> Sequence[str]:
        return self._loaded()[soname]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def _host_flags() -> frozenset[int] | None:
    info = read_elf(sys.executable)
    return None if info is None else ld_cache_flags(info.elf_class, info.machine)


def library_changes(
    index: LibraryIndex, owned: Ownership, removed: Sequence[str]
) -> list[LibraryChange]:
    """Every needed library of the remaining distributions that a removal takes away."""
    gone = {path for name in removed for path in owned.files.get(name, ())}
    # The loader finds a library by its file name, so only sonames that name a deleted file
    # can be affected: everything else is skipped without resolving.
    gone_names = {os.path.basename(path) for path in gone}
    remaining = [name for name in owned.files if name not in set(removed)]
    now, later = index.loader(), index.loader(gone)
    changes = []
    for dist in remaining:
        for obj in index.objects(owned.files[dist]):
            for soname in obj.needed:
                if os.path.basename(soname) not in gone_names:
                    continue
                before = now.resolve(obj, soname)
                if before is None or normalise(before) not in gone:
                    continue
                after = later.resolve(obj, soname)
                changes.append(
                    LibraryChange(
                        consumer=obj.path,
                        consumer_dist=dist,
                        soname=soname,
                        before=normalise(before),
                        before_dist=owned.owner_of(before),
                        after=normalise(after) if after else None,
                        after_dist=owned.owner_of(after),
                    )
                )
    return changes


def unresolved(index: LibraryIndex, owned: Ownership) -> list[tuple[str, str, str]]:
    """(distribution, object, soname) for every DT_NEEDED that resolves to nothing now."""
    loader = index.loader()
    missing = []
    for dist, files in owned.files.items():
        for obj in index.objects(files):
            for soname in obj.needed:
                if loader.resolve(obj, soname) is None:
                    missing.append((dist, obj.path, soname))
    return missing


# -- what a probe process loaded ------------------------------------------------------------


class Drift(Struct, frozen=True):
    """A library the probe loaded from ``before`` and now loads from ``after`` (or not at all)."""

    library: str  # soname, or file name when it has none
    before: str
    before_dist: str | None
    after: str | None
    after_dist: str | None

    def describe(self) -> str:
        old = f"{self.before} ({self.before_dist or 'no distribution'})"
        if self.after is None:
            return f"{self.library}: was {old}, now not loaded at all"
        return (
            f"{self.library}: was {old}, now {self.after} ({self.after_dist or 'no distribution'})"
        )

    def to_dict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)


def _by_library(paths: Iterable[str], index: LibraryIndex) -> dict[str, str]:
    keyed = {}
    for path in paths:
        info = index.cache.get(path)
        name = info.soname if info is not None and info.soname else os.path.basename(path)
        keyed[name] = path
    return keyed


def drift(
    before: Sequence[str], after: Sequence[str], index: LibraryIndex, owned: Ownership
) -> list[Drift]:
    """Libraries that moved to another real file, or disappeared, between two probe runs."""
    old = _by_library(before, index)
    new = _by_library(after, index)
    changes = []
    for library, path in sorted(old.items()):
        moved = new.get(library)
        if moved is not None and os.path.realpath(moved) == os.path.realpath(path):
            continue
        changes.append(
            Drift(
                library=library,
                before=path,
                before_dist=owned.owner_of(path),
                after=moved,
                after_dist=owned.owner_of(moved),
            )
        )
    return changes


def hollow_distributions(
    owned: Ownership, installed: Mapping[str, InstalledDistribution]
) -> list[str]:
    """Installed distributions some of whose RECORD files are gone (compiled caches aside)."""
    hollow = []
    for key, files in owned.files.items():
        if key not in installed:
            continue
        if any(not p.endswith(".pyc") and not os.path.lexists(p) for p in files):
            hollow.append(key)
    return sorted(hollow)
