"""What a removal affects, from metadata: which installed distributions depend on it."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence, Set

from msgspec import Struct
from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from safeuninstall.environment.installed import (
    InstalledDistribution,
    RequirementIndex,
    requirement_index,
)
from safeuninstall.environment.paths import normalise
from safeuninstall.environment.requirements import satisfies
from safeuninstall.environment.sizes import count_text
from safeuninstall.libraries.index import (
    LibraryChange,
    LibraryIndex,
    Ownership,
    library_changes,
)
from safeuninstall.probe.importables import top_level_modules


class Dependency(Struct, frozen=True):
    """``dependent`` requires ``required``; ``extra`` is set when only an extra needs it."""

    dependent: str
    required: str
    specifier: str
    extra: str | None = None


# A word of a marker that could be an extra's name.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def _edge(dependent: str, value: str, markers: Mapping[str, str]) -> Dependency | None:
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
    index: RequirementIndex | None = None,
) -> list[Dependency]:
    """The dependency edges that lead, directly or transitively, to a removed distribution.

    Only requirement lines naming a distribution on that path are parsed: in a 3000-
    distribution environment that is a handful of lines instead of thousands. ``index``: the
    installed set's requirement index, when the caller has it already.
    """
    index = requirement_index(installed) if index is None else index
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


# -- unmet requirements: what a removal leaves a remaining distribution without ---------------


class Unmet(Struct, frozen=True):
    """A requirement of ``dependent``, met before the removal, that the removal leaves unmet.

    ``extra`` is set when the line is behind an extra of ``dependent``: it counts because
    ``requested_by`` (remaining distributions) request that extra, as torch requests
    ``cuda-toolkit[cublas]``.
    """

    dependent: str  # canonical name; stays installed
    requirement: str  # the Requires-Dist line as written, markers included
    required: str  # canonical name of the removed distribution it names
    extra: str | None = None
    requested_by: tuple[str, ...] = ()

    @property
    def needs(self) -> str:
        """The requirement without its markers: what a person reads."""
        return self.requirement.split(";", 1)[0].strip()

    @property
    def to_remove_too(self) -> tuple[str, ...]:
        """Who must go as well for this line to stop counting: the dependent, or for a line
        behind an extra, those that request the extra."""
        return self.requested_by if self.extra is not None else (self.dependent,)

    def met_by(self, version: str) -> bool:
        """Whether ``version`` of the required distribution meets the requirement; a line or a
        version that cannot be compared is taken as met (as unmet_requirements takes it)."""
        requirement = _parsed(self.requirement)
        return requirement is None or satisfies(requirement.specifier, version)

    def describe(self) -> str:
        if self.extra is None:
            return f"{self.dependent} requires {self.needs}"
        return (
            f"{self.dependent}[{self.extra}] requires {self.needs}, "
            f"an extra requested by {', '.join(self.requested_by)}"
        )


@functools.lru_cache(maxsize=4096)  # requirers and unmet_now read the same lines
def _parsed(value: str) -> Requirement | None:
    """The requirement, or None for a line that is no valid PEP 508 requirement."""

    try:
        return Requirement(value)
    except InvalidRequirement:
        return None


def _holds(requirement: Requirement, markers: Mapping[str, str], extra: str) -> bool:
    """Whether the requirement's markers hold on the target, with ``extra`` requested ("" for
    none). A marker that can't be evaluated there does not hold, as for uv and pip."""

    if requirement.marker is None:
        return True
    try:
        return requirement.marker.evaluate({**markers, "extra": extra})
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return False


# (distribution, extra) -> the remaining distributions whose requirements request it
_Requested = dict[tuple[str, str], set[str]]


def _requested_extras(
    index: RequirementIndex,
    markers: Mapping[str, str],
    remaining: Set[str],
) -> _Requested:
    """Every extra that the remaining distributions request through requirements that hold on
    the target, with who requests it. Transitive: a line behind an extra requests its extras
    only when that extra is itself requested (a least fixed point, so a cycle of extras that no
    one outside requests stays off). Only lines with ``[`` are parsed."""
    # (requester, gate): the lines of requester that request extras, behind extra ``gate``
    gated: dict[tuple[str, str], list[tuple[str, frozenset[str]]]] = {}
    requested: _Requested = {}
    frontier: list[tuple[str, str]] = []

    def request(name: str, extras: Iterable[str], by: Set[str]) -> None:
        for extra in extras:
            known = requested.setdefault((name, extra), set())
            if not by <= known:  # on, or requested by more: pass it on (sets only grow)
                known.update(by)
                frontier.append((name, extra))

    for name, lines in index.items():
        if name not in remaining:
            continue
        for requester, value in lines:
            if requester not in remaining or "[" not in value.split(";", 1)[0]:
                continue
            requirement = _parsed(value)
            if requirement is None or not requirement.extras:
                continue
            extras: frozenset[str] = frozenset(canonicalize_name(e) for e in requirement.extras)
            if _holds(requirement, markers, ""):
                request(name, extras, {requester})
            elif requirement.marker is not None and "extra" in str(requirement.marker):
                for gate in _extras_named(requirement):
                    if _holds(requirement, markers, gate):
                        gated.setdefault((requester, gate), []).append((name, extras))
    while frontier:
        requester, gate = frontier.pop()
        for name, extras in gated.get((requester, gate), ()):
            # A distribution requesting another extra of its own passes on who requested it.
            by = set(requested[(requester, gate)]) if name == requester else {requester}
            request(name, extras, by)
    return requested


def _extras_named(requirement: Requirement) -> set[str]:
    """The words of the marker that could be an extra it compares against, canonical."""
    text = str(requirement.marker).replace('"', " ").replace("'", " ")
    return {canonicalize_name(token) for token in text.split() if _NAME.fullmatch(token)}


class _Gate:
    """Whether a Requires-Dist line of ``dependent`` counts on the target: it holds with no
    extra, or behind an extra of ``dependent`` that a distribution of ``remaining`` requests
    (transitively). Who requests which extra is worked out once, on the first line that asks."""

    def __init__(
        self, index: RequirementIndex, markers: Mapping[str, str], remaining: Set[str]
    ) -> None:
        self._index = index
        self._markers = markers
        self._remaining = remaining
        self._requested: _Requested | None = None

    @property
    def requested(self) -> _Requested:
        if self._requested is None:
            self._requested = _requested_extras(self._index, self._markers, self._remaining)
        return self._requested

    def extras_on(self, requirement: Requirement, dependent: str) -> tuple[str, ...] | None:
        """None when the line holds with no extra; else the requested extras of ``dependent``
        with which it holds, sorted (none: the line counts for nothing)."""
        if _holds(requirement, self._markers, ""):
            return None
        if requirement.marker is None or "extra" not in str(requirement.marker):
            return ()
        return tuple(
            sorted(
                extra
                for extra in _extras_named(requirement)
                if (dependent, extra) in self.requested
                and _holds(requirement, self._markers, extra)
            )
        )


def unmet_in(
    index: RequirementIndex,
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Iterable[str],
) -> tuple[Unmet, ...]:
    """unmet_requirements, given the installed set's requirement index."""
    gone = {canonicalize_name(name) for name in removed} & installed.keys()
    remaining = installed.keys() - gone
    gate = _Gate(index, markers, remaining)
    found = []
    for name in sorted(gone):
        version = installed[name].version
        for dependent, value in index.get(name, ()):
            if dependent in gone:
                continue
            requirement = _parsed(value)
            if requirement is None or canonicalize_name(requirement.name) != name:
                continue  # no requirement the tool can judge (see unmet_requirements)
            if not satisfies(requirement.specifier, version):
                continue  # unmet before the removal already
            on = gate.extras_on(requirement, dependent)
            if on is None:
                found.append(Unmet(dependent, value, name))
            elif on:
                by = set().union(*(gate.requested[(dependent, extra)] for extra in on))
                found.append(Unmet(dependent, value, name, on[0], tuple(sorted(by))))
    return tuple(sorted(found, key=lambda u: (u.dependent, u.required, u.requirement)))


def unmet_requirements(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Iterable[str],
) -> tuple[Unmet, ...]:
    """The requirements of remaining distributions that removing ``removed`` leaves unmet.

    A Requires-Dist line counts when its markers hold on the target (``markers``: the target
    interpreter's) and it is behind no extra, or behind an extra that a remaining distribution
    requests (transitively). A line that was unmet before the removal does not count: it names
    a distribution not installed, or a version the installed one does not satisfy. A line that
    is no valid PEP 508 requirement is skipped: it says nothing the tool can judge, and the
    probe judges the removal as it judges any other.
    """
    return unmet_in(requirement_index(installed), installed, markers, removed)


def allowed_unmet(unmet: Sequence[Unmet], change: str, *, no_probe: bool) -> str:
    """What --allow-unmet lets ``change`` (``the removal``) leave unmet, and what judges it."""
    judged_by = (
        f"nothing judges {change} (--no-probe)" if no_probe else f"the probe judges {change}"
    )
    return f"--allow-unmet: {count_text(len(unmet), 'requirement')} left unmet; {judged_by}"


def removal_closure(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Sequence[str],
    index: RequirementIndex | None = None,
) -> tuple[str, ...]:
    """``removed`` and every distribution that must go with it for no requirement to be left
    unmet: the dependents, theirs in turn, and those that request an extra which needs a
    removed one. ``index``: the installed set's requirement index, when the caller has it."""
    index = requirement_index(installed) if index is None else index
    names: list[str] = list(dict.fromkeys(canonicalize_name(name) for name in removed))
    while True:
        more = {
            name
            for unmet in unmet_in(index, installed, markers, names)
            for name in unmet.to_remove_too
        } - set(names)
        if not more:
            return tuple(names)
        names += sorted(more)


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
    unmet: tuple[Unmet, ...] = ()  # requirements of remaining ones the removal leaves unmet

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
        names |= {name for u in self.unmet for name in (u.dependent, *u.requested_by)}
        names |= {c.consumer_dist for c in self.library_changes if c.consumer_dist}
        return tuple(sorted(names - set(self.removed)))

    @property
    def finds_breakage(self) -> bool:
        return bool(self.dependents or self.unmet or self.breaks or self.shared_files)

    @property
    def refused_by_strict(self) -> bool:
        """--strict refuses breakage and drift alike."""
        return self.finds_breakage or bool(self.drifts)


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
    requirements: RequirementIndex | None = None,
) -> ImpactReport:
    """``requirements``: the installed set's requirement index, when the caller has it."""
    requirements = requirement_index(installed) if requirements is None else requirements
    edges = edges_into(installed, markers, removed, requirements)
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
        unmet=unmet_in(requirements, installed, markers, removed),
    )


# -- who requires whom, as the environment stands (audit) ------------------------------------


class Requirer(Struct, frozen=True):
    """``dependent`` names an installed distribution in a Requires-Dist line that holds on the
    target: without an extra, or behind ``extra``. ``active`` says whether that extra is
    requested (by a remaining distribution, transitively); a line behind an extra no one
    requests requires nothing."""

    dependent: str
    requirement: str  # the line as written, markers included
    extra: str | None = None
    active: bool = True


def requirers(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    index: RequirementIndex | None = None,
) -> dict[str, list[Requirer]]:
    """Installed name -> the installed distributions whose requirements name it, with markers
    evaluated for the target and extras followed where they are requested. A line that is no
    valid PEP 508 requirement, or whose markers can't be evaluated, names nothing; a
    distribution naming itself is left out."""
    index = requirement_index(installed) if index is None else index
    gate = _Gate(index, markers, set(installed))
    found: dict[str, list[Requirer]] = {}
    for name in sorted(installed.keys() & index.keys()):
        for dependent, value in index[name]:
            if dependent == name:
                continue
            requirement = _parsed(value)
            if requirement is None or canonicalize_name(requirement.name) != name:
                continue
            on = gate.extras_on(requirement, dependent)
            if on is None:
                found.setdefault(name, []).append(Requirer(dependent, value))
                continue
            if on:
                found.setdefault(name, []).append(Requirer(dependent, value, on[0]))
                continue
            if requirement.marker is None:
                continue
            # Behind an extra no one requests: which one, from the ``extra == "x"`` it names.
            named = {canonicalize_name(e) for e in _EXTRA_COMPARED.findall(str(requirement.marker))}
            extras = sorted(e for e in named if _holds(requirement, markers, e))
            if extras:
                found.setdefault(name, []).append(
                    Requirer(dependent, value, extras[0], active=False)
                )
    return found


_EXTRA_COMPARED = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


# A marker that is one extra and nothing else: ``extra == "test"``.
_ONLY_EXTRA = re.compile(r"""\s*extra\s*==\s*(['"])([^'"]*)\1\s*""")


def unmet_now(
    index: RequirementIndex,
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
) -> tuple[Unmet, ...]:
    """The requirements the environment as it stands does not meet: a Requires-Dist line that
    holds on the target (without an extra, or behind an extra that an installed distribution
    requests) naming a distribution that is not installed, or whose version it does not
    allow. ``index``: the installed set's requirement index."""
    gate = _Gate(index, markers, set(installed))
    found = []
    for name, lines in index.items():
        present = installed.get(name)
        for dependent, value in lines:
            if dependent == name:
                continue
            only = _ONLY_EXTRA.fullmatch(value.partition(";")[2])
            # Most lines naming what is not installed: not parsed.
            if only is not None and (dependent, canonicalize_name(only.group(2))) not in (
                gate.requested
            ):
                continue
            requirement = _parsed(value)
            if requirement is None or canonicalize_name(requirement.name) != name:
                continue
            if present is not None and satisfies(requirement.specifier, present.version):
                continue
            on = gate.extras_on(requirement, dependent)
            if on is None:
                found.append(Unmet(dependent, value, name))
            elif on:
                by = tuple(sorted(gate.requested[(dependent, on[0])]))
                found.append(Unmet(dependent, value, name, on[0], by))
    return tuple(sorted(found, key=lambda u: (u.dependent, u.required, u.requirement)))


# -- unmet requirements after any change (``run``): an install or upgrade, not only a removal --


def unmet_after_change(
    before: Mapping[str, InstalledDistribution],
    after: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
) -> tuple[Unmet, ...]:
    """The requirements the environment does not meet ``after`` a change and did meet before
    it (the same dependent, the same line), by unmet_now's rule: a line that was already unmet
    before the change is the environment's, not the change's.

    Only the lines that can have changed are judged: those of a distribution the change added
    or replaced, those naming one it replaced or removed, and those behind or requesting an
    extra (which extras are requested can change with any distribution)."""
    changed = {
        name
        for name in before.keys() | after.keys()
        if name not in before
        or name not in after
        or before[name].dist_info != after[name].dist_info
        or before[name].version != after[name].version
    }

    def unmet(installed: Mapping[str, InstalledDistribution]) -> tuple[Unmet, ...]:
        index = {
            name: kept
            for name, lines in requirement_index(installed).items()
            if (
                kept := [
                    (d, v) for d, v in lines if name in changed or d in changed or _extras_in(v)
                ]
            )
        }
        return unmet_now(index, installed, markers)

    was = {(u.dependent, u.requirement) for u in unmet(before)}
    return tuple(u for u in unmet(after) if (u.dependent, u.requirement) not in was)


def _extras_in(value: str) -> bool:
    """The line requests extras (``name[extra]``) or is behind one (``; extra == ...``)."""
    requirement, _, marker = value.partition(";")
    return "[" in requirement or "extra" in marker
