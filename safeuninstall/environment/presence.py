"""Which installed distributions miss a file their RECORD lists (hollow).

Telling that every file is there is one lstat per file (63,000 in an ML venv). A folder lists
its names in about the time one lstat takes, so each folder of the RECORDs' files is listed
once (5,800 in that venv) and a name the listing lacks is looked up itself. Nothing is kept
between commands: "the file is there" can only be confirmed by looking, and a cache of it that
whoever can write the state folder could forge would hide a missing file from ``doctor``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from safeuninstall.base.cachefile import FileStamp
from safeuninstall.environment.installed import InstalledDistribution

_SETTLED_NS = 2_000_000_000  # a folder changed in the last 2 s: its listing is not reused


def hollow(
    files: Mapping[str, tuple[str, ...]], installed: Mapping[str, InstalledDistribution]
) -> list[str]:
    """The installed distributions some of whose files (``files``: name -> its RECORD paths,
    normalised) are gone, compiled caches aside."""
    listings = _Listings()
    found = []
    for key, paths in files.items():
        if key not in installed:
            continue
        # The folders listed for an earlier distribution, stat'ed before this one's look (one
        # not listed yet is stat'ed by its listing).
        now = _folder_keys(listings.listed({p.rpartition("/")[0] for p in paths}))
        if any(not p.endswith(".pyc") and not listings.lexists(p, now) for p in paths):
            found.append(key)
    return sorted(found)


def _folder_keys(folders: set[str]) -> dict[str, FileStamp]:
    """Each folder's stat now, where it can be taken."""
    keys: dict[str, FileStamp] = {}
    for folder in folders:
        try:
            keys[folder] = FileStamp.of(os.stat(folder or "/"))
        except (OSError, ValueError):
            continue
    return keys


class _Listings:
    """``os.path.lexists`` answered from one listing of each folder: an ML venv's 63,000
    RECORD files are in 5,800 folders, and listing a folder costs about what one lstat does.
    A name the listing lacks is looked up itself, so the answer is lexists' own wherever the
    listing does not vouch for the name (a folder that can't be listed, another spelling).

    A listing serves a distribution only while its folder has the stat it had just before the
    listing, settled (see _SETTLED_NS): a folder several distributions share (site-packages,
    ``nvidia/``) may change between the first one's look and a later one's, and is then listed
    again."""

    def __init__(self) -> None:
        self._names: dict[str, tuple[FileStamp | None, frozenset[str]]] = {}

    def listed(self, folders: set[str]) -> set[str]:
        """Those of ``folders`` listed already."""
        return folders & self._names.keys()

    def lexists(self, path: str, now: Mapping[str, FileStamp]) -> bool:
        """``now``: the folders' stats the caller took before this look."""
        folder, _, name = path.rpartition("/")
        known = self._names.get(folder)
        if known is None or (folder in now and known[0] != now[folder]):
            known = self._names[folder] = _listing(folder)
        return name in known[1] or os.path.lexists(path)


def _listing(folder: str) -> tuple[FileStamp | None, frozenset[str]]:
    """The folder's names and its stat before them; no stat when it changed too recently to
    vouch that the names are still those (a change in the same clock tick keeps the stat)."""
    try:
        info = os.stat(folder or "/")
        names = frozenset(os.listdir(folder or "/"))
    except (OSError, ValueError):
        return None, frozenset()
    settled = time.time_ns() - _SETTLED_NS
    if info.st_mtime_ns > settled or info.st_ctime_ns > settled:
        return None, names
    return FileStamp.of(info), names
