"""Diagnosis: from what a failing probe says, or from an environment that is already broken, to
the distribution that provided the missing piece and the one command that puts it back."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from msgspec import Struct, field
from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.requirements import satisfies
from safeuninstall.libraries.elf import is_elf_candidate
from safeuninstall.libraries.index import (
    Census,
    LibraryIndex,
    MissingLibrary,
    Ownership,
    census,
)
from safeuninstall.plans.changes import Installed, build_stem, plan_rollback
from safeuninstall.state.snapshot import PackageEntry, Snapshot

_MISSING_LIBRARY = re.compile(r"([\w.+-]+\.so(?:\.[\w.]+)?): cannot open shared object file")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


class Finding(Struct, frozen=True):
    """One thing missing from the environment, and who needs it.

    Kinds: "library", "module", "requirement", "hollow", "record", "doubled" (two or more
    dist-info folders of one name), "stale" (a hollow build that nothing requires, whose files
    are another build's: dropped, not reinstalled), "unfinished" (an operation's journal, the
    operation dead) and "running" (an operation under way) are breakage; "on-demand"
    (a library only objects that nothing loads at start need: plugins) and "driver" (a GPU
    driver's library) are notes.
    """

    kind: str
    what: str  # the soname, module, requirement or distribution
    needed_by: str  # who needs it (distributions), "" when unknown
    provider: str | None = None  # name==version that brings it back, when known
    snapshot: str | None = None  # the snapshot whose stash holds the provider
    detail: str = ""  # "record": why the RECORD can't be read; notes: the objects that need it
    recorded_in: str | None = None  # the snapshot that recorded the provider without its files
    pinned: bool = False  # the provider is the requirement's own pin (``==``)
    # a library no snapshot kept: the pins of its consumers' missing requirements
    expected_with: tuple[str, ...] = ()
    # the provider is installed at that version without some of its files: only a reinstall
    # brings them back (an install of an installed version does nothing)
    reinstall: bool = False
    missing_files: int = 0  # "hollow", "stale": how many of the files its RECORD lists are gone
    # "doubled" that no snapshot keeps: the installer's command that removes every folder, for
    # this environment (Context.backend)
    command: str = ""

    def describe(self) -> str:
        if self.kind == "record":
            return (
                f"unreadable RECORD of {self.what} ({self.detail}): which files it installed "
                "is unknown, and it cannot be removed or stashed until it is reinstalled"
            )
        if self.kind == "doubled":
            return _describe_doubled(self)
        if self.kind == "unfinished":
            return (
                f"unfinished operation: {self.what}; it did not end, and recover finishes or "
                "undoes it before anything else can change the environment"
            )
        if self.kind == "running":
            return (
                f"an operation is running on this environment: {self.what}; what doctor "
                "finds now may be its work in progress: run doctor again after it ends"
            )
        where = f" (needed by {self.needed_by})" if self.needed_by else ""
        if self.kind == "driver":
            return (
                f"not installed: {self.what}{where}: the GPU driver's library, which comes with "
                "the driver and never with a wheel (absent on a machine without that GPU)"
            )
        if self.kind == "on-demand":
            objects = ", ".join(sorted({os.path.basename(p) for p in self.detail.split(", ")}))
            return (
                f"not found: {self.what}, needed only by {objects} ({self.needed_by}), which "
                "no extension module or program loads: a plugin, loaded on demand if at all"
            )
        if self.kind == "hollow":
            return f"{self._hollow()}: {self._source()}"
        if self.kind == "stale":
            return _describe_stale(self)
        return f"missing {self.kind} {self.what}{where}: {self._source()}"

    def _hollow(self) -> str:
        name, _, version = self.what.partition("==")
        verb = "is" if self.missing_files == 1 else "are"
        return f"{name} {version} is installed but {self.missing_files} of its files {verb} missing"

    def _source(self) -> str:
        if self.provider and self.snapshot:
            return f"provided by {self.provider}, kept in snapshot {self.snapshot}"
        if self.provider and self.reinstall and self.kind == "hollow":
            them = "it" if self.missing_files == 1 else "them"
            return f"a reinstall of {self.provider} brings {them} back"
        if self.provider and self.reinstall:
            return (
                f"{self.provider} installed it, and is still installed without it: a "
                "reinstall brings it back"
            )
        if self.provider and self.recorded_in:
            return f"snapshot {self.recorded_in} recorded {self.provider} (without its files)"
        if self.provider and self.pinned:
            return f"the requirement pins {self.provider}"
        if self.provider:
            return f"provided by {self.provider}"
        if self.expected_with:
            return (
                "no snapshot kept it; expected back with the missing requirements of "
                + self.needed_by
            )
        return "no snapshot knows who provided it"


def doubled_findings(
    installed: Mapping[str, InstalledDistribution], snapshots: Sequence[Snapshot]
) -> list[Finding]:
    """A distribution with two or more dist-info folders (an uninstall or an upgrade killed
    half way left the other version's): importlib sees one, uv lists and removes both, and no
    restore can be verified while both are there. From what installed_distributions read
    already: nothing more is read. The provider is the newest stash of one of its versions."""
    findings = []
    for name, dist in sorted(installed.items()):
        if not dist.doubled:
            continue
        folders = (dist.dist_info.name, *(p.name for p in dist.doubled))
        versions = {f.removesuffix(".dist-info").rpartition("-")[2] for f in folders}
        pin, snap = _provider(snapshots, _is_one_of(name, versions))
        findings.append(Finding("doubled", name, "", pin, snap, detail=", ".join(folders)))
    return findings


def _describe_doubled(finding: Finding) -> str:
    first = finding.detail.split(", ")[0]
    if finding.provider and finding.snapshot:
        fix = (
            f"snapshot {finding.snapshot} keeps {finding.provider}: a rollback to it removes "
            "every folder and brings that version back (the others' files are kept aside)"
        )
    else:
        fix = (
            f"no snapshot keeps either: `{finding.command or 'uv pip uninstall ' + finding.what}` "
            "removes every folder, then install the version wanted"
        )
    return (
        f"{finding.what} is installed more than once: {finding.detail} (an uninstall or an "
        f"upgrade cut short left a second version): importlib sees {first}, uv lists and "
        f"removes them all, and no restore of it can be verified; {fix}"
    )


def _describe_stale(finding: Finding) -> str:
    """A leftover build: why it goes rather than comes back."""
    other = (finding.provider or "").partition("==")[0]
    required = f" (required by {finding.detail})" if finding.detail else ""
    return (
        f"{finding._hollow()}, and nothing requires it: its files are those of {other}"
        f"{required}, another build at the same paths, which a reinstall of it would "
        f"overwrite: remove it, then reinstall {finding.provider}"
    )


def _stash_basenames(entry: PackageEntry) -> set[str]:
    return {os.path.basename(f.path) for f in entry.stash.files} if entry.stash else set()


def _module_roots(entry: PackageEntry) -> set[str]:
    """Top-level module names a stashed distribution provided (from its file paths: under
    site-packages, or, in a --target folder, which is itself the site folder, from its
    root, its scripts folder aside)."""
    roots: set[str] = set()
    if entry.stash is None:
        return roots
    paths = [stashed.path.split("/") for stashed in entry.stash.files]
    in_site = any("site-packages" in parts for parts in paths)
    for parts in paths:
        if in_site and "site-packages" not in parts:
            continue
        rest = parts[parts.index("site-packages") + 1 :] if in_site else parts
        if len(rest) == 1 and not rest[0].endswith((".py", ".so", ".pyd")):
            continue  # a file at the top that is no module (a .pth, a README)
        if not rest or rest[0].endswith((".dist-info", ".data")):
            continue
        if in_site or rest[0] != "bin":  # a --target folder's scripts are in its bin
            roots.add(rest[0].split(".", 1)[0])
    return roots


def also_in(
    snap: Snapshot, names: Iterable[str], folders: Sequence[str]
) -> list[tuple[str, str, str]]:
    """Of the modules the distributions ``names`` provided (by ``snap``'s stash), those that
    ``folders`` (the interpreter's own site folders, beside a --target or --prefix folder)
    hold too: (distribution, module, the path there). An import of one finds that copy."""
    found = []
    for name in names:
        entry = snap.package(name)
        if entry is None:
            continue
        for root in sorted(_module_roots(entry)):
            for folder in folders:
                there = [os.path.join(folder, root), os.path.join(folder, root + ".py")]
                path = next((p for p in there if os.path.exists(p)), None)
                if path is not None:
                    found.append((entry.name, root, path))
                    break
    return found


def _ships_file(name: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: name in _stash_basenames(entry)


def _ships_module(root: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: root in _module_roots(entry)


def _is_release(name: str, version: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: entry.name == name and entry.version == version


def _is_one_of(name: str, versions: Collection[str]) -> Callable[[PackageEntry], bool]:
    return lambda entry: entry.name == name and entry.version in versions


def _satisfying(name: str, specifier: SpecifierSet) -> Callable[[PackageEntry], bool]:
    return lambda entry: entry.name == name and satisfies(specifier, entry.version)


def _provider(
    snapshots: Sequence[Snapshot], match: Callable[[PackageEntry], bool]
) -> tuple[str | None, str | None]:
    for snap in snapshots:  # newest first
        for entry in snap.packages:
            if entry.stash is not None and match(entry):
                return entry.pin, snap.id
    return None, None


def diagnose(outputs: Iterable[str], snapshots: Sequence[Snapshot]) -> list[Finding]:
    """Map "libX.so.N: cannot open shared object file" and "No module named X" to the
    distribution a snapshot's stash says provided it."""
    findings: dict[tuple[str, str], Finding] = {}
    for text in outputs:
        for soname in _MISSING_LIBRARY.findall(text):
            pin, snap = _provider(snapshots, _ships_file(soname))
            findings.setdefault(("library", soname), Finding("library", soname, "", pin, snap))
        for module in _MISSING_MODULE.findall(text):
            root = module.split(".", 1)[0]
            pin, snap = _provider(snapshots, _ships_module(root))
            findings.setdefault(("module", module), Finding("module", module, "", pin, snap))
    return list(findings.values())


# -- doctor: an environment that is already broken ------------------------------------------


class DoctorReport(Struct):
    """Every finding of ``doctor``, the notes that are not breakage, and the one command that
    repairs the findings, when known."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)  # "driver", "on-demand": not breakage
    repair_command: str | None = None
    repair_snapshot: str | None = None
    repair_also: list[str] = field(default_factory=list)  # what the repair brings back besides

    @property
    def healthy(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy else 1


Requirements = Mapping[str, Sequence[tuple[str, Requirement]]]


def requirements(
    installed: Mapping[str, InstalledDistribution], markers: Mapping[str, str]
) -> dict[str, list[tuple[str, Requirement]]]:
    """name -> (canonical name, requirement) for each of its Requires-Dist that applies on the
    target without an extra."""
    return {key: list(_applying(dist, markers)) for key, dist in installed.items()}


# A marker that requires an extra: ``extra == "name"`` (either quote, any spacing).
_EXTRA_CLAUSE = re.compile(r"""\bextra\s*==\s*(?:"[^"]+"|'[^']+')""")
_OR = re.compile(r"\bor\b")


def _needs_an_extra(value: str) -> bool:
    """Whether the line applies only behind an extra, told without parsing it: a marker with
    an ``extra == "name"`` clause and no ``or`` is false without extras, whatever else it says.
    (Most of a torch venv's Requires-Dist lines are such; parsing and evaluating each would be
    most of `doctor`'s time.)"""
    _, semicolon, marker = value.partition(";")
    return bool(semicolon) and _EXTRA_CLAUSE.search(marker) is not None and not _OR.search(marker)


def _applying(
    dist: InstalledDistribution, markers: Mapping[str, str]
) -> Iterator[tuple[str, Requirement]]:
    for value in dist.requires_dist():
        if _needs_an_extra(value):
            continue
        try:
            requirement = Requirement(value)
        except InvalidRequirement:
            continue
        if _holds_without_extra(requirement, markers):
            yield canonicalize_name(requirement.name), requirement


def _holds_without_extra(requirement: Requirement, markers: Mapping[str, str]) -> bool:
    """Whether the line applies on the target with no extra requested: what
    ``applies_on_target`` answers with (True, None), without going on to try each word of the
    marker as an extra (a line behind an extra is no requirement here): on an ML venv, most of
    the markers evaluated would be those tries."""
    if requirement.marker is None:
        return True
    try:
        return requirement.marker.evaluate({**markers, "extra": ""})
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return False


def unmet_requirements(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    required: Requirements | None = None,
) -> list[tuple[str, Requirement]]:
    """(dependent, requirement) for every Requires-Dist the target does not satisfy;
    ``required``: ``requirements(installed, markers)``, when already at hand."""
    unmet = []
    for key, wanted in (required or requirements(installed, markers)).items():
        for name, requirement in wanted:
            present = installed.get(name)
            if present is None or not satisfies(requirement.specifier, present.version):
                unmet.append((key, requirement))
    return unmet


def _exact_pin(name: str, specifier: SpecifierSet) -> str | None:
    """``name==version`` when the requirement allows one version only (``==1.2``, ``===1.2``)."""
    specifiers = list(specifier)
    if len(specifiers) != 1:
        return None
    (only,) = specifiers
    if only.operator not in ("==", "===") or "*" in only.version:
        return None
    return f"{name}=={only.version}"


def _recorded(
    snapshots: Sequence[Snapshot], match: Callable[[PackageEntry], bool]
) -> tuple[str | None, str | None]:
    """The newest snapshot entry that matches, kept or only recorded: (pin, snapshot id)."""
    for snap in snapshots:
        for entry in snap.packages:
            if match(entry):
                return entry.pin, snap.id
    return None, None


def _requirement_finding(
    dependent: str, requirement: Requirement, snapshots: Sequence[Snapshot]
) -> Finding:
    """Where the missing distribution comes back from: a snapshot's stash, else the version a
    snapshot recorded, else the requirement's own pin."""
    name = canonicalize_name(requirement.name)
    wanted = _satisfying(name, requirement.specifier)
    what = str(requirement)
    pin, snap = _provider(snapshots, wanted)
    if pin is not None:
        return Finding("requirement", what, dependent, pin, snap)
    pin, recorded = _recorded(snapshots, wanted)
    if pin is not None:
        return Finding("requirement", what, dependent, pin, recorded_in=recorded)
    pin = _exact_pin(name, requirement.specifier)
    return Finding("requirement", what, dependent, pin, pinned=pin is not None)


def examine(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    libraries: tuple[LibraryIndex, Ownership, str],
    snapshots: Sequence[Snapshot],
    hollow: Sequence[str],
) -> DoctorReport:
    """Everything broken at once: libraries a load can't find, unmet requirements, hollow
    installs, RECORDs that can't be read; and apart, the libraries that are not breakage.
    ``libraries``: (index, ownership, the interpreter's path); ``hollow``: the hollow
    distributions (libraries.hollow_distributions)."""
    index, owned, interpreter = libraries
    required = requirements(installed, markers)
    graph = {
        key: [name for name, _ in wanted if name in installed] for key, wanted in required.items()
    }
    found = census(index, owned, graph, interpreter)
    unmet = [
        _requirement_finding(dependent, requirement, snapshots)
        for dependent, requirement in unmet_requirements(installed, markers, required)
    ]
    lost = {name: _lost_files(owned.files.get(name, ())) for name in hollow}
    sonames = {m.soname for m in (*found.missing, *found.on_demand)}
    stale = _stale_builds(installed, (required, sonames), owned, lost, unmet)
    # A leftover build is dropped: it is no provider of what is missing, nor reinstalled.
    lost = {name: files for name, files in lost.items() if name not in stale}
    missing, notes = _libraries_missing(found, installed, snapshots, unmet, lost)
    findings = [*missing, *unmet, *_hollow_findings(installed, snapshots, lost)]
    findings += stale.values()
    for name, reason in sorted(owned.unreadable.items()):
        # No provider: a reinstall of the same version is what repairs it, and neither a
        # rollback (it keeps an installed release as it is) nor a plain install would do one.
        what = f"{name}=={installed[name].version}"
        findings.append(Finding("record", what, "", detail=reason))
    return DoctorReport(findings=findings, notes=notes)


def _libraries_missing(
    found: Census,
    installed: Mapping[str, InstalledDistribution],
    snapshots: Sequence[Snapshot],
    unmet: Sequence[Finding],
    lost: Mapping[str, list[str]],
) -> tuple[list[Finding], list[Finding]]:
    """The libraries a load can't find, as findings; and apart, as notes, those that are not
    breakage: a driver's, and those loaded on demand that no removed distribution shipped.
    ``lost``: each hollow distribution's files that are gone."""
    coming = _pins_by_dependent(unmet)
    # The installed distribution whose RECORD lists a library that is gone: the one whose
    # reinstall brings it back (torch's pin of the nvidia wheel is met; its files are not).
    listed_by = {
        os.path.basename(path): f"{name}=={installed[name].version}"
        for name, paths in lost.items()
        for path in paths
    }
    findings = [_library_finding(m, snapshots, coming, listed_by) for m in found.missing]
    notes = []
    gone = _gone_releases(snapshots, installed, lost) if found.on_demand else set()
    for missing in found.on_demand:
        # Loaded on demand if at all: breakage only where a snapshot shows a removed
        # distribution shipped it (a library a package loads itself, with ctypes). With
        # nothing removed, no stash is searched (a torch venv has nine such libraries).
        pin, _ = _provider(snapshots, _ships_file(missing.soname)) if gone else (None, None)
        if pin is not None and pin in gone:
            findings.append(_library_finding(missing, snapshots, coming, listed_by))
        else:
            notes.append(_note("on-demand", missing))
    notes += [_note("driver", missing) for missing in found.driver]
    return findings, notes


def _hollow_findings(
    installed: Mapping[str, InstalledDistribution],
    snapshots: Sequence[Snapshot],
    lost: Mapping[str, list[str]],
) -> list[Finding]:
    """A hollow distribution (``lost``: its files that are gone) comes back from a snapshot's
    stash of the same release, else by a reinstall of it."""
    findings = []
    for name, files in lost.items():
        release = f"{name}=={installed[name].version}"
        pin, snap = _provider(snapshots, _is_release(name, installed[name].version))
        findings.append(
            Finding(
                "hollow",
                release,
                "",
                pin or release,
                snap,
                reinstall=pin is None,
                missing_files=len(files),
            )
        )
    return findings


def _stale_builds(
    installed: Mapping[str, InstalledDistribution],
    needs: tuple[Requirements, Collection[str]],
    owned: Ownership,
    lost: Mapping[str, list[str]],
    unmet: Sequence[Finding],
) -> dict[str, Finding]:
    """The hollow distributions that are another build's leftover, by name: nothing requires
    one, and another build of the same files is required (or whole): installed at the same
    paths (a shared library, or a name that differs only in its CUDA suffix), or missing as
    an unmet requirement of the same name but for that suffix, when a library it lost is one
    a load can't find (a bare uninstall of the nvidia-*-cu13 wheels leaves their cu12 twins
    hollow). Reinstalling the leftover would overwrite the other build's files: it goes, and
    the other build is reinstalled. ``needs``: the requirements, and the sonames missing."""
    required, sonames = needs
    requirers: dict[str, list[str]] = {}
    for key, wanted in required.items():
        for name, _ in wanted:
            if name != key:
                requirers.setdefault(name, []).append(key)
    stale = {}
    for name in sorted(lost):
        if name in requirers:
            continue
        other = _installed_twin(name, owned, requirers, lost)
        pin: str | None = None
        if other is not None:
            pin = f"{other}=={installed[other].version}"
            needers = ", ".join(sorted(requirers.get(other, ())))
        elif any(os.path.basename(path) in sonames for path in lost[name]):
            pin, needers = _missing_twin(name, unmet)
        if pin is not None:
            release = f"{name}=={installed[name].version}"
            count = len(lost[name])
            stale[name] = Finding("stale", release, "", pin, detail=needers, missing_files=count)
    return stale


def _installed_twin(
    name: str, owned: Ownership, requirers: Mapping[str, object], lost: Collection[str]
) -> str | None:
    """The installed distribution that lists files of ``name`` and is another build of them
    (a shared library, or the same stem), required or whole; the required first."""
    shared: dict[str, bool] = {}
    for path in owned.files.get(name, ()):
        for other in owned.owners.get(path, ()):
            if other != name:
                shared[other] = shared.get(other, False) or is_elf_candidate(path)
    twins = [
        other
        for other, library in shared.items()
        if (library or build_stem(other) == build_stem(name))
        and (other in requirers or other not in lost)
    ]
    twins.sort(key=lambda other: (other not in requirers, other))
    return twins[0] if twins else None


def _missing_twin(name: str, unmet: Sequence[Finding]) -> tuple[str | None, str]:
    """The pin of an unmet requirement on another build of ``name`` (same stem, another
    name), and who requires it."""
    for finding in unmet:
        other = canonicalize_name((finding.provider or "").partition("==")[0])
        if finding.provider and other != name and build_stem(other) == build_stem(name):
            return finding.provider, finding.needed_by
    return None, ""


def _lost_files(paths: Iterable[str]) -> list[str]:
    """Of a hollow distribution's RECORD paths, those gone (compiled caches aside, as
    hollow_distributions counts them)."""
    return [p for p in paths if not p.endswith(".pyc") and not os.path.lexists(p)]


def _library_finding(
    missing: MissingLibrary,
    snapshots: Sequence[Snapshot],
    coming: Mapping[str, list[str]],
    listed_by: Mapping[str, str],
) -> Finding:
    pin, snap = _provider(snapshots, _ships_file(missing.soname))
    needers = ", ".join(missing.distributions)
    if pin is not None:
        return Finding("library", missing.soname, needers, pin, snap)
    if missing.soname in listed_by:
        owner = listed_by[missing.soname]
        return Finding("library", missing.soname, needers, owner, reinstall=True)
    # No snapshot kept it: the missing requirements of the distributions that need it are what
    # should bring it back (torch's pins of the nvidia wheels).
    expected = sorted({p for dist in missing.distributions for p in coming.get(dist, ())})
    return Finding("library", missing.soname, needers, expected_with=tuple(expected))


def _pins_by_dependent(unmet: Sequence[Finding]) -> dict[str, list[str]]:
    pins: dict[str, list[str]] = {}
    for finding in unmet:
        if finding.provider is not None:
            pins.setdefault(finding.needed_by, []).append(finding.provider)
    return pins


def _gone_releases(
    snapshots: Sequence[Snapshot],
    installed: Mapping[str, InstalledDistribution],
    hollow: Collection[str],
) -> set[str]:
    """Pins that snapshots kept and that are not installed now, whole."""
    gone = set()
    for snap in snapshots:
        for entry in snap.packages:
            present = installed.get(entry.name)
            if entry.stash is not None and (
                present is None or present.version != entry.version or entry.name in hollow
            ):
                gone.add(entry.pin)
    return gone


def _note(kind: str, missing: MissingLibrary) -> Finding:
    return Finding(
        kind,
        missing.soname,
        ", ".join(missing.distributions),
        detail=", ".join(missing.needed_by),
    )


# -- the repair: one command for every finding ----------------------------------------------


class Repair(Struct, frozen=True):
    """The one step that brings back every missing piece: a rollback to ``snapshot``, else an
    install of ``install`` (pins, each with its recorded source where a snapshot has one),
    after an uninstall of ``drop`` (leftover builds whose files ``install`` puts back)."""

    snapshot: str | None = None
    install: tuple[PackageEntry, ...] = ()
    also: tuple[str, ...] = ()  # what the rollback brings back besides
    reinstall: bool = False  # some of ``install`` is installed without its files
    drop: tuple[str, ...] = ()  # names to uninstall first


def plan_repair(
    findings: Sequence[Finding], snapshots: Sequence[Snapshot], view: Mapping[str, Installed]
) -> Repair | None:
    """A rollback to the newest snapshot whose stash holds every missing distribution and
    that takes nothing away that is installed and intact; else one install of the pins; None
    when some finding has no known way back."""
    wanted: set[str] = set()
    for finding in findings:
        if finding.provider is not None:
            wanted.add(finding.provider)
        elif finding.expected_with:
            wanted.update(finding.expected_with)
        else:
            return None
    # A rollback is the repair when it brings back every missing piece and takes nothing away
    # that is installed and intact now: first one whose stash holds them all, else one whose
    # stash holds some (the rest it reinstalls from the index, as an install would all).
    drop = tuple(sorted(f.what.partition("==")[0] for f in findings if f.kind == "stale"))
    # A rollback brings a leftover build back with the rest: the install drops it first.
    plans = [] if drop else [(snap, plan_rollback(snap, view)) for snap in snapshots]
    for whole in (True, False):
        for snap, plan in plans:
            restored = {e.pin: e for e in plan.restore}
            if not wanted <= set(restored):
                continue
            kept = [_kept(restored[pin]) for pin in wanted]
            if not (all(kept) if whole else any(kept)):
                continue
            if plan.added or any(view[n].intact for n in plan.changed):
                continue
            # Said, not hidden: a rollback also brings back what was removed since on purpose.
            return Repair(snapshot=snap.id, also=tuple(sorted(set(restored) - wanted)))
    # The uninstall of a leftover deletes the files it shares: those of a build installed now.
    reinstall = bool(drop) or any(finding.reinstall for finding in findings)
    entries = tuple(_entry_for_pin(snapshots, pin) for pin in sorted(wanted))
    return Repair(install=entries, reinstall=reinstall, drop=drop)


def _kept(entry: PackageEntry) -> bool:
    return entry.stash is not None and entry.stash.complete


def _entry_for_pin(snapshots: Sequence[Snapshot], pin: str) -> PackageEntry:
    """The snapshot entry of that release (its source: an index URL, a local build...), else
    the bare pin."""
    for snap in snapshots:
        for entry in snap.packages:
            if entry.pin == pin:
                return entry
    name, _, version = pin.partition("==")
    return PackageEntry(name=name, version=version)
