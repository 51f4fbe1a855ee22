"""Diagnosis: from what a failing probe says, or from an environment that is already broken, to
the distribution that provided the missing piece and the one command that puts it back."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec
from msgspec import Struct, field
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .environment import InstalledDistribution
from .impact import applies_on_target
from .libraries import LibraryIndex, Ownership, hollow_distributions, unresolved
from .snapshot import PackageEntry, Snapshot

_MISSING_LIBRARY = re.compile(r"([\w.+-]+\.so(?:\.[\w.]+)?): cannot open shared object file")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


class Finding(Struct, frozen=True):
    """One thing missing from the environment, and who needs it."""

    kind: str  # "library", "module", "requirement", "hollow", "record"
    what: str  # the soname, module, requirement or distribution
    needed_by: str  # who needs it (distribution or object path), "" when unknown
    provider: str | None = None  # name==version that provided it, when a snapshot knows
    snapshot: str | None = None  # the snapshot whose stash holds the provider
    detail: str = ""  # "record": why the RECORD can't be read, naming the file

    def describe(self) -> str:
        if self.kind == "record":
            return (
                f"unreadable RECORD of {self.what} ({self.detail}): which files it installed "
                "is unknown, and it cannot be removed or stashed until it is reinstalled"
            )
        where = f" (needed by {self.needed_by})" if self.needed_by else ""
        source = (
            f": provided by {self.provider}, kept in snapshot {self.snapshot}"
            if self.provider and self.snapshot
            else f": provided by {self.provider}"
            if self.provider
            else ": no snapshot knows who provided it"
        )
        return f"missing {self.kind} {self.what}{where}{source}"

    def to_dict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)


def _stash_basenames(entry: PackageEntry) -> set[str]:
    return {os.path.basename(f.path) for f in entry.stash.files} if entry.stash else set()


def _module_roots(entry: PackageEntry) -> set[str]:
    """Top-level module names a stashed distribution provided (from its file paths)."""
    roots: set[str] = set()
    if entry.stash is None:
        return roots
    for stashed in entry.stash.files:
        parts = stashed.path.split("/")
        if "site-packages" in parts:
            rest = parts[parts.index("site-packages") + 1 :]
            if rest and not rest[0].endswith((".dist-info", ".data")):
                roots.add(rest[0].split(".", 1)[0])
    return roots


def _ships_file(name: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: name in _stash_basenames(entry)


def _ships_module(root: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: root in _module_roots(entry)


def _is_release(name: str, version: str) -> Callable[[PackageEntry], bool]:
    return lambda entry: entry.name == name and entry.version == version


def _satisfying(name: str, specifier: SpecifierSet) -> Callable[[PackageEntry], bool]:
    return lambda entry: entry.name == name and _satisfies(specifier, entry.version)


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
    """Every finding of ``doctor``, and the one command that repairs them, when known."""

    findings: list[Finding] = field(default_factory=list)
    repair_command: str | None = None
    repair_snapshot: str | None = None
    repair_also: list[str] = field(default_factory=list)  # what the repair brings back besides

    @property
    def healthy(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy else 1

    def to_dict(self) -> dict[str, object]:
        return {
            "healthy": self.healthy,
            "findings": [f.to_dict() for f in self.findings],
            "repair_command": self.repair_command,
            "repair_snapshot": self.repair_snapshot,
            "repair_also": self.repair_also,
        }


def unmet_requirements(
    installed: Mapping[str, InstalledDistribution], markers: Mapping[str, str]
) -> list[tuple[str, Requirement]]:
    """(dependent, requirement) for every Requires-Dist the target does not satisfy."""
    unmet = []
    for key, dist in installed.items():
        for value in dist.requires_dist():
            try:
                requirement = Requirement(value)
            except InvalidRequirement:
                continue
            applies, extra = applies_on_target(requirement, markers)
            if not applies or extra is not None:
                continue
            present = installed.get(canonicalize_name(requirement.name))
            if present is None or not _satisfies(requirement.specifier, present.version):
                unmet.append((key, requirement))
    return unmet


def _satisfies(specifier: SpecifierSet, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return True  # can't judge a non-standard version: don't cry wolf


def examine(
    installed: Mapping[str, InstalledDistribution],
    markers: Mapping[str, str],
    index: LibraryIndex,
    owned: Ownership,
    snapshots: Sequence[Snapshot],
) -> list[Finding]:
    """Everything broken at once: unresolved libraries, unmet requirements, hollow installs,
    RECORDs that can't be read."""
    findings: list[Finding] = []
    seen_sonames: dict[str, list[str]] = {}
    for dist, _obj, soname in unresolved(index, owned):
        seen_sonames.setdefault(soname, []).append(dist)
    for soname, needers in sorted(seen_sonames.items()):
        pin, snap = _provider(snapshots, _ships_file(soname))
        findings.append(Finding("library", soname, ", ".join(sorted(set(needers))), pin, snap))
    for dependent, requirement in unmet_requirements(installed, markers):
        wanted = _satisfying(canonicalize_name(requirement.name), requirement.specifier)
        pin, snap = _provider(snapshots, wanted)
        findings.append(Finding("requirement", str(requirement), dependent, pin, snap))
    for name in hollow_distributions(owned, installed):
        version = installed[name].version
        pin, snap = _provider(snapshots, _is_release(name, version))
        findings.append(Finding("hollow", f"{name}=={version}", "", pin, snap))
    for name, reason in sorted(owned.unreadable.items()):
        # No provider: a reinstall of the same version is what repairs it, and neither a
        # rollback (it keeps an installed release as it is) nor a plain install would do one.
        what = f"{name}=={installed[name].version}"
        findings.append(Finding("record", what, "", detail=reason))
    return findings
