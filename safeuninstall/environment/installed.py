"""The target environment: where its packages live, what is installed (the interpreter itself:
interpreter.py)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import msgspec
from msgspec import Struct
from packaging.utils import canonicalize_name

from safeuninstall.base import interrupts
from safeuninstall.base.bounded import open_regular, read_bytes
from safeuninstall.base.errors import EnvironmentNotWritable
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.environment.legacy import (
    DIST_INFO,
    EGG_INFO,
    EGG_INFO_FILE,
    EGG_LINK,
    LegacyRemoval,
    egg_link_target,
    removal,
)
from safeuninstall.environment.names import unsafe_name, unsafe_version
from safeuninstall.environment.records import RecordEntry, read_record, record_paths
from safeuninstall.environment.source import Source as Source  # also named from here

# What a dist-info file may hold at most; beyond, it is read as missing. A header of 16 MiB
# (some put the whole README in a Description field) is already none a tool would write.
_MAX_HEADER_BYTES = 16 * 1024 * 1024
_MAX_DIRECT_URL_BYTES = 1024 * 1024  # a URL, a commit, a subdirectory
_MAX_INSTALLER_BYTES = 4 * 1024  # one word: "uv", "pip"


class InstalledDistribution(Struct, frozen=True):
    """One installed distribution as found on disk: a ``*.dist-info`` folder, or an install
    made the legacy way (``layout``, see legacy.py)."""

    name: str  # as in METADATA (PKG-INFO)
    version: str
    # The metadata that makes it installed, in a site folder: the .dist-info folder, the
    # .egg-info folder or file, or the .egg-link file.
    dist_info: Path
    installer: str
    requested: bool
    source: Source
    # Other metadata of the same name, later in sys.path order (a broken environment):
    # importlib.metadata never sees them, but uninstalling the name removes them.
    shadowed: tuple[Path, ...] = ()
    layout: str = DIST_INFO
    egg_info: Path | None = None  # an egg-link's .egg-info folder, in its project folder

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)

    @property
    def site_dir(self) -> Path:
        return self.dist_info.parent

    @property
    def legacy(self) -> bool:
        return self.layout != DIST_INFO

    @property
    def doubled(self) -> tuple[Path, ...]:
        """Its other dist-info folders (another version installed beside it: an uninstall or
        an upgrade killed half way). uv removes them all with it; a snapshot keeps one."""
        if self.legacy:
            return ()
        return tuple(p for p in self.shadowed if p.name.endswith(".dist-info"))

    @property
    def metadata_dir(self) -> Path | None:
        """The folder with METADATA or PKG-INFO, top_level.txt..., if there is one."""
        if self.layout == EGG_LINK:
            return self.egg_info
        return None if self.layout == EGG_INFO_FILE else self.dist_info

    def record(self) -> list[RecordEntry]:
        """The files a removal deletes: RECORD's, or for a legacy install those uv deletes
        (none where it refuses: see ``legacy_removal``)."""
        if self.legacy:
            return list(self.legacy_removal().files)
        return read_record(self.dist_info / "RECORD")

    def record_paths(self) -> list[str]:
        """The paths of ``record()``, no hash decoded (raises what it raises)."""
        if self.legacy:
            return [entry.path for entry in self.legacy_removal().files]
        return record_paths(self.dist_info / "RECORD")

    def legacy_removal(self) -> LegacyRemoval:
        """What uv does to remove this legacy install (see legacy.py)."""
        return removal(self.layout, self.dist_info, self.site_dir)

    def requires_dist(self) -> list[str]:
        """Requires-Dist values from the METADATA (PKG-INFO) header, the long description not
        read; for a legacy install, also what its requires.txt lists."""
        if self.layout == EGG_INFO_FILE:
            return _requires(self.dist_info)
        folder = self.metadata_dir
        if folder is None:
            return []
        if not self.legacy:
            return _requires(folder / "METADATA")
        return _requires(folder / "PKG-INFO") + _requires_txt(folder / "requires.txt")


def _requires(metadata: Path) -> list[str]:
    try:
        return read_requires(metadata)
    except OSError:
        return []


def read_requires(metadata: Path) -> list[str]:
    """The Requires-Dist values of a METADATA header; raises OSError when it can't be read."""
    return [
        line[len("Requires-Dist:") :].strip()
        for line in _header_lines(metadata)
        if line.startswith("Requires-Dist:")
    ]


def _requires_txt(path: Path) -> list[str]:
    """setuptools' requires.txt as Requires-Dist values: lines before the first section, then
    ``[extra]``, ``[:marker]`` and ``[extra:marker]`` sections as markers."""
    text = _read_text(path, _MAX_HEADER_BYTES) or ""
    found = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        extra, _, marker = section.partition(":")
        markers = ([f'extra == "{extra}"'] if extra else []) + ([f"({marker})"] if marker else [])
        found.append(f"{line}; {' and '.join(markers)}" if markers else line)
    return found


# The distribution name at the start of a requirement: enough to know whether a line can
# matter, before paying for a full parse.
_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


# required name -> [(dependent, Requires-Dist value)]
RequirementIndex = Mapping[str, Sequence[tuple[str, str]]]


def requested(installed: Mapping[str, InstalledDistribution]) -> tuple[frozenset[str], bool]:
    """(the distributions known to be requested by the user, whether the REQUESTED files of
    those uv installed were disregarded): the one definition that audit's orphans and
    --with-orphans share.

    pip writes REQUESTED for the names on its command line only. uv writes it for every
    distribution it installs, dependencies too (astral-sh/uv#13278): where every distribution
    uv installed has one, they say nothing and are disregarded; where some lack it (removed by
    hand, or a uv that writes it as pip does), they are read."""
    by_uv = [d for d in installed.values() if d.installer == "uv"]
    disregarded = bool(by_uv) and all(d.requested for d in by_uv)
    found = frozenset(
        name
        for name, dist in installed.items()
        if dist.requested and not (disregarded and dist.installer == "uv")
    )
    return found, disregarded


def requirement_index(
    installed: Mapping[str, InstalledDistribution],
    requires_dist: Callable[[InstalledDistribution], list[str]] | None = None,
) -> dict[str, list[tuple[str, str]]]:
    """required name -> [(dependent, Requires-Dist value)], from each METADATA header. No line
    is parsed: the leading name alone says which lines can matter to a removal.
    ``requires_dist``: reads a distribution's values, else each is read."""
    index: dict[str, list[tuple[str, str]]] = {}
    for key, dist in installed.items():
        values = dist.requires_dist() if requires_dist is None else requires_dist(dist)
        for value in values:
            match = _LEADING_NAME.match(value)
            if match:
                index.setdefault(canonicalize_name(match.group(1)), []).append((key, value))
    return index


def _header_lines(metadata: Path) -> Iterator[str]:
    """The lines of a METADATA header, up to the blank line before the body, and no more than
    _MAX_HEADER_BYTES of them. Raises OSError when the file can't be read, or is no regular
    file (a FIFO would block the open, /dev/zero never end a line)."""
    with open_regular(metadata) as handle:
        budget = _MAX_HEADER_BYTES
        while budget > 0 and (raw := handle.readline(budget)):
            budget -= len(raw)
            line = raw.decode("utf-8", errors="replace")
            if line in ("\n", "\r\n"):
                return
            yield line


def _read_name_version(metadata: Path) -> tuple[str, str] | None:
    """Name and Version from a METADATA header, without parsing the whole file."""
    name = version = None
    try:
        for line in _header_lines(metadata):
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
            if name and version:
                return name, version
    except OSError:
        return None
    return None  # the header had no Name/Version


def _read_text(path: Path, limit: int) -> str | None:
    """The file's text; None when it is missing, unreadable, over ``limit`` or not UTF-8: what
    it says is then unknown, as if it were not there."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def read_distribution(dist_info: Path) -> InstalledDistribution | None:
    found = _read_name_version(dist_info / "METADATA")
    if found is None:
        return None
    name, version = found
    if unsafe_name(canonicalize_name(name)) or unsafe_version(version):
        return None  # a name or version that could act as a path or a requirement's syntax
    source = Source(kind="index")
    direct_url = _read_text(dist_info / "direct_url.json", _MAX_DIRECT_URL_BYTES)
    if direct_url:
        try:
            data = json.loads(direct_url)
        except ValueError:
            data = None
        if isinstance(data, dict):
            source = Source.from_direct_url(data)
    return InstalledDistribution(
        name=name,
        version=version,
        dist_info=dist_info,
        installer=(_read_text(dist_info / "INSTALLER", _MAX_INSTALLER_BYTES) or "").strip(),
        requested=(dist_info / "REQUESTED").exists(),
        source=source,
    )


def read_legacy(path: Path, is_dir: bool) -> InstalledDistribution | None:
    """An install made the legacy way, as uv identifies it (``InstalledDist::try_from_path``):
    an ``.egg-info`` folder or file, named ``name[-version[-pyX.Y]]`` (the version read from
    PKG-INFO when the name has none), or an ``.egg-link`` whose project folder holds
    ``<name>.egg-info/PKG-INFO``. None for anything else."""
    if path.name.endswith(".egg-link"):
        return _read_egg_link(path)
    stem = path.name[: -len(".egg-info")]
    name, _, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if rest else ""
    header = path / "PKG-INFO" if is_dir else path
    read = _read_name_version(header)
    if not version:
        if read is None:
            return None
        version = read[1]
    if read is not None and canonicalize_name(read[0]) == canonicalize_name(name):
        name = read[0]  # the metadata's spelling; uv matches by the file name
    return _legacy(name, version, path, EGG_INFO if is_dir else EGG_INFO_FILE)


def _read_egg_link(egg_link: Path) -> InstalledDistribution | None:
    target = egg_link_target(egg_link)
    if target is None or "\0" in target:
        return None
    project = egg_link.parent / target
    egg_info = project / (egg_link.name[: -len(".egg-link")].replace("-", "_") + ".egg-info")
    read = _read_name_version(egg_info / "PKG-INFO")
    if read is None or not project.is_absolute():
        return None
    source = Source(kind="editable", url=project.as_uri())
    return _legacy(read[0], read[1], egg_link, EGG_LINK, source=source, egg_info=egg_info)


def _legacy(
    name: str,
    version: str,
    path: Path,
    layout: str,
    *,
    source: Source | None = None,
    egg_info: Path | None = None,
) -> InstalledDistribution | None:
    if not name or unsafe_name(canonicalize_name(name)) or unsafe_version(version):
        return None  # as in read_distribution: it could act as a path or a requirement
    return InstalledDistribution(
        name=name,
        version=version,
        dist_info=path,
        installer="",
        requested=False,
        source=source or Source(kind="index"),
        layout=layout,
        egg_info=egg_info,
    )


# What marks an installed distribution in a site folder, as uv looks for it.
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")


def _site_entries(
    interpreter: Interpreter, suffixes: tuple[str, ...] = _METADATA_SUFFIXES
) -> Iterator[os.DirEntry[str]]:
    """The entries of the target's site folders whose name ends with one of ``suffixes``, in
    sys.path order and by name within a folder; an unreadable folder has none."""
    for site_dir in interpreter.site_dirs:
        try:
            entries = sorted(os.scandir(site_dir), key=lambda e: e.name)
        except OSError:
            continue
        yield from (entry for entry in entries if entry.name.endswith(suffixes))


def _read_entry(entry: os.DirEntry[str]) -> InstalledDistribution | None:
    try:
        is_dir = entry.is_dir()
    except OSError:
        return None
    if entry.name.endswith(".dist-info"):
        return read_distribution(Path(entry.path)) if is_dir else None
    if entry.name.endswith(".egg-link") and is_dir:
        return None
    return read_legacy(Path(entry.path), is_dir)


def easy_install_eggs(interpreter: Interpreter) -> dict[str, Path]:
    """easy_install's ``name-version-pyX.Y.egg`` folders and zips, by canonical name: installed
    for importlib.metadata and pip, not for uv (it lists no ``.egg``), so not here either."""
    found: dict[str, Path] = {}
    for entry in _site_entries(interpreter, (".egg",)):
        name = entry.name.split("-", 1)[0]
        if name:
            found.setdefault(canonicalize_name(name), Path(entry.path))
    return found


_GLANCE_BYTES = 256 * 1024  # of a METADATA file, for required_elsewhere: its header, mostly


def required_elsewhere(interpreter: Interpreter, names: Iterable[str]) -> bool:
    """Whether a Requires-Dist line of another dist-info folder's METADATA names one of
    ``names`` (canonical). A glance, for deciding whether to begin work early: a byte search of
    the first 256 KiB of each file, nothing parsed, a folder's own name taken from the folder
    name; an unreadable file names nothing. Faster than reading the installed set and its
    requirement index (docs/performance.md has the figures)."""
    wanted = set(names)
    if not wanted:
        return False
    spellings = b"|".join(
        b"[-_.]+".join(re.escape(part.encode()) for part in name.split("-")) for name in wanted
    )
    line = re.compile(
        rb"^Requires-Dist:[ \t]*(?:" + spellings + rb")(?![A-Za-z0-9._-])", re.M | re.I
    )
    for entry in _site_entries(interpreter, (".dist-info",)):
        own = canonicalize_name(entry.name[: -len(".dist-info")].rpartition("-")[0])
        if own in wanted:
            continue
        try:
            with open_regular(Path(entry.path, "METADATA")) as handle:
                head = handle.read(_GLANCE_BYTES)
        except OSError:
            continue
        if line.search(head.partition(b"\n\n")[0]):
            return True
    return False


def census(interpreter: Interpreter) -> frozenset[str]:
    """Every dist-info folder, .egg-info and .egg-link of the target, as a path: a folder
    listing, no file read. Two censuses differ when anything was installed, removed or
    replaced in between, and a second dist-info folder for one name shows here where
    installed_distributions keeps one."""
    return frozenset(
        e.path
        for e in _site_entries(interpreter)
        if not e.name.endswith(".dist-info") or e.is_dir()
    )


def doubled_dist_info(interpreter: Interpreter) -> dict[str, tuple[str, ...]]:
    """Canonical name -> its dist-info folders, for every name that has two or more (a
    version installed beside another, which uv lists twice and importlib shows once). Read
    from the folder names (``<name>-<version>.dist-info``): a folder listing, no file read."""
    by_name: dict[str, list[str]] = {}
    for entry in _site_entries(interpreter, (".dist-info",)):
        name = entry.name[: -len(".dist-info")].rpartition("-")[0]
        if name and entry.is_dir():
            by_name.setdefault(canonicalize_name(name), []).append(entry.name)
    return {name: tuple(folders) for name, folders in by_name.items() if len(folders) > 1}


def census_changes(before: frozenset[str], after: frozenset[str]) -> list[str]:
    """What changed between two censuses, one folder an item (``went: x-1.0.dist-info``)."""
    parts = [f"appeared: {os.path.basename(p)}" for p in sorted(after - before)]
    parts += [f"went: {os.path.basename(p)}" for p in sorted(before - after)]
    return parts


def census_change(before: frozenset[str], after: frozenset[str]) -> str:
    """What changed between two censuses, in words ("" when nothing did)."""
    return "; ".join(census_changes(before, after))


def names_in(entries: Iterable[str]) -> frozenset[str]:
    """The canonical names the census ``entries`` (paths or folder names) are installs of."""
    return frozenset(n for p in entries for n in _named_as(os.path.basename(p)))


def folders_of(census: frozenset[str], names: Collection[str]) -> frozenset[str]:
    """The entries of ``census`` that are installs of one of ``names`` (canonical), by their
    folder names: what an uninstall of ``names`` takes away (uv removes every copy of a name),
    what a restore of them puts back."""
    wanted = set(names)
    return frozenset(p for p in census if _named_as(os.path.basename(p)) & wanted)


def installed_distributions(interpreter: Interpreter) -> dict[str, InstalledDistribution]:
    """Every distribution in the target's site-packages, keyed by canonical name: dist-info
    folders and the installs made the legacy way that uv lists (``layout`` says which).

    Where two of them claim one name (a broken environment), the first in sys.path order wins,
    as importlib.metadata would pick it; the others are its ``shadowed``.
    """
    found: dict[str, InstalledDistribution] = {}
    shadowed: dict[str, list[Path]] = {}
    for entry in _site_entries(interpreter):
        dist = _read_entry(entry)
        if dist is None:
            continue
        if dist.key in found:
            shadowed.setdefault(dist.key, []).append(dist.dist_info)
        else:
            found[dist.key] = dist
    for key, folders in shadowed.items():
        found[key] = msgspec.structs.replace(found[key], shadowed=tuple(folders))
    return found


def _named_as(entry: str) -> set[str]:
    """The canonical names a site folder's entry may be installed as, by its own name: a
    dist-info folder's name is ``name-version``; an .egg-info's ``name-version-pyX.Y`` or
    ``name``, an .egg-link's ``name``."""
    stem = entry.rpartition(".")[0]
    if entry.endswith(".dist-info"):
        return {canonicalize_name(stem.rpartition("-")[0])}
    return {canonicalize_name(stem.partition("-")[0]), canonicalize_name(stem)}


def without_metadata(interpreter: Interpreter, names: Iterable[str]) -> dict[str, Path]:
    """Of ``names`` (canonical), those that no distribution is installed as but that a
    dist-info folder is named after, whose METADATA is missing or unreadable: uv lists and
    removes such a folder by its name, ``installed_distributions`` does not see it."""
    wanted = set(names)
    found: dict[str, Path] = {}
    for entry in _site_entries(interpreter, (".dist-info",)):
        named = _named_as(entry.name) & (wanted - found.keys())
        if named and entry.is_dir() and read_distribution(Path(entry.path)) is None:
            found[named.pop()] = Path(entry.path)
    return found


def ensure_writable(interpreter: Interpreter) -> None:
    """Refuse a read-only environment before any change. A real write, because os.access says
    yes to root even on a read-only mount or an immutable folder.

    The test file is created and deleted with interrupts deferred: Ctrl-C or SIGTERM between
    the two left it in the environment of a command that then said it changed nothing.
    """
    for folder in (*interpreter.site_dirs, Path(interpreter.scripts)):
        if not folder.is_dir():
            continue
        with interrupts.deferred():
            try:
                fd, probe = tempfile.mkstemp(prefix=".safe-uninstall-write-test-", dir=folder)
            except OSError as err:
                raise EnvironmentNotWritable(
                    f"{folder} is not writable ({err.strerror}): nothing can be removed from it"
                ) from None
            try:
                os.close(fd)
            finally:
                os.unlink(probe)
