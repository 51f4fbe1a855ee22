"""The snapshot: the exact installed set at one moment, and the stash that can give it back.

A snapshot is a frozen record (a ``msgspec.Struct``) with ``from_dict``/``to_dict``;
``load``/``save`` are the only TOML readers and writers. Everything read from disk is
validated, and an error names the file and the key path (``packages[3].version``), because
snapshot files can be edited by hand.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import tomli_w
from msgspec import Struct, field
from packaging.utils import InvalidName, canonicalize_name
from packaging.version import InvalidVersion, Version

from . import tomlfile
from .atomicfile import write_atomically
from .environment import Source
from .errors import SnapshotInvalid

FORMAT_VERSION = 1
SNAPSHOT_FILE = "snapshot.toml"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_SOURCE_KINDS = ("index", "editable", "directory", "url", "file", "vcs")


class StashedFile(Struct, frozen=True):
    """A file kept in a stash, with the sha256 it must have when it comes back."""

    path: str  # relative to the environment root, POSIX separators
    sha256: str
    size: int


class PackageStash(Struct, frozen=True):
    """The files of one distribution, kept under the snapshot folder."""

    folder: str  # relative to the snapshot folder
    files: tuple[StashedFile, ...]
    # False when some RECORD file could not be kept (outside the environment, unreadable):
    # such a distribution is reinstalled instead of restored from here.
    complete: bool


class PackageEntry(Struct, frozen=True):
    """One installed distribution as the snapshot froze it."""

    name: str  # canonical
    version: str
    installer: str = ""
    requested: bool = False
    source: Source = field(default_factory=lambda: Source(kind="index"))
    dist_info: str = ""  # relative to the environment root
    stash: PackageStash | None = None

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


class Target(Struct, frozen=True):
    """The environment a snapshot was taken of."""

    python: str
    prefix: str
    version: str


class Snapshot(Struct, frozen=True):
    """The exact package set of an environment at one moment, and the stashes kept with it."""

    id: str
    created: str  # ISO 8601, UTC
    tool_version: str
    command: tuple[str, ...]
    operation: str  # "uninstall", "rollback", "snapshot"
    target: Target
    packages: tuple[PackageEntry, ...]
    removed: tuple[str, ...] = ()  # canonical names this operation removes
    outcome: str = "pending"
    format: int = FORMAT_VERSION

    def package(self, name: str) -> PackageEntry | None:
        for entry in self.packages:
            if entry.name == name:
                return entry
        return None

    def with_outcome(self, outcome: str) -> Snapshot:
        return msgspec.structs.replace(self, outcome=outcome)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "id": self.id,
            "created": self.created,
            "tool_version": self.tool_version,
            "command": list(self.command),
            "operation": self.operation,
            "outcome": self.outcome,
            "removed": list(self.removed),
            "target": msgspec.structs.asdict(self.target),
            "packages": [_package_to_dict(p) for p in self.packages],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        reader = _Reader(data, "")
        fmt = reader.integer("format")
        if fmt != FORMAT_VERSION:
            raise _invalid(
                "format", f"unknown format version {fmt} (this tool reads {FORMAT_VERSION})"
            )
        target = reader.table("target")
        packages = tuple(_package_from_dict(item) for item in reader.array_of_tables("packages"))
        names = [p.name for p in packages]
        if len(set(names)) != len(names):
            raise _invalid("packages", "a distribution is listed twice")
        return cls(
            format=fmt,
            id=reader.string("id"),
            created=reader.string("created"),
            tool_version=reader.string("tool_version"),
            command=tuple(reader.strings("command")),
            operation=reader.string("operation"),
            outcome=reader.string("outcome"),
            removed=tuple(reader.names("removed")),
            target=Target(
                python=target.string("python"),
                prefix=target.string("prefix"),
                version=target.string("version"),
            ),
            packages=packages,
        )


def _package_to_dict(entry: PackageEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": entry.name,
        "version": entry.version,
        "installer": entry.installer,
        "requested": entry.requested,
        "dist_info": entry.dist_info,
        "source": {k: v for k, v in msgspec.structs.asdict(entry.source).items() if v is not None},
    }
    if entry.stash is not None:
        out["stash"] = {
            "folder": entry.stash.folder,
            "complete": entry.stash.complete,
            "files": [
                {"path": f.path, "sha256": f.sha256, "size": f.size} for f in entry.stash.files
            ],
        }
    return out


def _package_from_dict(reader: _Reader) -> PackageEntry:
    source = reader.table("source")
    kind = source.string("kind")
    if kind not in _SOURCE_KINDS:
        raise _invalid(source.key("kind"), f"unknown source kind {kind!r}")
    stash = None
    if "stash" in reader.data:
        stash_reader = reader.table("stash")
        stash = PackageStash(
            folder=stash_reader.relative_path("folder"),
            complete=stash_reader.boolean("complete"),
            files=tuple(
                StashedFile(
                    path=f.relative_path("path"),
                    sha256=f.sha256("sha256"),
                    size=f.integer("size"),
                )
                for f in stash_reader.array_of_tables("files")
            ),
        )
    return PackageEntry(
        name=reader.name("name"),
        version=reader.version("version"),
        installer=reader.string("installer"),
        requested=reader.boolean("requested"),
        dist_info=reader.relative_path("dist_info") if reader.data.get("dist_info") else "",
        source=Source(
            kind=kind,
            url=source.optional_string("url"),
            vcs=source.optional_string("vcs"),
            commit=source.optional_string("commit"),
            requested_revision=source.optional_string("requested_revision"),
            subdirectory=source.optional_string("subdirectory"),
        ),
        stash=stash,
    )


class _KeyError(Exception):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")


def _invalid(key: str, problem: str) -> _KeyError:
    return _KeyError(key, problem)


class _Reader:
    """Typed access to a TOML table that names the key path in every error."""

    def __init__(self, data: Mapping[str, Any], prefix: str) -> None:
        if not isinstance(data, Mapping):
            raise _invalid(prefix or "(top level)", "expected a table")
        self.data = data
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def _get(self, name: str, kind: type | tuple[type, ...], what: str) -> Any:
        if name not in self.data:
            raise _invalid(self.key(name), "missing")
        value = self.data[name]
        # bool is an int in Python; don't accept true where a number is meant.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _invalid(self.key(name), f"expected {what}, got {type(value).__name__}")
        return value

    def string(self, name: str) -> str:
        value: str = self._get(name, str, "a string")
        return value

    def optional_string(self, name: str) -> str | None:
        return self.string(name) if name in self.data else None

    def integer(self, name: str) -> int:
        value: int = self._get(name, int, "an integer")
        if value < 0:
            raise _invalid(self.key(name), "must not be negative")
        return value

    def boolean(self, name: str) -> bool:
        value: bool = self._get(name, bool, "true or false")
        return value

    def strings(self, name: str) -> list[str]:
        values = self._get(name, list, "an array of strings")
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise _invalid(f"{self.key(name)}[{index}]", "expected a string")
        return list(values)

    def names(self, name: str) -> list[str]:
        values = self.strings(name)
        for index, value in enumerate(values):
            _check_name(f"{self.key(name)}[{index}]", value)
        return values

    def name(self, name: str) -> str:
        return _check_name(self.key(name), self.string(name))

    def version(self, name: str) -> str:
        value = self.string(name)
        try:
            Version(value)
        except InvalidVersion:
            raise _invalid(self.key(name), f"{value!r} is not a valid version") from None
        return value

    def sha256(self, name: str) -> str:
        value = self.string(name)
        if not _SHA256.fullmatch(value):
            raise _invalid(self.key(name), "expected 64 lowercase hex digits")
        return value

    def relative_path(self, name: str) -> str:
        value = self.string(name)
        problem = unsafe_relative_path(value)
        if problem:
            raise _invalid(self.key(name), f"{value!r} {problem}")
        return value

    def table(self, name: str) -> _Reader:
        return _Reader(self._get(name, Mapping, "a table"), self.key(name))

    def array_of_tables(self, name: str) -> list[_Reader]:
        values = self._get(name, list, "an array of tables")
        return [_Reader(item, f"{self.key(name)}[{i}]") for i, item in enumerate(values)]


def _check_name(key: str, value: str) -> str:
    try:
        canonical = canonicalize_name(value, validate=True)
    except InvalidName:
        raise _invalid(key, f"{value!r} is not a valid distribution name") from None
    if canonical != value:
        raise _invalid(key, f"{value!r} is not in canonical form ({canonical!r})")
    return value


def unsafe_relative_path(value: str) -> str | None:
    """Why ``value`` can't be a path inside the environment, or None when it can."""
    if not value:
        return "is empty"
    if value.startswith("/") or value.startswith("\\") or re.match(r"^[A-Za-z]:", value):
        return "is absolute"
    if "\\" in value or "\0" in value:
        return "has a backslash or NUL character"
    normal = posixpath.normpath(value)
    if normal == ".." or normal.startswith("../") or normal != value:
        return "is not a normalised path inside the environment"
    return None


def load(path: Path) -> Snapshot:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotInvalid(f"{path}: no such snapshot file") from None
    except OSError as err:
        raise SnapshotInvalid(f"{path}: cannot read it: {err.strerror}") from None
    try:
        data = tomlfile.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SnapshotInvalid(f"{path}: not a valid TOML file: {err}") from None
    try:
        return Snapshot.from_dict(data)
    except _KeyError as err:
        raise SnapshotInvalid(f"{path}: {err}") from None


def dumps(snapshot: Snapshot) -> str:
    return tomli_w.dumps(snapshot.to_dict())


def save(snapshot: Snapshot, path: Path) -> None:
    write_atomically(path, dumps(snapshot).encode("utf-8"))
