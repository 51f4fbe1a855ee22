"""What a removal affects, from metadata: which installed distributions depend on it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement

from .environment import InstalledDistribution
from .names import canonical


@dataclass(frozen=True)
class Dependency:
    """``dependent`` requires ``required``; ``extra`` is set when only an extra needs it."""

    dependent: str
    required: str
    specifier: str
    extra: str | None = None


def requires_dist(metadata_text: str) -> list[str]:
    """The Requires-Dist values of a METADATA header (the body is not read)."""
    values = []
    for line in metadata_text.splitlines():
        if not line.strip():
            break
        if line.startswith("Requires-Dist:"):
            values.append(line[len("Requires-Dist:") :].strip())
    return values


def _marker_extra(requirement: Requirement, markers: Mapping[str, str]) -> tuple[bool, str | None]:
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
                return True, canonical(token)
        except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
            continue
    return False, None


def dependencies(
    installed: Mapping[str, InstalledDistribution], markers: Mapping[str, str]
) -> list[Dependency]:
    """Every edge dependent -> required between installed distributions, for the target."""
    edges = []
    for key, dist in installed.items():
        try:
            text = dist.metadata_text()
        except OSError:
            continue
        for value in requires_dist(text):
            try:
                requirement = Requirement(value)
            except InvalidRequirement:
                continue
            required = canonical(requirement.name)
            if required not in installed or required == key:
                continue
            applies, extra = _marker_extra(requirement, markers)
            if applies:
                edges.append(Dependency(key, required, str(requirement.specifier), extra))
    return edges


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
