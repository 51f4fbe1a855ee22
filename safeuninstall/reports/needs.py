"""Which of some candidates for removal the environment needs, and why, before any is tried.

``--keep-needed`` removes only the candidates nothing needs. What the metadata and the library
model show as needed is kept without being tried; the rest are tried (bisection.py). A candidate
is needed by what stays, and what stays is everything else plus the candidates kept so far, so
the judgement runs to a fixed point: start with every candidate removed, keep what something
remaining needs, and again with those kept, until nothing more is kept. That leaves the largest
set that the static evidence allows to be removed.

A candidate is needed when removing it
- leaves a requirement of a remaining distribution unmet (impact.unmet_in: markers of the
  target, extras requested by remaining ones);
- changes which file a remaining ELF object loads for one of its DT_NEEDED (libraries.py: it
  breaks, or it drifts to another copy);
- deletes a file that a remaining distribution lists too (two builds installing the same path,
  as nvidia-nccl-cu12 and -cu13 do): uv deletes it, and the other is left hollow.

What stays includes the candidates kept later, by the baseline's load map or by the search: each
keeps the candidates it requires (``required``), so the final state leaves no requirement unmet.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence

from msgspec import Struct
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from safeuninstall.environment.installed import InstalledDistribution, RequirementIndex, requested
from safeuninstall.environment.paths import normalise
from safeuninstall.libraries.index import (
    LibraryChange,
    LibraryIndex,
    Ownership,
    library_changes,
)
from safeuninstall.reports.impact import applies_on_target, unmet_in


class Needed(Struct, frozen=True):
    """A candidate kept: what needs it (``why``: metadata, library, shared-file, loaded by the
    probe's process, or probe: the bisection found the probe fails without it)."""

    name: str
    reasons: tuple[str, ...]
    why: str

    @property
    def reason(self) -> str:
        return self.reasons[0]


_MAX_REASONS = 3  # a person reads the first; JSON has a few more


def judge(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    candidates: Sequence[str],
    requirements: RequirementIndex,
    libraries: tuple[LibraryIndex, Ownership],
    staying: Mapping[str, Needed] | None = None,
) -> tuple[tuple[Needed, ...], tuple[str, ...]]:
    """(the candidates the environment needs, each with its reasons; the rest, to be tried).
    ``staying``: candidates kept already (not among ``candidates``), named so in the reasons."""
    index, owned = libraries
    kept: dict[str, Needed] = {}
    while True:
        tried = [name for name in candidates if name not in kept]
        named = {**(staying or {}), **kept}
        found = _needed_by_metadata(installed, markers, tried, requirements, named)
        _add(found, _needed_by_libraries(index, owned, tried, named, installed))
        _add(found, _needed_by_shared_files(owned, tried, named))
        if not found:
            break
        kept.update(found)
    ordered = tuple(kept[name] for name in candidates if name in kept)
    return ordered, tuple(name for name in candidates if name not in kept)


def required(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    removed: Sequence[str],
    requirements: RequirementIndex,
    staying: Mapping[str, Needed],
) -> tuple[dict[str, Needed], tuple[str, ...]]:
    """Of ``removed``, those that a distribution staying requires (Requires-Dist on the
    target, extras requested by those staying), to a fixed point: one kept so requires in
    turn. (them, each with its reason; the rest.) A candidate kept keeps its requirements:
    the probe alone may not see them (rich imports markdown-it-py only to render Markdown).
    ``staying``: the candidates kept, named so in the reasons."""
    found: dict[str, Needed] = {}
    gone = list(removed)
    while more := _needed_by_metadata(installed, markers, gone, requirements, {**staying, **found}):
        found.update(more)
        gone = [name for name in gone if name not in more]
    return found, tuple(gone)


def _add(into: dict[str, Needed], more: Mapping[str, Needed]) -> None:
    for name, needed in more.items():
        into.setdefault(name, needed)


def _stays(name: str, kept: Mapping[str, Needed]) -> str:
    """How a dependent that stays is named: a kept candidate says so."""
    return f"{name} (kept)" if name in kept else name


def _needed_by_metadata(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    tried: Sequence[str],
    requirements: RequirementIndex,
    kept: Mapping[str, Needed],
) -> dict[str, Needed]:
    reasons: dict[str, list[str]] = {}
    for unmet in unmet_in(requirements, installed, markers, tried):
        dependent = _stays(unmet.dependent, kept)
        if unmet.extra is None:
            text = f"{dependent} requires {unmet.needs}"
        else:
            text = (
                f"{dependent}[{unmet.extra}] requires {unmet.needs}, an extra requested by "
                + ", ".join(_stays(name, kept) for name in unmet.requested_by)
            )
        reasons.setdefault(unmet.required, []).append(text)
    return {
        name: Needed(name, tuple(texts[:_MAX_REASONS]), "metadata")
        for name, texts in reasons.items()
    }


def _needed_by_libraries(
    index: LibraryIndex,
    owned: Ownership,
    tried: Sequence[str],
    kept: Mapping[str, Needed],
    installed: Mapping[str, InstalledDistribution],
) -> dict[str, Needed]:
    reasons: dict[str, list[str]] = {}
    gone = set(tried)
    for change in library_changes(index, owned, tried):
        for owner in owned.owners.get(change.before, ()):
            if owner in gone:
                reasons.setdefault(owner, []).append(
                    _library_reason(change, owner, owned, kept, installed)
                )
    return {
        name: Needed(name, tuple(dict.fromkeys(texts))[:_MAX_REASONS], "library")
        for name, texts in reasons.items()
    }


def _library_reason(
    change: LibraryChange,
    owner: str,
    owned: Ownership,
    kept: Mapping[str, Needed],
    installed: Mapping[str, InstalledDistribution],
) -> str:
    consumer = _shown(change.consumer, change.consumer_dist, installed)
    if change.consumer_dist in kept:
        consumer += f" ({change.consumer_dist}, kept)"
    text = f"{consumer} needs {change.soname} from it"
    others = [o for o in owned.owners.get(change.before, ()) if o != owner]
    if others:
        text += f" ({_shown(change.before, owner, installed)}, which {', '.join(others)} lists too)"
    if change.after is not None:
        text += f"; without it the loader would take {change.after} (drift)"
    return text


def _needed_by_shared_files(
    owned: Ownership, tried: Sequence[str], kept: Mapping[str, Needed]
) -> dict[str, Needed]:
    gone = set(tried)
    found = {}
    for name in tried:
        shared: dict[str, list[str]] = {}
        for path in owned.files.get(name, ()):
            for other in owned.owners.get(path, ()):
                if other not in gone:
                    shared.setdefault(other, []).append(path)
        if shared:
            texts = tuple(
                _shared_text(other, paths, kept) for other, paths in sorted(shared.items())
            )
            found[name] = Needed(name, texts[:_MAX_REASONS], "shared-file")
    return found


def _shared_text(other: str, paths: Sequence[str], kept: Mapping[str, Needed]) -> str:
    if len(paths) == 1:
        listed, example, them = "1 of its files is", paths[0], "it"
    else:
        listed, example, them = f"{len(paths)} of its files are", f"such as {paths[0]}", "them"
    return (
        f"{listed} listed by {_stays(other, kept)} too ({example}): removing it would delete "
        f"{them} and leave {other} hollow"
    )


def together(tried: Sequence[str], owned: Ownership) -> dict[str, tuple[str, ...]]:
    """The units the search moves: candidates that list a file in common go together (named
    ``a+b``), since removing one deletes the file and leaves the other hollow."""
    group = {name: name for name in tried}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for name in tried:
        for path in owned.files.get(name, ()):
            for other in owned.owners.get(path, ()):
                if other in group and root(other) != root(name):
                    group[root(other)] = root(name)
    units: dict[str, list[str]] = {}
    for name in tried:
        units.setdefault(root(name), []).append(name)
    return {"+".join(names): tuple(names) for names in units.values()}


def loaded_by_probe(
    candidates: Sequence[str],
    libraries: Sequence[str],
    owned: Ownership,
    installed: Mapping[str, InstalledDistribution],
) -> dict[str, Needed]:
    """Candidates whose files the probe's process loaded (its load map, ``libraries``): a
    removal changes what it loads (drift), whoever loaded them. torch's ``__init__`` loads
    ``nvidia/*/lib/*.so*`` it finds on sys.path with ctypes, which no ELF model sees."""
    wanted = set(candidates)
    reasons: dict[str, list[str]] = {}
    for path in libraries:
        for owner in owned.owners.get(normalise(path), ()):
            if owner in wanted:
                reasons.setdefault(owner, []).append(
                    f"the probe's process loads {_shown(path, owner, installed)} from it (its "
                    "load map): removing it "
                    "changes what the probe loads (--allow-drift accepts that)"
                )
    return {
        name: Needed(name, tuple(texts[:_MAX_REASONS]), "loaded") for name, texts in reasons.items()
    }


def _shown(path: str, dist: str | None, installed: Mapping[str, InstalledDistribution]) -> str:
    """A path relative to its distribution's site folder (``torch/lib/libtorch_cuda.so``)."""
    found = installed.get(dist) if dist else None
    if found is not None:
        site = str(found.site_dir)
        if path.startswith(site + os.sep):
            return path[len(site) + 1 :]
    return path


class Trial(Struct, frozen=True):
    """One probe run of the search: the candidates removed then, and the verdict."""

    removed: tuple[str, ...]
    passed: bool
    why: str = ""  # a failure: the probe's last line, or the drift
    # Not passed, yet no failure either: a metric's runs could not tell (metric.decide)
    inconclusive: bool = False


# The kind of a candidate the search keeps because the runs without it did not pass: the probe
# failed, or a metric's runs could not tell (which shows neither that it is needed nor not).
PROBE = "probe"
INCONCLUSIVE = "inconclusive"


def kept_by_search(name: str, trials: Sequence[Trial]) -> tuple[str, str]:
    """The kind and reason of a candidate the search kept, from the smallest run that removed
    it and did not pass (a decided failure before an inconclusive one of the same size): the
    probe failed without it, or the metric's runs could not tell, never said as a failure."""
    unpassed = [t for t in trials if not t.passed and name in t.removed]
    smallest = min(unpassed, key=lambda t: (len(t.removed), t.inconclusive), default=None)
    if smallest is not None and smallest.inconclusive:
        text = "inconclusive: the metric's runs could not tell whether it is needed"
        shown = smallest.why.removeprefix("INCONCLUSIVE: ")  # metric.decide's words
        return INCONCLUSIVE, f"{text}: {shown}" if shown else text
    text = "the probe fails without it, confirmed by a second run (bisection)"
    return PROBE, f"{text}: {smallest.why}" if smallest is not None and smallest.why else text


class Cleanup(Struct, frozen=True):
    """What ``--keep-needed`` did: what it tried, kept (and why), removed, and what it cost."""

    candidates: tuple[str, ...]  # as named (patterns expanded), plus orphans
    kept: tuple[Needed, ...]  # by static evidence, then by the probe
    tried: tuple[str, ...]  # removed together and probed
    removed: tuple[str, ...]  # what stays removed
    probe_runs: int = 0  # after the change; the baseline is not counted
    reruns: int = 0  # besides those, runs made again on a failing state to confirm it
    bound: int = 0  # the most runs the search could take (bisection.bound)
    trials: tuple[Trial, ...] = ()


class Orphans(Struct, frozen=True):
    """What --with-orphans adds, and the orphans it leaves installed (``spared``)."""

    found: tuple[str, ...]
    spared: tuple[str, ...] = ()


def orphans(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    named: Sequence[str],
    requirements: RequirementIndex,
    libraries: tuple[LibraryIndex, Ownership],
    *,
    spare: Collection[str] = (),
) -> Orphans:
    """The dependencies of ``named`` (transitively) that removing them leaves orphaned: no
    remaining distribution requires them (markers of the target, extras requested by remaining
    ones), they were not requested by the user (no REQUESTED file: pulled in by another), and
    no remaining ELF object loads a library of theirs. In the order met, breadth first.
    Those in ``spare`` (the tool, uv, what the tool runs on) are never added: they are
    ``spared``, and stay with what they require.

    What counts as requested is environment.requested's judgement, as for audit."""
    index, owned = libraries
    wanted, _ = requested(installed)
    removing = list(named)
    found: list[str] = []
    spared: dict[str, None] = {}
    frontier = list(named)
    while frontier:
        candidates = [
            dep
            for name in frontier
            for dep in _requires(installed[name], markers, installed)
            if dep not in removing and dep not in wanted
        ]
        frontier = []
        for dep in dict.fromkeys(candidates):
            trial = [*removing, dep]
            if any(u.required == dep for u in unmet_in(requirements, installed, markers, trial)):
                continue
            if any(
                dep in owned.owners.get(c.before, ()) for c in library_changes(index, owned, trial)
            ):
                continue
            if dep in spare:
                spared[dep] = None
                continue
            removing.append(dep)
            found.append(dep)
            frontier.append(dep)
    return Orphans(tuple(found), tuple(spared))


def requirement_closure(
    name: str, installed: Mapping[str, InstalledDistribution], markers: Mapping[str, str]
) -> set[str]:
    """``name`` and every installed distribution it requires on the target, transitively."""
    found: set[str] = set()
    frontier = [name] if name in installed else []
    while frontier:
        current = frontier.pop()
        if current in found:
            continue
        found.add(current)
        frontier += _requires(installed[current], markers, installed)
    return found


def _requires(
    dist: InstalledDistribution,
    markers: Mapping[str, str],
    installed: Mapping[str, InstalledDistribution],
) -> list[str]:
    """The installed distributions ``dist`` requires on the target (no extra)."""

    found: list[str] = []
    for value in dist.requires_dist():
        try:
            requirement = Requirement(value)
        except InvalidRequirement:
            continue
        applies, extra = applies_on_target(requirement, markers)
        name = canonicalize_name(requirement.name)
        if applies and extra is None and name in installed:
            found.append(name)
    return found
