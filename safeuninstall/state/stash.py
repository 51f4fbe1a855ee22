"""Keeping the exact files of a distribution, and putting them back.

Stashing hard-links every RECORD file into the snapshot folder (same filesystem: no data is
copied; the uninstall then only drops the other name of each inode) and falls back to a copy
where linking is impossible. Restoring links them back after checking each one's sha256 against
the one recorded at its snapshot, so what comes back is proven to be the bytes the snapshot
kept: a stashed file must be a regular file (a symbolic link is refused, not followed), the
file linked back must be the very one checked, and an edit in place of an installed file that
reached the stash through the shared inode is caught, not restored as the original.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from safeuninstall.base.atomicfile import leftover_temps, write_atomically
from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.cachefile import CacheFile, FileStamp
from safeuninstall.base.errors import SnapshotInvalid, StashError
from safeuninstall.environment.installed import InstalledDistribution, read_distribution
from safeuninstall.environment.legacy import (
    DESCRIBED,
    EASY_INSTALL_PTH,
    MAX_PTH_BYTES,
    has_line,
    put_line_back,
)
from safeuninstall.environment.paths import normalise
from safeuninstall.environment.records import RecordEntry, sha256_file
from safeuninstall.state.journal import file_fault
from safeuninstall.state.layout import SnapshotFolder, aside_of, stash_of
from safeuninstall.state.snapshot import PackageEntry, PackageStash, PthLine, Snapshot, StashedFile


def relative_to_root(path: Path | str, root: Path | str) -> str | None:
    """``path`` (lexically normalised, symlinks not followed) relative to ``root``, or None."""
    normal = os.path.normpath(path)
    base = os.path.normpath(root)
    if normal == base:
        return "."
    prefix = base if base.endswith(os.sep) else base + os.sep
    if not normal.startswith(prefix):
        return None
    rel = normal[len(prefix) :]
    if os.path.isabs(rel):  # "//x" under "/": POSIX keeps a leading double slash
        return None
    return rel.replace(os.sep, "/")


def package_entry(
    dist: InstalledDistribution, env_root: Path, stash: PackageStash | None = None
) -> PackageEntry:
    """``dist`` as a snapshot records it (``stash``: the files kept of it, if any)."""
    return PackageEntry(
        name=dist.key,
        version=dist.version,
        installer=dist.installer,
        requested=dist.requested,
        source=dist.source,
        dist_info=relative_to_root(dist.dist_info, env_root) or "",
        stash=stash,
        layout=dist.layout,
    )


def link_entry(rel: str, target: str, *, swept: bool = False) -> StashedFile:
    """A symbolic link, kept as its target: the sha256 and size are those of the target's text."""

    data = os.fsencode(target)
    return StashedFile(
        path=rel,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        link=target,
        swept=swept,
    )


class StashPlace(Struct, frozen=True):
    """Where a snapshot's stash goes: the environment's root (the stash mirrors paths relative
    to it), the snapshot's folder, and the paths (normalised) that other distributions list too."""

    env_root: Path
    snapshot: SnapshotFolder
    shared: Collection[str] = ()


def stash_distribution(
    dist: InstalledDistribution,
    place: StashPlace,
    *,
    removed: bool = True,
    on_bytes: Callable[[int], None] | None = None,
    swept: Sequence[str] = (),
    entries: Sequence[RecordEntry] | None = None,
    folder: str | None = None,
) -> PackageStash:
    """Keep every file of ``dist`` in the snapshot folder, as uv would delete it: a RECORD line
    that leads out of the environment is skipped (uv skips it), a RECORD folder is kept whole
    (uv deletes it whole), a symbolic link is recorded as the link it is. ``swept``: the
    ``__pycache__`` folders uv deletes on its way up from this distribution's files (see
    deletion.py), kept too, as files that are no distribution's own (``StashedFile.swept``).
    ``entries``: its RECORD, when the caller has read it already.

    ``removed``: the installer removes ``dist`` right after (else it stays installed: a
    snapshot's stash, or a distribution kept beside a removal). ``on_bytes`` is told the size
    of each file once it is kept (for a progress bar: linking is instant, a copy to another
    filesystem is not).

    Raises StashError, before anything is removed, when a file can't be kept for a reason that
    could lose data (disk full, I/O error), and, for a distribution to remove, when what the
    installer would delete is not what a stash can give back: a RECORD path that a symlinked
    folder leads out of the environment (the installer would delete the file there), or a
    second dist-info folder of its name (uv removes them all; a snapshot keeps one version per
    name). A symlink is never followed out of the environment: for a distribution that stays,
    such a file makes the stash incomplete instead: that distribution is reinstalled rather
    than restored.

    The recorded sha256 is the RECORD's (reading 1 GB to hash it again would cost more than
    the uninstall), except for the place's ``shared`` paths (normalised, see paths.normalise) that
    other distributions list too: another build may have overwritten them, so their bytes are
    hashed as they are.

    ``folder``: where in the snapshot folder, instead of ``stash/<name>-<version>`` (see
    ``stash_aside``).

    A legacy install (legacy.py) has no RECORD: its files are those uv deletes, each hashed
    here, and the easy-install.pth whose line uv takes out is copied whole (``lines``). Where
    its removal is refused (legacy_refusal), one to remove raises StashError and one that
    stays gets an incomplete stash.
    """
    if removed and dist.shadowed:
        raise StashError(_shadowed_failure(dist))
    legacy = dist.legacy_removal() if dist.legacy else None
    if legacy is not None and legacy.refused is not None:
        if removed:
            raise StashError(legacy_failure(dist, legacy.refused))
        return PackageStash(folder=stash_of(dist.key, dist.version), files=(), complete=False)
    if legacy is not None:
        entries = list(legacy.files)
    elif entries is None:
        entries = _read_record(dist)
    stasher = _Stasher(dist, place, removed, on_bytes, folder)
    return stasher.keep_all(entries, swept, legacy.pth_line if legacy is not None else None)


def _read_record(dist: InstalledDistribution) -> list[RecordEntry]:
    try:
        return dist.record()
    except OSError as err:
        raise StashError(f"{dist.name} {dist.version}: cannot read its RECORD: {err}") from err


def stash_aside(
    dist_info: Path, place: StashPlace, *, removed: bool = True
) -> tuple[str, PackageStash]:
    """Keep the files of ``dist_info``, a second dist-info folder of a distribution about to be
    removed (uv removes every folder of the name), under ``aside/<its folder name>`` in the
    snapshot folder: a snapshot records one version per name, so this one is not restored by
    a rollback, but no byte of it is lost. Returns the folder, relative to the snapshot's, and
    what it holds. Raises StashError as stash_distribution does, before anything is removed.
    ``removed``: as stash_distribution's (a guarded command may remove it, or not)."""
    dist = read_distribution(dist_info)
    if dist is None:
        raise StashError(f"cannot read {dist_info}/METADATA; nothing was removed")
    folder = aside_of(dist_info.name)
    return folder, stash_distribution(dist, place, removed=removed, folder=folder)


def kept_aside(snapshot: SnapshotFolder) -> list[str]:
    """The dist-info folders ``stash_aside`` kept in ``snapshot`` (names only: a snapshot
    does not record them, and no restore puts them back)."""
    try:
        found = sorted(os.scandir(snapshot.aside_dir), key=lambda e: e.name)
    except OSError:
        return []
    return [
        e.name for e in found if e.name.endswith(".dist-info") and e.is_dir(follow_symlinks=False)
    ]


def not_put_back(snapshot: SnapshotFolder, snapshot_id: str, names: Iterable[str]) -> list[str]:
    """What to say of each dist-info folder ``names`` that snapshot ``snapshot_id`` kept aside
    and a restore to it did not put back."""
    return [
        f"{name}, a second dist-info folder when snapshot {snapshot_id} was taken, is not put "
        f"back (a snapshot brings back one version per name); its files are kept in "
        f"{snapshot.holding(aside_of(name))}"
        for name in names
    ]


class Refusal(Struct, frozen=True):
    """Why a removal is refused before any change."""

    message: str
    uv_removes_it: bool  # uv itself would remove it, without a snapshot


def legacy_refusal(dist: InstalledDistribution, installer: str) -> Refusal | None:
    """Why removing ``dist``, a legacy install, is refused before any change (None when it
    is not): where uv refuses or would stop half way, would delete what a stash cannot give
    back, or another installer than uv would remove it by its own rule."""
    if not dist.legacy:
        return None
    legacy = dist.legacy_removal()
    if installer != "uv":
        reason: str | None = (
            f"{installer} removes it by its own rule (installed-files.txt, scripts), not uv's, "
            "the one a snapshot here keeps the files of"
        )
    else:
        reason = legacy.refused
    if reason is None:
        return None
    return Refusal(legacy_failure(dist, reason), uv_removes_it=not legacy.uv_refuses)


def legacy_failure(dist: InstalledDistribution, reason: str) -> str:
    return f"{dist.name} {dist.version} is {DESCRIBED[dist.layout]}: {reason}; nothing was removed"


class _Stasher:
    """One distribution's files, kept one by one (see ``stash_distribution``)."""

    def __init__(
        self,
        dist: InstalledDistribution,
        place: StashPlace,
        removed: bool,
        on_bytes: Callable[[int], None] | None,
        folder: str | None = None,
    ) -> None:
        self.place = place
        self.removed = removed
        self.on_bytes = on_bytes
        self.folder = folder or stash_of(dist.key, dist.version)
        self.dest_root = str(place.snapshot.holding(self.folder))
        self.site_dir = str(dist.site_dir)
        self.real_root = os.path.realpath(place.env_root)
        self.files: list[StashedFile] = []
        self.complete = True
        self.made: set[str] = set()  # folders of the stash known to exist: one mkdir check each
        self.inside: set[str] = set()  # folders of the environment known to resolve inside it
        self.kept: set[str] = set()  # paths kept (relative to the root): a file listed twice once
        self.absent: list[str] = []  # RECORD files already gone (relative to the root)

    def keep_all(
        self, entries: Iterable[RecordEntry], swept: Sequence[str], pth_line: str | None
    ) -> PackageStash:
        """Keep the files ``entries`` lists, then the ``swept`` folders, then the .pth file
        whose ``pth_line`` the removal takes out; what the stash then holds."""
        after_file = file_fault("stash-file")
        for entry in entries:
            if self.keep(entry) and after_file is not None:
                after_file()
        for folder in swept:
            self.keep_folder(folder, swept=True)
        lines = (self.keep_pth(pth_line),) if pth_line is not None else ()
        return PackageStash(
            folder=self.folder,
            files=tuple(self.files),
            complete=self.complete,
            lines=lines,
            absent=tuple(self.absent),
        )

    def keep(self, entry: RecordEntry) -> bool:
        """Keep one RECORD file; False where there was nothing to keep (gone, or left out)."""
        source = os.path.join(self.site_dir, entry.path)
        rel = relative_to_root(source, self.place.env_root)
        if rel is None:
            return False  # out of the environment: uv skips it, so it stays where it is
        if not self._stays_inside(source, rel):
            self.complete = False  # never followed; a restore reinstalls this distribution
            return False
        try:
            info = os.lstat(source)
        except FileNotFoundError:
            self.absent.append(rel)
            return False  # listed but already gone: nothing to remove, nothing to keep
        except OSError as err:
            raise StashError(f"cannot read {source}: {err.strerror}") from err
        if stat.S_ISDIR(info.st_mode):
            return self.keep_folder(source)  # uv deletes a folder it lists whole
        shared = self.place.shared and normalise(source) in self.place.shared
        return self._keep(source, rel, info, None if shared else entry.sha256)

    def keep_folder(self, folder: str, *, swept: bool = False) -> bool:
        """Keep every file under ``folder`` (links as links, none followed)."""
        kept = False
        for parent, dirs, names in os.walk(folder):
            dirs.sort()
            for name in sorted(names) + [
                d for d in dirs if os.path.islink(os.path.join(parent, d))
            ]:
                source = os.path.join(parent, name)
                rel = relative_to_root(source, self.place.env_root)
                if rel is None or rel in self.kept:
                    continue
                try:
                    info = os.lstat(source)
                except FileNotFoundError:
                    continue
                except OSError as err:
                    raise StashError(f"cannot read {source}: {err.strerror}") from err
                kept = self._keep(source, rel, info, None, swept=swept) or kept
        return kept

    def _keep(
        self,
        source: str,
        rel: str,
        info: os.stat_result,
        sha256: str | None,
        *,
        swept: bool = False,
    ) -> bool:
        """Link (else copy) ``source`` into the stash; a symbolic link is recorded by its
        target instead. ``sha256``: the RECORD's, else the bytes are hashed."""
        if rel in self.kept:
            return False
        self.kept.add(rel)
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(source)
            except OSError as err:
                raise StashError(_stash_failure(Path(source), err)) from err
            self.files.append(link_entry(rel, target, swept=swept))
            return True
        dest = os.path.join(self.dest_root, rel)
        try:
            parent = os.path.dirname(dest)
            if parent not in self.made:
                _makedirs_private(Path(parent))
                self.made.add(parent)
            _link_or_copy(source, dest, parent_exists=True)
            if sha256 is None:
                sha256 = sha256_file(Path(dest))
        except OSError as err:
            raise StashError(_stash_failure(Path(source), err)) from err
        self.files.append(StashedFile(path=rel, sha256=sha256, size=info.st_size, swept=swept))
        if self.on_bytes is not None:
            self.on_bytes(info.st_size)
        return True

    def keep_pth(self, line: str) -> PthLine:
        """A copy of the site folder's easy-install.pth, whose ``line`` the uninstall takes out
        (a copy, not a link: setuptools rewrites that file in place)."""
        source = os.path.join(self.site_dir, EASY_INSTALL_PTH)
        rel = relative_to_root(source, self.place.env_root)
        if rel is None or not self._stays_inside(source, rel):
            raise StashError(f"{source} is outside the environment; nothing was removed")
        dest = Path(self.dest_root, rel)
        try:
            info = os.lstat(source)
            data = read_bytes(Path(source), MAX_PTH_BYTES)
            _makedirs_private(dest.parent)
            write_atomically(dest, data, mode=stat.S_IMODE(info.st_mode))
        except OSError as err:
            raise StashError(_stash_failure(Path(source), err)) from err

        return PthLine(path=rel, line=line, sha256=hashlib.sha256(data).hexdigest(), size=len(data))

    def _stays_inside(self, source: str, rel: str) -> bool:
        """Whether ``source``'s folder resolves inside the environment (once per folder). For a
        distribution to remove, a folder that leads out is refused: uv would delete there."""
        folder_of = os.path.dirname(source)
        if folder_of in self.inside:
            return True
        escape = _symlinked_escape(source, self.real_root)
        if escape is not None:
            if self.removed:
                raise StashError(_escape_failure(rel, escape))
            return False
        self.inside.add(folder_of)
        return True


def in_place(stash: PackageStash, env_root: Path) -> bool:
    """Every file ``stash`` holds is at its place in the environment, and every line it took
    out of a .pth file is there: how a legacy install, which has no RECORD, is known whole."""
    if not all(os.path.lexists(env_root / f.path) for f in stash.files):
        return False
    for pth in stash.lines:
        try:
            if not has_line(read_bytes(env_root / pth.path, MAX_PTH_BYTES), pth.line):
                return False
        except OSError:
            return False
    return True


def _symlinked_escape(source: str, real_root: str) -> str | None:
    """Where ``source``, a path inside the environment by its name, really is when a symlinked
    folder leads it out of the environment; None when it stays inside. uv follows such a
    folder, and would delete the file it leads to."""
    real = normalise(source)
    return None if real.startswith(os.path.join(real_root, "")) else real


def _escape_failure(rel: str, real: str) -> str:
    return (
        f"{rel} resolves outside the environment ({real}) through a symlinked folder: "
        "uninstalling would delete the file there, which no snapshot can give back; "
        "nothing was removed"
    )


def _shadowed_failure(dist: InstalledDistribution) -> str:
    folders = ", ".join(str(folder) for folder in (dist.dist_info, *dist.shadowed))
    return (
        f"{dist.name} is installed more than once, in {len(dist.shadowed) + 1} places: "
        f"{folders}. uv removes every one of them, and a snapshot keeps one version "
        "per name, so this removal could not be undone; nothing was removed. Keep one "
        f"version first (for example: uv pip install --reinstall {dist.key}=={dist.version})"
        + (
            "; or, if a snapshot keeps one of its versions (`safe-uninstall doctor` names it), "
            "`safe-uninstall rollback ID` to it removes every folder, keeping the others' files "
            "aside, and brings that version back"
            if dist.doubled
            else ""
        )
    )


def _stash_failure(source: Path, err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return f"no space left on device while keeping {source}; nothing was removed"
    return f"cannot keep a copy of {source}: {err.strerror or err}; nothing was removed"


def _makedirs_private(folder: Path) -> None:
    """Like mkdir -p, but every folder it creates is owner-only (mkdir's mode skips parents)."""
    if folder.is_dir():
        return
    _makedirs_private(folder.parent)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)


def _link_or_copy(source: Path | str, dest: Path | str, *, parent_exists: bool = False) -> None:
    if not parent_exists:
        _makedirs_private(Path(dest).parent)
    try:
        os.link(source, dest, follow_symlinks=False)
    except FileExistsError:
        os.unlink(dest)
        os.link(source, dest, follow_symlinks=False)
    except OSError as err:
        # Another filesystem, or a filesystem without hard links: copy the bytes.
        if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            raise
        shutil.copy2(source, dest, follow_symlinks=False)


class FileProblem(Struct, frozen=True):
    """A stashed file that cannot be restored as it is, and why."""

    path: str
    problem: str


_MAX_VERIFIED_BYTES = 64 * 1024 * 1024  # some 400,000 files


class _Verified(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """A stashed file whose bytes were hashed: its stamp then (the ctime too: an in-place write
    whose mtime was set back with os.utime changes it; the mode, which a restore gives back),
    and the sha256 of its bytes."""

    stamp: FileStamp
    sha256: str


def _verified_file(snapshot: SnapshotFolder) -> CacheFile[dict[str, _Verified]]:
    return CacheFile(
        snapshot.verified_file,
        dict[str, _Verified],
        format="safeuninstall-stash-verified",
        version=3,
        max_bytes=_MAX_VERIFIED_BYTES,
    )


def read_verified(snapshot: SnapshotFolder) -> dict[str, tuple[FileStamp, str]]:
    """Stashed files whose bytes were hashed (stamp then, sha256 of the bytes as installed),
    trusted as long as the stamp is unchanged. A record that is not a regular file of its
    own, too large or not well formed is none: the stash is hashed again."""
    stored = _verified_file(snapshot).read() or {}
    return {key: (value.stamp, value.sha256) for key, value in stored.items()}


# (st_dev, st_ino, st_size, st_mtime_ns): the file a check accepted. Size and mtime too, since
# an inode number is reused as soon as its file is deleted.
FileId = tuple[int, int, int, int]


def file_id(info: os.stat_result) -> FileId:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class StashCheck(Struct, frozen=True):
    """The result of checking a stash against its recorded hashes."""

    problems: list[FileProblem]
    # sha256 of each stashed file as accepted (by path relative to the environment root):
    # the RECORD's, or the bytes as installed when the stash was hashed before a change
    accepted: dict[str, str]
    modified: list[str]  # files that differed from their RECORD already before the removal
    # each accepted file as it was when it was checked: what restore_files may link back
    identities: dict[str, FileId]
    # accepted files whose mode is not the one the stash hasher recorded (a chmod reaches the
    # stash through the shared inode): the permission bits restore_files gives back
    modes: dict[str, int]


def check_stash(
    stash: PackageStash,
    snapshot: SnapshotFolder,
    verified: Mapping[str, tuple[FileStamp, str]] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    *,
    accept_modified: bool = True,
    with_swept: bool = True,
) -> StashCheck:
    """Every stashed file exists and holds the bytes it held when its snapshot was taken.

    Those bytes are the ones the stash hasher recorded in ``verified`` where it has the file,
    else the sha256 the snapshot recorded (the RECORD's). A file whose device, inode, size,
    mtime, ctime and mode are those it had when it was hashed is not read again (rewriting its
    bytes changes the ctime, which no one can set back); any other is hashed and must match. So a
    stash changed since its snapshot is caught, also when an edit in place of an installed
    file reached it through a shared inode (a hard link), even one that put the RECORD's bytes
    back.

    A file the hasher recorded with bytes that differ from its RECORD (modified locally before
    the removal) is accepted as it was installed with ``accept_modified``, for a restore of the
    state of this very snapshot; without it, it is a problem: those bytes were the installed
    ones at this snapshot, not at another that a restore may be looking for.

    Only a regular file can be accepted: a symbolic link in the stash (which a restore would
    link back as it is, pointing wherever it points) or anything else is a problem, and the
    distribution is then brought back by a reinstall instead. A symbolic link is kept as its
    target in the snapshot, nothing in the stash: it is accepted as recorded. ``with_swept``:
    also the files that are no distribution's own (``StashedFile.swept``), brought back only to
    the state of the snapshot that kept them.
    """
    problems = []
    accepted: dict[str, str] = {}
    modified = []
    identities: dict[str, FileId] = {}
    modes: dict[str, int] = {}
    for stashed in stash.files:
        if stashed.swept and not with_swept:
            continue
        if stashed.link is not None:
            accepted[stashed.path] = stashed.sha256
            continue
        if on_bytes is not None:
            on_bytes(stashed.size)
        key = f"{stash.folder}/{stashed.path}"
        known = verified.get(key) if verified is not None else None
        found = _check_copy(snapshot.holding(key), stashed.sha256, known, accept_modified)
        if isinstance(found, str):
            problems.append(FileProblem(stashed.path, found))
            continue
        identities[stashed.path], accepted[stashed.path], mode = found
        if found[1] != stashed.sha256:
            modified.append(stashed.path)
        if known is not None and mode != known[0].mode:
            modes[stashed.path] = stat.S_IMODE(known[0].mode)
    for pth in stash.lines:
        problem = _pth_problem(snapshot.holding(f"{stash.folder}/{pth.path}"), pth)
        if problem is not None:
            problems.append(FileProblem(pth.path, problem))
    return StashCheck(problems, accepted, modified, identities, modes)


def _check_copy(
    kept: Path, recorded: str, known: tuple[FileStamp, str] | None, accept_modified: bool
) -> tuple[FileId, str, int] | str:
    """The stashed copy ``kept`` as check_stash accepts it (the file checked, the sha256 of
    its bytes, its st_mode), or why it does not: ``recorded`` is the sha256 its snapshot recorded,
    ``known`` the stash hasher's record of it, if any (see check_stash)."""
    try:
        info = kept.lstat()
        if not stat.S_ISREG(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            return f"stashed copy is {kind}"
        expected = known[1] if known is not None else recorded
        if known is not None and known[0] == FileStamp.of(info):
            actual = expected
        else:
            actual = sha256_file(kept, info)
    except OSError as err:
        return f"stashed copy unreadable: {err.strerror or str(err)}"
    if actual != expected:
        return "stashed copy does not match its sha256: its bytes changed since the snapshot"
    if actual != recorded and not accept_modified:
        return (
            "stashed copy differs from its RECORD (modified locally before that "
            "snapshot): not the bytes of the snapshot being restored"
        )
    return file_id(info), actual, info.st_mode


def _pth_problem(kept: Path, pth: PthLine) -> str | None:
    """Why the stashed copy of an easy-install.pth can't give its line back, or None."""
    try:
        info = kept.lstat()
        if not stat.S_ISREG(info.st_mode):
            return "stashed copy is not a regular file"
        if sha256_file(kept, info) != pth.sha256:
            return "stashed copy does not match its sha256: its bytes changed since the snapshot"
    except OSError as err:
        return f"stashed copy unreadable: {err.strerror or err}"
    return None


class StashHasher:
    """Hashes a snapshot's stash in a thread while the probes run (they take seconds, 1 GB
    takes about 0.5 s), and records each file's identity and sha256 in
    ``stash-verified.json``: a restore then links files back without reading them again, and
    a file that was modified locally after its install is restored as it was, not refused.

    The installer's removal unlinks the environment's links to the stashed files, which sets
    their ctime: ``installer_runs`` and ``installer_done`` take each file's identity just
    before and just after it, and a file whose identity was the one hashed until the
    installer ran, and changed in nothing but its ctime while it ran, is recorded with its
    identity after it. Any other change, before or after, leaves the record as hashed, and
    the file is hashed again when it is restored."""

    def __init__(self, snapshot: SnapshotFolder, stashes: Sequence[PackageStash]) -> None:
        self._snapshot = snapshot
        self._stashes = stashes
        self._cancelled = threading.Event()
        self._began = threading.Event()  # the thread runs ``_run``: a join can wait for it
        self._thread = threading.Thread(target=self._run, name="stash-hasher", daemon=True)
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # the last record written is made from the latest
        self._hashed: dict[str, tuple[FileStamp, str]] | None = None  # once the thread is done
        self._before: dict[str, FileStamp] | None = None  # just before the installer ran
        self._after: dict[str, FileStamp] | None = None  # just after

    def start(self) -> StashHasher:
        try:
            self._thread.start()
        except BaseException:
            # Ctrl-C while start() waits for the thread, which may run anyway: its snapshot is
            # being given up, and a record written now would bring the deleted folder back.
            self.cancel()
            raise
        return self

    def __enter__(self) -> StashHasher:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Its work is done by the time the block is left: its record is what vouches for a
        file changed locally before the removal (a later rollback relies on it). On an
        exception it stops instead: its snapshot is being given up."""
        if kind is None:
            self.wait()
        else:
            self.cancel()

    def installer_runs(self) -> None:
        """The installer is about to remove files whose stashed copies share their inodes."""
        identities = self._identities()
        with self._lock:
            self._before = identities

    def installer_done(self) -> None:
        """The installer has finished: record what it changed, if the hashing is done."""
        identities = self._identities()
        with self._lock:
            self._after = identities
            hashed = self._hashed
        if hashed is not None:
            self._write(hashed)

    def _identities(self) -> dict[str, FileStamp]:
        found = {}
        for stash in self._stashes:
            for stashed in stash.files:
                key = f"{stash.folder}/{stashed.path}"
                with contextlib.suppress(OSError):
                    found[key] = FileStamp.of(self._snapshot.holding(key).lstat())
        return found

    def _run(self) -> None:
        self._began.set()
        hashed: dict[str, tuple[FileStamp, str]] = {}
        for stash in self._stashes:
            for stashed in stash.files:
                if self._cancelled.is_set():
                    return
                key = f"{stash.folder}/{stashed.path}"
                kept = self._snapshot.holding(key)
                try:
                    before = kept.lstat()
                    if not stat.S_ISREG(before.st_mode):
                        continue  # never vouched for: check_stash refuses it
                    digest = sha256_file(kept, before, stop=self._cancelled.is_set)
                    if FileStamp.of(kept.lstat()) == FileStamp.of(before):
                        hashed[key] = (FileStamp.of(before), digest)
                except OSError:
                    continue
        if self._cancelled.is_set():
            return
        with self._lock:
            self._hashed = hashed
        self._write(hashed)

    def _write(self, hashed: Mapping[str, tuple[FileStamp, str]]) -> None:
        with self._writing:
            with self._lock:
                before, after = self._before, self._after
            verified = {}
            for key, (recorded, digest) in hashed.items():
                if before is not None and after is not None:
                    recorded = _through_the_installer(recorded, before.get(key), after.get(key))
                verified[key] = _Verified(recorded, digest)
            _verified_file(self._snapshot).write(verified)  # lost, it costs a re-hash

    def wait(self) -> None:
        if self._thread.ident is not None:
            self._thread.join()

    def cancel(self) -> None:
        """Stop within a chunk of the file being hashed, write nothing. (A thread that has not
        begun yet sees the cancel first thing.)"""
        self._cancelled.set()
        if self._began.is_set():
            self._thread.join()


def _through_the_installer(
    hashed: FileStamp, before: FileStamp | None, after: FileStamp | None
) -> FileStamp:
    """The stamp to record of a file hashed as ``hashed``: the one after the installer ran
    where the file was that one until then and the installer changed nothing but its ctime
    (the unlink of the environment's link to it)."""
    if (
        before == hashed
        and after is not None
        and replace(after, ctime_ns=hashed.ctime_ns) == hashed
    ):
        return after
    return hashed


def restore_files(
    stash: PackageStash,
    *,
    snapshot: SnapshotFolder,
    env_root: Path,
    displaced_dir: Path,
    checked: StashCheck,
    with_swept: bool = True,
) -> None:
    """Link every stashed file back to its place in the environment.

    ``checked`` is ``check_stash``'s verdict on this stash, without problems: each file linked
    back must be the inode it accepted (or, where the link became a copy, hold the bytes it
    accepted); one that changed since is not put in place. A different file already at a place
    is first kept under ``displaced_dir`` (nothing is lost), then replaced atomically. Raises
    OSError on failure.
    """
    real_root = Path(os.path.realpath(env_root))
    ready: set[str] = set()  # folders checked and created: a package has few, files many
    after_file = file_fault("restore-file")
    for pth in stash.lines:  # before the .egg-link that makes the editable installed
        kept = snapshot.holding(f"{stash.folder}/{pth.path}")
        _put_line_back(pth, kept, env_root / pth.path, displaced_dir / pth.path, real_root)
    # Path strings, one lstat of the place and one of the link made: pathlib and
    # exists()/is_symlink() pairs would be most of a restore's time.
    kept_root = str(snapshot.holding(stash.folder))
    env = os.fspath(env_root)
    for stashed in sorted(stash.files, key=_metadata_last):
        if stashed.swept and not with_swept:
            continue
        dest = os.path.join(env, stashed.path)
        parent = os.path.dirname(dest)
        if parent not in ready:
            _refuse_escape(Path(dest), real_root)
            os.makedirs(parent, exist_ok=True)
            ready.add(parent)
        if stashed.link is not None:
            _restore_link(Path(dest), stashed.link, displaced_dir / stashed.path)
            continue
        kept_file = os.path.join(kept_root, stashed.path)
        linked = _link_back(kept_file, dest, displaced_dir / stashed.path, checked, stashed.path)
        if linked and after_file is not None:
            after_file()


def _link_back(kept_file: str, dest: str, displaced: Path, checked: StashCheck, rel: str) -> bool:
    """Link ``kept_file``, the stashed copy of ``rel`` that ``checked`` accepted, to ``dest``
    through a temp file renamed into place; a different file at ``dest`` is first kept at
    ``displaced``. False where ``dest`` is that very file already. Raises OSError where the
    copy was not checked, or changed since. A mode changed since the file was hashed is given
    back to the file once it is known to be the one checked (through the shared inode, to the
    stash and uv's cache too)."""
    identity = checked.identities.get(rel)
    if identity is None:
        raise OSError(errno.EPERM, f"{kept_file} was not checked; not linked back")
    mode = checked.modes.get(rel)
    try:
        there: os.stat_result | None = os.lstat(dest)
    except FileNotFoundError:
        there = None
    if there is not None:
        if file_id(there) == identity:
            if mode is not None:
                os.chmod(dest, mode)
            return False
        _link_or_copy(dest, displaced)
    tmp = restore_temp(dest)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # left by a killed restore: never written through, never reused
    _link_or_copy(kept_file, tmp, parent_exists=True)
    if not _is_checked(Path(tmp), identity, checked.accepted[rel]):
        os.unlink(tmp)
        raise OSError(errno.ESTALE, f"{kept_file} changed since its check; not linked back")
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, dest)
    return True


def restore_temp(dest: str) -> str:
    """Where a file (or link) restored to ``dest`` is made before it is renamed into place."""
    folder, name = os.path.split(dest)
    return os.path.join(folder, f".{name}.safe-uninstall-tmp")


def restore_leftovers(stash: PackageStash, env_root: Path) -> list[Path]:
    """What a restore of ``stash`` killed half way may have left in the environment: the temp
    file of each of its files, and write_atomically's temp beside each .pth file it puts a
    line back into. Only names the restore gives, and no folder."""
    found = []
    for stashed in stash.files:
        tmp = Path(restore_temp(os.path.join(env_root, stashed.path)))
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(tmp.lstat().st_mode):
                found.append(tmp)
    for pth in stash.lines:
        found += leftover_temps(env_root / pth.path)
    return found


def _restore_link(dest: Path, target: str, saved: Path) -> None:
    """A symbolic link put back as it was; whatever is in its place is kept under ``saved``."""
    if dest.is_symlink() and os.readlink(dest) == target:
        return
    if dest.exists() or dest.is_symlink():
        if dest.is_dir() and not dest.is_symlink():
            raise OSError(errno.EEXIST, f"{dest} is a folder where a link was", str(dest))
        _link_or_copy(dest, saved)
    tmp = Path(restore_temp(os.fspath(dest)))
    if tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, dest)


def _put_line_back(pth: PthLine, kept: Path, dest: Path, displaced: Path, real_root: Path) -> None:
    """Put ``pth.line`` back into the .pth file at ``dest``, in its place (legacy.put_line_back),
    from the stashed copy whose bytes are checked against ``pth.sha256`` as they are read. The
    file as it was, if it differs, is kept at ``displaced``. Raises OSError."""

    original = read_bytes(kept, MAX_PTH_BYTES)
    if hashlib.sha256(original).hexdigest() != pth.sha256:
        raise OSError(errno.ESTALE, f"{kept} changed since its check; not used")
    _refuse_escape(dest, real_root)
    try:
        info = dest.lstat()
    except FileNotFoundError:
        info = None
    current = read_bytes(dest, MAX_PTH_BYTES) if info and stat.S_ISREG(info.st_mode) else None
    merged = put_line_back(original, current, pth.line)
    if merged == current:
        return
    if info is not None:
        _makedirs_private(displaced.parent)
        if current is not None:
            write_atomically(displaced, current, durable=False)
        else:  # a link or anything else in its place: kept as it is
            os.replace(dest, displaced)
    write_atomically(dest, merged, mode=stat.S_IMODE(kept.lstat().st_mode))


def _metadata_last(stashed: StashedFile) -> tuple[bool, bool]:
    """A distribution becomes visible with its METADATA (PKG-INFO; a legacy editable with its
    .egg-link): link that last, after the rest of its metadata folder, so that a restore killed
    half way leaves no distribution that looks installed but is not (the next restore then
    simply completes it)."""
    parts = stashed.path.split("/")
    if parts[-1].endswith(".egg-link"):
        return True, True
    in_metadata = any(part.endswith((".dist-info", ".egg-info")) for part in parts[:-1])
    return in_metadata, in_metadata and parts[-1] in ("METADATA", "PKG-INFO")


def _is_checked(linked: Path, identity: FileId, sha256: str) -> bool:
    """``linked`` is the file that was checked; or, made by a copy (another filesystem), a
    regular file with the bytes that were accepted."""
    info = linked.lstat()
    if file_id(info) == identity:
        return True
    try:
        return stat.S_ISREG(info.st_mode) and sha256_file(linked, info) == sha256
    except OSError:
        return False


def _refuse_escape(dest: Path, real_root: Path) -> None:
    """A symlinked folder inside the environment must not lead a restore outside it."""
    real_parent = os.path.realpath(dest.parent)
    if real_parent != str(real_root) and not real_parent.startswith(str(real_root) + os.sep):
        raise OSError(errno.EPERM, f"{dest} resolves outside the environment ({real_parent})")


def check_restore_paths(
    snapshot: Snapshot, entries: Iterable[PackageEntry], env_root: Path, source: Path
) -> None:
    """Before any change: every file a restore would write lands inside the environment.

    The snapshot loader already refuses absolute and ``..`` paths; this catches a symlinked
    folder inside the environment (or in the stash) that leads out of it. The error names the
    snapshot file and the key path.
    """
    real_root = Path(os.path.realpath(env_root))
    positions = {entry.name: index for index, entry in enumerate(snapshot.packages)}
    for entry in entries:
        if entry.stash is None:
            continue
        written = [(f"files[{i}]", f.path) for i, f in enumerate(entry.stash.files)]
        written += [(f"lines[{i}]", pth.path) for i, pth in enumerate(entry.stash.lines)]
        for where, rel in written:
            dest = env_root / rel
            real = Path(os.path.realpath(dest.parent))
            if real != real_root and real_root not in real.parents:
                key = f"packages[{positions[entry.name]}].stash.{where}.path"
                raise SnapshotInvalid(
                    f"{source}: {key}: {rel!r} resolves outside the environment "
                    f"({real}); refusing to restore"
                )
