"""The files of the state folder that only save time: one stamp of a file, one typed cache file.

A cache is a hint, never an authority. Each entry carries the key of what it summarises, and is
used only while that key matches the thing as it is now:

- ``FileStamp``: a file's device, inode, size, mtime, ctime and mode (mtime can be set back
  with ``os.utime``, ctime cannot; a chmod changes the mode alone). Enough for a cache whose
  content only saves time: whoever could forge the entry could also change the thing it stands
  for.
- ``digest``: the sha256 of bytes the command reads anyway. A cache whose content could change
  a verdict (a snapshot's twin) is keyed by the content it summarises: a forged entry then has
  to name the bytes as they are, and it is their summary or it is ignored.

``CacheFile`` is every such file: read as a regular file of its own only (never a symbolic
link, a FIFO or a device: a link to ``/dev/zero`` would be read without end, a FIFO would wait
for a writer for ever), bounded, and decoded by type with msgspec. One that is missing,
unreadable, corrupt, too large, or of another format or version reads as no cache, and the
work is done again; one that can't be written only costs time on the next command.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import Struct

from safeuninstall.base.atomicfile import write_atomically
from safeuninstall.base.bounded import read_bytes

T = TypeVar("T")
E = TypeVar("E")


class FileStamp(Struct, frozen=True, array_like=True):
    """What tells one state of a file from another without reading it."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    # Moves with any change to the inode, and also when another hard link to it is made or
    # removed: the file as a path shows it may be the same.
    ctime_ns: int
    mode: int  # st_mode: the kind and the permission bits

    @classmethod
    def of(cls, info: os.stat_result) -> FileStamp:
        return cls(
            info.st_dev,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            info.st_ctime_ns,
            info.st_mode,
        )

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> FileStamp:
        """The stamp of ``path`` (links followed); raises OSError."""
        return cls.of(os.stat(path))


def digest(data: bytes) -> str:
    """The key of a cache entry that summarises ``data``."""
    return hashlib.sha256(data).hexdigest()


def read_cache(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the state file ``path``: OSError (Unusable) unless it is a regular file
    of its own (not a symbolic link) of at most ``limit`` bytes."""
    return read_bytes(os.fspath(path), limit, follow_links=False)


class _Envelope(Struct, Generic[T], frozen=True, forbid_unknown_fields=True):
    format: str
    version: int
    data: T


class CacheFile(Generic[T]):
    """One cache file holding a value of type ``data_type``, named by ``format`` and
    ``version`` (change the version with the type: a file of another version is not read)."""

    def __init__(
        self, path: Path, data_type: Any, *, format: str, version: int, max_bytes: int
    ) -> None:
        self.path = path
        self._type = _Envelope[data_type]
        self._format = format
        self._version = version
        self._max_bytes = max_bytes

    def read(self) -> T | None:
        """The value stored, or None when there is none that can be used."""
        try:
            stored = _decode(read_cache(self.path, self._max_bytes), self._type)
        except (OSError, ValueError, msgspec.DecodeError, RecursionError):
            return None  # missing, unreadable, corrupt, too large: worked out again
        if stored.format != self._format or stored.version != self._version:
            return None
        value: T = stored.data
        return value

    def write(self, value: T) -> None:
        """Store ``value`` atomically, without fsync: a cache lost in a power cut costs time."""
        stored = _Envelope(self._format, self._version, value)
        try:
            payload = msgspec.json.encode(stored)
        except UnicodeEncodeError:
            # A path that is not UTF-8 (os.fsdecode keeps its bytes as lone surrogates): json
            # writes them as \\udcxx escapes and reads them back (see _decode); msgspec doesn't.
            payload = json.dumps(msgspec.to_builtins(stored), separators=(",", ":")).encode()
        with contextlib.suppress(OSError):
            write_atomically(self.path, payload, mode=0o600, durable=False)


def _decode(data: bytes, data_type: Any) -> Any:
    try:
        return msgspec.json.decode(data, type=data_type)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError:
        # Not JSON, or JSON with the \\udcxx escapes of a path that is not UTF-8 (see write).
        return msgspec.convert(json.loads(data), data_type)


class RecordKeyed(Generic[E]):
    """A cache file with one entry per RECORD path (record-cache.json): read once, written back
    once, shared by every environment whose state folder it is. ``_stored``: the entries read
    from the file, ``_used``: those this command used or found, ``_sites``: the site folders it
    asked about. Saving keeps the entries of the environments this command did not look at
    while their site folder exists, and replaces this one's with what the command used."""

    def __init__(self, file: CacheFile[dict[str, E]] | None) -> None:
        self._file = file
        self._stored: dict[str, E] = (file.read() or {}) if file is not None else {}
        self._used: dict[str, E] = {}
        self._sites: set[str] = set()
        self._alive: dict[str, bool] = {}  # another environment's site folder -> kept
        self.changed = False
        self.hits = 0

    def save(self) -> None:
        """Store what this command used and the entries of other environments, if anything
        changed."""
        kept = {
            record: entry
            for record, entry in self._stored.items()
            if self._elsewhere(os.path.dirname(os.path.dirname(record)))
        }
        entries = {**kept, **self._used}
        if self._file is None or (not self.changed and entries.keys() == self._stored.keys()):
            return
        self._file.write(entries)

    def _elsewhere(self, site: str) -> bool:
        """Whether a stored entry of the site folder ``site`` is kept as another environment's:
        one this command did not look at, and that still exists. A state folder shared by
        many short-lived venvs (``--state-dir`` in CI jobs) would otherwise keep every one of
        them for every later command to decode."""
        alive = self._alive.get(site)
        if alive is None:
            alive = self._alive[site] = site not in self._sites and os.path.isdir(site)
        return alive
