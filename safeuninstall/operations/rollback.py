"""``rollback`` and ``recover``: make the installed set equal a snapshot's again.

A plain rollback returns to the state before the latest change still in effect
(plan.choose_snapshot); ``rollback ID`` to the one named. It snapshots the state it leaves first
(so it can itself be rolled back, and undone), checks that everything it must bring back can
come back, removes what the snapshot does not have, brings back what it does in one batch, and
proves the result; one that removes anything is judged like a removal and undone when it fails.
A recover does the same towards the snapshot that an interrupted operation's journal names.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from safeuninstall.base import process
from safeuninstall.base.errors import (
    NotRestorable,
    SnapshotInvalid,
    SnapshotNotFound,
    UnfinishedTransaction,
)
from safeuninstall.base.outcome import Cause, Mark, Outcome, Returned
from safeuninstall.context import baseline
from safeuninstall.context.analysis import (
    Analysis,
    analyse,
    owned_files,
    sharing_files,
    snapshot_view,
    with_default,
)
from safeuninstall.context.baseline import BaselineCache, Begun, fingerprint
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import (
    InstalledDistribution,
    census,
    ensure_writable,
    installed_distributions,
)
from safeuninstall.libraries.index import Ownership
from safeuninstall.operations.endings.rollback import (
    ALREADY_MATCHES,
    NOTHING_TO_RECOVER,
    NOTHING_TO_ROLL_BACK,
    RECOVER,
    RECOVER_CONCURRENT_KEPT,
    RECOVER_FELL_SHORT,
    RECOVER_INCOMPLETE,
    RECOVERED,
    RECOVERED_PROBE_FAILS,
    RECOVERED_PROBE_INTERRUPTED,
    ROLLBACK,
    ROLLBACK_CONCURRENT_KEPT,
    ROLLBACK_FAILED_NOT_UNDONE,
    ROLLBACK_INCOMPLETE,
    ROLLED_BACK,
    ROLLED_BACK_PROBE_FAILS,
    ROLLED_BACK_PROBE_INTERRUPTED,
)
from safeuninstall.operations.endings.uninstall import DRY_RUN, REFUSED_UNMET
from safeuninstall.operations.results import ProbeRuns, RollbackResult
from safeuninstall.options import RollbackOptions
from safeuninstall.plans.changes import RollbackPlan, SnapshotChoice, choose_snapshot, plan_rollback
from safeuninstall.probe.derived import after_settings, dropped_notes, judged_apart, undecided
from safeuninstall.probe.runner import Probe, ProbeResult, ProbeSettings, RunSettings, run_all
from safeuninstall.reports.impact import Unmet, allowed_unmet
from safeuninstall.state.journal import Entry, Journal
from safeuninstall.state.snapshot import PackageEntry, Snapshot
from safeuninstall.state.stash import check_restore_paths, kept_aside, legacy_refusal, not_put_back
from safeuninstall.transaction.guard import Back, Change, Ended, Guard, SwitchFailed, Words, stopped
from safeuninstall.transaction.others import ChangedByOthers
from safeuninstall.transaction.restore import remove_half_restored, remove_restore_leftovers
from safeuninstall.transaction.transaction import (
    Restored,
    SnapshotSpec,
    Transaction,
    cannot_come_back,
    rewritten,
)


def rollback(ctx: Context, configured: ProbeSettings, options: RollbackOptions) -> RollbackResult:
    """Back to snapshot ``options.snapshot``; without one, to the state before the latest change
    that is still in effect (plan.choose_snapshot)."""
    ctx.refuse_externally_managed()
    with ctx.locked():
        ctx.refuse_if_unfinished()
        now = _Now.read(ctx)
        if options.snapshot is not None:
            wanted = ctx.store.resolve(options.snapshot)
            return _Rollback(ctx, configured, options, wanted, now).run()
        choice, chosen = _choose(ctx, now)
        if chosen is None:
            return RollbackResult(
                command="rollback",
                outcome=NOTHING_TO_ROLL_BACK,
                python=str(ctx.python),
                environment=ctx.where,
                choice=choice,
                messages=(
                    f"`{ctx.suggest('snapshots')}` lists the snapshots; "
                    f"`{ctx.suggest('rollback', 'ID')}` returns to one of them",
                ),
            )
        return _Rollback(ctx, configured, options, chosen, now, choice=choice).run()


class _Now(Struct, frozen=True):
    """The environment as a rollback starts: its census (taken first, so a change after it
    shows later), the installed set, and who owns which file."""

    census: frozenset[str]
    installed: Mapping[str, InstalledDistribution]
    owned: Ownership

    @classmethod
    def read(cls, ctx: Context) -> _Now:
        taken = census(ctx.interpreter)
        installed = installed_distributions(ctx.interpreter)
        return cls(taken, installed, owned_files(ctx, installed))


def _choose(ctx: Context, now: _Now) -> tuple[SnapshotChoice, Snapshot | None]:
    """The snapshot a plain rollback returns to (plan.choose_snapshot), loaded; None with the
    choice's reason when no change since a snapshot is still in effect. Snapshots are read
    newest first only as far as the choice needs (a 3000-distribution one takes 0.1 s)."""
    loaded: dict[str, Snapshot] = {}

    def history() -> Iterator[tuple[str, Snapshot | str]]:
        for snapshot_id, snap in ctx.store.iter_loadable():
            if isinstance(snap, Snapshot):
                loaded[snapshot_id] = snap
                yield snapshot_id, snap
            else:
                yield snapshot_id, snap.message

    def find(snapshot_id: str) -> Snapshot | None:
        if snapshot_id not in loaded:
            try:
                snap = ctx.store.load(snapshot_id)
            except SnapshotInvalid:
                return None
            if not ctx.store.is_ours(snap):
                return None
            loaded[snapshot_id] = snap
        return loaded[snapshot_id]

    prefix = ctx.interpreter.prefix

    def matches(snap: Snapshot) -> bool:
        view = snapshot_view(now.installed, now.owned, snap, prefix, doubled=True)
        return plan_rollback(snap, view).empty

    choice = choose_snapshot(history(), matches, find)
    if choice.blocked:
        raise SnapshotInvalid(
            f"{choice.reason}; a plain rollback cannot tell which changes are still in effect "
            f"past it: name the snapshot to return to (`{ctx.suggest('snapshots')}` lists them)"
        )
    if not loaded:
        raise SnapshotNotFound(ctx.store.why_none())
    return choice, loaded.get(choice.snapshot) if choice.snapshot else None


def recover(ctx: Context, configured: ProbeSettings, options: RollbackOptions) -> RollbackResult:
    """Finish what an interrupted operation left: return to the snapshot its journal names."""
    ctx.refuse_externally_managed()
    with ctx.locked():
        journal = ctx.journal()
        entry = journal.read()
        # A journal write cut short (the first one too, which leaves no journal): under the
        # lock, nobody else writes one now.
        leftovers = _deleted(journal.leftovers())
        if entry is None:
            return _recovered(
                ctx,
                NOTHING_TO_RECOVER,
                "no unfinished operation on this environment",
                _deleted_note(leftovers, "a journal write cut short"),
            )
        journal.refuse_if_elsewhere(entry, ctx.suggest)
        found = f"found: {entry.describe()}"
        stopped = _stop_left_running(ctx, entry)  # before anything is read
        ctx.store.remove_unsaved()
        if not entry.snapshot or not ctx.store.snapshot_path(entry.snapshot).is_file():
            return _recovered(
                ctx,
                RECOVERED,
                found,
                *stopped,
                _recover_without_snapshot(ctx, entry, journal),
                _deleted_note(leftovers, f"the interrupted {entry.operation}"),
            )
        wanted = ctx.store.load(entry.snapshot)
        entry = journal.step(entry, "recover")
        with ctx.installer_locked():
            leftovers += remove_restore_leftovers(ctx.store, wanted, ctx.interpreter)
            # Their restores (a bisect's, a try --state's switches) may have begun what
            # ``wanted`` lacks.
            if entry.operation in ("rollback", "bisect", "try"):
                remove_half_restored(ctx.store, ctx.interpreter)
        rollback = _Rollback(ctx, configured, options, wanted, _Now.read(ctx), recovering=entry)
        rollback.messages += [found, *stopped]
        rollback.messages += _deleted_note(leftovers, f"the interrupted {entry.operation}")
        return rollback.run()


def _recovered(ctx: Context, outcome: Outcome, *messages: str | list[str]) -> RollbackResult:
    """A recover that ends before it compares anything; ``messages``: lines, or lists of them."""
    said = [line for m in messages for line in ([m] if isinstance(m, str) else m)]
    return RollbackResult(
        command="recover",
        outcome=outcome,
        python=str(ctx.python),
        environment=ctx.where,
        messages=tuple(said),
    )


def _deleted_note(names: Sequence[str], by: str) -> list[str]:
    if not names:
        return []
    return [f"deleted the temp files {by} left: " + ", ".join(names)]


def _deleted(paths: Sequence[Path]) -> list[str]:
    """Delete ``paths``; the names of those deleted."""
    deleted = []
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
            deleted.append(path.name)
    return deleted


def _stop_left_running(ctx: Context, entry: Entry) -> list[str]:
    """What the killed operation started runs in sessions of its own and outlives it: the
    installer it was running (the journal names it), a ``run``'s command. Each is stopped,
    with all it started, before the environment is read, so that nothing changes it behind
    the recover's back (an uninstall going on after recover found the environment whole). One
    that does not end when killed stops the recover before any change."""
    said, running = [], []
    for child in entry.children:
        stopped, left = process.stop_left(child.marker, child.pid, child.started)
        running += left
        if stopped:
            said.append(
                f"stopped what the interrupted {entry.operation} left running: "
                + ", ".join(stopped)
            )
    if entry.operation == "run":
        marker = process.guard_marker(ctx.interpreter.prefix, entry.snapshot)
        stopped, left = process.stop_left(marker)
        running += left
        if stopped:
            said.append(
                f"stopped what the guarded command left running: {len(stopped)} "
                f"process{'es' if len(stopped) != 1 else ''}"
            )
    if running:
        raise UnfinishedTransaction(
            f"the interrupted {entry.operation} left processes running that did not end when "
            f"killed (pid {', '.join(map(str, sorted(running)))}): nothing was changed; run "
            f"`{ctx.suggest('recover')}` again once they have ended"
        )
    return said


def _recover_without_snapshot(ctx: Context, entry: Entry, journal: Journal) -> str:
    if entry.step == "stash" and entry.snapshot:
        # Killed while stashing: the snapshot was never saved, so nothing was removed yet.
        shutil.rmtree(ctx.store.folder(entry.snapshot).path, ignore_errors=True)
        journal.finish()
        return (
            "it stopped while stashing, before anything was removed: the environment was "
            "not changed; the partial snapshot folder was deleted"
        )
    aside = shlex.join(["mv", str(journal.path), f"{journal.path}.unreadable"])
    raise SnapshotNotFound(
        f"the journal {journal.path} names no readable snapshot ({entry.describe()}); "
        f"move it aside ({aside}), find the snapshot to return to with "
        f"`{ctx.suggest('snapshots')}`, and run `{ctx.suggest('rollback', 'ID')}`"
    )


class _Rollback:
    """One rollback (or recover) towards ``wanted``, from the plan to its result.

    A rollback that uninstalls anything (distributions added since the snapshot, versions
    replaced) is judged like a removal: the impact report of what it uninstalls, the probe's
    baseline before and its run after, and, when the probe fails after and passed before, or
    when ``wanted`` cannot be brought back whole, the environment is put back as it was before
    the rollback, in one batch, verified. A rollback that only brings back (and a recover, which
    finishes an operation that was cut short) is probed after, and reported.
    """

    def __init__(
        self,
        ctx: Context,
        configured: ProbeSettings,
        options: RollbackOptions,
        wanted: Snapshot,
        now: _Now,
        *,
        choice: SnapshotChoice | None = None,
        recovering: Entry | None = None,
    ) -> None:
        self.ctx = ctx
        self.configured = configured
        self.options = options
        self.wanted = wanted
        self.now = now
        self.choice = choice
        self.recovering = recovering  # the journal entry of the operation being recovered
        self.endings = RECOVER if recovering else ROLLBACK
        self.operation = self.endings.operation
        self.command = self.operation.value
        self.verb = "recover" if recovering else "roll back"
        self.messages: list[str] = []
        self.begun: Begun | None = None
        self.cache = BaselineCache(ctx.store.root)
        # the second dist-info folders a recover keeps (see ``run``)
        self.beside: frozenset[str] = frozenset()
        self.rewritten: tuple[str, ...] = ()  # a recover's (see ``_with_rewritten``)

    def _result(self, outcome: Outcome, **parts: Any) -> RollbackResult:
        return msgspec.structs.replace(
            self.base, outcome=outcome, messages=tuple(self.messages), **parts
        )

    def run(self) -> RollbackResult:
        """Make the installed set equal ``wanted``."""
        plan = self._plan()
        unmet = self._judged_before(plan)
        self.messages += self._kept_aside_by(self.wanted)
        stopped = self._stopped_before(plan, unmet)
        if stopped is not None:
            return stopped
        self._refuse_before_change(plan)
        spec, restore = self._spec(plan)
        try:
            if self.judged and self.settings.probes:
                self.begun = self._begin_baseline()  # overlaps the restorable check
            # Before anything is removed, whatever the path (recover too): every entry must
            # come back, or nothing changes.
            self._refuse_unrestorable(restore[0])
            return self._apply(spec, restore)
        finally:
            if self.begun is not None:
                self.begun.cancel()

    def _plan(self) -> RollbackPlan:
        """What makes the installed set ``wanted``'s: what to uninstall, what to bring back."""
        ctx, wanted, now = self.ctx, self.wanted, self.now
        if os.path.realpath(wanted.target.prefix) != os.path.realpath(ctx.interpreter.prefix):
            # A snapshot of another environment (a shared --state-dir) must not apply here.
            raise SnapshotInvalid(
                f"snapshot {wanted.id} was taken of {wanted.target.prefix}, not of this "
                f"environment ({ctx.interpreter.prefix}); refusing to apply it here"
            )
        # A recover returns to the state before an operation: a second dist-info folder that
        # state had (its snapshot kept it aside) stays where the recover need not remove its
        # name, as the operation's own undo keeps it.
        before = set(kept_aside(ctx.store.folder(wanted.id))) if self.recovering else set()
        view = snapshot_view(
            now.installed, now.owned, wanted, ctx.interpreter.prefix, doubled=True, beside=before
        )
        plan = plan_rollback(wanted, view)
        if self.recovering is not None:
            plan = self._with_rewritten(plan)
        self.beside = frozenset(
            p.name
            for n, d in now.installed.items()
            if n not in plan.remove
            for p in d.doubled
            if p.name in before
        )
        return plan

    def _judged_before(self, plan: RollbackPlan) -> Sequence[Unmet]:
        """The impact report and the probe (a rollback is judged like a removal of what it
        uninstalls, unless it finishes a cut-short operation); what it leaves unmet."""
        now = self.now
        self.judged = bool(plan.remove) and self.recovering is None
        analysis = self._analyse(plan) if self.judged else None
        affected = analysis.report.affected if analysis is not None else None
        self.settings = with_default(
            self.configured, now.installed, affected, plan.remove if self.judged else ()
        )
        self.after = self.settings  # what runs after the change (derived.after_settings)
        self.base = RollbackResult(
            command=self.command,
            outcome=ALREADY_MATCHES,
            python=str(self.ctx.python),
            environment=self.ctx.where,
            snapshot=self.wanted.id,
            choice=self.choice,
            rollback_plan=plan,
            removed=tuple(f"{n}=={now.installed[n].version}" for n in plan.remove),
            impact=analysis.report if analysis is not None else None,
            probes=ProbeRuns(notes=self.settings.notes, disabled=self.settings.disabled),
        )
        return analysis.report.unmet if analysis is not None else ()

    def _stopped_before(self, plan: RollbackPlan, unmet: Sequence[Unmet]) -> RollbackResult | None:
        """The result when the rollback stops before any change: nothing to do, requirements
        it would leave unmet (unless --allow-unmet), --dry-run; None when it goes ahead."""
        if plan.empty and self.recovering is None:
            self.messages.append(f"the installed set already matches snapshot {self.wanted.id}")
            return self._result(ALREADY_MATCHES)
        if unmet and not self.options.allow_unmet:
            self.messages += self._refused_unmet()
            return self._result(REFUSED_UNMET)
        if unmet:
            no_probe = self.settings.disabled
            self.messages.append(allowed_unmet(unmet, "the rollback", no_probe=no_probe))
        if self.options.dry_run:
            return self._result(DRY_RUN)
        return None

    def _refuse_before_change(self, plan: RollbackPlan) -> None:
        """The environment writable, the installer there, nothing to uninstall that the backend
        cannot put back, and every path to restore inside the environment."""
        ctx, wanted, installed = self.ctx, self.wanted, self.now.installed
        ensure_writable(ctx.interpreter)
        ctx.backend.check_available()
        refused = [r for n in plan.remove if (r := legacy_refusal(installed[n], ctx.backend.name))]
        if refused:
            raise NotRestorable("; ".join(r.message for r in refused))
        ctx.refuse_deleting_the_interpreter([installed[n] for n in plan.remove])
        prefix = Path(ctx.interpreter.prefix)
        check_restore_paths(wanted, plan.restore, prefix, ctx.store.snapshot_path(wanted.id))

    def _spec(
        self, plan: RollbackPlan
    ) -> tuple[SnapshotSpec, tuple[Sequence[PackageEntry], Sequence[str]]]:
        """The snapshot of the state it leaves, and what it brings back: the entries, and the
        names that stay but are stashed and restored with them."""
        now = self.now
        # Distributions that stay but share files with what the rollback removes (a cu12 and a
        # cu13 build of one library): the uninstall deletes those files, so they are stashed
        # with the rest and restored after it.
        kept_shared = sharing_files(now.owned, plan.remove)
        doubled = [n for n in plan.remove if now.installed[n].doubled]
        self.messages += [self._doubled(now.installed[n]) for n in doubled]
        spec = SnapshotSpec(
            operation=self.command,
            stash=[*plan.remove, *kept_shared],
            removed=plan.remove,
            shared=now.owned.shared_paths(),
            returns_to=self.wanted.id,
            doubled=doubled,
        )
        wanted_by_name = {e.name: e for e in self.wanted.packages}
        entries = [*plan.restore, *(wanted_by_name[n] for n in kept_shared if n in wanted_by_name)]
        return spec, (entries, kept_shared)

    def _with_rewritten(self, plan: RollbackPlan) -> RollbackPlan:
        """A recover's plan, with the distributions installed as ``wanted`` has them whose
        files were replaced or written in place since (a guarded command's doing, say): their
        versions match, their bytes may not, so they are brought back too, from a stash that
        still holds the bytes of the snapshot or by their pins; where neither can, the
        recover is refused and says which file."""
        wanted = self.wanted
        self.rewritten = again = rewritten(self.ctx, wanted, self.now.installed, plan)
        if not again:
            return plan
        self.messages += [
            f"files of {n}=={self.now.installed[n].version} were replaced or written since "
            f"snapshot {wanted.id}: it is brought back too"
            for n in again
        ]
        return msgspec.structs.replace(
            plan,
            remove=(*plan.remove, *again),
            restore=(*plan.restore, *(e for n in again if (e := wanted.package(n)) is not None)),
        )

    def _doubled(self, dist: InstalledDistribution) -> str:
        """What happens to a distribution installed twice (a removal or an upgrade killed half
        way left a second dist-info folder)."""
        folders = ", ".join(p.name for p in (dist.dist_info, *dist.doubled))
        entry = self.wanted.package(dist.key)
        back = f"{entry.pin} comes back" if entry is not None else "nothing comes back"
        return (
            f"{dist.name} is installed twice ({folders}): both are removed (uv removes every "
            f"dist-info folder of a name) and {back}; the files of "
            f"{', '.join(p.name for p in dist.doubled)} are kept aside in this "
            f"{self.command}'s snapshot folder"
        )

    def _kept_aside_by(self, snap: Snapshot) -> list[str]:
        """Every second dist-info folder ``snap`` kept aside in its folder, said as not put
        back: a rollback, and the undo of one, make the environment ``snap``'s record, one
        folder per name, so none of them is there after it, whether it is there now or not
        (said before the rollback begins too). Unlike a run's undo (run._second_folders_gone),
        which returns only what the command changed. A recover keeps those in ``beside``."""
        folder = self.ctx.store.folder(snap.id)
        return not_put_back(
            folder, snap.id, [n for n in kept_aside(folder) if n not in self.beside]
        )

    def _analyse(self, plan: RollbackPlan) -> Analysis:
        """The impact report of what the rollback uninstalls. A distribution it replaces stays
        installed, in the snapshot's version: a requirement on it is left unmet only when that
        version does not satisfy it."""
        analysis = analyse(self.ctx, self.now.installed, plan.remove)
        versions = {e.name: e.version for e in self.wanted.packages}
        unmet = tuple(
            u
            for u in analysis.report.unmet
            if u.required not in plan.changed or not u.met_by(versions[u.required])
        )
        report = msgspec.structs.replace(analysis.report, unmet=unmet)
        return msgspec.structs.replace(analysis, report=report)

    def _refused_unmet(self) -> list[str]:
        """Why the rollback is refused, and the command that goes ahead anyway."""
        # The refusal itself is the outcome's line (results.outcome_text): said once.
        return [
            f"to return to snapshot {self.wanted.id} anyway, the probe judging it: "
            + self.ctx.suggest("rollback", "--allow-unmet", self.wanted.id),
        ]

    def _begin_baseline(self) -> Begun:
        ctx = self.ctx
        return baseline.begin(
            self.settings, ctx, self.cache, fingerprint(ctx.interpreter, ctx.environ), fresh=False
        )

    def _refuse_unrestorable(self, entries: Sequence[PackageEntry]) -> None:
        """Before anything is removed: every entry comes back from a stash whose bytes are
        those it kept (hash-checked as the restore checks them), or the installer's dry run
        finds it (transaction.cannot_come_back). Else refuse, so a rollback never ends with
        neither state."""
        wanted = self.wanted
        cannot = cannot_come_back(self.ctx, wanted, entries, offline=self.options.offline)
        if not cannot:
            return
        if self.recovering is not None:
            journal = self.ctx.journal().path
            aside = shlex.join(["mv", str(journal), f"{journal}.kept"])
            cannot.append(
                "nothing was changed: once it can come back (an index within reach), run "
                f"recover again; to keep the environment as it is instead, {aside}"
            )
        raise NotRestorable(f"cannot {self.verb} to snapshot {wanted.id}: " + "; ".join(cannot))

    def _apply(
        self, spec: SnapshotSpec, restore: tuple[Sequence[PackageEntry], Sequence[str]]
    ) -> RollbackResult:
        words = Words(self.command, "anything was changed", f"the {self.command} had started")
        change = Change(
            self.endings,
            self.command,
            words,
            self.now.census,
            self.now.installed,
            spec,
            offline=self.options.offline,
            recovering=self.recovering,
            undoes=self.recovering is None,
        )
        self.guard = guard = Guard(self.ctx, change, self.messages)
        baseline_results = self._baseline_results()  # Ctrl-C here: nothing was changed
        with guard.guarded() as txn:
            with txn.interrupts_deferred():
                guard.prepare()
                self.messages.append(
                    f"the state before this {self.command} is snapshot {guard.snapshot.id}"
                )
                restored = self._change(txn, spec, restore)
                stopped = self._stopped(txn, restored)
                if stopped is None and not restored.ok:
                    stopped = self._short(txn, restored)
            if txn.interrupted:
                self.messages.append(
                    f"an interrupt arrived during the {self.command}; it finished first"
                )
            if stopped is not None:
                return stopped
            runs = self.base.probes
            self.base = msgspec.structs.replace(
                self.base,
                restored=restored,
                probes=msgspec.structs.replace(
                    runs,
                    notes=(*runs.notes, *dropped_notes(baseline_results)),
                    baseline=baseline_results,
                ),
            )
            if not self.judged:
                self._finish(txn)
                return self._probe_after(txn)
            return self._judge(txn)

    def _baseline_results(self) -> tuple[ProbeResult, ...]:
        """The probe before the change. One that fails already cannot judge the rollback (a
        rollback is often run to repair what fails): it is run after, and reported. (A derived
        probe's candidates that fail before are dropped, see derived.py.)"""
        if self.begun is None:  # not judged: the probe runs after it, and is reported
            return ()
        results = self.guard.baseline(self.begun, self.cache, must_pass=False)
        self.after = after_settings(self.settings, results)
        failing = [r.probe.label for r in results if not r.passed]
        if failing:
            self.messages.append(
                f"the probe fails before the {self.command} ({', '.join(failing)}): it cannot "
                "judge it, and is reported after it"
            )
        return results

    def _change(
        self,
        txn: Transaction,
        spec: SnapshotSpec,
        restore: tuple[Sequence[PackageEntry], Sequence[str]],
    ) -> Restored:
        """Uninstall what ``wanted`` lacks, bring back what it has, verify."""
        if spec.removed:
            failed = txn.uninstall(spec.removed, undone_on_error=False)
            if failed is not None:
                self.messages.append(failed)
        entries, intact = restore
        return txn.restore(
            self.wanted,
            entries,
            intact,
            offline=self.options.offline,
            beside=self.beside,
            rewritten=self.rewritten,
        )

    def _stopped(self, txn: Transaction, restored: Restored) -> RollbackResult | None:
        """An error of ours stopped the restore half way: the journal stays, and ``recover``
        returns to the state before the operation (for a recover: finishes it)."""
        if restored.verification is not None:
            return None
        outcome = RECOVER_INCOMPLETE if self.recovering else ROLLBACK_INCOMPLETE
        txn.finish(outcome, keep_journal=True)
        self.messages.append(stopped(restored))
        return self._result(outcome, restored=restored, next_command=self.ctx.suggest("recover"))

    def _short(self, txn: Transaction, restored: Restored) -> RollbackResult:
        """The environment does not match ``wanted`` (a reinstall failed, a stash changed): a
        rollback is undone; a recover keeps its journal, and is run again."""
        if self.recovering is None:
            return self._undo(txn, Cause.FAILED, restored)
        # Its note is the recover's that stopped on an error: both are run again as they are.
        txn.finish(RECOVER_INCOMPLETE, keep_journal=True)
        return self._result(
            RECOVER_FELL_SHORT, restored=restored, next_command=self.ctx.suggest("recover")
        )

    def _finish(self, txn: Transaction) -> None:
        txn.finish(Returned(self.operation, self.wanted.id))
        if self.recovering is not None:
            self.ctx.store.set_outcome(self.wanted.id, Mark.RECOVERED)

    def _judge(self, txn: Transaction) -> RollbackResult:
        """The environment matches ``wanted``: the probe after it, against the baseline. A
        probe that passed before and fails now undoes the rollback."""
        settings = self.after
        runs = self.base.probes
        if not settings.probes:
            self._finish(txn)
            return self._result(ROLLED_BACK)
        txn.probing()
        try:
            after = tuple(self._probed_after_change(settings))
        except SwitchFailed as err:
            self.messages.append(err.message)
            return self._undo(txn, Cause.FAILED, self.base.restored)
        except ChangedByOthers as err:  # while the metric's runs switched
            assert self.base.restored is not None
            if not self.guard.at_change:  # back in the state before it: nothing of it to keep
                self.messages.append(err.message)
                return self._undo(txn, Cause.CONCURRENT, self.base.restored)
            return self._concurrent_kept(self.base.restored, err)
        except KeyboardInterrupt:
            self._finish(txn)
            return self._probe_interrupted(txn)
        self.base = msgspec.structs.replace(
            self.base, probes=msgspec.structs.replace(runs, after=after)
        )
        concurrent = self._changed_by_others(txn)
        if concurrent is not None:  # before the verdict: the probe judged another environment
            return concurrent
        regressed = [
            new.probe.label
            for old, new in zip(runs.baseline, after, strict=True)
            if old.passed and not new.passed
        ]
        if regressed:
            self.messages.append(
                f"the probe passed before the {self.command} and fails after it: "
                + ", ".join(regressed)
            )
            cause = Cause.INCONCLUSIVE if undecided(after) else Cause.PROBE_FAILED
            if cause is Cause.INCONCLUSIVE:
                self.messages.append(
                    "the metric's runs could not tell: inconclusive is never a pass"
                )
            return self._undo(txn, cause, self.base.restored)
        self._finish(txn)
        if all(r.passed for r in after):
            return self._result(ROLLED_BACK)
        return self._result(ROLLED_BACK_PROBE_FAILS)

    def _probed_after_change(self, settings: ProbeSettings) -> list[ProbeResult]:
        """Each probe after the change, judged against the baseline; a metric, once the others
        pass, by runs of the states before and after it, interleaved (``_compared``)."""
        ctx = self.ctx
        interleaves = self.recovering is None and not self.rewritten and not self.beside
        return judged_apart(
            settings,
            self.base.probes.baseline,
            lambda plain: run_all(plain, ctx.interpreter, ctx.child_env()),
            self._compared if interleaves else None,
        )

    def _compared(self, probe: Probe) -> ProbeResult:
        """A metric judged by runs of the state before the change (its own snapshot's) and
        the state it made, interleaved (Guard.compared). The state it made is switched back to
        from a stash of what it brought back, kept only while the runs last; the environment
        ends there, also when the runs are interrupted (the change then stands, as when its
        probe is)."""
        now = installed_distributions(self.ctx.interpreter)
        plan = self.base.rollback_plan
        stash = [e.name for e in plan.restore] if plan is not None else []
        how = RunSettings(self.after.timeout, self.ctx.child_env())
        with self.guard.stashed_state(now, stash) as made:
            return self.guard.compared(probe, how, made, stands=True)

    def _probe_interrupted(self, txn: Transaction) -> RollbackResult:
        """The probe after the change was interrupted, the change finished: it stands, the
        restore verified; only the check is missing (another process's change found now is
        kept, as after a probe that ran)."""
        concurrent = self._changed_by_others(txn)
        if concurrent is not None:
            return concurrent
        self.messages.append(
            "the probe after it was interrupted: the installed set matches the snapshot, "
            "and each restored file its hash, but nothing proved it works; run "
            f"`{self.ctx.suggest('probe')}`"
        )
        return self._result(
            RECOVERED_PROBE_INTERRUPTED if self.recovering else ROLLED_BACK_PROBE_INTERRUPTED
        )

    def _changed_by_others(self, txn: Transaction) -> RollbackResult | None:
        """After the probe, before anything is claimed: the environment re-read (its census)
        against what the restore left. A change by another process while the probe ran ends
        the operation here: the restore's proof no longer holds, and the probe judged another
        environment. Nothing is undone: returning to the state before would undo that
        process's work as if this operation had done it (as run-concurrent-kept)."""
        restored = self.base.restored
        assert restored is not None and restored.verification is not None
        txn.expect(restored.left)  # the census the restore's proof was made on
        try:
            txn.check_others(during=f"during the {self.command}'s probe")
        except ChangedByOthers as err:
            return self._concurrent_kept(restored, err)
        return None

    def _concurrent_kept(self, restored: Restored, changed: ChangedByOthers) -> RollbackResult:
        """Kept beside another process's change (Guard.kept_for_others): the proof of the
        restore names what changed after it; the rollback named goes to ``wanted`` again."""
        assert restored.verification is not None
        outcome = RECOVER_CONCURRENT_KEPT if self.recovering else ROLLBACK_CONCURRENT_KEPT
        ended = self.guard.kept_for_others(changed, outcome, self.wanted)
        verification = msgspec.structs.replace(restored.verification, changed_after=changed.changes)
        restored = msgspec.structs.replace(restored, verification=verification)
        return self._result(outcome, restored=restored, next_command=ended.next_command)

    def _undo(self, txn: Transaction, cause: Cause, forward: Restored | None) -> RollbackResult:
        """Put the environment back as it was before the rollback (its own snapshot), in one
        batch, and verify it: what the rollback brought that the snapshot lacks goes, what it
        removed comes back from the stash it took."""
        before = self.guard.snapshot
        if forward is not None and not forward.ok:
            self.messages.append(
                f"the environment could not be made to match snapshot {self.wanted.id}"
            )
        ended = self.guard.undo(
            cause,
            Back(all_or_nothing=True),
            aside=lambda: self._kept_aside_by(before),
            not_undone=lambda why: self._not_undone(txn, why, forward),
        )
        return self._result(
            ended.outcome, restored=forward, undo=ended.restored, next_command=ended.next_command
        )

    def _not_undone(self, txn: Transaction, why: str, forward: Restored | None) -> Ended:
        """Something the rollback removed cannot come back now: the environment is left as the
        rollback made it rather than half undone (an uninstall first would leave it worse). No
        journal is kept: ``recover`` would try the same return and be refused the same way, and
        every other command would be refused meanwhile. The refusal may pass (an index out of
        reach): a rollback to this rollback's own snapshot is then the way back, named."""
        before = txn.snapshot
        assert before is not None
        back = self.ctx.suggest("rollback", before.id)
        self.messages.append(
            f"cannot put the environment back as it was before the {self.command}: {why}"
        )
        if forward is not None and forward.ok:  # the probe judged it: it matches ``wanted``
            self.messages += [
                f"nothing was undone: the environment is as the {self.command} left it",
                f"once what it removed can come back, {back} returns to the state before it",
            ]
            outcome, next_command = ROLLED_BACK_PROBE_FAILS, None
        else:
            self.messages += [
                "nothing was undone: the environment matches neither "
                + " nor ".join(
                    _differing(
                        self.ctx,
                        [
                            (f"snapshot {self.wanted.id}", self.wanted),
                            (f"the state before the {self.command}, snapshot {before.id}", before),
                        ],
                    )
                ),
                f"once what it lacks can come back (an index reachable, a stash whole), {back} "
                f"returns to the state before the {self.command}; "
                f"{self.ctx.suggest('rollback', self.wanted.id)} tries it again",
            ]
            outcome, next_command = ROLLBACK_FAILED_NOT_UNDONE, back
        txn.finish(outcome)
        return Ended(outcome, next_command=next_command)

    def _probe_after(self, txn: Transaction) -> RollbackResult:
        """The installed set matches the snapshot: does it work?"""
        ctx, settings = self.ctx, self.settings
        try:
            final = tuple(run_all(settings, ctx.interpreter, ctx.child_env()))
        except KeyboardInterrupt:
            return self._probe_interrupted(txn)
        runs = msgspec.structs.replace(self.base.probes, after_restore=final)
        self.base = msgspec.structs.replace(self.base, probes=runs)
        concurrent = self._changed_by_others(txn)
        if concurrent is not None:
            return concurrent
        if all(r.passed for r in final):
            return self._result(RECOVERED if self.recovering else ROLLED_BACK)
        return self._result(RECOVERED_PROBE_FAILS if self.recovering else ROLLED_BACK_PROBE_FAILS)


def _differing(ctx: Context, named: Sequence[tuple[str, Snapshot]]) -> list[str]:
    """Each ``(label, snapshot)`` with how the environment, read once now, differs from it
    (``snapshot 0001 (missing urllib3==2.2.1)``)."""
    try:
        now = _Now.read(ctx)
    except Exception:  # a failure's report must not fail: the verification lists them
        return [label for label, _ in named]
    said = []
    for label, snap in named:
        view = snapshot_view(now.installed, now.owned, snap, ctx.interpreter.prefix, doubled=True)
        plan = plan_rollback(snap, view)
        pins = {e.name: e.pin for e in snap.packages}
        versions = {n: f"{n}=={d.version}" for n, d in now.installed.items()}
        parts = [f"missing {pins[n]}" for n in plan.missing]
        parts += [f"{versions[n]} instead of {pins[n]}" for n in plan.changed]
        parts += [f"{versions[n]} added" for n in plan.added]
        said.append(f"{label} ({'; '.join(parts) or 'no difference in the installed set'})")
    return said
