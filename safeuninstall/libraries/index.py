"""Shared libraries: who owns which file, which ELF objects lose or change a DT_NEEDED library
when files disappear, what the environment's processes load (and fail to), and what a probe
process really loaded.

For a removal the loader is simulated twice, once as the environment is and once without the
files a removal deletes; an object whose needed library resolved to a deleted file then either
resolves to nothing (it breaks) or to another file (it drifts: the loader silently picks up
another copy).

For the environment as it is (``census``), loads start where a process really starts them: at
the roots, Python extension modules (loaded into the interpreter) and programs. What a root's
load needs and can't find breaks an import or a program. What only an object no root loads
needs (a plugin that is dlopen'ed on demand, into a process that has usually loaded what it
needs already) and what only a GPU driver provides are information, not breakage.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Final

from msgspec import Struct

from safeuninstall.environment import presence
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.paths import normalise
from safeuninstall.environment.recordcache import Listed, Listings, RecordCache
from safeuninstall.libraries.elf import ElfCache, ElfInfo, is_elf_candidate, read_elf
from safeuninstall.libraries.ldcache import ld_cache_flags, read_ld_cache
from safeuninstall.libraries.loader import Loader, LoadMap, Resolved, split_ld_library_path


class Ownership(Struct, frozen=True):
    """Which installed distributions list each file in their RECORD (paths normalised)."""

    owners: Mapping[str, tuple[str, ...]]
    files: Mapping[str, tuple[str, ...]]  # dist key -> its files
    # dist key -> why its RECORD, which is there, can't be read (naming the file): what that
    # distribution owns is unknown
    unreadable: Mapping[str, str] = {}

    def shared_paths(self, of: Iterable[str] | None = None) -> set[str]:
        """Paths that more than one distribution lists (of those that ``of`` lists: the
        stash asks only about the files it keeps, a few of an ML venv's 63,000)."""
        if of is None:
            return {path for path, owners in self.owners.items() if len(owners) > 1}
        return {
            path
            for name in of
            for path in self.files.get(name, ())
            if len(self.owners.get(path, ())) > 1
        }

    def libraries(self, name: str) -> list[str]:
        """The paths of ``name``'s files named like libraries (what the loader model reads):
        of an on-demand ownership, only their folders are resolved."""
        if isinstance(self.files, _FilesOnDemand):
            return self.files.listings.files_named(name, ".so", is_elf_candidate)
        return [p for p in self.files.get(name, ()) if ".so" in p and is_elf_candidate(p)]

    def owner_of(self, path: str | None) -> str | None:
        if path is None:
            return None
        found = self.owners.get(normalise(path))
        return found[0] if found else None


def ownership(
    installed: Mapping[str, InstalledDistribution], cache: RecordCache | None = None
) -> Ownership:
    """Who lists which file. ``cache``: the RECORDs read by an earlier command, where they
    have not changed since (recordcache.py)."""
    cache = RecordCache() if cache is None else cache
    owners: dict[str, tuple[str, ...]] = {}
    files: dict[str, tuple[str, ...]] = {}
    unreadable: dict[str, str] = {}
    for key, dist in installed.items():
        try:
            paths = cache.files(dist)
        except FileNotFoundError:  # none written (some installers): as before, nothing known
            files[key] = ()
            continue
        except OSError as err:  # there, but broken: said where it matters
            files[key] = ()
            unreadable[key] = str(err)
            continue
        files[key] = paths
        _add_owner(owners, key, paths)
    return Ownership(owners, files, unreadable)


def ownership_on_demand(
    installed: Mapping[str, InstalledDistribution], cache: RecordCache
) -> Ownership:
    """Who lists which file, as ``ownership`` answers it, worked out where it is asked: a
    RECORD the cache answers for is resolved when one of its files is asked about, and who
    lists a path is found by its folder (recordcache.Listings). Iterating the owners works
    out every path, as ``ownership`` does."""
    listed: dict[str, Listed] = {}
    unreadable: dict[str, str] = {}
    for key, dist in installed.items():
        try:
            listed[key] = cache.listing(dist)
        except FileNotFoundError:  # none written (some installers): as before, nothing known
            listed[key] = ()
        except OSError as err:  # there, but broken: said where it matters
            listed[key] = ()
            unreadable[key] = str(err)
    listings = Listings(listed)
    return Ownership(_OwnersOnDemand(listings), _FilesOnDemand(listings), unreadable)


class _FilesOnDemand(Mapping[str, tuple[str, ...]]):
    """Distribution -> its files, each RECORD's resolved on the first ask."""

    def __init__(self, listings: Listings) -> None:
        self.listings = listings

    def __getitem__(self, key: str) -> tuple[str, ...]:
        return self.listings.files(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.listings.keys())

    def __len__(self) -> int:
        return len(self.listings.keys())


class _OwnersOnDemand(Mapping[str, tuple[str, ...]]):
    """Path -> who lists it: one path by its folder; all of them when iterated."""

    def __init__(self, listings: Listings) -> None:
        self.listings = listings

    def __getitem__(self, path: str) -> tuple[str, ...]:
        found = self.listings.owners(path)
        if not found:
            raise KeyError(path)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.listings.everything())

    def __len__(self) -> int:
        return len(self.listings.everything())


def _add_owner(owners: dict[str, tuple[str, ...]], key: str, paths: Sequence[str]) -> None:
    """``key`` lists ``paths``: most are no one else's, so they are added in one C call (an
    ML venv has 63,000), and only the shared ones one by one."""
    mine: dict[str, tuple[str, ...]] = dict.fromkeys(paths, (key,))
    if len(mine) != len(paths):  # a RECORD listing a path twice: the owner counted twice
        for path in paths:
            owners[path] = (*owners.get(path, ()), key)
        return
    for path in owners.keys() & mine.keys():
        mine[path] = (*owners[path], key)
    owners.update(mine)


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


class LibraryIndex:
    """The ELF objects of an environment and a loader to resolve their needs; each file is
    read once a command (ElfCache)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.cache = ElfCache()
        self._ld_library_path = split_ld_library_path(environ.get("LD_LIBRARY_PATH"))
        self._ld_cache = _LazyLdCache()

    def loader(self, gone: Collection[str] = ()) -> Loader:
        """A loader for the environment as it is, or as it will be without ``gone`` files."""

        def exists(path: str) -> bool:
            return os.path.isfile(path) and (not gone or normalise(path) not in gone)

        return Loader(self._ld_library_path, self._ld_cache, exists=exists, reader=self.cache.get)

    def objects(self, paths: Iterable[str]) -> list[ElfInfo]:
        """The dynamic ELF files among ``paths`` named like libraries (``*.so``, ``*.so.*``)."""
        found = []
        for path in paths:
            # ".so" first: one C call for the 95 % of a torch venv's 16,000 paths that are not
            if ".so" not in path or not is_elf_candidate(path):
                continue
            info = self.cache.get(path)
            if info is not None:
                found.append(info)
        return found

    def scan(self, paths: Iterable[str]) -> tuple[list[ElfInfo], list[ElfInfo]]:
        """The dynamic ELF files among ``paths``: (those named like libraries, the programs).

        A program is a file in a ``bin`` folder, or without a dot in its name outside the
        metadata folders (``torch/bin/torch_shm_manager``, ``triton/FileCheck``), that has a
        PT_INTERP; files named otherwise are not opened (a wheel has thousands of them).
        """
        libraries, programs = [], []
        for path in paths:
            folder, _, name = path.rpartition("/")
            if ".so" in name and is_elf_candidate(name):
                info = self.cache.get(path)
                if info is not None:
                    libraries.append(info)
            elif folder.endswith("/bin") or ("." not in name and not _is_metadata(folder)):
                info = self.cache.get(path)
                if info is not None and info.program:
                    programs.append(info)
        return libraries, programs


def _is_metadata(folder: str) -> bool:
    """A ``*.dist-info`` folder (RECORD, METADATA, WHEEL... have no dot) or below one."""
    return folder.endswith(".dist-info") or ".dist-info/" in folder


class _LazyLdCache(Mapping[str, Sequence[str]]):
    """/etc/ld.so.cache, parsed the first time the loader model looks outside the environment:
    a removal whose files no ELF object names never does, and never pays for it."""

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
        for obj in index.objects(owned.libraries(dist)):
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


# -- what the environment's processes load -----------------------------------------------------

# Sonames a GPU driver installs and no wheel ships: a wheel that needs one expects the driver on
# the machine. On a machine without that GPU they are absent, and no install can bring them.
DRIVER_LIBRARIES: Final = frozenset(
    {
        "libcuda.so.1",
        "libcudadebugger.so.1",
        "libnvcuvid.so.1",
        "libnvidia-encode.so.1",
        "libnvidia-fbc.so.1",
        "libnvidia-ml.so.1",
        "libnvidia-nvvm.so.4",
        "libnvidia-opticalflow.so.1",
        "libnvidia-ptxjitcompiler.so.1",
        "libnvoptix.so.1",
        "libdxcore.so",  # WSL's GPU bridge
    }
)


class MissingLibrary(Struct, frozen=True):
    """A needed library that no search finds."""

    soname: str
    needed_by: tuple[str, ...]  # the objects that need it (paths)
    distributions: tuple[str, ...]  # theirs; for an object outside the environment, the root's


class Census(Struct, frozen=True):
    """The needed libraries that the environment's processes can't find, by what that means."""

    missing: tuple[MissingLibrary, ...]  # a root's load needs it: an import or a program fails
    on_demand: tuple[MissingLibrary, ...]  # needed only where no root's load reaches (plugins)
    driver: tuple[MissingLibrary, ...]  # a GPU driver's library: never in a wheel
    roots: int  # extension modules and programs loaded


class _Needs:
    """soname -> (objects, distributions) that need it, in the order met."""

    def __init__(self) -> None:
        self.by_soname: dict[str, tuple[dict[str, None], dict[str, None]]] = {}

    def add(self, soname: str, consumer: str, dist: str) -> None:
        objects, dists = self.by_soname.setdefault(soname, ({}, {}))
        objects[consumer] = None
        dists[dist] = None

    def listed(self, leave_out: Collection[str] = ()) -> tuple[MissingLibrary, ...]:
        return tuple(
            MissingLibrary(soname, tuple(objects), tuple(sorted(dists)))
            for soname, (objects, dists) in sorted(self.by_soname.items())
            if soname not in leave_out
        )


class RootLoads(Struct, frozen=True):
    """Every root of the environment loaded as its process would load it (``root_loads``)."""

    held: Mapping[str, tuple[str, ElfInfo]]  # library path (normalised) -> (distribution, it)
    loads: tuple[tuple[str, ElfInfo, LoadMap], ...]  # (distribution, root, its load)
    everything: Mapping[str, str]  # every name some root's load brought -> its path
    loader: Loader


def root_loads(
    index: LibraryIndex,
    owned: Ownership,
    requires: Mapping[str, Collection[str]],
    interpreter: str,
) -> RootLoads:
    """Load every root of the environment (its extension modules and programs) as its process
    would: see ``census``, which sorts what these loads can't find."""
    loader = index.loader()
    python = index.cache.get(os.path.realpath(interpreter))
    started = loader.load(python).names if python is not None else {}
    chain = (python,) if python is not None else ()
    held: dict[str, tuple[str, ElfInfo]] = {}
    roots: list[tuple[str, ElfInfo]] = []
    for dist, files in owned.files.items():
        objects, programs = index.scan(files)
        for info in objects:
            held[info.path] = (dist, info)  # RECORD paths: normalised already
        roots += [(dist, info) for info in objects if info.python_extension]
        roots += [(dist, info) for info in programs]

    def load_root(info: ElfInfo, loaded: Mapping[str, str]) -> LoadMap:
        if info.program:
            return loader.load(info)
        return loader.load(info, loaded=loaded, chain=chain)

    first = [(dist, info, load_root(info, started)) for dist, info in roots]
    brought: dict[str, dict[str, str]] = {}  # distribution -> names its roots' loads brought
    for dist, info, done in first:
        # A load that fails leaves nothing loaded (dlopen unmaps what it mapped).
        if not info.program and not done.missing:
            _merge(brought.setdefault(dist, {}), done.names)
    loads = []
    everything = dict(started)
    for dist, info, done in first:
        if done.missing and not info.program:
            loaded = dict(started)
            for name in _required(dist, requires):
                _merge(loaded, brought.get(name, {}))
            done = load_root(info, loaded)
        loads.append((dist, info, done))
        # Broken or not, what the roots load is what a plugin finds.
        _merge(everything, done.names)
    return RootLoads(held, tuple(loads), everything, loader)


def census(
    index: LibraryIndex,
    owned: Ownership,
    requires: Mapping[str, Collection[str]],
    interpreter: str,
) -> Census:
    """Load every root of the environment as its process would, and sort what can't be found.

    An extension module is loaded into the interpreter (``interpreter``, whose own libraries
    are then loaded already), alone. Where that leaves a need unmet, it is loaded again after
    the roots of its distribution and of everything that distribution requires (``requires``:
    name -> the names it requires, installed), as an import of it loads them first: what they
    loaded answers by name (a module that needs ``libc10.so`` without a path to torch's, and
    counts on ``import torch`` having loaded it). A program is loaded alone. An object
    that no root's load reaches is loaded after all of them: what it still can't find is
    information (``on_demand``), as is a driver's library (``driver``).
    """
    found = root_loads(index, owned, requires, interpreter)
    held = found.held
    needs, plugins, driver = _Needs(), _Needs(), _Needs()
    reached: set[str] = set()

    def note(missing: Iterable[Resolved], into: _Needs, dist: str) -> None:
        for entry in missing:
            consumer = normalise(entry.consumer)
            found_in = driver if entry.soname in DRIVER_LIBRARIES else into
            found_in.add(entry.soname, consumer, held[consumer][0] if consumer in held else dist)

    for dist, _, done in found.loads:
        note(done.missing, needs, dist)
        reached.update(normalise(obj.path) for obj in done.objects)
    for path, (dist, info) in held.items():
        if path not in reached:
            note(found.loader.load(info, loaded=found.everything).missing, plugins, dist)
    return Census(
        missing=needs.listed(),
        on_demand=plugins.listed(leave_out=needs.by_soname),
        driver=driver.listed(),
        roots=len(found.loads),
    )


def _merge(into: dict[str, str], names: Mapping[str, str]) -> None:
    """Names already there keep their object, as in one process."""
    for name, path in names.items():
        into.setdefault(name, path)


def _required(dist: str, requires: Mapping[str, Collection[str]]) -> list[str]:
    """``dist`` and every installed distribution it requires, directly or not."""
    seen = {dist: None}
    pending = [dist]
    while pending:
        for name in requires.get(pending.pop(), ()):
            if name not in seen:
                seen[name] = None
                pending.append(name)
    return list(seen)


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
        # The same path is the same file by either realpath (/proc/self/maps gives real paths:
        # every library of an unchanged torch import, 170 realpath calls twice, is this case).
        if moved is not None and (
            moved == path or os.path.realpath(moved) == os.path.realpath(path)
        ):
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
    return presence.hollow(owned.files, installed)
