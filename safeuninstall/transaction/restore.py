"""Bringing distributions back in one batch, and proving the result.

``restore`` brings back a list of snapshot entries: from a stash where one holds the exact
name==version and its bytes still hash right, else in ONE pinned ``--no-deps`` install.
``verify`` then compares the installed set with the snapshot and hashes every restored file
against its RECORD. ``remove_half_restored`` takes back what a restore killed half way had
linked back of a distribution that the state a recover returns to does not have.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct, field

from safeuninstall.base import process
from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.errors import BackendError, SnapshotInvalid
from safeuninstall.context.context import Context
from safeuninstall.environment.backend import shell_line
from safeuninstall.environment.installed import (
    InstalledDistribution,
    Source,
    doubled_dist_info,
    installed_distributions,
)
from safeuninstall.environment.interpreter import Interpreter, find_uv
from safeuninstall.environment.legacy import MAX_PTH_BYTES, has_line
from safeuninstall.environment.paths import normalise
from safeuninstall.environment.records import sha256_file
from safeuninstall.libraries.index import ownership
from safeuninstall.plans.changes import (
    RestorePlan,
    SetDifference,
    StashCandidate,
    StashIndex,
    compare_sets,
    plan_restore,
)
from safeuninstall.state.layout import stash_folder_name
from safeuninstall.state.snapshot import PackageEntry, Snapshot
from safeuninstall.state.stash import (
    FileId,
    check_stash,
    file_id,
    read_verified,
    relative_to_root,
    restore_files,
    restore_leftovers,
)
from safeuninstall.state.store import Store


class RestoreReport(Struct):
    """What a restore brought back, how, and what it could not."""

    from_stash: list[str] = field(default_factory=list)  # pins restored from a stash
    reinstalled: list[str] = field(default_factory=list)  # pins reinstalled by uv/pip
    failed: list[str] = field(default_factory=list)  # pins that could not be brought back
    notes: list[str] = field(default_factory=list)  # what happened on the way, for the user
    # files linked back from a stash whose sha256 was checked, as stash.file_id gives them
    verified_files: set[FileId] = field(default_factory=set)
    # per distribution restored from a stash: {path relative to the environment: sha256}
    accepted: dict[str, dict[str, str]] = field(default_factory=dict)
    reinstalled_names: list[str] = field(default_factory=list)
    # files restored as symbolic links: {path relative to the environment: target}
    links: dict[str, str] = field(default_factory=dict)
    # lines put back into a .pth file: (pin, path relative to the environment, line)
    lines: list[tuple[str, str, str]] = field(default_factory=list)
    # RECORD files of those restored from a stash that were already gone when it was taken
    absent: set[str] = field(default_factory=set)


class RestoreJob(Struct, frozen=True):
    """What to bring back, and from where."""

    entries: Sequence[PackageEntry]
    index: StashIndex  # where each name==version is stashed
    displaced_dir: Path  # where a file found in the way is moved to
    preferred_snapshot: str | None = None  # its stash is tried first
    # The snapshot this change took of the state it leaves (the same as the preferred one for
    # a removal). Like the preferred one, its stash holds bytes as they were installed there.
    current_snapshot: str | None = None
    offline: bool = False  # a reinstall uses no network
    # Distributions whose files were replaced or written since the preferred snapshot: the
    # current one's stash holds them as they are now, not as they were installed there.
    rewritten: Collection[str] = ()


def restore(
    ctx: Context,
    job: RestoreJob,
    checkpoint: Callable[[str], object] = lambda step: None,
    follow: Callable[[], process.Watch] = process.Watch,
) -> RestoreReport:
    """``checkpoint`` is called at the step boundary inside: before the reinstall; ``follow``
    gives who follows the installer's process (Transaction: the journal records it).
    ``ctx.on_progress`` is told (step, bytes checked, bytes in all) while stashes are checked."""
    return _Restore(ctx, job).run(checkpoint, follow)


class _Restore:
    def __init__(self, ctx: Context, job: RestoreJob) -> None:
        self.ctx = ctx
        self.job = job
        self.report = RestoreReport()
        self.plan = plan_restore(job.entries, job.index, preferred_snapshot=job.preferred_snapshot)
        progress = ctx.on_progress
        self.on_bytes = (
            byte_counter(progress, "restore", _restore_total(self.plan)) if progress else None
        )

    def run(
        self, checkpoint: Callable[[str], object], follow: Callable[[], process.Watch]
    ) -> RestoreReport:
        report = self.report
        reinstall = list(self.plan.reinstall)
        if self.plan.from_stash:
            # uv's lock while the tool itself writes into the venv; released before uv runs.
            with self.ctx.installer_locked() as missing:
                if missing is not None:
                    report.notes.append(missing)
                for entry, candidates in self.plan.from_stash:
                    if not any(self._from_stash(entry, candidate) for candidate in candidates):
                        reinstall.append(entry)
        checkpoint("restore-reinstall")
        if reinstall:
            try:
                self.ctx.backend.install(reinstall, offline=self.job.offline, watch=follow())
            except BackendError as err:
                report.failed.extend(e.pin for e in reinstall)
                report.notes.append(f"reinstall failed: {err.message}\n{err.detail}".strip())
            else:
                report.reinstalled.extend(e.pin for e in reinstall)
                report.reinstalled_names.extend(e.name for e in reinstall)
        return report

    def _from_stash(self, entry: PackageEntry, candidate: StashCandidate) -> bool:
        """Link ``entry`` back from ``candidate``'s stash if every byte there hashes right."""
        report = self.report
        stash = candidate.entry.stash
        assert stash is not None  # the index holds complete stashes only
        folder = self.ctx.store.folder(candidate.snapshot_id)
        # Bytes modified locally are the installed ones only at the snapshot that stashed them:
        # the one being restored, or the one of the state being left (a distribution the
        # change keeps, stashed because it shares files with what is removed).
        own = candidate.snapshot_id == self.job.preferred_snapshot or (
            candidate.snapshot_id == self.job.current_snapshot
            and entry.name not in self.job.rewritten
        )
        checked = check_stash(
            stash,
            folder,
            read_verified(folder),
            self.on_bytes,
            accept_modified=own,
            with_swept=own,
        )
        if checked.problems:
            report.notes.append(
                f"{entry.pin}: stash of snapshot {candidate.snapshot_id} not used: "
                + "; ".join(f"{p.path}: {p.problem}" for p in checked.problems[:3])
            )
            return False
        try:
            restore_files(
                stash,
                snapshot=folder,
                env_root=Path(self.ctx.interpreter.prefix),
                displaced_dir=self.job.displaced_dir,
                checked=checked,
                with_swept=own,
            )
        except OSError as err:
            report.notes.append(f"{entry.pin}: restore from stash failed: {err}")
            return False
        # The files as checked: restore_files linked back exactly those (or hashed a copy).
        report.verified_files.update(checked.identities.values())
        report.accepted[entry.name] = checked.accepted
        report.links.update({f.path: f.link for f in stash.files if f.link is not None})
        report.lines.extend((entry.pin, pth.path, pth.line) for pth in stash.lines)
        report.absent.update(stash.absent)
        report.from_stash.append(entry.pin)
        if checked.modified:
            report.notes.append(
                f"{entry.pin}: restored as it was installed, which differed from its RECORD "
                f"(modified locally before the removal): {', '.join(checked.modified[:3])}"
            )
        return True


def reinstall_past_the_cache(
    ctx: Context,
    entries: Sequence[PackageEntry],
    report: RestoreReport,
    verification: Verification,
    *,
    offline: bool,
    watch: process.Watch = process.UNWATCHED,
) -> bool:
    """uv installs a wheel by hard-linking the files of its cache into the environment: a file
    written in place there is written in uv's cache too (and in a stash that linked it), and
    every reinstall links the same wrong bytes back. So the distributions that uv reinstalled
    with files that fail their RECORD hash are installed once more past the cache
    (``--reinstall --no-cache``: from the index or the find-links). Whether that ran; either
    way a note says what happened and gives the ``uv cache clean`` line that drops the bad
    bytes from the cache, the one way out when no index is at hand."""
    bad: dict[str, list[str]] = {}
    for mismatch in verification.hash_mismatches:
        pin, _, path = mismatch.partition(": ")
        if pin in report.reinstalled:
            bad.setdefault(pin, []).append(path)
    chosen = [e for e in entries if e.pin in bad]
    if ctx.backend.name != "uv" or not chosen:
        return False
    what = "; ".join(f"{pin}: {', '.join(paths[:3])}" for pin, paths in bad.items())
    clean = _cache_clean_line(ctx.environ, [e.name for e in chosen])
    found = (
        f"uv reinstalled {', '.join(bad)} with files that fail their RECORD hash ({what}): uv "
        "links installed files from its cache, so a file written in place in an environment "
        "is written in the cache too, and each reinstall brings it back"
    )
    try:
        ctx.backend.install(chosen, offline=offline, fresh=True, watch=watch)
    except BackendError as err:
        report.notes.append(
            f"{found}. Installing past the cache failed ({err.message}): `{clean}` drops those "
            "bytes from uv's cache; then run this again where the index (or the find-links) "
            "can be reached"
        )
        return False
    report.notes.append(
        f"{found}. Installed again past the cache (--reinstall --no-cache); uv's cache still "
        f"holds those bytes, for any environment that installs them: `{clean}` drops them"
    )
    return True


def _cache_clean_line(environ: Mapping[str, str], names: Sequence[str]) -> str:
    """The ``uv cache clean NAME...`` a person runs, on the cache the tool's uv used."""
    argv = [find_uv(environ) or "uv", "cache", "clean"]
    if environ.get("UV_CACHE_DIR"):
        argv += ["--cache-dir", environ["UV_CACHE_DIR"]]
    return shell_line([*argv, *names])


def remove_half_restored(store: Store, interpreter: Interpreter) -> list[str]:
    """Delete the files a restore killed half way linked back for a distribution it never
    finished; return their paths relative to the environment.

    A restore links a distribution's METADATA last, so one cut short is not installed: a
    recover that returns to a state without it (an interrupted rollback's) neither removes nor
    restores it, and its files would stay. They are found as files of the environment that are
    the very inode of a stash copy of a distribution that is not installed, and that no installed
    distribution lists. Deleting one loses no byte: its stash copy is that same inode.
    """
    installed = installed_distributions(interpreter)
    complete = {stash_folder_name(d.key, d.version) for d in installed.values()}
    owned = ownership(installed).owners
    env_root = os.path.normpath(interpreter.prefix)
    real_root = os.path.realpath(env_root)
    roots = scheme_folders(interpreter)
    removed: list[str] = []
    for snapshot_id in store.ids():
        if store.of_another_environment(snapshot_id):
            continue  # its stash holds none of this environment's files
        try:
            stashes = [
                entry.path
                for entry in os.scandir(store.folder(snapshot_id).stash_dir)
                if entry.name not in complete and entry.is_dir(follow_symlinks=False)
            ]
        except OSError:
            continue
        for stash in stashes:
            for folder, _, names in os.walk(stash):
                for name in names:
                    kept = os.path.join(folder, name)
                    rel = os.path.relpath(kept, stash)
                    placed = os.path.join(env_root, rel)
                    if not _linked_back(kept, placed, real_root) or normalise(placed) in owned:
                        continue
                    try:
                        os.unlink(placed)
                    except OSError:  # left behind rather than stopping the recover half way
                        continue
                    _remove_empty_parents(placed, env_root, roots)
                    removed.append(rel.replace(os.sep, "/"))
    return removed


def remove_restore_leftovers(
    store: Store, snapshot: Snapshot, interpreter: Interpreter
) -> list[str]:
    """Delete the temp files a restore killed half way left in the environment (named as only
    a restore names them, stash.restore_leftovers), and the folders it made for them once
    empty; return their paths relative to the environment.

    The restore an operation on ``snapshot`` runs brings back the distributions of
    ``snapshot`` (the undo of a removal or a run, a recover) or of the one it returns to (a
    rollback): their stashes name every file it can have been writing."""
    snapshots = [snapshot]
    if snapshot.returns_to:
        with contextlib.suppress(SnapshotInvalid):  # a restore could not have used it either
            snapshots.append(store.load(snapshot.returns_to))
    env_root = os.path.normpath(interpreter.prefix)
    roots = scheme_folders(interpreter)
    removed = []
    for snap in snapshots:
        for entry in snap.packages:
            if entry.stash is None:
                continue
            for tmp in restore_leftovers(entry.stash, Path(env_root)):
                try:
                    os.unlink(tmp)
                except OSError:  # left behind rather than stopping the recover
                    continue
                _remove_empty_parents(str(tmp), env_root, roots)
                removed.append(relative_to_root(tmp, env_root) or str(tmp))
    return sorted(set(removed))


def _linked_back(kept: str, placed: str, real_root: str) -> bool:
    """``placed`` is ``kept``'s inode, in a folder inside the environment."""
    try:
        same = os.path.samestat(os.lstat(kept), os.lstat(placed))
    except OSError:
        return False
    real_parent = os.path.realpath(os.path.dirname(placed))
    return same and (real_parent == real_root or real_parent.startswith(real_root + os.sep))


def scheme_folders(interpreter: Interpreter) -> frozenset[str]:
    """The install scheme's roots (site folders, scripts, headers, data: the environment's own
    root) and every folder above them up to the environment's root: what no clean-up may
    remove, empty or not (normalised paths)."""
    root = os.path.normpath(interpreter.prefix)
    major_minor = ".".join(interpreter.version.split(".")[:2])
    roots = [
        interpreter.purelib,
        interpreter.platlib,
        interpreter.scripts,
        os.path.join(root, "include", "site", f"python{major_minor}"),
    ]
    kept = {root}
    for scheme_root in roots:
        folder = os.path.normpath(scheme_root)
        while folder.startswith(root + os.sep) and folder not in kept:
            kept.add(folder)
            folder = os.path.dirname(folder)
    return frozenset(kept)


def _remove_empty_parents(path: str, root: str, kept: Collection[str]) -> None:
    """The folders a restore made for its files, once they are empty again; never one of
    ``kept`` (scheme_folders), nor any above it."""
    folder = os.path.dirname(path)
    while folder not in kept and folder.startswith(root + os.sep):
        try:
            os.rmdir(folder)
        except OSError:  # not empty: a folder that holds anything else stays
            return
        folder = os.path.dirname(folder)


def byte_counter(
    report: Callable[[str, int, int], None], step: str, total: int
) -> Callable[[int], None]:
    """Adds up bytes as a step goes and reports (step, done, total) after each addition."""
    done = 0

    def add(count: int) -> None:
        nonlocal done
        done = min(done + count, total)
        report(step, done, total)

    return add


def _restore_total(plan: RestorePlan) -> int:
    """Bytes to check: the first stash each entry will try."""
    total = 0
    for _, candidates in plan.from_stash:
        stash = candidates[0].entry.stash
        total += sum(f.size for f in stash.files) if stash else 0
    return total


class Verification(Struct, frozen=True):
    """The proof that an environment matches a snapshot again."""

    difference: SetDifference
    hash_mismatches: tuple[str, ...]  # "name==version: path"
    source_mismatches: tuple[str, ...]  # same version, another build
    files_checked: int
    # dist-info folders beyond one per name (a second version installed beside the first)
    extra_dist_info: tuple[str, ...] = ()
    # what another process changed after the proof ("went: x-1.0.dist-info"): it holds no more
    changed_after: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            self.difference.equal
            and not self.hash_mismatches
            and not self.source_mismatches
            and not self.extra_dist_info
            and not self.changed_after
        )

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(self.difference.missing)

    @property
    def unexpected(self) -> tuple[str, ...]:
        return tuple(self.difference.unexpected)

    def describe(self) -> list[str]:
        lines = [f"changed by another process since: {c}" for c in self.changed_after]
        lines += [f"missing: {pin}" for pin in self.difference.missing]
        lines += [f"not in the snapshot: {pin}" for pin in self.difference.unexpected]
        lines += [f"a second dist-info folder: {folder}" for folder in self.extra_dist_info]
        lines += [f"another build or layout: {item}" for item in self.source_mismatches]
        lines += [f"hash mismatch: {item}" for item in self.hash_mismatches]
        return lines


def verify(
    snapshot: Snapshot,
    interpreter: Interpreter,
    report: RestoreReport,
    *,
    intact: Iterable[str] = (),
    beside: Collection[str] = (),
) -> Verification:
    """Prove the restore.

    - The installed set equals the snapshot's, name, version and source.
    - Every file restored from a stash is back with the bytes it had (the stash's: its RECORD
      hash, or the bytes as installed where they differed).
    - Every distribution restored from a stash is whole: each file its RECORD lists is there
      (but those already gone when the stash was taken), and one the stash did not hold is
      hashed against the RECORD.
    - Every reinstalled distribution matches its RECORD.
    - ``intact``: distributions that share paths with what was removed still have every file.
    - A legacy install is back in its layout, and a line put back into easy-install.pth is
      there.
    - No dist-info folder beside the one of its name that is installed, but for ``beside``
      (folder names): those the state returned to had too.
    """
    installed = installed_distributions(interpreter)
    wanted = {e.name: e for e in snapshot.packages}
    difference = compare_sets(
        {name: e.version for name, e in wanted.items()},
        {name: dist.version for name, dist in installed.items()},
    )
    sources = _source_mismatches(wanted, installed)
    mismatches, checked = _check_from_stash(report, wanted, installed, Path(interpreter.prefix))
    for name in [*report.reinstalled_names, *intact]:
        dist = installed.get(name)
        if dist is None:
            continue  # reported as missing above
        bad, count = _check_record(dist, check_hashes=name in report.reinstalled_names)
        checked += count
        mismatches.extend(f"{dist.key}=={dist.version}: {path}" for path in bad)
    extra = _extra(interpreter, beside)
    return Verification(difference, tuple(mismatches), sources, checked, extra)


def _source_mismatches(
    wanted: Mapping[str, PackageEntry], installed: Mapping[str, InstalledDistribution]
) -> tuple[str, ...]:
    """The distributions installed at the version ``wanted`` has but from another source, or
    in another layout."""
    return tuple(
        f"{name}=={dist.version} (snapshot: {_source(wanted[name].source)}, "
        f"installed: {_source(dist.source)})"
        for name, dist in sorted(installed.items())
        if name in wanted
        and wanted[name].version == dist.version
        and wanted[name].source != dist.source
    ) + tuple(
        f"{name}=={dist.version} (snapshot: {wanted[name].layout}, installed: {dist.layout})"
        for name, dist in sorted(installed.items())
        if name in wanted
        and wanted[name].version == dist.version
        and wanted[name].layout != dist.layout
    )


def _check_from_stash(
    report: RestoreReport,
    wanted: Mapping[str, PackageEntry],
    installed: Mapping[str, InstalledDistribution],
    env_root: Path,
) -> tuple[list[str], int]:
    """What ``report`` restored from a stash, against what it accepted: each file given back
    holds its bytes (a link its target), each distribution is whole (``_check_restored``),
    each line put back into a .pth file is there. The mismatches, and the files checked."""
    mismatches: list[str] = []
    checked = 0
    for name, files in report.accepted.items():
        pin = f"{name}=={wanted[name].version}" if name in wanted else name
        for rel, sha256 in files.items():
            checked += 1
            if rel in report.links:
                if not _is_link(env_root / rel, report.links[rel]):
                    mismatches.append(f"{pin}: {rel}")
            elif not _holds(env_root / rel, sha256, report.verified_files):
                mismatches.append(f"{pin}: {rel}")
    for name in report.accepted:
        dist = installed.get(name)
        if dist is None or dist.legacy:  # missing: said above; legacy: its lines and files
            continue
        bad, count = _check_restored(dist, env_root, report)
        checked += count
        mismatches.extend(f"{dist.key}=={dist.version}: {path}" for path in bad)
    for pin, rel, line in report.lines:
        checked += 1
        if not _has_line(env_root / rel, line):
            mismatches.append(f"{pin}: {rel} (its line {line!r} is missing)")
    return mismatches, checked


def _extra(interpreter: Interpreter, beside: Collection[str]) -> tuple[str, ...]:
    """Every dist-info folder after the first of its name (by the name its folder carries),
    but those in ``beside``. installed_distributions sees only the first: a second version
    installed beside the restored one would otherwise pass for the snapshot's. (A legacy
    install's second copy is a ``shadowed`` one, refused to remove.)"""
    return tuple(
        extra
        for folders in doubled_dist_info(interpreter).values()
        for extra in folders[1:]
        if extra not in beside
    )


def _source(source: Source) -> str:
    return f"{source.kind} {source.url}" if source.url else source.kind


def _is_link(path: Path, target: str) -> bool:
    try:
        return os.readlink(path) == target
    except OSError:  # not a link, or gone
        return False


def _holds(path: Path, sha256: str, verified_files: set[FileId]) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    # Only a regular file holds bytes of its own: a symbolic link where a file was restored
    # is not that file, whatever it points to.
    if not stat.S_ISREG(info.st_mode):
        return False
    # A file linked back from a stash whose bytes were just checked is that same inode:
    # hashing it again would read every byte twice.
    if file_id(info) in verified_files:
        return True
    try:
        return sha256_file(path, info) == sha256
    except OSError:  # unreadable, or replaced while it was read: not the restored bytes
        return False


def _has_line(path: Path, line: str) -> bool:
    try:
        return has_line(read_bytes(path, MAX_PTH_BYTES), line)
    except OSError:  # gone, unreadable, not a regular file
        return False


def _check_restored(
    dist: InstalledDistribution, env_root: Path, report: RestoreReport
) -> tuple[list[str], int]:
    """``dist``, restored from a stash, against its RECORD: every file there but those gone
    already when the stash was taken; one the stash did not give back (``report.accepted``
    has those, checked by ``verify``) hashed against the RECORD. Paths out of the environment
    are uv's to skip, and a stash's too."""
    try:
        entries = dist.record()
    except OSError:
        return ["RECORD unreadable"], 0
    given = report.accepted[dist.key]
    bad = []
    checked = 0
    for entry in entries:
        path = dist.site_dir / entry.path
        rel = relative_to_root(path, env_root)
        if rel is None or rel in given or rel in report.links:
            continue
        try:
            info = os.lstat(path)
        except OSError:
            if rel not in report.absent and not entry.path.endswith(".pyc"):
                bad.append(f"{entry.path} (missing)")
            continue
        if entry.sha256 is None or not stat.S_ISREG(info.st_mode):
            continue  # RECORD itself; a folder the RECORD lists, kept file by file
        checked += 1
        try:
            matches = sha256_file(path, info) == entry.sha256
        except OSError:
            matches = False
        if not matches:
            bad.append(entry.path)
    return bad, checked


def _check_record(dist: InstalledDistribution, *, check_hashes: bool) -> tuple[list[str], int]:
    try:
        entries = dist.record()
    except OSError:
        return ["RECORD unreadable"], 0
    bad = []
    checked = 0
    for entry in entries:
        path = dist.site_dir / entry.path
        if not os.path.lexists(path):
            if not entry.path.endswith(".pyc"):
                bad.append(entry.path)
            continue
        if entry.sha256 is None or not check_hashes:
            continue
        checked += 1
        try:
            matches = sha256_file(path) == entry.sha256
        except OSError:  # unreadable, or not a regular file
            matches = False
        if not matches:
            bad.append(entry.path)
    return bad, checked
