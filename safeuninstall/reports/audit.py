"""The audit: what the environment holds, who needs each distribution, and what can go.

One pass over the installed set (RECORD, METADATA, REQUESTED, INSTALLER), the library model
(libraries.root_loads: which object needs which soname, and which file answers) and one walk
of the site folders. Nothing is written, nothing is locked.

Sizes are the files' sizes in bytes (what ``du --apparent-size`` counts, and what snapshots and
``prune`` count), each file once: a file reached by two paths (a hard link) or listed by two
distributions (two wheels that install the same path) is counted once. A file that only one
distribution lists is that distribution's own (``bytes``); a file that two or more list is
``shared`` (in each one's ``shared_bytes``, and once in the environment's ``shared_bytes``);
a file in a site folder that no RECORD lists is ``unowned``. So the distributions' ``bytes``,
the shared and the unowned bytes add up to the environment's ``total_bytes``.

Everything read from disk is untrusted: a RECORD that can't be read makes its distribution's
files unknown (said, never an orphan); a RECORD path outside the environment is not counted
(said, with how many); a METADATA line that is no requirement names nothing.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence

from msgspec import Struct

from safeuninstall.environment.installed import (
    InstalledDistribution,
    requested,
    requirement_index,
)
from safeuninstall.environment.paths import normalise
from safeuninstall.environment.records import read_record
from safeuninstall.environment.sizes import Counted, Weighing, count, lstat, walk
from safeuninstall.libraries.index import LibraryIndex, Ownership, RootLoads, root_loads
from safeuninstall.probe.runner import ProbeResult
from safeuninstall.reports.impact import Requirer, Unmet, requirers, unmet_now

_USES_KEPT = 50  # objects named per distribution in loaded_by (the count is exact)


class LibraryUse(Struct, frozen=True):
    """``consumer`` (of ``consumer_dist``) needs ``soname``, and the loader finds ``library``."""

    consumer: str
    consumer_dist: str | None
    soname: str
    library: str


class DistributionAudit(Struct, frozen=True, kw_only=True):
    """One installed distribution, as the audit sees it."""

    name: str  # canonical
    version: str
    installer: str
    requested: bool
    # False where its REQUESTED file says nothing (uv writes one for every distribution it
    # installs: environment.requested): then ``requested`` is False, and not known
    requested_known: bool = True
    bytes: int  # files only it lists, each once
    files: int  # how many
    shared_bytes: int = 0  # files it lists with another distribution (counted in none's bytes)
    shared_with: tuple[str, ...] = ()
    # of ``bytes``, files that have hard links the environment does not list (a uv cache, a
    # snapshot's stash): removing it does not free them
    linked_elsewhere_bytes: int = 0
    missing_files: int = 0  # RECORD lists them, the disk has them not (compiled caches aside)
    outside_files: int = 0  # RECORD paths outside the environment: not counted, not trusted
    record_problem: str | None = None  # why its RECORD can't be read: its files are unknown
    metadata_only: bool = False  # lists no file outside its own metadata folder
    required_by: tuple[Requirer, ...] = ()  # lines that hold (extras followed where requested)
    optional_for: tuple[Requirer, ...] = ()  # lines behind an extra no one requests
    loaded_by: tuple[LibraryUse, ...] = ()  # other distributions' objects that load its files
    loaded_by_count: int = 0  # how many such objects (loaded_by keeps the first _USES_KEPT)
    loaded_by_probe: bool | None = None  # the probe process mapped one of its files (--load)
    unmet: tuple[Unmet, ...] = ()  # its own requirements the environment does not meet

    @property
    def orphan(self) -> bool:
        """Nothing requires it, nothing loads it, it was not requested (and its files are
        known). Where whether it was requested is unknown (uv's REQUESTED), it is no orphan:
        it may be the very one the user installed (``top_level``)."""
        return self.requested_known and self._unused

    @property
    def top_level(self) -> bool:
        """Nothing requires it and nothing loads it, and no REQUESTED file tells whether the
        user asked for it (uv writes one for every install): what the user installed, or a
        leftover; no one can tell from the environment."""
        return not self.requested_known and self._unused

    @property
    def _unused(self) -> bool:
        return not (
            self.requested
            or self.required_by
            or self.loaded_by_count
            or self.loaded_by_probe
            or self.record_problem
        )


class LibraryCopy(Struct, frozen=True):
    """One file that answers to a soname: who lists it, and whose wheel's copy it is (the
    owners whose RECORD gives the size it has on disk: two wheels that install one path leave
    the copy of the one installed last)."""

    path: str
    owners: tuple[str, ...]
    content_of: tuple[str, ...]
    loaded: bool  # some root's load (the library model) finds this file for the soname
    needed_by: tuple[str, ...] = ()  # the objects whose need the loader answers with it
    loaded_by_probe: bool | None = None  # the probe process mapped it (--load)


class DuplicateLibrary(Struct, frozen=True):
    """A soname that files of two or more distributions answer to."""

    soname: str
    copies: tuple[LibraryCopy, ...]

    @property
    def distributions(self) -> tuple[str, ...]:
        return tuple(sorted({o for c in self.copies for o in c.owners}))


class UnownedFolder(Struct, frozen=True):
    """Files in a site folder that no RECORD lists, by their first folder (or file) there."""

    path: str
    bytes: int
    files: int


class StashHolding(Struct, frozen=True):
    snapshot: str
    bytes: int  # what its stash alone keeps on disk


class AuditReport(Struct, frozen=True, kw_only=True):
    python: str
    environment: str = ""  # as a person names it (Context.where): a --target folder, say
    site_dirs: tuple[str, ...]
    distributions: tuple[DistributionAudit, ...]  # largest first (bytes + shared_bytes)
    duplicates: tuple[DuplicateLibrary, ...]
    total_bytes: int  # owned + shared + unowned
    owned_bytes: int  # the sum of the distributions' bytes
    shared_bytes: int  # files two or more distributions list, each once
    unowned_bytes: int  # files in the site folders that no RECORD lists
    unowned_files: int
    unowned: tuple[UnownedFolder, ...]  # the largest folders of them
    stash_bytes: int = 0  # what the snapshots' stashes keep that the environment does not
    stashes: tuple[StashHolding, ...] = ()
    probe: tuple[ProbeResult, ...] | None = None  # the runs of --load, else None
    mapped: tuple[str, ...] | None = None  # the files those processes mapped (real paths)
    notes: tuple[str, ...] = ()

    exit_code = 0

    @property
    def orphans(self) -> tuple[str, ...]:
        return tuple(sorted(d.name for d in self.distributions if d.orphan))

    @property
    def top_level(self) -> tuple[str, ...]:
        """Not required, not loaded, and not known to be requested or not (uv's installs)."""
        return tuple(sorted(d.name for d in self.distributions if d.top_level))


# -- sizes -------------------------------------------------------------------------------------


class _Sizes(Struct, frozen=True):
    own: Mapping[str, tuple[int, int, int]]  # dist -> (bytes, files, linked elsewhere bytes)
    shared: Mapping[str, tuple[int, tuple[str, ...]]]  # dist -> (bytes, with whom)
    missing: Mapping[str, int]
    outside: Mapping[str, int]
    shared_total: int
    unowned_total: int
    unowned_files: int
    unowned: tuple[UnownedFolder, ...]


def _sizes(counted: Counted) -> _Sizes:
    own, shared, missing, outside, shared_total, unowned_total, unowned_files, top = counted
    return _Sizes(
        own=own,
        shared=shared,
        missing=missing,
        outside=outside,
        shared_total=shared_total,
        unowned_total=unowned_total,
        unowned_files=unowned_files,
        unowned=tuple(UnownedFolder(*u) for u in top),
    )


# -- who loads whom ----------------------------------------------------------------------------


class _Uses(Struct, frozen=True):
    by_provider: Mapping[str, Mapping[tuple[str, str], LibraryUse]]  # dist -> uses of its files
    loaded: Mapping[str, set[str]]  # soname -> the files root loads found for it
    consumers: Mapping[str, Mapping[str, None]]  # library file -> every object that needs it


def _uses(loads: RootLoads, owned: Ownership) -> _Uses:
    """Every DT_NEEDED a root's load met and found, and those of the objects no root reaches
    (plugins, loaded on demand into a process that has what the roots loaded)."""
    by_provider: dict[str, dict[tuple[str, str], LibraryUse]] = {}
    loaded: dict[str, set[str]] = {}
    consumers: dict[str, dict[str, None]] = {}
    spelled: dict[str, str] = {}  # path -> normalise(path): the same few hundred, met 17,000 times

    def normalised(path: str) -> str:
        found = spelled.get(path)
        if found is None:
            found = spelled[path] = normalise(path)
        return found

    def add(consumer: str, soname: str, path: str) -> None:
        consumer = normalised(consumer)
        library = normalised(path)
        consumers.setdefault(library, {})[consumer] = None
        consumer_owners = owned.owners.get(consumer, ())
        for provider in owned.owners.get(library, ()):
            if provider in consumer_owners:
                continue  # its own objects loading its own files: no one else needs it
            whose = consumer_owners[0] if consumer_owners else None
            use = LibraryUse(consumer, whose, soname, library)
            by_provider.setdefault(provider, {}).setdefault((consumer, soname), use)

    reached: set[str] = set()
    for _, _, done in loads.loads:
        for entry in done.needed:
            if entry.path is not None:
                add(entry.consumer, entry.soname, entry.path)
        for soname, path in done.names.items():
            if "/" not in soname:
                loaded.setdefault(soname, set()).add(normalised(path))
        reached.update(normalised(obj.path) for obj in done.objects)
    for path, (_, info) in loads.held.items():
        if path in reached:
            continue
        for soname in info.needed:
            found = loads.everything.get(soname) or loads.loader.resolve(info, soname)
            if found is not None:
                add(info.path, soname, found)
    return _Uses(by_provider, loaded, consumers)


def _duplicates(
    loads: RootLoads,
    owned: Ownership,
    installed: Mapping[str, InstalledDistribution],
    uses: _Uses,
    probe_paths: Collection[str] | None,
) -> list[DuplicateLibrary]:
    by_soname: dict[str, dict[str, tuple[str, ...]]] = {}
    for path, (_, info) in loads.held.items():
        soname = info.soname or os.path.basename(path)
        by_soname.setdefault(soname, {})[path] = owned.owners.get(path, ())
    found = []
    for soname, copies in sorted(by_soname.items()):
        if len({owner for owners in copies.values() for owner in owners}) < 2:
            continue
        listed = []
        for path, owners in sorted(copies.items()):
            real = os.path.realpath(path)
            listed.append(
                LibraryCopy(
                    path=path,
                    owners=owners,
                    content_of=_content_of(path, owners, installed),
                    loaded=path in uses.loaded.get(soname, ()),
                    needed_by=tuple(sorted(uses.consumers.get(path, {}))),
                    loaded_by_probe=None if probe_paths is None else real in probe_paths,
                )
            )
        found.append(DuplicateLibrary(soname, tuple(listed)))
    return found


def _content_of(
    path: str,
    owners: Sequence[str],
    installed: Mapping[str, InstalledDistribution],
) -> tuple[str, ...]:
    """The owners whose RECORD gives this file the size it has: whose copy is on disk (one
    owner: itself, unread)."""
    info = lstat(path)
    if len(owners) < 2 or info is None:
        return tuple(owners) if info is not None else ()
    size = info[1]
    matching = []
    for owner in owners:
        dist = installed[owner]
        try:
            entries = read_record(dist.dist_info / "RECORD") if not dist.legacy else []
        except OSError:
            continue
        site = str(dist.site_dir)
        if any(e.size == size and normalise(os.path.join(site, e.path)) == path for e in entries):
            matching.append(owner)
    return tuple(matching)


# -- the report --------------------------------------------------------------------------------


def audit_environment(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    libraries: tuple[LibraryIndex, Ownership, str],
    *,
    python: str,
    prefix: str,
    site_dirs: Sequence[str],
    probe_paths: Collection[str] | None = None,
    weighing: Weighing | None = None,
) -> AuditReport:
    """The audit of the installed set, its duplicated sonames and sizes (the snapshots' stashes
    and the probe runs are the caller's to add). ``libraries``: (index, ownership, the
    interpreter's path); ``probe_paths``: the real paths a probe process mapped (--load), None
    when no probe ran; ``weighing``: the sizes' walk, started by the caller in a child process
    (sizes.py), else walked and counted here."""

    index, owned, interpreter = libraries
    root = normalise(os.path.realpath(prefix))
    sites = [os.path.realpath(s) for s in site_dirs]
    if weighing is not None and weighing.roots != tuple(sites):
        raise ValueError("the weighing walks other folders than the site folders")
    if weighing is not None:
        weighing.send(owned.owners, list(owned.files), root)  # the child counts meanwhile
    requirements = requirement_index(installed)
    required = requirers(installed, markers, requirements)
    unmet = unmet_now(requirements, installed, markers)
    loads = root_loads(index, owned, _requires(required), interpreter)
    uses = _uses(loads, owned)
    probed = _probed(owned, probe_paths)
    if weighing is not None:
        sizes = _sizes(weighing.result())
    else:
        sizes = _sizes(count(walk(sites), owned.owners, list(owned.files), root, sites))
    audits = _distribution_audits(installed, owned, sizes, required, unmet, uses, probed)
    duplicates = _duplicates(loads, owned, installed, uses, probe_paths)
    owned_bytes = sum(d.bytes for d in audits)
    return AuditReport(
        python=python,
        site_dirs=tuple(site_dirs),
        distributions=tuple(audits),
        duplicates=tuple(duplicates),
        total_bytes=owned_bytes + sizes.shared_total + sizes.unowned_total,
        owned_bytes=owned_bytes,
        shared_bytes=sizes.shared_total,
        unowned_bytes=sizes.unowned_total,
        unowned_files=sizes.unowned_files,
        unowned=sizes.unowned,
        # uv's REQUESTED files were disregarded (environment.requested)
        notes=(_UV_REQUESTED,) if not all(d.requested_known for d in audits) else (),
    )


def _requires(required: Mapping[str, Sequence[Requirer]]) -> dict[str, list[str]]:
    """dependent -> the names its requirement lines that hold name (``requirers`` turned round)."""
    requires: dict[str, list[str]] = {}
    for name, found in required.items():
        for dependent in (r.dependent for r in found if r.active):
            requires.setdefault(dependent, []).append(name)
    return requires


def _distribution_audits(
    installed: Mapping[str, InstalledDistribution],
    owned: Ownership,
    sizes: _Sizes,
    required: Mapping[str, Sequence[Requirer]],
    unmet: Sequence[Unmet],
    uses: _Uses,
    probed: set[str] | None,
) -> list[DistributionAudit]:
    """Each installed distribution as the audit sees it, largest first (bytes + shared_bytes)."""
    wanted, disregarded = requested(installed)
    audits = []
    for name, dist in installed.items():
        own_bytes, own_files, elsewhere = sizes.own.get(name, (0, 0, 0))
        shared_bytes, shared_with = sizes.shared.get(name, (0, ()))
        lines = required.get(name, [])
        used = sorted(uses.by_provider.get(name, {}).values(), key=lambda u: (u.consumer, u.soname))
        audits.append(
            DistributionAudit(
                name=name,
                version=dist.version,
                installer=dist.installer,
                requested=name in wanted,
                requested_known=not (disregarded and dist.installer == "uv"),
                bytes=own_bytes,
                files=own_files,
                shared_bytes=shared_bytes,
                shared_with=shared_with,
                linked_elsewhere_bytes=elsewhere,
                missing_files=sizes.missing.get(name, 0),
                outside_files=sizes.outside.get(name, 0),
                record_problem=owned.unreadable.get(name),
                metadata_only=_metadata_only(dist, owned),
                required_by=tuple(r for r in lines if r.active),
                optional_for=tuple(r for r in lines if not r.active),
                loaded_by=tuple(used[:_USES_KEPT]),
                loaded_by_count=len({u.consumer for u in used}),
                loaded_by_probe=None if probed is None else name in probed,
                unmet=tuple(u for u in unmet if u.dependent == name),
            )
        )
    audits.sort(key=lambda d: (-(d.bytes + d.shared_bytes), d.name))
    return audits


_UV_REQUESTED = (
    "REQUESTED disregarded for the distributions uv installed: uv writes it for every one, "
    "dependencies too (astral-sh/uv#13278); a distribution nothing requires or loads is top "
    "level, not an orphan: it may be one you asked for, or a leftover"
)


def _probed(owned: Ownership, probe_paths: Collection[str] | None) -> set[str] | None:
    """The distributions one of whose files the probe process mapped."""
    if probe_paths is None:
        return None
    found: set[str] = set()
    for path in probe_paths:
        found.update(owned.owners.get(normalise(path), ()))
    return found


def _metadata_only(dist: InstalledDistribution, owned: Ownership) -> bool:
    if dist.key in owned.unreadable or dist.legacy:
        return False
    info_dir = normalise(str(dist.dist_info))
    return all(p.startswith(info_dir + os.sep) for p in owned.files.get(dist.key, ()))


def holders_of_libraries(index: LibraryIndex, owned: Ownership) -> list[str]:
    """The distributions that hold a shared library or a program: what ``--load``'s derived
    probe imports, where no probe is configured."""
    found = []
    for name, paths in owned.files.items():
        libraries, programs = index.scan(paths)
        if libraries or programs:
            found.append(name)
    return sorted(found)
