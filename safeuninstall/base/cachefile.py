"""The files of the state folder that only save time, and the one way they are read.

A cache is a hint, never an authority: an entry is used only while its key, which includes
what the entry describes (a file's device, inode, size, mtime and ctime: mtime can be set back
with ``os.utime``, ctime cannot), matches the thing as it is now, and a hit that would decide
which environment is acted on or whether a file is verified is confirmed against the thing
itself. ``read_cache`` reads every such file: a regular file only (never a symbolic link, a
FIFO or a device: a link to ``/dev/zero`` would be read without end, a FIFO would wait for a
writer for ever), bounded, decoded by type with msgspec by its caller.

``RecordKeyed`` is a cache file with one entry per RECORD path (record-cache.json,
presence-cache.json): read once, written back once, shared by every environment whose state
folder it is.

The file is untrusted input like every other file the tool reads: one that is missing,
unreadable, corrupt, too large or of another format or version is an empty cache (its
entries are worked out again), and each cache validates the entries it uses. Saving keeps
the entries of the environments this command did not look at (a state folder may be
shared) while their site folder exists, and replaces this one's with what the command used;
a cache that can't be written only costs time.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import Struct

from safeuninstall.base.atomicfile import write_atomically
from safeuninstall.base.bounded import read_bytes

E = TypeVar("E")


def read_cache(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the state file ``path``: OSError (Unusable) unless it is a regular file
    of its own (not a symbolic link) of at most ``limit`` bytes."""
    return read_bytes(os.fspath(path), limit, follow_links=False)


class Stored(Struct, Generic[E], frozen=True, forbid_unknown_fields=True):
    format: str
    version: int
    entries: dict[str, E]  # RECORD (METADATA) path -> its entry


class RecordKeyed(Generic[E]):
    """RECORD path -> an entry: those read from the file (``_stored``), those this command
    used or found (``_used``), and the site folders it asked about (``_sites``)."""

    def __init__(
        self, cache_file: Path | None, stored: Any, format: str, version: int, max_bytes: int
    ) -> None:
        """``stored``: the Stored type to decode, ``Stored[Entry]``."""
        self.cache_file = cache_file
        self._format = format
        self._version = version
        self._stored: dict[str, E] = {}
        self._used: dict[str, E] = {}
        self._sites: set[str] = set()  # the site folders of the distributions asked about
        self._alive: dict[str, bool] = {}  # another environment's site folder -> kept
        self.changed = False
        self.hits = 0
        if cache_file is not None:
            self._stored = self._load(cache_file, stored, max_bytes)

    def _load(self, path: Path, stored_type: Any, max_bytes: int) -> dict[str, E]:
        try:
            stored = msgspec.json.decode(read_cache(path, max_bytes), type=stored_type)
        except (OSError, ValueError, msgspec.DecodeError, RecursionError):
            return {}  # missing, unreadable, corrupt, too large: worked out again
        if stored.format != self._format or stored.version != self._version:
            return {}
        entries: dict[str, E] = stored.entries
        return entries

    def save(self) -> None:
        """Store what this command used (the installed set as it is) and the entries of other
        environments (a state folder may be shared), if anything changed."""
        kept = {
            record: entry
            for record, entry in self._stored.items()
            if self._elsewhere(os.path.dirname(os.path.dirname(record)))
        }
        entries = {**kept, **self._used}
        if self.cache_file is None or (not self.changed and entries.keys() == self._stored.keys()):
            return
        payload = msgspec.json.encode(Stored(self._format, self._version, entries))
        with contextlib.suppress(OSError):
            write_atomically(self.cache_file, payload, mode=0o644, durable=False)

    def _elsewhere(self, site: str) -> bool:
        """Whether a stored entry of the site folder ``site`` is kept as another environment's:
        one this command did not look at, and that still exists. A state folder shared by
        many short-lived venvs (``--state-dir`` in CI jobs) would otherwise keep every one of
        them, 2 MB a 235-distribution venv, for every later command to decode."""
        alive = self._alive.get(site)
        if alive is None:
            alive = self._alive[site] = site not in self._sites and os.path.isdir(site)
        return alive
