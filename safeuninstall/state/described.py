"""A described state: the distributions another environment has, as a file says them.

Three kinds of file say it, told apart by name and content:

- a snapshot.toml this tool wrote, here or on another machine (``format`` and ``packages``);
- a PEP 751 lock file, ``pylock.toml`` or ``pylock.NAME.toml`` (``lock-version``): what
  ``safe-uninstall export --format pylock`` or a locker writes, validated by
  ``packaging.pylock``;
- any other name: a pinned requirements file, ``name==version`` a line, as ``uv pip freeze``
  and ``safe-uninstall export`` write it (comments, ``--hash`` options, ``name @ URL`` lines,
  ``-e`` lines and index options are read).

A source tree or a checkout (an editable install, a ``directory`` or ``vcs`` source, ``name @``
a folder) gives no version an index has, whatever version its metadata said: the file says only
that the name is present as *some* install. Its version is None, so nothing compares it and no
command brings one back or takes the install here away because of it. ``uv pip freeze`` names an
editable install by its tree alone (``-e file:///src/x``): which distribution that is, only an
environment can say (``select`` with what is installed there).

Each becomes one ``DescribedState``: per distribution its version, where it comes from and the
hashes the file gives, and the marker under which it applies. ``select`` gives the set that
applies to one environment (its marker values): what ``diff`` compares with another side;
``entries`` the same as a snapshot's entries, for a command that brings those versions here
(from a stash that holds them, else an index: ``DescribedPackage.from_index`` says whether an
index can give a version at all).

Its text is UTF-8, or UTF-16 with a byte-order mark, as uv reads a requirements file (and
``-r`` here: requirements.decode_text). The file is untrusted: it is read only if it is a
regular file, up to a limit; a file of another kind, a syntax error, an unpinned line or a
value that could act as something else (a path, a marker or URL in a name) is refused with an
error naming the file and the line or key path.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.pylock import Package, Pylock, PylockUnsupportedVersionError, PylockValidationError
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from safeuninstall.base import tomlfile
from safeuninstall.base.bounded import limit_text, read_bytes
from safeuninstall.base.errors import InvalidInput, SnapshotInvalid
from safeuninstall.environment.names import unsafe_name, unsafe_version
from safeuninstall.environment.requirements import decode_text, logical_lines
from safeuninstall.environment.source import Source
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state.snapshot import PackageEntry

# A snapshot.toml lists every stashed file: 64 MiB is some 400,000 files, where a 5 GB torch
# environment has 22,000. A requirements file is a line per distribution.
_MAX_TOML_BYTES = 64 << 20
_MAX_BYTES = 16 << 20
_SHOWN = 80  # characters of a refused line shown in a message
_NOT_TEXT = "not text: neither UTF-8 nor UTF-16 with a byte-order mark"
# Far beyond any environment (a large ML one has a few hundred); what is more is refused
# before it is validated entry by entry, which would take a minute for a million lines.
MAX_PACKAGES = 20_000

# Identifiers that name a snapshot of the environment, never a file (``./7`` is the file 7).
_SNAPSHOT_REFERENCE = re.compile(r"[0-9]+|latest|now")


class DescribedFormat(enum.Enum):
    SNAPSHOT = "snapshot"
    PYLOCK = "pylock"
    REQUIREMENTS = "requirements"


class DescribedPackage(Struct, frozen=True):
    """One distribution as the file describes it."""

    name: str  # canonical
    version: str | None  # None: the file gives none (a source tree, a URL without one)
    where: str  # "line 4", "packages[2]": where the file says it, for messages
    source: Source = field(default_factory=lambda: Source(kind="index"))
    marker: str | None = None  # PEP 508: the environments it applies to; None: every one
    hashes: tuple[str, ...] = ()  # "sha256:<hex>" of its files, where the file gives them

    @property
    def pin(self) -> str:
        """``name==version``; the name alone where no version is known."""
        return self.name if self.version is None else f"{self.name}=={self.version}"

    @property
    def from_index(self) -> bool:
        """Whether a package index (or a ``--find-links`` folder) can supply it: a version
        released under this name, not a URL, a folder or a checkout."""
        return self.version is not None and self.source.kind == "index"


class UnnamedEditable(Struct, frozen=True):
    """An ``-e`` line that names its source alone, as ``uv pip freeze`` writes one."""

    where: str
    url: str


class DescribedState(Struct, frozen=True):
    """What a file says another environment has."""

    path: str  # as given
    format: DescribedFormat
    packages: tuple[DescribedPackage, ...]
    # What was read and left out, each a sentence naming its line
    set_aside: tuple[str, ...] = ()
    python: str | None = None  # the Python version the file was made for, where it says
    editables: tuple[UnnamedEditable, ...] = ()

    def select(
        self, markers: Mapping[str, str] | None, installed: Mapping[str, Source] | None = None
    ) -> dict[str, DescribedPackage]:
        """The distributions that apply to an environment with these marker values, by name;
        ``markers`` None: every one, markers not evaluated. A name that applies twice is an
        error: one environment has one version of it. ``installed``: the sources of what an
        environment has, by name, which tell which distributions the unnamed editable lines
        are (``editables_in``)."""
        chosen: dict[str, DescribedPackage] = {}
        for package in self.packages:
            if markers is not None and not _applies(package, markers, self.path):
                continue
            if (first := chosen.get(package.name)) is not None:
                why = (
                    "both apply to one environment"
                    if markers is not None
                    else "with no environment to evaluate their markers for, both count"
                )
                raise InvalidInput(
                    f"{self.path}: {package.where}: {package.name} is listed again "
                    f"({first.where}); {why}"
                )
            chosen[package.name] = package
        if installed is not None:
            for package in self.editables_in(installed, chosen):
                chosen.setdefault(package.name, package)
        return chosen

    def editables_in(
        self, installed: Mapping[str, Source], named: Mapping[str, DescribedPackage]
    ) -> list[DescribedPackage]:
        """The installed distributions an unnamed editable line may be: the editable install
        from its tree; where none is, every editable install the file does not name
        (``named``) otherwise: the file may mean any of them, and none is to be touched
        because of it."""
        found: list[DescribedPackage] = []
        here = [n for n, s in installed.items() if s.kind == "editable"]
        for line in self.editables:
            same = [n for n in here if _as_url(installed[n].url or "") == _as_url(line.url)]
            for name in same or [n for n in here if n not in named]:
                source = Source(kind="editable", url=line.url)
                found.append(DescribedPackage(name, None, line.where, source))
        return found

    def unversioned(
        self, chosen: Mapping[str, DescribedPackage], then: str, here: bool = True
    ) -> list[str]:
        """A sentence per distribution of ``chosen`` the file gives no version of, and per
        unnamed editable line none of them is: what is ``then`` (not compared, kept).
        ``here``: ``chosen`` was selected with what an environment has installed."""
        said = []
        for name, package in sorted(chosen.items()):
            if package.version is None:
                what = _SOURCES.get(package.source.kind, "no version")
                said.append(f"{name}: {what} in {self.path} ({package.where}): {then}")
        found = {p.where for p in chosen.values() if p.version is None}
        nor = ", and none here is from its tree" if here else ""
        said += [
            f"{line.where}: an editable install ({line.url[:_SHOWN]}) that names no "
            f"distribution{nor}: {then}"
            for line in self.editables
            if line.where not in found
        ]
        return said

    def entries(self, markers: Mapping[str, str] | None) -> tuple[PackageEntry, ...]:
        """The distributions that apply, each as a snapshot lists one (name, version, source;
        no stash), sorted by name: what an operation that brings these versions into an
        environment takes (the stash index finds which stashes hold each pin; ``from_index``
        says which others an index can give). Those without a version are left out: no pin
        names them."""
        return tuple(
            PackageEntry(name=p.name, version=p.version, source=p.source)
            for _, p in sorted(self.select(markers).items())
            if p.version is not None
        )


# How a distribution the file gives no version of is said, by its source's kind.
_SOURCES = {
    "editable": "an editable install",
    "directory": "a source tree",
    "vcs": "a checkout",
    "url": "a direct reference",
}
# Sources that are a tree or a checkout: a version of one is not a version an index has.
_TREES = frozenset({"editable", "directory", "vcs"})


def _as_url(where: str) -> str:
    """A tree's path or ``file:`` URL as one ``file:`` URL, to match an installed one."""
    if where.startswith("/"):
        return Path(where).as_uri()
    return where.rstrip("/")


def is_file_reference(reference: str) -> bool:
    """Whether a command's snapshot argument names a file: anything that is not a snapshot
    number, ``latest`` or ``now``."""
    return not _SNAPSHOT_REFERENCE.fullmatch(reference)


def read(path: Path) -> DescribedState:
    """The state the file at ``path`` describes; InvalidInput, naming it, if it describes
    none."""
    toml = path.suffix == ".toml"
    raw = _read_bounded(path, _MAX_TOML_BYTES if toml else _MAX_BYTES)
    try:
        text = decode_text(raw)
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: {_NOT_TEXT}") from None
    if toml:
        return _from_toml(path, text)
    return _from_requirements(path, text)


def _read_bounded(path: Path, limit: int) -> bytes:
    if path.is_dir():
        raise InvalidInput(f"{path}: a folder, not a file")
    try:
        return read_bytes(path, limit)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such file") from None
    except OSError as err:  # bounded.Unusable says it in full; others have a strerror
        what = err.strerror or str(err).removeprefix(f"{path}: ")
        if "over the limit" in what:
            what = f"larger than {limit_text(limit)}: not a file that describes an environment"
        raise InvalidInput(f"{path}: cannot read it: {what}") from None


def _applies(package: DescribedPackage, markers: Mapping[str, str], path: str) -> bool:
    if package.marker is None:
        return True
    try:
        return Marker(package.marker).evaluate({**markers, "extra": ""})
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as err:
        raise InvalidInput(f"{path}: {package.where}.marker: {err}") from None


def _checked(path: Path, where: str, name: str, version: str | None) -> tuple[str, str | None]:
    """The canonical name and the version, refused if either could act as something else."""
    canonical = canonicalize_name(name)
    problem = unsafe_name(canonical)
    if problem:
        raise InvalidInput(f"{path}: {where}: {name[:_SHOWN]!r} {problem}")
    if version is not None and (problem := unsafe_version(version)):
        raise InvalidInput(f"{path}: {where}: {version[:_SHOWN]!r} {problem}")
    return canonical, version


# -- TOML: a snapshot, a lock file ---------------------------------------------------------------


def _from_toml(path: Path, text: str) -> DescribedState:
    try:
        data = tomlfile.loads(text)
    except ValueError as err:
        raise InvalidInput(f"{path}: not a valid TOML file: {err}") from None
    except RecursionError:  # the parser recurses into nested arrays and tables
        raise InvalidInput(f"{path}: not a valid TOML file: nested too deeply") from None
    packages = data.get("packages")
    if isinstance(packages, list) and len(packages) > MAX_PACKAGES:
        raise InvalidInput(f"{path}: {_too_many()}")
    if "lock-version" in data:
        return _from_pylock(path, data)
    if "format" in data and "packages" in data:
        return _from_snapshot(path, data)
    raise InvalidInput(
        f"{path}: a TOML file that is neither a snapshot (no `format`) nor a pylock.toml "
        "(no `lock-version`)"
    )


def _too_many() -> str:
    return f"more than {MAX_PACKAGES} distributions: not the set of one environment"


def _from_snapshot(path: Path, data: dict[str, Any]) -> DescribedState:
    try:
        snap = snapshot_file.from_data(data, path)
    except SnapshotInvalid as err:
        raise InvalidInput(err.message) from None
    packages = tuple(
        DescribedPackage(
            entry.name,
            None if entry.source.kind in _TREES else entry.version,
            f"packages[{index}]",
            entry.source,
        )
        for index, entry in enumerate(snap.packages)
    )
    return DescribedState(str(path), DescribedFormat.SNAPSHOT, packages, (), snap.target.version)


def _from_pylock(path: Path, data: dict[str, Any]) -> DescribedState:
    try:
        lock = Pylock.from_dict(data)
    except (PylockValidationError, PylockUnsupportedVersionError) as err:
        raise InvalidInput(f"{path}: not a valid pylock.toml: {err}") from None
    packages = tuple(
        _locked(path, f"packages[{index}]", package) for index, package in enumerate(lock.packages)
    )
    python = str(lock.requires_python) if lock.requires_python else None
    return DescribedState(str(path), DescribedFormat.PYLOCK, packages, (), python)


def _locked(path: Path, where: str, package: Package) -> DescribedPackage:
    """A ``[[packages]]`` table; the version, where the table has none, from its wheels'
    file names (PEP 751 leaves it out for a source tree: then it stays unknown)."""
    version = str(package.version) if package.version is not None else None
    hashes: list[str] = []
    for wheel in package.wheels or ():
        hashes += _hashes(wheel.hashes)
        if version is None and wheel.filename:
            version = str(parse_wheel_filename(wheel.filename)[1])
    if package.sdist is not None:
        hashes += _hashes(package.sdist.hashes)
    source = _lock_source(package)
    if source.kind in _TREES:
        version = None
    name, version = _checked(path, where, str(package.name), version)
    return DescribedPackage(
        name,
        version,
        where,
        source,
        str(package.marker) if package.marker is not None else None,
        tuple(dict.fromkeys(hashes)),
    )


def _hashes(hashes: Mapping[str, str]) -> list[str]:
    return [f"{algorithm}:{value}" for algorithm, value in sorted(hashes.items())]


def _lock_source(package: Package) -> Source:
    if package.vcs is not None:
        vcs = package.vcs
        return Source(
            kind="vcs",
            url=vcs.url or vcs.path,
            vcs=vcs.type,
            commit=vcs.commit_id,
            requested_revision=vcs.requested_revision,
            subdirectory=vcs.subdirectory,
        )
    if package.directory is not None:
        directory = package.directory
        kind = "editable" if directory.editable else "directory"
        return Source(kind=kind, url=directory.path, subdirectory=directory.subdirectory)
    if package.archive is not None:
        archive = package.archive
        return Source(
            kind="url", url=archive.url or archive.path, subdirectory=archive.subdirectory
        )
    return Source(kind="index", url=package.index)


# -- a pinned requirements file --------------------------------------------------------------------

_HASH = re.compile(r"\s--hash[=\s]\s*(\S+)")
# Options that say where to install from: read past, they change no version.
_INDEX_OPTIONS = re.compile(
    r"(-i|--index-url|--extra-index-url|-f|--find-links|--no-index|--trusted-host|--pre"
    r"|--prefer-binary|--only-binary|--no-binary|--require-hashes)(\s|=|$)"
)
_EDITABLE = re.compile(r"(-e|--editable)(\s+|=)")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9._-]+)")
# What pip freeze writes above an editable install it finds no VCS URL for.
_PIP_EDITABLE_COMMENT = re.compile(r"#\s*Editable\b[^(]*\(([A-Za-z0-9._-]+)==[^)]*\)")
_INCLUDE = re.compile(r"(-r|--requirement|-c|--constraint)(\s|=)")


def _from_requirements(path: Path, text: str) -> DescribedState:
    packages: list[DescribedPackage] = []
    editables: list[UnnamedEditable] = []
    named = _pip_editable_names(text)
    for number, line in logical_lines(text):
        where = f"line {number}"
        if editable := _EDITABLE.match(line):
            target = line[editable.end() :].strip()
            name = _egg_name(target) or named.get(number)
            if name is None:
                editables.append(UnnamedEditable(where, target))
            else:
                canonical, _ = _checked(path, where, name, None)
                source = Source(kind="editable", url=target)
                packages.append(DescribedPackage(canonical, None, where, source))
        elif _INCLUDE.match(line):
            raise InvalidInput(
                f"{path}: {where}: {line[:_SHOWN]!r} includes another file; give a file that "
                "pins every distribution itself (`uv pip freeze` writes one)"
            )
        elif _INDEX_OPTIONS.match(line):
            continue
        elif line.startswith("-"):
            raise InvalidInput(
                f"{path}: {where}: {line[:_SHOWN]!r} is an option this tool does "
                "not read in a pinned requirements file"
            )
        elif len(packages) == MAX_PACKAGES:
            raise InvalidInput(f"{path}: {where}: {_too_many()}")
        else:
            packages.append(_pinned(path, where, line))
    if not packages and not editables:
        raise InvalidInput(f"{path}: no `name==version` line: not a pinned requirements file")
    return DescribedState(
        str(path), DescribedFormat.REQUIREMENTS, tuple(packages), editables=tuple(editables)
    )


def _egg_name(target: str) -> str | None:
    """The name a VCS or URL target gives in its ``#egg=`` fragment (pip freeze writes it)."""
    found = _EGG.search(target)
    return found.group(1) if found else None


def _pip_editable_names(text: str) -> dict[int, str]:
    """The line numbers of the lines pip freeze's comment names an editable install for:
    ``# Editable install with no version control (name==1.0)`` above ``-e /src/name``."""
    named: dict[int, str] = {}
    pending: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if found := _PIP_EDITABLE_COMMENT.match(line):
            pending = found.group(1)
        elif line and not line.startswith("#"):
            if pending is not None:
                named[number] = pending
            pending = None
    return named


def _pinned(path: Path, where: str, line: str) -> DescribedPackage:
    hashes = tuple(_HASH.findall(f" {line}"))
    bare = _HASH.sub("", f" {line}").strip()
    try:
        requirement = Requirement(bare)
    except InvalidRequirement as err:
        reason = str(err).splitlines()[0]
        raise InvalidInput(
            f"{path}: {where}: {bare[:_SHOWN]!r} is not a requirement ({reason})"
        ) from None
    marker = str(requirement.marker) if requirement.marker is not None else None
    if requirement.url:
        version = _version_in_url(requirement.url)
        source = _url_source(requirement.url)
    else:
        version = _pinned_version(path, where, requirement)
        source = Source(kind="index")
    name, version = _checked(path, where, requirement.name, version)
    return DescribedPackage(name, version, where, source, marker, hashes)


def _pinned_version(path: Path, where: str, requirement: Requirement) -> str:
    specifiers = list(requirement.specifier)
    if (
        len(specifiers) == 1
        and specifiers[0].operator in ("==", "===")
        and ("*" not in specifiers[0].version)
    ):
        return specifiers[0].version
    raise InvalidInput(
        f"{path}: {where}: {str(requirement)[:_SHOWN]!r} is not pinned to one version "
        "(`name==version`, as `uv pip freeze` writes it)"
    )


def _version_in_url(url: str) -> str | None:
    """The version a wheel's or an sdist's file name carries; None for anything else."""
    filename = url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def _url_source(url: str) -> Source:
    """A ``name @ URL`` line: installed from that URL (a VCS URL keeps its ``git+``)."""
    return Source(kind="url", url=url)
