"""The snapshot: the exact installed set at one moment, and the stash that can give it back.

A snapshot is a frozen record (a ``msgspec.Struct``) with ``from_dict``/``to_dict``;
``load``/``save`` are the only TOML readers and writers. Everything read from disk is
validated, and an error names the file and the key path (``packages[3].version``), because
snapshot files can be edited by hand: msgspec's typed decoding checks the types and the
required keys, and the few checks a type cannot say (names, versions, paths, hashes) are
written out below.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
import tomli_w
from msgspec import Meta, Struct, field

from safeuninstall.base import tomlfile
from safeuninstall.base.atomicfile import write_atomically
from safeuninstall.base.errors import SnapshotInvalid
from safeuninstall.base.outcome import Note, parse_note
from safeuninstall.environment.legacy import DIST_INFO, EASY_INSTALL_PTH, LAYOUTS, MAX_PTH_LINE
from safeuninstall.environment.names import (
    canonical_name,
    is_valid_name,
    unsafe_name,
    unsafe_version,
)
from safeuninstall.environment.source import Source

FORMAT_VERSION = 1

# Far beyond any snapshot this tool writes (a million stashed files); a device or a runaway
# file in its place is refused instead of read whole.
_MAX_BYTES = 256 << 20

_SHA256 = re.compile(r"[0-9a-f]{64}")
_SOURCE_KINDS = ("index", "editable", "directory", "url", "file", "vcs")

# An id as the store forms it (0007): at least four ASCII digits, at most the nine it lists.
# What a file of ours may name as a snapshot; nothing else may reach a path.
FORMED_ID = re.compile(r"[0-9]{4,9}")


class StashedFile(Struct, frozen=True):
    """A file kept in a stash, with the sha256 it must have when it comes back."""

    path: str  # relative to the environment root, POSIX separators
    sha256: str  # of the file's bytes; of a link's target text
    size: Annotated[int, Meta(ge=0)]  # checked when read from a file, not when made in code
    link: str | None = None  # a symbolic link (nothing in the stash): where it points
    # Not the distribution's own: bytecode uv deletes with it (a shared __pycache__, see
    # deletion.py). Brought back only to the state of the snapshot that kept it.
    swept: bool = False


class PthLine(Struct, frozen=True):
    """A line the uninstall takes out of a file rather than a file it deletes: a legacy
    editable's line in easy-install.pth. The file as it was is kept beside the stashed files
    (same relative path), with its sha256; a restore puts the line back in its place."""

    path: str  # the .pth file, relative to the environment root
    line: str  # as uv matches it: stripped
    sha256: str  # of the file as it was, kept in the stash
    size: Annotated[int, Meta(ge=0)]


class PackageStash(Struct, frozen=True):
    """The files of one distribution, kept under the snapshot folder."""

    folder: str  # relative to the snapshot folder
    files: tuple[StashedFile, ...]
    # False when some RECORD file could not be kept (outside the environment, unreadable):
    # such a distribution is reinstalled instead of restored from here.
    complete: bool
    lines: tuple[PthLine, ...] = ()
    # RECORD files already gone when it was stashed (paths relative to the environment): a
    # restore does not bring them back, and its proof does not ask for them
    absent: tuple[str, ...] = ()


class PackageEntry(Struct, frozen=True):
    """One installed distribution as the snapshot froze it."""

    name: str  # canonical
    version: str
    installer: str = ""
    requested: bool = False
    source: Source = field(default_factory=lambda: Source(kind="index"))
    dist_info: str = ""  # relative to the environment root (an .egg-info, an .egg-link)
    stash: PackageStash | None = None
    layout: str = DIST_INFO  # how it was installed (legacy.LAYOUTS)

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def legacy(self) -> bool:
        return self.layout != DIST_INFO

    @property
    def legacy_layout(self) -> str | None:
        """Its layout where it is not a .dist-info folder (the file writes it there alone)."""
        return self.layout if self.legacy else None


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
    operation: str  # what made it: journal.OPERATIONS, "snapshot" (on request), "export", "file"
    target: Target
    packages: tuple[PackageEntry, ...]
    removed: tuple[str, ...] = ()  # canonical names this operation removes
    # A rollback's or a recover's: the snapshot it returns to (a plain rollback reads it to
    # tell which changes are still in effect). Empty for any other operation.
    returns_to: str = ""
    outcome: str = "pending"  # a Note's id: ``note`` reads it
    format: int = FORMAT_VERSION

    def package(self, name: str) -> PackageEntry | None:
        for entry in self.packages:
            if entry.name == name:
                return entry
        return None

    @property
    def note(self) -> Note:
        """How its operation ended (checked when the snapshot is read)."""
        return parse_note(self.outcome)

    def with_outcome(self, note: Note) -> Snapshot:
        return msgspec.structs.replace(self, outcome=note.id)

    def with_removed(self, removed: tuple[str, ...]) -> Snapshot:
        return msgspec.structs.replace(self, removed=removed)

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
            **({"returns_to": self.returns_to} if self.returns_to else {}),
            "target": msgspec.structs.asdict(self.target),
            "packages": [_package_to_dict(p) for p in self.packages],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        if not isinstance(data, Mapping):
            raise _KeyError("(top level)", "expected a table")
        _check_format(data)
        try:
            snapshot = msgspec.convert(data, cls)
        except msgspec.ValidationError as err:
            raise _key_error(err) from None
        _check_written_keys(data)
        _check(snapshot)
        return snapshot


def _package_to_dict(entry: PackageEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": entry.name,
        "version": entry.version,
        "installer": entry.installer,
        "requested": entry.requested,
        "dist_info": entry.dist_info,
        "source": {k: v for k, v in msgspec.structs.asdict(entry.source).items() if v is not None},
    }
    if entry.legacy:  # written only where it says something: older snapshots read the same
        out["layout"] = entry.layout
    if entry.stash is not None:
        out["stash"] = {
            "folder": entry.stash.folder,
            "complete": entry.stash.complete,
            "files": [_stashed_to_dict(f) for f in entry.stash.files],
        }
        if entry.stash.lines:
            out["stash"]["lines"] = [msgspec.structs.asdict(x) for x in entry.stash.lines]
        if entry.stash.absent:
            out["stash"]["absent"] = list(entry.stash.absent)
    return out


def _stashed_to_dict(stashed: StashedFile) -> dict[str, Any]:
    out: dict[str, Any] = {"path": stashed.path, "sha256": stashed.sha256, "size": stashed.size}
    if stashed.link is not None:
        out["link"] = stashed.link
    if stashed.swept:
        out["swept"] = True
    return out


class _KeyError(Exception):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")


def _check_format(data: Mapping[str, Any]) -> None:
    """Before anything else: a layout this tool does not know is refused, not misread."""
    if "format" not in data:
        raise _KeyError("format", "missing")
    fmt = data["format"]
    if type(fmt) is not int or fmt != FORMAT_VERSION:  # type(): true is not 1
        raise _KeyError(
            "format", f"unknown format version {fmt!r} (this tool reads {FORMAT_VERSION})"
        )


def _key_error(err: msgspec.ValidationError) -> _KeyError:
    """msgspec's "Expected `str`, got `int` - at `$.packages[3].version`" in this file's words:
    "packages[3].version: expected `str`, got `int`"."""
    problem, _, where = str(err).partition(" - at `$")
    key = where.removesuffix("`").removeprefix(".")
    missing = re.fullmatch(r"Object missing required field `(.*)`", problem)
    if missing:
        key, problem = (f"{key}.{missing[1]}" if key else missing[1]), "missing"
    problem = re.sub(r"\bobject\b", "table", problem)  # TOML's word for it
    return _KeyError(key or "(top level)", problem[:1].lower() + problem[1:])


# Keys that every snapshot file has, although a record made in code may leave them out (the
# record has a default): a file without them was not written by this tool.
_WRITTEN_KEYS = ("outcome", "removed")
_WRITTEN_PACKAGE_KEYS = ("installer", "requested", "source")


def _check_written_keys(data: Mapping[str, Any]) -> None:
    """After a successful decoding, so ``packages`` is known to be an array of tables."""
    for key in _WRITTEN_KEYS:
        if key not in data:
            raise _KeyError(key, "missing")
    for index, package in enumerate(data["packages"]):
        for key in _WRITTEN_PACKAGE_KEYS:
            if key not in package:
                raise _KeyError(f"packages[{index}].{key}", "missing")


def _check(snapshot: Snapshot) -> None:
    """What the types cannot say: names, versions, paths, hashes, source kinds, duplicates."""
    for index, name in enumerate(snapshot.removed):
        # What the tool removes was named on its command line: a PEP 508 name.
        _check_requested(f"removed[{index}]", name)
    try:
        parse_note(snapshot.outcome)
    except ValueError as err:
        raise _KeyError("outcome", str(err)) from None
    if snapshot.returns_to and not FORMED_ID.fullmatch(snapshot.returns_to):
        raise _KeyError("returns_to", f"{snapshot.returns_to!r} is not a snapshot id")
    for index, entry in enumerate(snapshot.packages):
        _check_package(f"packages[{index}]", entry)
    names = [entry.name for entry in snapshot.packages]
    if len(set(names)) != len(names):
        raise _KeyError("packages", "a distribution is listed twice")


def _check_package(key: str, entry: PackageEntry) -> None:
    _check_name(f"{key}.name", entry.name)
    _check_version(f"{key}.version", entry.version)
    if entry.source.kind not in _SOURCE_KINDS:
        raise _KeyError(f"{key}.source.kind", f"unknown source kind {entry.source.kind!r}")
    if entry.layout not in LAYOUTS:
        raise _KeyError(f"{key}.layout", f"unknown layout {entry.layout!r}")
    if entry.dist_info:
        _check_path(f"{key}.dist_info", entry.dist_info)
    if entry.stash is not None:
        _check_path(f"{key}.stash.folder", entry.stash.folder)
        for index, stashed in enumerate(entry.stash.files):
            _check_path(f"{key}.stash.files[{index}].path", stashed.path)
            _check_sha256(f"{key}.stash.files[{index}].sha256", stashed.sha256)
            if stashed.link is not None and (not stashed.link or "\0" in stashed.link):
                raise _KeyError(f"{key}.stash.files[{index}].link", "not a link target")
        for index, pth in enumerate(entry.stash.lines):
            _check_line(f"{key}.stash.lines[{index}]", pth)
        for index, rel in enumerate(entry.stash.absent):
            _check_path(f"{key}.stash.absent[{index}]", rel)


def _check_sha256(key: str, value: str) -> None:
    if not _SHA256.fullmatch(value):
        raise _KeyError(key, "expected 64 lowercase hex digits")


def _check_line(key: str, pth: PthLine) -> None:
    _check_path(f"{key}.path", pth.path)
    if posixpath.basename(pth.path) != EASY_INSTALL_PTH:
        raise _KeyError(f"{key}.path", f"{pth.path!r} is not an {EASY_INSTALL_PTH}")
    line = pth.line
    bad = not line or line != line.strip() or len(line) > MAX_PTH_LINE
    if bad or any(c in line for c in "\0\n\r"):
        raise _KeyError(f"{key}.line", "expected one stripped line of a .pth file")
    _check_sha256(f"{key}.sha256", pth.sha256)


def _check_name(key: str, value: str) -> None:
    problem = unsafe_name(value)
    if problem:
        raise _KeyError(key, f"{value!r} {problem}")


def _check_requested(key: str, value: str) -> None:
    if not is_valid_name(value):
        raise _KeyError(key, f"{value!r} is not a valid distribution name")
    canonical = canonical_name(value)
    if canonical != value:
        raise _KeyError(key, f"{value!r} is not in canonical form ({canonical!r})")


def _check_version(key: str, value: str) -> None:
    problem = unsafe_version(value)
    if problem:
        raise _KeyError(key, f"{value!r} {problem}")


def _check_path(key: str, value: str) -> None:
    problem = unsafe_relative_path(value)
    if problem:
        raise _KeyError(key, f"{value!r} {problem}")


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
    return parse(read_raw(path), path)


def read_raw(path: Path) -> bytes:
    """The bytes of the snapshot file ``path``; SnapshotInvalid when it can't be one."""
    try:
        raw = _read(path)
    except FileNotFoundError:
        raise SnapshotInvalid(f"{path}: no such snapshot file") from None
    except OSError as err:
        raise SnapshotInvalid(f"{path}: cannot read it: {err.strerror}") from None
    if raw is None:
        raise SnapshotInvalid(f"{path}: not a regular file")
    if len(raw) > _MAX_BYTES:
        raise SnapshotInvalid(f"{path}: larger than {_MAX_BYTES >> 20} MiB: not a snapshot file")
    return raw


def parse(raw: bytes, path: Path) -> Snapshot:
    """The snapshot the bytes ``raw`` of the file ``path`` hold; SnapshotInvalid if none."""
    try:
        data = tomlfile.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SnapshotInvalid(f"{path}: not a valid TOML file: {err}") from None
    except RecursionError:  # the parser recurses into nested arrays and tables
        raise SnapshotInvalid(f"{path}: not a valid TOML file: nested too deeply") from None
    return from_data(data, path)


def from_data(data: object, path: Path) -> Snapshot:
    """The snapshot of a table as snapshot.toml holds it (read from that file, or from its
    JSON twin: store.py), validated the same way; SnapshotInvalid, naming ``path``, if it is
    none."""
    try:
        return Snapshot.from_dict(data)  # type: ignore[arg-type]  # from_dict checks it
    except _KeyError as err:
        raise SnapshotInvalid(f"{path}: {err}") from None


_PACKAGE_TABLE = b"\n[[packages]]\n"  # each package's table starts so in a file save() wrote


def header(raw: bytes) -> tuple[dict[str, Any], int] | None:
    """What the snapshot file's bytes ``raw`` say before their first package, parsed, and how
    many package tables they hold; None where that can't be told this way (a file this tool
    did not write). Some 100 times faster than parsing the whole file, for a listing: it
    does not validate what it does not read."""
    first = raw.find(_PACKAGE_TABLE)
    top = raw if first < 0 else raw[: first + 1]
    try:
        data = tomlfile.loads(top.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if "packages" in data:
        return None
    return data, raw.count(_PACKAGE_TABLE)


def _read(path: Path) -> bytes | None:
    """Up to one byte more than the limit; None for a FIFO or a device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not hang the command
    with open(fd, "rb") as stream:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        # As many bytes as the file has, and one more to see it grow (then the rest, up to
        # the limit): one read of the whole limit would reserve that much memory each time.
        data = stream.read(min(info.st_size, _MAX_BYTES) + 1)
        if len(data) > info.st_size:
            data += stream.read(_MAX_BYTES + 1 - len(data))
        return data


def dumps(snapshot: Snapshot) -> str:
    return tomli_w.dumps(snapshot.to_dict())


def save(snapshot: Snapshot, path: Path) -> bytes:
    """Write the snapshot file, durably; the bytes written."""
    raw = dumps(snapshot).encode("utf-8")
    write_atomically(path, raw)
    return raw
