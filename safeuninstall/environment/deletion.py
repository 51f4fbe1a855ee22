"""What ``uv pip uninstall`` really deletes, worked out before it runs, so the stash holds it.

uv (crates/uv-install-wheel/src/uninstall.rs) goes through a distribution's RECORD:

- a line whose path, normalised, leads out of the environment is skipped (with a warning):
  nothing is deleted there, so nothing there needs keeping;
- a file (or a symbolic link) is deleted; a folder is deleted whole, whatever it holds;
- then, for each folder a file was deleted from (inside site-packages), deepest first: its
  ``__pycache__`` is deleted whole, and if the folder is then empty it goes too, and so on
  upwards. So a ``__pycache__`` that other distributions' bytecode shares (pip's
  overlapping-package test: ``parent/plugins/__pycache__`` after ``child`` is removed) is
  deleted with all of it, listed in another RECORD or in none.

uv removes the distributions of one command in the order of their dist-info paths, each seeing
what the ones before it deleted; ``plan_deletion`` follows the same order over a view of the
file system (``FileSystem``), so it is tested without one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from msgspec import Struct

from safeuninstall.environment.records import RecordEntry


class FileSystem(Protocol):
    def kind(self, path: str) -> str:
        """``file`` (a symbolic link too), ``folder`` or ``missing``; never follows a link."""

    def names(self, folder: str) -> list[str]:
        """The entries of ``folder`` (none when it cannot be read)."""


class _Disk:
    def kind(self, path: str) -> str:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return "missing"
        return "folder" if stat.S_ISDIR(mode) else "file"

    def names(self, folder: str) -> list[str]:
        try:
            return os.listdir(folder)
        except OSError:
            return []


DISK: FileSystem = _Disk()


class Removed(Struct, frozen=True):
    """One distribution uv is to remove: its name, site folder and RECORD."""

    name: str
    site_dir: str
    record: Sequence[RecordEntry]
    dist_info: str = ""  # uv's order: by dist-info path


class Deletion(Struct, frozen=True):
    """Beyond the RECORD's own files, per distribution (absolute, normalised paths)."""

    folders: Mapping[str, tuple[str, ...]]  # RECORD lines that are folders: deleted whole
    swept: Mapping[str, tuple[str, ...]]  # __pycache__ folders deleted on the way up
    outside: Mapping[str, tuple[str, ...]]  # RECORD lines out of the environment: skipped


def inside(path: str, root: str) -> bool:
    """``path`` (normalised) is ``root`` or under it, by name, as uv's scheme check is."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def plan_deletion(removed: Sequence[Removed], env_root: str, fs: FileSystem = DISK) -> Deletion:
    root = os.path.normpath(env_root)
    gone: set[str] = set()  # files and folders deleted so far
    gone_folders: set[str] = set()  # folders deleted whole: everything under them is gone
    folders: dict[str, list[str]] = {}
    swept: dict[str, list[str]] = {}
    outside: dict[str, list[str]] = {}

    def is_gone(path: str) -> bool:
        if path in gone:
            return True
        # A folder above it gone? By slicing the string: torch's 12,000 RECORD lines are
        # looked up several times each, and os.path.dirname on each is the slow way.
        end = len(path)
        while gone_folders and (end := path.rfind(os.sep, 0, end)) > len(root):
            if path[:end] in gone_folders:
                return True
        return False

    def delete(path: str, *, whole: bool = False) -> None:
        gone.add(path)
        if whole:
            gone_folders.add(path)

    for dist in sorted(removed, key=lambda d: d.dist_info):
        site = os.path.normpath(dist.site_dir)
        visited: set[str] = set()
        for entry in dist.record:
            path = os.path.normpath(os.path.join(site, entry.path))
            if not inside(path, root):
                outside.setdefault(dist.name, []).append(entry.path)
                continue
            kind = "missing" if is_gone(path) else fs.kind(path)
            if kind == "file":
                delete(path)
                visited.add(os.path.dirname(path))
            elif kind == "folder":
                delete(path, whole=True)
                folders.setdefault(dist.name, []).append(path)
        for folder in sorted(visited, reverse=True):
            if not folder.startswith(site + os.sep):
                continue  # bin/ and the like: uv sweeps site-packages only
            while folder != site:
                pycache = os.path.join(folder, "__pycache__")
                if not is_gone(pycache) and fs.kind(pycache) == "folder":
                    delete(pycache, whole=True)
                    swept.setdefault(dist.name, []).append(pycache)
                if is_gone(folder) or fs.kind(folder) != "folder":
                    break
                prefix = folder + os.sep
                if any(not is_gone(prefix + name) for name in fs.names(folder)):
                    break
                delete(folder, whole=True)
                folder = os.path.dirname(folder)
    return Deletion(
        folders={k: tuple(v) for k, v in folders.items()},
        swept={k: tuple(v) for k, v in swept.items()},
        outside={k: tuple(v) for k, v in outside.items()},
    )


def vital_line(
    record_paths: Iterable[str], site_dir: str, env_root: str, vital: Collection[str]
) -> tuple[str, str] | None:
    """The first RECORD line (as written, and the path it names) whose deletion takes one of
    ``vital`` (normalised paths, see interpreter.vital_files): the path itself, or a folder
    that holds it, which uv deletes whole. None when there is none. A line that leads out of
    the environment is skipped, as uv skips it."""
    root = os.path.normpath(env_root)
    site = os.path.normpath(site_dir)
    holding = {parent for path in vital for parent in _parents(path) if inside(parent, root)}
    for line in record_paths:
        path = os.path.normpath(os.path.join(site, line))
        if inside(path, root) and (path in vital or path in holding):
            return line, path
    return None


def _parents(path: str) -> Iterator[str]:
    while (parent := os.path.dirname(path)) != path:
        yield parent
        path = parent
