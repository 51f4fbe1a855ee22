"""``rollback`` and ``recover``: make the installed set equal a snapshot's again.

A rollback snapshots the state it leaves first (so it can itself be rolled back), removes what
the snapshot does not have, brings back what it does in one batch, and proves the result. A
recover does the same towards the snapshot that an interrupted operation's journal names.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..analysis import installed_view, sharing_files, with_default
from ..context import Context
from ..environment import (
    InstalledDistribution,
    census,
    census_change,
    ensure_writable,
    installed_distributions,
)
from ..errors import (
    BackendError,
    EnvironmentChanged,
    NotRestorable,
    SnapshotInvalid,
    SnapshotNotFound,
)
from ..journal import Entry, Journal
from ..libraries import Ownership, ownership
from ..options import RollbackOptions
from ..outcome import Outcome
from ..plan import Installed, plan_restore, plan_rollback
from ..probe import ProbeSettings, run_all
from ..restore import remove_half_restored
from ..results import ProbeRuns, RollbackResult
from ..snapshot import PackageEntry, Snapshot
from ..stash import check_restore_paths, in_place, legacy_refusal
from ..transaction import SnapshotSpec, Transaction, stash_index


def rollback(ctx: Context, configured: ProbeSettings, options: RollbackOptions) -> RollbackResult:
    """Back to snapshot ``options.snapshot`` (default: the latest)."""
    ctx.refuse_externally_managed()
    with ctx.locked():
        ctx.journal().refuse_if_unfinished(ctx.suggest)
        wanted = ctx.store.resolve(options.snapshot)
        return _Rollback(ctx, configured, options, wanted).run()


def recover(ctx: Context, configured: ProbeSettings, options: RollbackOptions) -> RollbackResult:
    """Finish what an interrupted operation left: return to the snapshot its journal names."""
    ctx.refuse_externally_managed()
    with ctx.locked():
        journal = ctx.journal()
        entry = journal.read()
        if entry is None:
            return RollbackResult(
                command="recover",
                outcome=Outcome.NOTHING_TO_RECOVER,
                python=str(ctx.python),
                messages=("no unfinished operation on this environment",),
            )
        journal.refuse_if_elsewhere(entry, ctx.suggest)
        found = f"found: {entry.describe()}"
        ctx.store.remove_unsaved()
        if not entry.snapshot or not ctx.store.snapshot_path(entry.snapshot).is_file():
            return RollbackResult(
                command="recover",
                outcome=Outcome.RECOVERED,
                python=str(ctx.python),
                messages=(found, _recover_without_snapshot(ctx, entry, journal)),
            )
        wanted = ctx.store.load(entry.snapshot)
        entry = journal.step(entry, "recover")
        if entry.operation == "rollback":  # its restore may have begun what ``wanted`` lacks
            with ctx.installer_locked():
                remove_half_restored(ctx.store, ctx.interpreter)
        rollback = _Rollback(ctx, configured, options, wanted, recovering=entry)
        rollback.messages.append(found)
        return rollback.run()


def _recover_without_snapshot(ctx: Context, entry: Entry, journal: Journal) -> str:
    if entry.step == "stash" and entry.snapshot:
        # Killed while stashing: the snapshot was never saved, so nothing was removed yet.
        shutil.rmtree(ctx.store.folder(entry.snapshot), ignore_errors=True)
        journal.finish()
        return (
            "it stopped while stashing, before anything was removed: the environment was "
            "not changed; the partial snapshot folder was deleted"
        )
    aside = shlex.join(["mv", str(journal.path), f"{journal.path}.unreadable"])
    raise SnapshotNotFound(
        f"the journal {journal.path} names no readable snapshot ({entry.describe()}); "
        f"move it aside ({aside}), find the snapshot to return to with "
        "`safe-uninstall snapshots`, and run `safe-uninstall rollback ID`"
    )


def _view(
    installed: Mapping[str, InstalledDistribution],
    owned: Ownership,
    wanted: Snapshot,
    prefix: str,
) -> dict[str, Installed]:
    """The installed set as the rollback plans it. A legacy install has no RECORD to say it
    is whole: it is whole when every file and line the snapshot's stash of it holds is there
    (a removal killed half way leaves its metadata with some files gone)."""
    view = installed_view(installed, owned)
    stashes = {e.name: e for e in wanted.packages if e.legacy and e.stash and e.stash.complete}
    for name, current in view.items():
        entry = stashes.get(name)
        if entry is None or not current.intact or entry.version != current.version:
            continue
        assert entry.stash is not None
        if not in_place(entry.stash, Path(prefix)):
            view[name] = msgspec.structs.replace(current, intact=False)
    return view


class _Rollback:
    """One rollback (or recover) towards ``wanted``, from the plan to its result."""

    def __init__(
        self,
        ctx: Context,
        configured: ProbeSettings,
        options: RollbackOptions,
        wanted: Snapshot,
        recovering: Entry | None = None,
    ) -> None:
        self.ctx = ctx
        self.configured = configured
        self.options = options
        self.wanted = wanted
        self.recovering = recovering  # the journal entry of the operation being recovered
        self.command = "recover" if recovering else "rollback"
        self.messages: list[str] = []

    def _result(self, outcome: Outcome, **parts: Any) -> RollbackResult:
        return msgspec.structs.replace(
            self.base, outcome=outcome, messages=tuple(self.messages), **parts
        )

    def run(self) -> RollbackResult:
        """Make the installed set equal ``wanted``."""
        ctx, wanted = self.ctx, self.wanted
        if os.path.realpath(wanted.target.prefix) != os.path.realpath(ctx.interpreter.prefix):
            # A snapshot of another environment (a shared --state-dir) must not apply here.
            raise SnapshotInvalid(
                f"snapshot {wanted.id} was taken of {wanted.target.prefix}, not of this "
                f"environment ({ctx.interpreter.prefix}); refusing to apply it here"
            )
        self.census = census(ctx.interpreter)  # first: a change after it shows later
        installed = installed_distributions(ctx.interpreter)
        owned = ownership(installed)
        plan = plan_rollback(wanted, _view(installed, owned, wanted, ctx.interpreter.prefix))
        self.settings = with_default(self.configured, installed, None)
        self.base = RollbackResult(
            command=self.command,
            outcome=Outcome.ALREADY_MATCHES,
            python=str(ctx.python),
            snapshot=wanted.id,
            rollback_plan=plan,
            removed=tuple(f"{n}=={installed[n].version}" for n in plan.remove),
            probes=ProbeRuns(notes=self.settings.notes),
        )
        if plan.empty and self.recovering is None:
            self.messages.append(f"the environment already matches snapshot {wanted.id}")
            return self._result(Outcome.ALREADY_MATCHES)
        if self.options.dry_run:
            return self._result(Outcome.DRY_RUN)
        ensure_writable(ctx.interpreter)
        ctx.backend.check_available()
        refused = [r for n in plan.remove if (r := legacy_refusal(installed[n], ctx.backend.name))]
        if refused:
            raise NotRestorable("; ".join(r.message for r in refused))
        prefix = Path(ctx.interpreter.prefix)
        check_restore_paths(wanted, plan.restore, prefix, ctx.store.snapshot_path(wanted.id))
        # Distributions that stay but share files with what the rollback removes (a cu12 and a
        # cu13 build of one library): the uninstall deletes those files, so they are stashed
        # with the rest and restored after it.
        kept_shared = sharing_files(owned, plan.remove)
        spec = SnapshotSpec(
            operation=self.command,
            stash=[*plan.remove, *kept_shared],
            removed=plan.remove,
            shared=owned.shared_paths(),
        )
        wanted_by_name = {e.name: e for e in wanted.packages}
        entries = [*plan.restore, *(wanted_by_name[n] for n in kept_shared if n in wanted_by_name)]
        if self.recovering is None:
            self._refuse_unrestorable(entries)
        with Transaction(ctx, self.command, self.recovering) as txn:
            with txn.interrupts_deferred():
                stopped = self._change(txn, installed, spec, (entries, kept_shared))
            if txn.interrupted:
                self.messages.append(
                    f"an interrupt arrived during the {self.command}; it finished first"
                )
        return stopped or self._probe_after()

    def _refuse_unrestorable(self, entries: Sequence[PackageEntry]) -> None:
        """Before anything is removed: every entry comes back from a stash, or the installer's
        dry run finds it. Else refuse, so a rollback never ends with neither state."""
        ctx, wanted = self.ctx, self.wanted
        index = stash_index(ctx, entries, [wanted])
        reinstall = plan_restore(entries, index, preferred_snapshot=wanted.id).reinstall
        legacy = [e.pin for e in reinstall if e.legacy]
        if legacy:  # an installer would bring back a wheel's layout, not the one that was there
            raise NotRestorable(
                f"cannot roll back to snapshot {wanted.id}: {', '.join(legacy)} was installed "
                "the legacy way, and no stash holds it; only a stash gives such an install back"
            )
        if not reinstall:
            return
        try:
            ctx.backend.check_installable(reinstall, offline=self.options.offline)
        except BackendError as err:
            pins = ", ".join(e.pin for e in reinstall)
            raise NotRestorable(
                f"cannot roll back to snapshot {wanted.id}: no stash holds {pins}, and "
                f"{ctx.backend.name} cannot install it ({err.message})",
                detail=err.detail,
            ) from None

    def _change(
        self,
        txn: Transaction,
        installed: Mapping[str, InstalledDistribution],
        spec: SnapshotSpec,
        restore: tuple[Sequence[PackageEntry], Sequence[str]],
    ) -> RollbackResult | None:
        """Snapshot, uninstall, restore, verify: a result when it stopped short, None when the
        environment is proven to match ``wanted``."""
        ctx, wanted = self.ctx, self.wanted
        before = txn.snapshot_before(installed, spec)
        change = census_change(self.census, census(ctx.interpreter))
        if change:  # the last look before anything is removed
            raise EnvironmentChanged(
                f"another process changed the environment while this {self.command} prepared "
                f"it ({change}); nothing was changed: run it again"
            )
        # The state we leave is itself a snapshot, so a rollback can be rolled back.
        self.messages.append(f"the state before this {self.command} is snapshot {before.id}")
        if spec.removed:
            failed = txn.uninstall(spec.removed)
            if failed is not None:
                self.messages.append(failed)
        entries, intact = restore
        restored = txn.restore(wanted, entries, intact, offline=self.options.offline)
        if restored.verification is None:  # an error of ours stopped it half way
            outcome = Outcome.named(f"{self.command}-incomplete")
            txn.finish(outcome.value, keep_journal=True)
            self.messages.append(
                f"the restore stopped on an unexpected error ({restored.error}): the "
                "environment is only partly restored"
            )
            return self._result(outcome, restored=restored, next_command=ctx.suggest("recover"))
        if not restored.ok:
            # A rollback that stopped short is retried by running it again.
            txn.finish(f"{self.command}-incomplete", keep_journal=self.recovering is not None)
            again = ("recover",) if self.recovering else ("rollback", wanted.id)
            return self._result(
                Outcome.INCOMPLETE, restored=restored, next_command=ctx.suggest(*again)
            )
        txn.finish(f"{self.command}-to-{wanted.id}")
        if self.recovering is not None:
            ctx.store.set_outcome(wanted.id, "recovered")
        self.base = msgspec.structs.replace(self.base, restored=restored)
        return None

    def _probe_after(self) -> RollbackResult:
        """The environment matches the snapshot: does it work?"""
        ctx, settings = self.ctx, self.settings
        done = "recovered" if self.recovering else "rolled-back"
        try:
            final = tuple(run_all(settings, ctx.interpreter, ctx.child_env()))
        except KeyboardInterrupt:
            # The environment already matches the snapshot; only the check is missing.
            self.messages.append(
                "the probe after it was interrupted: the environment matches the snapshot, "
                "but nothing proved it works; run `safe-uninstall probe`"
            )
            return self._result(Outcome.named(f"{done}-probe-interrupted"))
        runs = msgspec.structs.replace(self.base.probes, after_restore=final)
        passed = all(r.passed for r in final)
        return self._result(Outcome.named(done if passed else f"{done}-probe-fails"), probes=runs)
