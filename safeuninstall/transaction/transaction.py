"""A change to the environment that can be undone, and proven undone.

``Transaction`` is what every mutating operation (uninstall, rollback, recover) goes through:

1. ``snapshot``: the journal first, then the snapshot and the stash of everything the change
   may delete; nothing is removed before both exist.
2. ``uninstall``: the installer runs, journalled.
3. ``restore``: everything wanted comes back in one batch (stash first, else one pinned
   install), then the environment is re-read and compared with the snapshot: a frozen
   ``Restored`` says what was proven.
4. ``finish``: the snapshot's outcome is written and the journal removed.

Throughout, it keeps the installed set (a census) the operation expects, as its own uninstalls
and restores change it; ``check_others`` is the one check that no other process changed the
environment meanwhile (others.py says what finding one means).

Leaving the ``with`` block on an exception before anything was removed gives the change up:
the snapshot folder and the journal go, the environment is as it was. After a removal the
journal stays until ``finish``: a process killed then is finished by ``recover``. Interrupts
(Ctrl-C, SIGTERM) are deferred where a half-done step would be worse than a late exit
(``interrupts_deferred``).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import msgspec
from msgspec import Struct

from safeuninstall import __version__
from safeuninstall.base import interrupts, process
from safeuninstall.base.cachefile import FileStamp
from safeuninstall.base.errors import BackendError, NotRestorable, SnapshotInvalid
from safeuninstall.base.outcome import Outcome, Returned
from safeuninstall.context.analysis import sharing_files, snapshot_view
from safeuninstall.context.context import Context
from safeuninstall.environment.deletion import Removed, plan_deletion
from safeuninstall.environment.installed import (
    InstalledDistribution,
    census,
    folders_of,
    installed_distributions,
    names_in,
)
from safeuninstall.environment.records import RecordEntry, sha256_file
from safeuninstall.environment.sizes import count_text
from safeuninstall.libraries.index import ownership
from safeuninstall.plans.changes import (
    RollbackPlan,
    StashCandidate,
    StashKey,
    build_stash_index,
    plan_restore,
    plan_rollback,
)
from safeuninstall.state.journal import Child, Entry
from safeuninstall.state.layout import SnapshotFolder
from safeuninstall.state.snapshot import PackageEntry, PackageStash, Snapshot, Target
from safeuninstall.state.stash import (
    StashHasher,
    StashPlace,
    check_stash,
    package_entry,
    read_verified,
    stash_aside,
    stash_distribution,
)

# The retention policy runs after every change (cli/commands.py, Common.retain): it is loaded
# with the guard, before the change, which may take this package's own files away.
from safeuninstall.transaction import retention  # noqa: F401
from safeuninstall.transaction.others import ChangedByOthers, differences
from safeuninstall.transaction.restore import (
    RestoreJob,
    RestoreReport,
    Verification,
    byte_counter,
    reinstall_past_the_cache,
    restore,
    verify,
)


class SnapshotSpec(Struct, frozen=True):
    """What a snapshot records besides the installed set."""

    operation: str  # "uninstall", "rollback", "recover", "snapshot"
    stash: Sequence[str] = ()  # distributions whose files are kept
    removed: Sequence[str] = ()  # what the operation removes
    shared: Collection[str] = ()  # paths other distributions list too (stashed as shared)
    returns_to: str = ""  # a rollback's or a recover's: the snapshot it returns to
    # installed in more than one dist-info folder: the others than the one the snapshot records
    # are kept aside (stash.stash_aside), as uv removes every folder of a name
    doubled: Collection[str] = ()


class Restored(Struct, frozen=True):
    """What a restore did and what was proven afterwards, from a re-read of the environment."""

    report: RestoreReport
    verification: Verification | None  # None: the restore stopped on an error of ours
    error: str | None = None
    # The census the verification was made on (taken first, so a change after it shows in a
    # later one): what the restore left.
    left: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        return self.verification is not None and self.verification.ok

    @property
    def restored_pins(self) -> list[str]:
        """What it brought back, from a stash or reinstalled."""
        return self.report.from_stash + self.report.reinstalled


def take_snapshot(
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    folder: SnapshotFolder,
    spec: SnapshotSpec,
    *,
    save: bool = True,
) -> Snapshot:
    """Write a snapshot of ``installed`` into ``folder``, stashing ``spec.stash`` first.
    Without ``save``, only the stash is written: a state an operation switches to and drops
    (no history lists it; a folder left by a killed process is deleted as unsaved).

    On any failure (disk full, Ctrl-C) the half-made folder is deleted and the error raised:
    nothing has been removed yet, so nothing is lost.
    """
    snapshot_id = folder.id
    env_root = Path(ctx.interpreter.prefix)
    on_bytes = _stash_progress(ctx, installed, spec.stash)
    place = StashPlace(env_root, folder, spec.shared)
    try:
        # A legacy install's removal is uv's own (legacy.py), without the sweep of a RECORD's.
        records = {n: _record(installed[n]) for n in spec.removed if not installed[n].legacy}
        deletion = plan_deletion(
            [
                Removed(name, str(installed[name].site_dir), record or (), str(dist_info))
                for name, record in records.items()
                for dist_info in (installed[name].dist_info,)
            ],
            str(env_root),
        )
        _keep_aside(ctx, installed, place, spec)
        stashes = {
            name: stash_distribution(
                _one_of(installed[name], spec.doubled),
                place,
                removed=name in spec.removed,
                on_bytes=on_bytes,
                swept=deletion.swept.get(name, ()),
                entries=records.get(name),
            )
            for name in spec.stash
        }
        snap = _snapshot_of(ctx, snapshot_id, installed, stashes, spec)
        if save:
            ctx.store.save(snap)
    except BaseException:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise
    stashed = count_text(len(stashes), "distribution")
    said = f"snapshot: {snapshot_id}" if save else "the state to switch back to"
    ctx.emit("snapshot", f"{said} ({stashed} stashed)")
    return snap


def _keep_aside(
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    place: StashPlace,
    spec: SnapshotSpec,
) -> None:
    """Stash the second dist-info folders of ``spec.doubled`` aside (stash.stash_aside)."""
    for name in spec.doubled:
        for dist_info in installed[name].doubled:
            aside, _ = stash_aside(dist_info, place, removed=name in spec.removed)
            ctx.emit(
                "snapshot",
                f"kept aside: {dist_info.name}, a second dist-info folder of {name} "
                f"(in {place.snapshot.holding(aside)})",
            )


def _snapshot_of(
    ctx: Context,
    snapshot_id: str,
    installed: Mapping[str, InstalledDistribution],
    stashes: Mapping[str, PackageStash],
    spec: SnapshotSpec,
) -> Snapshot:
    """The snapshot of ``installed``, with the ``stashes`` kept of it, taken now."""
    env_root = Path(ctx.interpreter.prefix)
    return Snapshot(
        id=snapshot_id,
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
        tool_version=__version__,
        command=tuple(ctx.command),
        operation=spec.operation,
        target=Target(
            python=str(ctx.python),
            # the real path: a snapshot taken through a symbolic link to the venv stays its
            # snapshot once the link is gone (Store.belongs compares real paths)
            prefix=os.path.realpath(ctx.interpreter.prefix),
            version=ctx.interpreter.version,
        ),
        packages=tuple(
            package_entry(dist, env_root, stashes.get(name))
            for name, dist in sorted(installed.items())
        ),
        removed=tuple(spec.removed),
        returns_to=spec.returns_to,
    )


def _one_of(dist: InstalledDistribution, doubled: Collection[str]) -> InstalledDistribution:
    """``dist``, without the dist-info folders beside it when they are kept aside. Its other
    copies (an .egg-info or .egg-link of the same name) stay, so that the stash still refuses
    a removal that would take them (stash.py: uv removes every copy of a name)."""
    if dist.key in doubled:
        aside = set(dist.doubled)
        return msgspec.structs.replace(
            dist, shadowed=tuple(p for p in dist.shadowed if p not in aside)
        )
    return dist


def _record(dist: InstalledDistribution) -> list[RecordEntry] | None:
    """Its RECORD, read once for the deletion plan and the stash; None when it can't be read
    (the stash then says why, before anything is removed)."""
    try:
        return dist.record()
    except OSError:
        return None


def _stash_progress(
    ctx: Context, installed: Mapping[str, InstalledDistribution], stash: Sequence[str]
) -> Callable[[int], None] | None:
    """A byte counter for the progress bar, when someone shows one (RECORD sizes give the
    total; reading them is skipped otherwise)."""
    report = ctx.on_progress
    if report is None or not stash:
        return None
    total = 0
    for name in stash:
        with contextlib.suppress(OSError):
            total += sum(e.size or 0 for e in installed[name].record())
    return byte_counter(report, "stash", total)


class Transaction:
    """One mutating operation's journal, snapshot, stash, restore and proof (see the module)."""

    def __init__(self, ctx: Context, operation: str, recovering: Entry | None = None) -> None:
        self._ctx = ctx
        self._journal = ctx.journal()
        self._operation = operation
        self._entry = recovering
        self._prefix = "recover:" if recovering is not None else ""
        self._folder: SnapshotFolder | None = None
        self._hasher: StashHasher | None = None
        self._changed = False  # the installer has run: giving up is no longer possible
        self.interrupted = False  # an interrupt arrived during interrupts_deferred
        self.left_behind: list[str] = []  # what giving up could not delete
        self.snapshot: Snapshot | None = None
        # The second dist-info folders there as the snapshot was taken (see ``restore``)
        self._beside: frozenset[str] = frozenset()
        self._expected: frozenset[str] | None = None  # the census it expects (``expect``)

    def __enter__(self) -> Transaction:
        return self

    @property
    def changed(self) -> bool:
        """The installer has run: the environment may differ from the snapshot."""
        return self._changed

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        giving_up = kind is not None and not self._changed
        if giving_up:
            # A second interrupt (Ctrl-C pressed twice; `timeout` signals the process and then
            # its group) must not cut the give-up short: it left the journal and a "pending"
            # snapshot, and every later command refused. It is obeyed once both are gone.
            with interrupts.deferred():
                if self._hasher is not None:
                    self._hasher.cancel()  # the snapshot goes: its record is not wanted
                self._give_up()
        elif self._hasher is not None:
            # Its record must be complete before the command ends. The operation is over by
            # now: an interrupt must not cut the wait short and pass for one that came before
            # any change.
            with interrupts.deferred(obey=False):
                self._hasher.wait()

    def snapshot_before(
        self, installed: Mapping[str, InstalledDistribution], spec: SnapshotSpec
    ) -> Snapshot:
        """The journal, then the snapshot and stash of the state before the change. The stash
        is hashed in a thread while the change and its probe run."""
        ctx = self._ctx
        self._folder = ctx.store.new_folder()
        if self._entry is None:
            self._entry = self._journal.begin(self._operation, self._folder.id, "stash")
        else:
            self._step("stash")
        self.snapshot = take_snapshot(ctx, installed, self._folder, spec)
        self._beside = frozenset(p.name for d in installed.values() for p in d.doubled)
        stashes = [e.stash for e in self.snapshot.packages if e.stash]
        # A restore then need not hash the stash, and a file changed locally before the
        # removal is vouched for (its RECORD hash no longer is).
        self._hasher = StashHasher(self._folder, stashes).start()
        return self.snapshot

    def expect(self, read: frozenset[str]) -> None:
        """The installed set (a census) the operation expects now: the one it read before it
        began, or the one a step of its own left that the transaction did not make (``run``'s
        command). The transaction's own uninstalls and restores keep it up to date from here;
        ``check_others`` compares it with what is installed."""
        self._expected = read

    def others_changed(self, now: frozenset[str] | None = None) -> frozenset[str]:
        """What another process changed: the census entries (folders) that differ between the
        installed set expected and the census ``now`` (default: one taken now); none before
        ``expect``. Their names (installed.names_in) are what an undo leaves as they are."""
        if self._expected is None:
            return frozenset()
        return self._expected ^ (census(self._ctx.interpreter) if now is None else now)

    def check_others(
        self,
        now: frozenset[str] | None = None,
        *,
        during: str,
        then: str = "",
        more: Sequence[str] = (),
    ) -> None:
        """The one check that no other process changed the environment (others.py): raises
        ChangedByOthers naming each difference (and ``more``: what else the caller found
        changed by another process), said as ``during`` and ``then``."""
        changed = self.others_changed(now)
        changes = (*differences(self._expected or frozenset(), changed), *more)
        if changes:
            raise ChangedByOthers(changes, during=during, then=then)

    def _expect_of(self, names: Collection[str], now: frozenset[str] | None) -> None:
        """After a step of its own on ``names``: they are expected as the census ``now`` shows
        them (none of their folders when None: an uninstall that succeeded), the rest as
        before. An install of another name meanwhile stays a difference."""
        if self._expected is not None:
            kept = self._expected - folders_of(self._expected, names)
            self._expected = kept | (folders_of(now, names) if now is not None else frozenset())

    def _step(self, step: str, *, durable: bool = True, must_write: bool = True) -> None:
        assert self._entry is not None
        self._entry = self._journal.step(
            self._entry, self._prefix + step, durable=durable, must_write=must_write
        )

    def uninstall(self, names: Sequence[str], *, undone_on_error: bool = True) -> str | None:
        """Run the installer's uninstall; the error text if it failed, else None.

        The step counts as begun from its journal write on: an operation that undoes its change
        on an error (a removal, a run) restores after one at that write. ``undone_on_error=False``
        (a rollback, which undoes nothing on an error of ours): an error at that write gives
        the operation up, as before any change; the installer never ran.

        An interrupt that arrives while the installer runs waits for it to finish, and is
        obeyed then (KeyboardInterrupt): a restore that ran beside a still-running uninstall
        could be undone by it behind the verification's back."""
        before = self._changed
        self._changed = True  # first: the step is begun once its journal write is
        try:
            self._step("uninstall")
        except Exception:
            if not undone_on_error:
                self._changed = before
            raise
        self._ctx.emit("removing", f"removing: {', '.join(names)}")
        hasher = self._hasher
        done = False
        try:
            # Obeyed once uv is done: KeyboardInterrupt, or noted by a block around this one.
            with interrupts.deferred():
                if hasher is not None:
                    hasher.installer_runs()
                try:
                    self._ctx.backend.uninstall(names, watch=self._followed())
                    done = True
                finally:
                    # What uv left of them is its own: expected as it is, when it failed.
                    with contextlib.suppress(OSError):
                        self._expect_of(names, None if done else census(self._ctx.interpreter))
                if hasher is not None:
                    hasher.installer_done()
        except BackendError as err:
            return f"{err.message}\n{err.detail}".strip()
        return None

    def _followed(self) -> process.Watch:
        """How the installer's process is followed: the journal records its marker before it
        starts, its pid and start time once it has. It runs in a session of its own, so a
        SIGKILL of this process leaves it running: ``recover`` stops it before it compares
        anything, else it could go on changing the environment after recover's proof."""
        marker = process.new_marker()
        assert self._entry is not None
        self._entry = self._journal.child(self._entry, Child(marker))

        def started(proc: subprocess.Popen[bytes]) -> None:
            assert self._entry is not None
            ticks = process.start_ticks(proc.pid) or 0
            self._entry = self._journal.child(self._entry, Child(marker, proc.pid, ticks))

        return process.Watch(on_start=started, marker=marker)

    def changing(self, step: str) -> None:
        """A change of another kind than an uninstall (``run``'s command) is about to begin,
        journalled as ``step``: from here a failure restores, it no longer gives up."""
        self._changed = True
        self._step(step)

    def not_started(self) -> None:
        """The change ``changing`` announced never began (the command could not be started):
        leaving the block on an exception gives it up, as before any change."""
        self._changed = False

    def hashed(self) -> None:
        """Wait for the stash hasher. Before a change that may write into an installed file in
        place (and so into its stashed inode), its record must hold the bytes from before."""
        if self._hasher is not None:
            self._hasher.wait()

    def stop_hashing(self) -> None:
        """The stash hasher is not waited for: its record vouches for a file modified locally
        before the removal, for a later rollback, and without a probe to overlap, waiting for
        it made a --no-probe removal of 1 GB take 1.23 s instead of 0.24 s."""
        if self._hasher is not None:
            self._hasher.cancel()
            self._hasher = None

    def probing(self) -> None:
        """The probe after the change is about to run (a step that changes nothing)."""
        self._step("probe", durable=False)

    def restore(
        self,
        wanted: Snapshot,
        entries: Sequence[PackageEntry],
        intact: Sequence[str],
        *,
        offline: bool,
        beside: Collection[str] = (),
        rewritten: Collection[str] = (),
        theirs: Collection[str] = (),
    ) -> Restored:
        """Bring ``entries`` back in one batch and prove the environment equals ``wanted``, and
        that ``intact`` (distributions that share files with what was removed) are whole.

        A snapshot records one dist-info folder per name. ``beside``: the second folders
        ``wanted``'s state had that are not to be taken as a difference (a recover's, kept
        aside by that snapshot); returning to this transaction's own snapshot, those there as
        it was taken: a change that left one alone (a removal of another name, a command that
        installed another) did not make it, and its undo keeps it. ``rewritten``: those of
        ``entries`` whose files were replaced or written since ``wanted`` (RestoreJob).
        ``theirs``: distributions another process changed meanwhile, none of ``entries``: the
        proof takes them as they are now (that process's work is not this change's to undo),
        and says so."""
        ctx = self._ctx
        assert self.snapshot is not None
        self._restoring(entries)
        report = RestoreReport()
        job = self._job(wanted, entries, offline=offline, rewritten=rewritten)
        left: frozenset[str] | None = None
        try:
            report = restore(
                ctx, job, lambda step: self._step(step, must_write=False), self._followed
            )
            pruned = _pruned_note(ctx, wanted.id, report.reinstalled)
            if pruned:
                report.notes.append(pruned)
            self._step("verify", must_write=False)
            if wanted.id == self.snapshot.id:
                beside = self._beside
            if theirs:
                wanted = _as_they_left(ctx, wanted, theirs)
            left, verification = _prove(
                ctx, wanted, entries, report, (intact, beside), offline, self._followed
            )
        except Exception as err:
            return Restored(report, None, error=repr(err))
        finally:
            # What it brought back is its own, as it is (the verification judges it); what
            # another process did meanwhile to other names stays a difference.
            with contextlib.suppress(OSError):
                self._expect_of(
                    [e.name for e in entries], census(ctx.interpreter) if left is None else left
                )
        done = "verified" if verification.ok else "NOT verified"
        ctx.emit(
            "restored",
            f"restored: {count_text(verification.files_checked, 'file')} checked, {done}",
        )
        return Restored(report, verification, left=left)

    def _restoring(self, entries: Sequence[PackageEntry]) -> None:
        """A restore begins: said, journalled (from here a full disk must not stop it, see
        Journal.step), and the stash's record complete."""
        pins = ", ".join(e.pin for e in entries)
        self._ctx.emit(
            "restoring", f"restoring: {pins or 'nothing to bring back, only what was added'}"
        )
        self._step("restore", must_write=False)
        self._changed = True
        if self._hasher is not None:
            self._hasher.wait()  # usually done already: it ran while the probes did

    def _job(
        self,
        wanted: Snapshot,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        rewritten: Collection[str],
    ) -> RestoreJob:
        """What ``restore`` brings back and from where: ``wanted``'s stashes first, then this
        transaction's own, then any other snapshot's."""
        assert self.snapshot is not None
        first = [wanted] if wanted.id == self.snapshot.id else [wanted, self.snapshot]
        return RestoreJob(
            entries=entries,
            index=stash_index(self._ctx, entries, first),
            displaced_dir=self._ctx.store.folder(self.snapshot.id).displaced_dir,
            preferred_snapshot=wanted.id,
            current_snapshot=self.snapshot.id,
            offline=offline,
            rewritten=rewritten,
        )

    def return_to(
        self,
        wanted: Snapshot,
        *,
        offline: bool,
        also: Sequence[str] = (),
        all_or_nothing: bool = False,
    ) -> tuple[Restored, str | None]:
        """Make the installed set ``wanted``'s again, in one batch: uninstall what it lacks
        (added since, or another version) and ``also`` (installed as ``wanted`` has them, but
        with files replaced or written since), bring back what it has (from a stash, else one
        pinned install) with the distributions that share files with what is uninstalled, and
        prove it. Returns the proof, and the installer's failure: its error, or what it
        reported done and left undone (``_left_undone``: then what it left is expected as it
        is, not taken for another process's change).

        ``all_or_nothing``: before anything is uninstalled, every distribution to bring back
        must be able to come back (``cannot_come_back``); else NotRestorable is raised and the
        environment is left as it is."""
        ctx = self._ctx
        now = installed_distributions(ctx.interpreter)
        owned = ownership(now)
        back = plan_rollback(wanted, snapshot_view(now, owned, wanted, ctx.interpreter.prefix))
        again = [n for n in also if n in now and n not in back.remove]
        remove = [*back.remove, *again]
        shared = sharing_files(owned, remove)
        planned = {e.name for e in back.restore}
        more = [n for n in dict.fromkeys([*again, *shared]) if n not in planned]
        entries = [*back.restore, *(e for n in more if (e := wanted.package(n)) is not None)]
        if all_or_nothing and entries:  # nothing to bring back: no wait for the stash hasher
            cannot = self.cannot_come_back(wanted, entries, offline=offline)
            if cannot:
                raise NotRestorable("; ".join(cannot))
        taken = folders_of(census(ctx.interpreter), remove) if remove else frozenset()
        failed = self.uninstall(remove) if remove else None
        restored = self.restore(wanted, entries, shared, offline=offline, rewritten=again)
        if failed is None and restored.verification is not None:
            # Folders the uninstall was to take that are still there, but for those the
            # restore put back as they were: the installer left them.
            placed = {os.path.basename(e.dist_info) for e in entries}
            kept = left_installed(taken, restored.left, remove, put_back=placed)
            if kept:
                self._expect_of(kept, restored.left)
            failed = _left_undone(ctx.backend.name, restored, kept)
        return restored, failed

    def cannot_come_back(
        self, wanted: Snapshot, entries: Sequence[PackageEntry], *, offline: bool
    ) -> list[str]:
        """Why some of ``entries`` could not be brought back now, one line each (none: all
        can): ``cannot_come_back`` with this transaction's snapshot as the state it leaves,
        once the stash hasher has recorded it."""
        assert self.snapshot is not None
        if self._hasher is not None:
            self._hasher.wait()  # its record is what the stash is checked against
        return cannot_come_back(self._ctx, wanted, entries, offline=offline, leaving=self.snapshot)

    def finish(self, outcome: Outcome | Returned, *, keep_journal: bool = False) -> None:
        """Write ``outcome`` as the snapshot's (a rollback that returned to a snapshot: which
        one); remove the journal unless ``recover`` must still finish the job."""
        assert self.snapshot is not None
        with contextlib.suppress(OSError):
            self._ctx.store.set_outcome(self.snapshot.id, outcome)
        if not keep_journal:
            self._journal.finish()

    def discard(self) -> None:
        """The change is undone and proven (the environment is its snapshot's again) and the
        operation ends with nothing to keep (a refusal): the snapshot and the journal go, as
        when it is given up before any change. What could not be deleted is in
        ``left_behind``."""
        if self._hasher is not None:
            self._hasher.cancel()
            self._hasher = None
        self._give_up()

    def _give_up(self) -> None:
        """Nothing was removed: undo the snapshot too, so no "pending" one is left behind.
        What could not be deleted is kept in ``left_behind`` (see ``unchanged``)."""
        if self._folder is not None:
            shutil.rmtree(self._folder.path, ignore_errors=True)
            if os.path.lexists(self._folder.path):
                self.left_behind.append(f"the snapshot folder {self._folder.path}")
        if self._prefix == "":
            try:
                self._journal.finish()
            except OSError as err:
                self.left_behind.append(f"the journal {self._journal.path} ({err.strerror})")

    def unchanged(self, said: str) -> str:
        """``said`` ("interrupted before ...") and that nothing was changed: only when the
        give-up deleted the snapshot and the journal, else what remains."""
        if not self.left_behind:
            return f"{said}; nothing was changed"
        return (
            f"{said}; the environment was not changed, but giving the operation up could not "
            f"delete {' and '.join(self.left_behind)}"
        )

    @contextlib.contextmanager
    def interrupts_deferred(self) -> Iterator[None]:
        """While a restore runs, Ctrl-C, SIGTERM and SIGHUP are noted, not obeyed: a half-done
        restore is worse than a late exit. (A SIGKILL still stops it; the journal then leads
        to ``recover``.) ``interrupted`` says afterwards whether one arrived."""
        with interrupts.deferred(obey=False) as noted:
            yield
        self.interrupted = self.interrupted or bool(noted)


def left_installed(
    taken: frozenset[str],
    now: frozenset[str],
    names: Collection[str],
    *,
    put_back: Collection[str] = (),
) -> list[str]:
    """Of ``names``, those an uninstall reported done and left installed, sorted: their census
    folders it was to take (``taken``) still in the census ``now``, but for the folders a
    restore put back as they were (``put_back``, by folder name). The one check of it, for a
    removal and for a return to a snapshot; ``still_installed`` says it."""
    still = {p for p in taken & now if os.path.basename(p) not in put_back}
    return sorted(names_in(still) & set(names))


def still_installed(installer: str, names: Sequence[str]) -> str:
    """The installer reported success and left ``names`` installed, in words."""
    one = len(names) == 1
    return (
        f"{installer} reported success, but {', '.join(names)} {'is' if one else 'are'} "
        f"still installed: nothing of {'it' if one else 'them'} was removed"
    )


def _left_undone(installer: str, restored: Restored, kept: Sequence[str] = ()) -> str | None:
    """What the installer reported done and left undone, in words (None: nothing): ``kept``,
    what it said it uninstalled and left installed; the versions it said it installed and
    the proof finds missing."""
    lines = [still_installed(installer, kept)] if kept else []
    missing = set(restored.verification.missing if restored.verification is not None else ())
    absent = [pin for pin in restored.report.reinstalled if pin in missing]
    if absent:
        lines.append(
            f"{installer} reported success, but {', '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not installed: it installed nothing"
        )
    return "; ".join(lines) or None


def _as_they_left(ctx: Context, wanted: Snapshot, theirs: Collection[str]) -> Snapshot:
    """``wanted``, with the distributions another process changed (``theirs``) as they are
    installed now: what a proof of this change's undo compares the environment with."""
    now = installed_distributions(ctx.interpreter)
    root = Path(ctx.interpreter.prefix)
    kept = [e for e in wanted.packages if e.name not in theirs]
    added = [package_entry(now[n], root, None) for n in sorted(theirs) if n in now]
    packages = tuple(sorted([*kept, *added], key=lambda e: e.name))
    return msgspec.structs.replace(wanted, packages=packages)


def _pruned_note(ctx: Context, snapshot_id: str, reinstalled: Sequence[str]) -> str | None:
    """Why some of ``reinstalled`` came from the index: the snapshot's own stash is gone."""
    why = ctx.store.stash_pruned(snapshot_id) if reinstalled else None
    if why is None:
        return None
    return (
        f"the stash of snapshot {snapshot_id} was dropped ({why}): what no other stash held "
        f"was reinstalled from the index, by its pins: {', '.join(reinstalled)}"
    )


def stash_index(
    ctx: Context, entries: Sequence[PackageEntry], first: Sequence[Snapshot]
) -> dict[StashKey, list[StashCandidate]]:
    """Where each entry's exact name==version is stashed: ``first`` snapshots, then any other,
    newest first. Only snapshots whose stash folder has that distribution are read (a folder
    check each): parsing every 3000-package snapshot would cost 0.1 s apiece."""
    store = ctx.store
    wanted = {(e.name, e.version) for e in entries}
    snapshots = list(first)
    loaded = {snap.id for snap in snapshots}
    for snapshot_id in reversed(store.ids()):
        folder = store.folder(snapshot_id)
        if snapshot_id in loaded or not any(folder.package_stash(*d).is_dir() for d in wanted):
            continue
        try:
            snapshots.append(store.load(snapshot_id))
        except SnapshotInvalid:
            continue  # an unreadable snapshot can't vouch for its stash
    here = os.path.realpath(ctx.interpreter.prefix)
    # A stash the retention policy dropped vouches for nothing: its entries are reinstalled.
    snapshots = [snap for snap in snapshots if store.stash_pruned(snap.id) is None]
    return build_stash_index(
        snapshots, of_this_environment=lambda prefix: os.path.realpath(prefix) == here
    )


def cannot_come_back(
    ctx: Context,
    wanted: Snapshot,
    entries: Sequence[PackageEntry],
    *,
    offline: bool,
    leaving: Snapshot | None = None,
) -> list[str]:
    """Why some of ``entries`` could not be brought back to ``wanted`` now, one line each
    (none: all can). A stash counts when every file holds the bytes it held when it was
    stashed, checked as the restore checks it (a file replaced or written in place since, also
    through the inode a hard-linked stash shares with an installed file, does not; a file of
    the size it had but other bytes does not); the rest must be found by the installer's dry
    run, and not be a legacy install, which only a stash gives back. ``leaving``: the snapshot
    of the state the change leaves (its stash holds bytes as they were installed, as
    ``wanted``'s does)."""
    first = [wanted] if leaving is None or leaving.id == wanted.id else [wanted, leaving]
    own = {snap.id for snap in first}
    plan = plan_restore(entries, stash_index(ctx, entries, first), preferred_snapshot=wanted.id)
    reinstall = list(plan.reinstall)
    why = {e.pin: "no stash holds it" for e in reinstall}
    for entry, candidates in plan.from_stash:
        problems = []
        for candidate in candidates:
            stash = candidate.entry.stash
            assert stash is not None  # the index holds complete stashes only
            folder = ctx.store.folder(candidate.snapshot_id)
            mine = candidate.snapshot_id in own
            checked = check_stash(
                stash, folder, read_verified(folder), accept_modified=mine, with_swept=mine
            )
            if not checked.problems:
                break
            problems += [f"{p.path}: {p.problem}" for p in checked.problems[:1]]
        else:
            reinstall.append(entry)
            why[entry.pin] = f"its stash is not whole ({'; '.join(problems)})"
    lines = [
        f"{e.pin} was installed the legacy way, and {why[e.pin]}; only a stash gives such an "
        "install back"
        for e in reinstall
        if e.legacy
    ]
    installable = [e for e in reinstall if not e.legacy]
    if installable:
        try:
            ctx.backend.check_installable(installable, offline=offline)
        except BackendError as err:
            last = err.detail.strip().splitlines()[-1:] if err.detail else []
            lines += [
                f"{e.pin}: {why[e.pin]}, and {ctx.backend.name} cannot install it"
                for e in installable
            ]
            # Once, with the command line it ran: which index, offline or not.
            lines.append(f"the installer's check: {': '.join([err.message, *last])}")
    return lines


def rewritten(
    ctx: Context,
    snap: Snapshot,
    now: Mapping[str, InstalledDistribution],
    change: RollbackPlan,
) -> tuple[str, ...]:
    """Distributions installed as the snapshot has them whose files changed all the same:
    replaced (another inode: a reinstall, a command killed half way), written in place
    (another size or mtime than the stash hasher recorded before the change, or other bytes)
    or given another mode (a chmod). An lstat per file, and a read of those whose ctime alone
    moved (``_written``); where the stash cannot tell (a copy on another filesystem, an
    incomplete stash), the distribution is taken as it looks. ``change``: what a return to
    ``snap`` does anyway."""
    skip = {*change.remove, *(e.name for e in change.restore)}
    root = Path(ctx.interpreter.prefix)
    folder = ctx.store.folder(snap.id)
    hashed = read_verified(folder)
    found = []
    for entry in snap.packages:
        stash = entry.stash
        if entry.name in skip or entry.name not in now or stash is None or not stash.complete:
            continue
        if _changed_files(stash, folder, root, hashed):
            found.append(entry.name)
    return tuple(found)


def _changed_files(
    stash: PackageStash,
    folder: SnapshotFolder,
    root: Path,
    hashed: Mapping[str, tuple[FileStamp, str]],
) -> bool:
    for kept in stash.files:
        if kept.link is not None or kept.swept or "__pycache__" in kept.path:
            continue  # bytecode is rewritten by any import, by rename
        place = root / kept.path
        try:
            placed = os.lstat(place)
        except OSError:
            return True
        recorded = hashed.get(f"{stash.folder}/{kept.path}")
        if recorded is not None:
            if _written(place, placed, *recorded):
                return True
            continue
        try:
            stashed = os.lstat(folder.holding(f"{stash.folder}/{kept.path}"))
        except OSError:
            return False  # the stash cannot tell
        if stashed.st_dev != placed.st_dev:
            return False  # a copy on another filesystem: its inode tells nothing
        if stashed.st_ino != placed.st_ino:
            return True
    return False


def _written(place: Path, placed: os.stat_result, was: FileStamp, sha256: str) -> bool:
    """Whether the file at ``place`` (``placed``: its lstat) is not the one the stash hasher
    recorded as ``was``, with bytes of ``sha256``. A ctime that alone moved does not say: it
    also moves when another hard link to the file is made or removed, and uv links every
    install of a wheel, in any venv, to its cache's inodes. Nor does it clear the file: a
    write in place whose mtime was set back with os.utime moves the ctime alone too. The bytes
    then tell, read once."""
    stamp = FileStamp.of(placed)
    if stamp == was:
        return False
    if msgspec.structs.replace(stamp, ctime_ns=was.ctime_ns) != was:
        return True  # another inode, size, mtime or mode
    try:
        return sha256_file(place, placed) != sha256
    except OSError:  # changed while it was read, or unreadable: not the file recorded
        return True


def _prove(
    ctx: Context,
    wanted: Snapshot,
    entries: Sequence[PackageEntry],
    report: RestoreReport,
    spared: tuple[Sequence[str], Collection[str]],
    offline: bool,
    follow: Callable[[], process.Watch],
) -> tuple[frozenset[str], Verification]:
    """The census of what a restore left (taken first: a change after it shows in a later
    one), and the proof that it is ``wanted``'s state (``spared``: the ``intact`` and
    ``beside`` of ``verify``). What uv reinstalled with the bytes of a file written in place
    through its cache is installed again past it, and proved again."""
    intact, beside = spared
    left = census(ctx.interpreter)
    verification = verify(wanted, ctx.interpreter, report, intact=intact, beside=beside)
    if verification.ok or not reinstall_past_the_cache(
        ctx, entries, report, verification, offline=offline, watch=follow()
    ):
        return left, verification
    left = census(ctx.interpreter)
    return left, verify(wanted, ctx.interpreter, report, intact=intact, beside=beside)
