"""What several operations judge a change by: the impact report with what it was built from,
the probe derived from it, drift between two probe runs, and the view of the installed set
that rollback plans and doctor's repair start from.

Operations read these; none of them changes the environment.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import msgspec
from msgspec import Struct

from safeuninstall.context.context import Context
from safeuninstall.environment.installed import (
    InstalledDistribution,
    RequirementIndex,
    installed_distributions,
    requirement_index,
)
from safeuninstall.environment.recordcache import RECORD_CACHE_FILE, RecordCache
from safeuninstall.environment.sizes import count_text
from safeuninstall.libraries.index import (
    Drift,
    LibraryIndex,
    Ownership,
    drift,
    hollow_distributions,
    ownership,
    ownership_on_demand,
)
from safeuninstall.plans.changes import Installed
from safeuninstall.plans.diff import UNKNOWN, Side, compared
from safeuninstall.probe.derived import derive
from safeuninstall.probe.runner import ProbeResult, ProbeSettings
from safeuninstall.reports.impact import ImpactReport, impact_report
from safeuninstall.state.snapshot import Snapshot
from safeuninstall.state.stash import in_place, relative_to_root


class Analysis(Struct, frozen=True):
    """The impact report of a removal, with the ownership and library index it was built from."""

    report: ImpactReport
    owned: Ownership
    index: LibraryIndex

    def drift(self, baseline: Sequence[ProbeResult], after: Sequence[ProbeResult]) -> list[Drift]:
        """What each Python probe loaded before and after (Linux /proc/self/maps), compared."""
        found: list[Drift] = []
        for old, new in zip(baseline, after, strict=True):
            if old.libraries is None or new.libraries is None or not new.passed:
                continue
            found += drift(old.libraries, new.libraries, self.index, self.owned)
        return found

    def left_hollow(self) -> list[str]:
        """Remaining distributions whose files the removal deleted (shared paths), checked on
        disk: certain breakage, found without a probe."""
        return [
            name
            for name in self.report.hollow
            if any(not os.path.lexists(path) for path in self.owned.files.get(name, ()))
        ]


def library_index(ctx: Context) -> LibraryIndex:
    """The ELF objects of the environment, as the process environment finds them."""
    return LibraryIndex(ctx.environ)


def owned_files(
    ctx: Context, installed: Mapping[str, InstalledDistribution], *, on_demand: bool = False
) -> Ownership:
    """Who lists which file, the RECORDs that did not change since an earlier command read
    them answered from its cache in the state folder (read, not written, by a read-only
    command). ``on_demand``: worked out where asked (a removal asks about its own files and
    who else lists them; libraries.ownership_on_demand)."""
    cache = RecordCache(ctx.store.root / RECORD_CACHE_FILE)
    owned = ownership_on_demand(installed, cache) if on_demand else ownership(installed, cache)
    if not ctx.read_only:
        cache.save()
    return owned


def requirements_of(
    ctx: Context, installed: Mapping[str, InstalledDistribution]
) -> RequirementIndex:
    """The installed set's requirement index, from each METADATA header as it is now: whether a
    requirement is met is never taken from a file of the state folder."""
    return requirement_index(installed)


def analyse(
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    remove: Sequence[str],
    requirements: RequirementIndex | None = None,
) -> Analysis:
    """``requirements``: the installed set's requirement index, when the caller has it."""
    index = library_index(ctx)
    owned = owned_files(ctx, installed, on_demand=True)
    if requirements is None:
        requirements = requirements_of(ctx, installed)
    markers = ctx.interpreter.markers
    report = impact_report(installed, markers, remove, index, owned, requirements)
    ctx.emit(
        "impact", f"impact report: {count_text(len(report.affected), 'distribution')} affected"
    )
    return Analysis(report, owned, index)


def with_default(
    settings: ProbeSettings,
    installed: Mapping[str, InstalledDistribution],
    affected: Sequence[str] | None,
    removed: Sequence[str] = (),
) -> ProbeSettings:
    """The configured probes; where none is configured (and probes are not disabled), the probe
    derived from what the change affects (derived.py)."""
    if settings.probes or settings.disabled:
        return settings
    probes, notes = derive(installed, affected, removed)
    return ProbeSettings(probes=probes, timeout=settings.timeout, notes=notes)


def failure_text(results: Sequence[ProbeResult]) -> str:
    return "\n".join(
        f"probe {r.probe.label!r}: {r.summary()}\n{r.output}".rstrip()
        for r in results
        if not r.passed
    )


def installed_view(
    installed: Mapping[str, InstalledDistribution],
    owned: Ownership,
    *,
    doubled: bool = False,
    beside: Collection[str] = (),
    hollow: Collection[str] | None = None,
) -> dict[str, Installed]:
    """The installed set as rollback plans see it: name, version, source, and whether every
    file is there. ``doubled``: a distribution with a second dist-info folder beside it is not
    intact either, whatever its version: a rollback or a recover removes every folder of the
    name and brings back the snapshot's (what ``run`` compares before and after is another
    question: a second folder it found there is not its command's change); but for the
    folders (names) in ``beside``, which the state planned for had too. ``hollow``: the
    distributions that miss a file, when the caller has them."""
    hollow = set(hollow_distributions(owned, installed) if hollow is None else hollow)
    return {
        name: Installed(
            name=name,
            version=d.version,
            source=d.source,
            intact=name not in hollow
            and not (doubled and any(p.name not in beside for p in d.doubled)),
            layout=d.layout,
        )
        for name, d in installed.items()
    }


def snapshot_view(
    installed: Mapping[str, InstalledDistribution],
    owned: Ownership,
    wanted: Snapshot,
    prefix: str,
    *,
    doubled: bool = False,
    beside: Collection[str] = (),
) -> dict[str, Installed]:
    """The installed set as a return to ``wanted`` plans it (a rollback, ``run``'s undo). A
    legacy install has no RECORD to say it is whole: it is whole when every file and line the
    snapshot's stash of it holds is there (a removal killed half way leaves its metadata with
    some files gone)."""
    view = installed_view(installed, owned, doubled=doubled, beside=beside)
    stashes = {e.name: e for e in wanted.packages if e.legacy and e.stash and e.stash.complete}
    for name, current in view.items():
        entry = stashes.get(name)
        if entry is None or not current.intact or entry.version != current.version:
            continue
        assert entry.stash is not None
        if not in_place(entry.stash, Path(prefix)):
            view[name] = msgspec.structs.replace(current, intact=False)
    return view


def sharing_files(owned: Ownership, removed: Sequence[str]) -> list[str]:
    """Distributions not in ``removed`` that list a file one of ``removed`` lists."""
    gone = set(removed)
    return sorted(
        {
            other
            for name in removed
            for path in owned.files.get(name, ())
            for other in owned.owners.get(path, ())
            if other not in gone
        }
    )


def loadable_snapshots(ctx: Context) -> list[Snapshot]:
    """Every snapshot of this environment that can be read, newest first. One whose stash the
    retention policy dropped is seen without it: it records versions, it keeps no files."""
    found = []
    for _, snap in ctx.store.iter_loadable(keep_twins=not ctx.read_only):
        if not isinstance(snap, Snapshot):
            continue
        if ctx.store.stash_pruned(snap.id) is not None:
            packages = tuple(msgspec.structs.replace(e, stash=None) for e in snap.packages)
            snap = msgspec.structs.replace(snap, packages=packages)
        found.append(snap)
    return found


def installed_sides(
    ctx: Context, installed: Mapping[str, InstalledDistribution] | None = None
) -> dict[str, Side]:
    """Each installed distribution (of ``installed``, default those read now), with its files
    as its RECORD lists them: what ``diff`` compares a snapshot with, and ``bisect --dry-run``
    its good snapshot."""
    root = Path(ctx.interpreter.prefix)
    if installed is None:
        installed = installed_distributions(ctx.interpreter)
    return {name: _installed_side(dist, root) for name, dist in installed.items()}


def _installed_side(dist: InstalledDistribution, root: Path) -> Side:
    if dist.legacy:
        return Side(dist.version)
    try:
        record = dist.record()
    except OSError:  # no RECORD, or not one to trust: its files are not known
        return Side(dist.version)
    files: dict[str, str] = {}
    size = 0
    for entry in record:
        rel = relative_to_root(dist.site_dir / entry.path, root)
        if rel is None:
            continue  # outside the environment: no snapshot keeps it either
        if compared(rel):
            files[rel] = entry.sha256 or UNKNOWN
            size += entry.size or 0
    return Side(dist.version, files, size)
