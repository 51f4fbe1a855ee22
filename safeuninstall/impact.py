"""What a removal affects, from metadata: which installed distributions depend on it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec
from msgspec import Struct
from packaging.utils import canonicalize_name

from .environment import InstalledDistribution
from .importables import top_level_modules
from .libraries import LibraryChange, LibraryIndex, Ownership, library_changes
from .paths import normalise

if TYPE_CHECKING:
    from packaging.requirements import Requirement


class Dependency(Struct, frozen=True):
    """``dependent`` requires ``required``; ``extra`` is set when only an extra needs it."""

    dependent: str
    required: str
    specifier: str
    extra: str | None = None


# The distribution name at the start of a requirement: enough to know whether a line can
# matter, before paying for a full parse.
_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _requirement_index(
    installed: Mapping[str, InstalledDistribution],
) -> dict[str, list[tuple[str, str]]]:
    """required name -> [(dependent, Requires-Dist value)], from each METADATA header."""
    index: dict[str, list[tuple[str, str]]] = {}
    for key, dist in installed.items():
        for value in dist.requires_dist():
            match = _LEADING_NAME.match(value)
            if match:
                index.setdefault(canonicalize_name(match.group(1)), []).append((key, value))
    return index


def _edge(dependent: str, value: str, markers: Mapping[str, str]) -> Dependency | None:
    from packaging.requirements import InvalidRequirement, Requirement  # 18 ms; not for a leaf

    try:
        requirement = Requirement(value)
    except InvalidRequirement:
        return None
    applies, extra = applies_on_target(requirement, markers)
    if not applies:
        return None
    return Dependency(
        dependent, canonicalize_name(requirement.name), str(requirement.specifier), extra
    )


def edges_into(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Iterable[str],
) -> list[Dependency]:
    """The dependency edges that lead, directly or transitively, to a removed distribution.

    Only requirement lines naming a distribution on that path are parsed: in a 3000-
    distribution environment that is a handful of lines instead of thousands.
    """
    index = _requirement_index(installed)
    edges = []
    seen = set(removed)
    frontier = list(seen)
    while frontier:
        name = frontier.pop()
        for dependent, value in index.get(name, ()):
            if dependent == name:
                continue
            edge = _edge(dependent, value, markers)
            if edge is None:
                continue
            edges.append(edge)
            if edge.extra is None and dependent not in seen:
                seen.add(dependent)
                frontier.append(dependent)
    return edges


def applies_on_target(
    requirement: Requirement, markers: Mapping[str, str]
) -> tuple[bool, str | None]:
    """(applies, extra): does the requirement apply on the target, and behind which extra."""
    from packaging.markers import (  # 17.6 ms of import, on every command if at the top
        InvalidMarker,
        UndefinedComparison,
        UndefinedEnvironmentName,
    )

    if requirement.marker is None:
        return True, None
    env = {**markers, "extra": ""}
    try:
        if requirement.marker.evaluate(env):
            return True, None
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return False, None
    marker_text = str(requirement.marker)
    if "extra" not in marker_text:
        return False, None
    # Which extra turns it on? Try the extras named in the marker text.
    for token in marker_text.replace('"', " ").replace("'", " ").split():
        try:
            if requirement.marker.evaluate({**markers, "extra": token}):
                return True, canonicalize_name(token)
        except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
            continue
    return False, None


def dependents_of(
    removed: Iterable[str], edges: Iterable[Dependency], *, include_optional: bool = False
) -> list[str]:
    """Installed distributions that need a removed one, directly or through others, sorted."""
    removed_set = set(removed)
    by_required: dict[str, list[Dependency]] = {}
    for edge in edges:
        if edge.extra is None or include_optional:
            by_required.setdefault(edge.required, []).append(edge)
    found: set[str] = set()
    frontier = list(removed_set)
    while frontier:
        name = frontier.pop()
        for edge in by_required.get(name, []):
            if edge.dependent not in found and edge.dependent not in removed_set:
                found.add(edge.dependent)
                frontier.append(edge.dependent)
    return sorted(found)


# -- the impact report: everything a removal will affect, before it happens -----------------


class SharedFile(Struct, frozen=True):
    """``path`` is listed by removed ``removed_dist`` and by ``other`` that stays: the removal
    deletes it, leaving ``other`` installed but hollow."""

    path: str
    removed_dist: str
    other: str


class MetadataOnly(Struct, frozen=True):
    """A distribution that installs no files of its own, only metadata."""

    name: str
    provided_by: tuple[str, ...]  # where the files it stands for come from, when found


class UnreadableRecord(Struct, frozen=True):
    """A distribution whose RECORD is there but cannot be read: which files it has is unknown.
    One being removed cannot be stashed, so its removal is refused before any change."""

    name: str
    reason: str  # names the file
    removed: bool


class ImpactReport(Struct, frozen=True):
    """What removing some distributions would break, drift or leave behind."""

    removed: tuple[str, ...]
    dependents: tuple[str, ...]  # need a removed one (transitively), markers of the target
    optional_dependents: tuple[Dependency, ...]  # only through an extra
    shared_files: tuple[SharedFile, ...]
    library_changes: tuple[LibraryChange, ...]
    metadata_only: tuple[MetadataOnly, ...]
    unreadable_records: tuple[UnreadableRecord, ...] = ()

    @property
    def hollow(self) -> tuple[str, ...]:
        return tuple(sorted({s.other for s in self.shared_files}))

    @property
    def breaks(self) -> tuple[LibraryChange, ...]:
        return tuple(c for c in self.library_changes if c.breaks)

    @property
    def drifts(self) -> tuple[LibraryChange, ...]:
        return tuple(c for c in self.library_changes if not c.breaks)

    @property
    def affected(self) -> tuple[str, ...]:
        """Distributions whose code may stop working: what a default probe should import."""
        names = set(self.dependents) | set(self.hollow)
        names |= {c.consumer_dist for c in self.library_changes if c.consumer_dist}
        return tuple(sorted(names - set(self.removed)))

    @property
    def finds_breakage(self) -> bool:
        return bool(self.dependents or self.breaks or self.shared_files)

    @property
    def refused_by_strict(self) -> bool:
        """--strict refuses breakage and drift alike."""
        return self.finds_breakage or bool(self.drifts)

    def to_dict(self) -> dict[str, object]:
        return {
            "removed": list(self.removed),
            "dependents": list(self.dependents),
            "optional_dependents": [
                {"dependent": d.dependent, "requires": d.required, "extra": d.extra}
                for d in self.optional_dependents
            ],
            "shared_files": [msgspec.structs.asdict(s) for s in self.shared_files],
            "hollow": list(self.hollow),
            "breaks": [c.to_dict() for c in self.breaks],
            "drifts": [c.to_dict() for c in self.drifts],
            "metadata_only": [
                {"name": m.name, "provided_by": list(m.provided_by)} for m in self.metadata_only
            ],
            "unreadable_records": [msgspec.structs.asdict(u) for u in self.unreadable_records],
        }


def _shared_files(owned: Ownership, removed: Sequence[str]) -> list[SharedFile]:
    removed_set = set(removed)
    shared = []
    for name in removed:
        for path in owned.files.get(name, ()):
            for other in owned.owners.get(path, ()):
                if other not in removed_set:
                    shared.append(SharedFile(path, name, other))
    return shared


def _metadata_only(
    installed: Mapping[str, InstalledDistribution], owned: Ownership, removed: Sequence[str]
) -> list[MetadataOnly]:
    """Removed distributions whose RECORD lists nothing outside their own dist-info."""
    found = []
    for name in removed:
        if name in owned.unreadable:
            continue  # its files are unknown, not none
        dist = installed[name]
        info_dir = normalise(str(dist.dist_info))
        if any(not p.startswith(info_dir + os.sep) for p in owned.files.get(name, ())):
            continue
        found.append(MetadataOnly(name, _providers_of(dist, installed, owned)))
    return found


def _providers_of(
    dist: InstalledDistribution, installed: Mapping[str, InstalledDistribution], owned: Ownership
) -> tuple[str, ...]:
    """Who supplies what a metadata-only distribution stands for: the owners of the top-level
    modules it names (top_level.txt, else its own name), or the unowned path itself."""
    names = top_level_modules(dist) or [dist.key.replace("-", "_")]
    providers: set[str] = set()
    for module in names:
        for site_dir in {d.site_dir for d in installed.values()}:
            for candidate in (site_dir / module, site_dir / f"{module}.py"):
                if not candidate.exists():
                    continue
                owners = {
                    owner
                    for path, owner_list in owned.owners.items()
                    if path.startswith(normalise(str(candidate)))
                    for owner in owner_list
                    if owner != dist.key
                }
                providers |= owners or {f"{candidate} (no distribution lists it)"}
    return tuple(sorted(providers))


def impact_report(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Sequence[str],
    index: LibraryIndex,
    owned: Ownership,
) -> ImpactReport:
    edges = edges_into(installed, markers, removed)
    required = dependents_of(removed, edges)
    optional = tuple(
        e
        for e in edges
        if e.extra is not None and e.required in removed and e.dependent not in removed
    )
    return ImpactReport(
        removed=tuple(removed),
        dependents=tuple(required),
        optional_dependents=optional,
        shared_files=tuple(_shared_files(owned, removed)),
        library_changes=tuple(library_changes(index, owned, removed)),
        metadata_only=tuple(_metadata_only(installed, owned, removed)),
        unreadable_records=tuple(
            UnreadableRecord(name, reason, name in removed)
            for name, reason in sorted(owned.unreadable.items())
        ),
    )
