"""A snapshot as other tools' input: a requirements file for pip/uv, or a PEP 751 pylock.toml.

Requirements: one line per distribution, from where it was installed (PEP 610
``direct_url.json``, as the snapshot recorded it): ``name==version`` from an index,
``name @ url`` for an archive or a local folder, ``-e url`` for an editable install,
``name @ git+url@commit`` for a VCS checkout. ``uv pip sync FILE`` gives that set back.

pylock.toml needs, for a distribution from an index or an archive, the file's URL and sha256;
a snapshot records name, version and source, not those. So a pylock.toml is written only when
every distribution is a VCS checkout at a commit or a local folder; otherwise the export falls
back to requirements and says which distributions stopped it. What is written is validated
with ``packaging.pylock`` first.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import tomli_w
from msgspec import Struct
from packaging.pylock import Pylock, PylockValidationError
from packaging.version import InvalidVersion, Version

from safeuninstall import __version__
from safeuninstall.base.atomicfile import write_atomically
from safeuninstall.base.errors import SafeUninstallError
from safeuninstall.context.context import Context
from safeuninstall.environment.backend import requirement_for
from safeuninstall.environment.installed import installed_distributions
from safeuninstall.options import EXPORT_FORMATS
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state.layout import SnapshotFolder
from safeuninstall.state.snapshot import PackageEntry, Snapshot, Target
from safeuninstall.state.stash import package_entry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# PEP 751: pylock.toml, or pylock.<name>.toml
_PYLOCK_NAME = re.compile(r"^pylock\.([^.]+\.)?toml$")


# -- requirements ------------------------------------------------------------------------------


def requirement_line(entry: PackageEntry) -> str:
    return " ".join(requirement_for(entry))


def _has_local_label(version: str) -> bool:
    try:
        return Version(version).local is not None
    except InvalidVersion:
        return False


def requirements(snap: Snapshot) -> str:
    what = f"snapshot {snap.id} of" if snap.id else "the distributions installed in"
    count = len(snap.packages)
    lines = [
        f"# safe-uninstall {__version__}: {what} {snap.target.python}",
        f"# (Python {snap.target.version}), taken {snap.created}; {count} "
        f"distribution{'' if count == 1 else 's'}.",
        "# The exact set back in a fresh environment: uv pip sync THIS_FILE",
    ]
    local = [
        e.pin for e in snap.packages if e.source.kind == "index" and _has_local_label(e.version)
    ]
    if local:
        lines.append(
            "# Index URLs are not recorded: local builds such as "
            f"{', '.join(local[:3])} need their index (--index-url / --extra-index-url)."
        )
    lines += [requirement_line(entry) for entry in snap.packages]
    return "\n".join(lines) + "\n"


# -- pylock.toml -------------------------------------------------------------------------------


class _NotLockable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _local_path(url: str | None) -> str:
    parsed = urlparse(url or "")
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise _NotLockable("a folder that is not a local file: URL")
    return url2pathname(parsed.path)  # which unquotes it


def _package(entry: PackageEntry) -> dict[str, Any]:
    """One ``[[packages]]`` table. No version for a source tree: PEP 751 forbids it there."""
    source = entry.source
    table: dict[str, Any] = {"name": entry.name}
    if source.kind == "vcs":
        if not (source.vcs and source.url and source.commit):
            raise _NotLockable("a VCS checkout without a recorded commit")
        vcs: dict[str, Any] = {"type": source.vcs, "url": source.url}
        if source.requested_revision:
            vcs["requested-revision"] = source.requested_revision
        vcs["commit-id"] = source.commit
        if source.subdirectory:
            vcs["subdirectory"] = source.subdirectory
        table["vcs"] = vcs
    elif source.kind in ("directory", "editable"):
        directory: dict[str, Any] = {"path": _local_path(source.url)}
        if source.kind == "editable":
            directory["editable"] = True
        if source.subdirectory:
            directory["subdirectory"] = source.subdirectory
        table["directory"] = directory
    elif source.kind == "index":
        raise _NotLockable("from an index (the wheel's URL and sha256 are not recorded)")
    else:
        raise _NotLockable("an archive whose sha256 is not recorded")
    return table


def pylock(snap: Snapshot) -> str:
    """The pylock.toml text; raises _NotLockable naming every distribution that prevents it."""
    packages: list[dict[str, Any]] = []
    blocked: dict[str, list[str]] = {}
    for entry in snap.packages:
        try:
            packages.append(_package(entry))
        except _NotLockable as err:
            blocked.setdefault(err.reason, []).append(entry.name)
    if blocked:
        raise _NotLockable(
            "; ".join(
                f"{len(names)} {_plural(names)} {why}: {_names(names)}"
                for why, names in blocked.items()
            )
        )
    if not packages:
        raise _NotLockable("the snapshot lists no distribution (PEP 751 needs one at least)")
    data = {
        "lock-version": "1.0",
        "created-by": "safe-uninstall",
        "packages": packages,
        "tool": {
            "safe-uninstall": {
                **({"snapshot": snap.id} if snap.id else {}),
                "created": snap.created,
                "python": snap.target.python,
                "python-version": snap.target.version,
            }
        },
    }
    text = tomli_w.dumps(data)
    try:
        Pylock.from_dict(tomllib.loads(text))
    except PylockValidationError as err:  # a bug here, not the user's: say so, write nothing
        raise _NotLockable(f"the pylock.toml written would not be valid: {err}") from None
    return text


def _plural(names: Sequence[str]) -> str:
    return "distribution" if len(names) == 1 else "distributions"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


# -- the operation ---------------------------------------------------------------------------


class ExportOptions(Struct, frozen=True):
    """Which snapshot to export, in which format, and where to."""

    # an id, "latest", or the path of a snapshot.toml (or its folder); None: what is installed
    snapshot: str | None
    format: str  # "requirements" or "pylock"
    output: Path | None = None  # None: the caller prints the text
    cwd: Path = Path()  # what relative paths are relative to


class ExportResult(Struct, frozen=True):
    """The exported text, and the format it ended up in."""

    snapshot: str | None  # None: what is installed now
    requested: str  # the format asked for
    format: str  # the format written
    text: str
    packages: int
    output: Path | None = None  # where it was written, if anywhere

    @property
    def output_path(self) -> str | None:
        return str(self.output) if self.output else None

    @property
    def shown_text(self) -> str | None:
        """The text itself, when it went nowhere else."""
        return None if self.output else self.text


def _load(options: ExportOptions, target: Callable[[], Context]) -> Snapshot:
    """The snapshot.toml at a path (no environment needed), else one of the target's, else
    (no snapshot named) what the target has installed now: the newest snapshot is the state
    before the latest change (a removal's, a rollback's), not the state it left."""
    reference = options.snapshot
    if reference is not None and ("/" in reference or reference.endswith(".toml")):
        path = options.cwd / Path(reference).expanduser()
        if path.is_dir():
            path = SnapshotFolder(path).snapshot_file
        return snapshot_file.load(path)
    if reference is None:
        return _installed_now(target())
    return target().store.resolve(reference)


def _installed_now(ctx: Context) -> Snapshot:
    """What is installed, as a snapshot that is written nowhere and keeps no file (id "")."""
    installed = installed_distributions(ctx.interpreter)
    return Snapshot(
        id="",
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        command=tuple(ctx.command),
        operation="export",
        target=Target(
            python=str(ctx.python), prefix=ctx.interpreter.prefix, version=ctx.interpreter.version
        ),
        packages=tuple(
            package_entry(dist, Path(ctx.interpreter.prefix))
            for _, dist in sorted(installed.items())
        ),
    )


_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def _described(snap: Snapshot) -> str:
    return f"snapshot {snap.id}" if snap.id else "what is installed"


def _refuse_unless_replaceable(path: Path) -> None:
    """What is at ``path`` may be replaced only if it is a regular file. The new file is renamed
    over it, so a symbolic link would not be followed but destroyed, and a FIFO or a device node
    (``/dev/null`` for root) replaced by a file: refused instead, before anything is written."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise SafeUninstallError(f"{path}: cannot examine it: {err.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
        raise SafeUninstallError(
            f"{path} exists and is not a regular file ({kind}); refusing to replace it. "
            "Give the path of a file, or leave out -o to print to standard output"
        )


def export(options: ExportOptions, target: Callable[[], Context]) -> ExportResult:
    """``target`` opens the environment, if a snapshot of it is wanted."""
    if options.format not in EXPORT_FORMATS:
        raise SafeUninstallError(f"unknown export format {options.format!r}")
    snap = _load(options, target)
    fmt, output = options.format, options.output
    if fmt == "pylock":
        if output is not None and not _PYLOCK_NAME.match(output.name):
            raise SafeUninstallError(
                f"{output.name}: a lock file is named pylock.toml or pylock.NAME.toml (PEP 751), "
                "and `uv pip sync` refuses any other name; nothing was written. Give -o such "
                "a name"
            )
        try:
            text = pylock(snap)
        except _NotLockable as err:
            # An error, not a requirements file in its place: a job that asked for a lock
            # file goes on to `uv pip sync` it.
            raise SafeUninstallError(
                f"no pylock.toml can be written for {_described(snap)}: {err.reason}; nothing "
                "was written. `--format requirements` writes the same set as a requirements "
                "file, which `uv pip sync` reads too"
            ) from None
    else:
        text = requirements(snap)
    if output is not None:
        output = options.cwd / output
        _refuse_unless_replaceable(output)
        try:
            write_atomically(output, text.encode("utf-8"), mode=0o644)
        except OSError as err:
            raise SafeUninstallError(f"{output}: cannot write it: {err.strerror}") from None
    return ExportResult(
        snapshot=snap.id or None,
        requested=options.format,
        format=fmt,
        text=text,
        packages=len(snap.packages),
        output=output,
    )
