"""Installs made the legacy way, without a RECORD: exactly what uv deletes for each, by its rules.

uv lists three layouts beside ``*.dist-info`` (``InstalledDist::try_from_path`` in
crates/uv-distribution-types/src/installed.rs) and removes them by rules of its own
(crates/uv-install-wheel/src/uninstall.rs, crates/uv-installer/src/uninstall.rs):

- ``egg-info``: a ``name[-version[-pyX.Y]].egg-info`` folder, as ``setup.py install`` leaves it
  (pip's legacy install, which also wrote an installed-files.txt). uv deletes, for each line of
  its top_level.txt (blank lines, names in namespace_packages.txt and anything that is not an
  identifier skipped), the folder of that name, whole, else the first of ``name.py``,
  ``name.pyc``, ``name.pyo``; then the .egg-info folder. It reads no installed-files.txt:
  scripts, data files and ``__pycache__/name.*.pyc`` beside a module stay. With no
  top_level.txt it stops with an error before deleting anything.
- ``egg-link``: a legacy editable (``setup.py develop``): ``<name>.egg-link`` names the project
  folder, whose ``.egg-info`` holds the metadata. uv deletes the .egg-link and takes the first
  line equal to the .egg-link's first line out of ``easy-install.pth`` (the file rewritten
  whole, with ``\\n`` line ends); the project folder stays.
- ``egg-info-file``: a distutils install, one PKG-INFO file named ``.egg-info``: uv refuses
  ("distutils-installed distributions do not include the metadata required to uninstall
  safely"), and so does pip.

easy_install's ``.egg`` folders and zips are not listed by uv: for it, and so here, they are
not installed.

What this module gives for an install is the list of files uv will delete (each a regular file;
the snapshot hashes them, since no RECORD does) and the line it will take out of
easy-install.pth, or why the removal is refused before any change: where uv refuses or would
stop half way with an error, and where it would delete what a stash cannot give back (a
symbolic link, a FIFO). No path is followed out of the site folder: a top_level.txt name is a
single identifier, and a symbolic link is never entered.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.bounded import Unusable, read_bytes
from safeuninstall.environment.records import RecordEntry

DIST_INFO = "dist-info"
EGG_INFO = "egg-info"
EGG_INFO_FILE = "egg-info-file"
EGG_LINK = "egg-link"
LAYOUTS = (DIST_INFO, EGG_INFO, EGG_INFO_FILE, EGG_LINK)
# How each layout is named to a person.
DESCRIBED = {
    EGG_INFO: "a legacy .egg-info folder (setup.py install)",
    EGG_INFO_FILE: "a distutils .egg-info file",
    EGG_LINK: "a legacy editable (.egg-link, setup.py develop)",
}

EASY_INSTALL_PTH = "easy-install.pth"
# Limits on what is read: far beyond any file setuptools writes, short of a file that is not one.
_MAX_LIST_BYTES = 1024 * 1024  # top_level.txt, namespace_packages.txt
MAX_EGG_LINK_BYTES = 64 * 1024  # a path and "."
MAX_PTH_BYTES = 16 * 1024 * 1024  # a line per legacy editable or egg
MAX_PTH_LINE = 4096  # PATH_MAX

_UV_STOPS = "uv stops with an error"
_DISTUTILS = (
    "distutils-installed distributions do not include the metadata required to uninstall "
    "safely (uv and pip both refuse)"
)


class LegacyRemoval(Struct, frozen=True):
    """What uv does to the environment when it removes one legacy install."""

    files: tuple[RecordEntry, ...] = ()  # relative to the site folder: what uv deletes
    pth_line: str | None = None  # the line uv takes out of the site folder's easy-install.pth
    skipped: tuple[str, ...] = ()  # top_level.txt lines uv skips (not a top-level name)
    refused: str | None = None  # why it is not removed here, and nothing is changed
    uv_refuses: bool = False  # uv refuses it too, or stops with an error before the end


def removal(layout: str, path: Path, site_dir: Path) -> LegacyRemoval:
    """What uv does to remove the legacy install whose metadata is ``path`` (the .egg-info
    folder or file, or the .egg-link) in ``site_dir``."""
    if layout == EGG_INFO_FILE:
        return LegacyRemoval(refused=f"{path.name}: {_DISTUTILS}", uv_refuses=True)
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return LegacyRemoval(refused=_link(path))
        if layout == EGG_INFO:
            return _egg_info(path, site_dir)
        if layout == EGG_LINK:
            return _egg_link(path, site_dir)
    except Unusable as err:  # over a limit of ours, or not text (the message names the file)
        return LegacyRemoval(refused=f"cannot read what uv would remove: {err}")
    except OSError as err:  # so can't uv
        where = f"{err.filename}: {err.strerror}" if err.filename else str(err)
        return LegacyRemoval(refused=f"cannot read what uv would remove: {where}", uv_refuses=True)
    raise ValueError(f"not a legacy layout: {layout}")


def _link(path: Path) -> str:
    return (
        f"{path} is a symbolic link: uv deletes the link itself, and a stash keeps regular "
        "files only"
    )


def _egg_info(egg_info: Path, site_dir: Path) -> LegacyRemoval:
    try:
        top_level = _read_list(egg_info / "top_level.txt")
    except FileNotFoundError:
        return LegacyRemoval(
            refused=f"{egg_info.name} has no top_level.txt: uv stops with an error before "
            "deleting anything (it has no other list of the files)",
            uv_refuses=True,
        )
    try:
        namespaces = set(_read_list(egg_info / "namespace_packages.txt"))
    except FileNotFoundError:
        namespaces = set()
    found: dict[str, int] = {}
    skipped = []
    for name in dict.fromkeys(top_level):
        if name in namespaces:
            continue
        if not is_identifier(name):
            skipped.append(name)  # uv warns and skips it: never a path
            continue
        problem = _top_level(site_dir, name, found)
        if problem is not None:
            return LegacyRemoval(refused=problem, uv_refuses=_UV_STOPS in problem)
    problem = _walk(egg_info, site_dir, found)
    if problem is not None:
        return LegacyRemoval(refused=problem)
    files = tuple(RecordEntry(path=rel, sha256=None, size=size) for rel, size in found.items())
    return LegacyRemoval(files=files, skipped=tuple(skipped))


def _top_level(site_dir: Path, name: str, found: dict[str, int]) -> str | None:
    """uv's ``remove_dir_all(site/name)``, else the first of name.py, .pyc, .pyo."""
    path = site_dir / name
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            return _link(path)
        if stat.S_ISDIR(info.st_mode):
            return _walk(path, site_dir, found)
        return f"{path} is not a folder: {_UV_STOPS} there (not a directory)"
    for suffix in (".py", ".pyc", ".pyo"):
        module = site_dir / f"{name}{suffix}"
        try:
            info = os.lstat(module)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            return _link(module)
        if stat.S_ISDIR(info.st_mode):
            return f"{module} is a folder: {_UV_STOPS} there (it deletes a file)"
        if not stat.S_ISREG(info.st_mode):
            return _special(module)
        found[module.name] = info.st_size
        return None  # uv deletes the first one it finds
    return None


def _walk(folder: Path, site_dir: Path, found: dict[str, int]) -> str | None:
    """Every file under ``folder`` (which uv deletes whole), links never followed; or why the
    stash could not give them back."""
    skip = len(os.path.join(site_dir, ""))  # ``folder`` is in ``site_dir``: no relpath needed
    pending = [str(folder)]
    while pending:
        with os.scandir(pending.pop()) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                return _link(Path(entry.path))
            if stat.S_ISDIR(info.st_mode):
                pending.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                found[entry.path[skip:].replace(os.sep, "/")] = info.st_size
            else:
                return _special(Path(entry.path))
    return None


def _special(path: Path) -> str:
    return f"{path} is not a regular file: uv deletes it, and a stash keeps regular files only"


def _egg_link(egg_link: Path, site_dir: Path) -> LegacyRemoval:
    line = egg_link_target(egg_link)
    if line is None:
        return LegacyRemoval(refused=f"{egg_link} names no project folder")
    if len(line) > MAX_PTH_LINE or any(c in line for c in "\0\r"):
        return LegacyRemoval(refused=f"{egg_link}: its first line is not a path a snapshot records")
    pth = site_dir / EASY_INSTALL_PTH
    try:
        info = os.lstat(pth)
    except FileNotFoundError:
        return LegacyRemoval(
            refused=f"there is no {pth}: uv deletes {egg_link.name}, then {_UV_STOPS} on the "
            "missing file",
            uv_refuses=True,
        )
    if stat.S_ISLNK(info.st_mode):
        return LegacyRemoval(refused=_link(pth))
    try:
        text = read_bytes(pth, MAX_PTH_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        return LegacyRemoval(
            refused=f"{pth} is not UTF-8 text: uv deletes {egg_link.name}, then {_UV_STOPS} on it",
            uv_refuses=True,
        )
    size = os.lstat(egg_link).st_size
    listed = any(raw.strip() == line for raw in text.split("\n"))
    return LegacyRemoval(
        files=(RecordEntry(path=egg_link.name, sha256=None, size=size),),
        pth_line=line if listed else None,  # not there: uv leaves the file as it is
    )


def egg_link_target(egg_link: Path) -> str | None:
    """The first non-blank line of an .egg-link, stripped (uv's ``target_line``); None when it
    has none, or is not a small UTF-8 file."""
    try:
        text = read_bytes(egg_link, MAX_EGG_LINK_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for raw in text.split("\n"):
        line = raw.strip()
        if line:
            return line
    return None


def _read_list(path: Path) -> list[str]:
    """A text file's lines, stripped, blank ones left out (uv's ``lines().map(trim)``). Raises
    OSError (FileNotFoundError when it is missing), Unusable when over the limit or not UTF-8:
    uv stops on such a file before deleting anything."""
    raw = read_bytes(path, _MAX_LIST_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:  # uv stops on it too
        raise OSError(errno.EILSEQ, f"not UTF-8 text (byte {err.start})", str(path)) from None
    return [line.strip() for line in text.split("\n") if line.strip()]


def is_identifier(name: str) -> bool:
    """uv's ``Identifier``: an underscore or a letter, then underscores, letters and digits; no
    dot, no separator, so never a path."""
    return (
        bool(name)
        and (name[0] == "_" or name[0].isalpha())
        and all(c == "_" or c.isalnum() for c in name[1:])
    )


# -- easy-install.pth ----------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` with their ends (``\\n`` only: uv's ``lines()`` splits there)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _key(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").strip()


def put_line_back(original: bytes, current: bytes | None, line: str) -> bytes:
    """easy-install.pth with ``line`` back, from its bytes at the snapshot (``original``) and
    now (``current``, None when it is gone).

    Lines are kept in the original's order, with the original's bytes, as many of each as the
    current file has (plus ``line``); lines added since come after them. So the file uv left
    (the original less ``line``, line ends made ``\\n``) gives back the original byte for byte,
    also after several lines were taken out; a line another tool added or took out since
    stays added or out.
    """
    now = _lines(current) if current is not None else []
    wanted = Counter(_key(raw) for raw in now)
    before = sum(1 for raw in _lines(original) if _key(raw) == line)
    if wanted[line] < max(before, 1):  # uv took one out (of several, the first); else it is back
        wanted[line] += 1
    out: list[bytes] = []
    for raw in _lines(original):
        key = _key(raw)
        if wanted[key] > 0:
            out.append(raw)
            wanted[key] -= 1
    for raw in now:
        key = _key(raw)
        if wanted[key] > 0:
            out.append(raw)
            wanted[key] -= 1
    if wanted[line] > 0:  # the original lacked it too
        out.append(line.encode("utf-8") + b"\n")
    for index, raw in enumerate(out[:-1]):
        if not raw.endswith(b"\n"):
            out[index] = raw + b"\n"
    return b"".join(out)


def has_line(data: bytes, line: str) -> bool:
    return any(_key(raw) == line for raw in _lines(data))
