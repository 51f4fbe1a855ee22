"""The Requires-Dist values of each installed METADATA, kept between commands.

A removal asks every remaining distribution whether it requires what goes, and reading every
METADATA header for that on every command grows with the environment. A METADATA changes
only when its distribution is reinstalled, so an entry is used while
the file's stat is the one it was read with: device, inode, size, mtime and ctime, as
record-cache.json's (recordcache.py). The file is untrusted input: anything that is not a
well-formed entry for the METADATA as it is now is ignored and the header read. A METADATA
that can't be read is not kept (its values are read again next time), nor one that changed
while it was read; a legacy install (PKG-INFO, requires.txt) is always read.
"""

from __future__ import annotations

import os
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.cachefile import RecordKeyed, Stored
from safeuninstall.environment.installed import InstalledDistribution, read_requires
from safeuninstall.environment.recordcache import StatKey, stat_key

REQUIRES_CACHE_FILE = "requires-cache.json"
_FORMAT = "safeuninstall-requires-cache"
_VERSION = 1
# An ML venv's 235 distributions name some 1,300 requirements: tens of KB.
_MAX_CACHE_BYTES = 64 * 1024 * 1024


class _Entry(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    key: StatKey
    requires: list[str]  # the Requires-Dist values, as read_requires gives them


class RequiresCache(RecordKeyed[_Entry]):
    """METADATA path -> its Requires-Dist values, by the file's stat."""

    def __init__(self, cache_file: Path | None = None) -> None:
        super().__init__(cache_file, Stored[_Entry], _FORMAT, _VERSION, _MAX_CACHE_BYTES)

    def requires_dist(self, dist: InstalledDistribution) -> list[str]:
        """``dist.requires_dist()``, answered from the cache where the METADATA is unchanged."""
        if dist.legacy or dist.metadata_dir is None:
            return dist.requires_dist()
        metadata = dist.metadata_dir / "METADATA"
        name = str(metadata)
        self._sites.add(str(dist.site_dir))
        try:
            key = stat_key(os.stat(metadata))
        except OSError:
            return dist.requires_dist()
        entry = self._stored.get(name)
        if entry is not None and entry.key == key and _well_formed(entry.requires):
            self._used[name] = entry
            self.hits += 1
            return list(entry.requires)
        try:
            values = read_requires(metadata)
            unchanged = stat_key(os.stat(metadata)) == key
        except OSError:
            return []  # as dist.requires_dist() answers an unreadable METADATA; not kept
        if unchanged:
            self._used[name] = _Entry(key, values)
            self.changed = True
        return values


def _well_formed(values: list[str]) -> bool:
    """Values as a header line gives them: stripped, each on one line."""
    return all(v == v.strip() and "\n" not in v and "\r" not in v for v in values)
