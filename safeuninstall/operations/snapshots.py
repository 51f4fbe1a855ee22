"""``snapshot``, ``snapshots``, ``show`` and ``prune``: the snapshots themselves.

``snapshots`` and ``show`` only read, and import only what reading needs: what taking a
snapshot needs (the transaction and the impact modules, 20 modules) is imported by ``snapshot``
alone, and the installed-distribution reader and the plans (packaging's requirement parser
with them) by ``snapshot`` and ``prune``.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterable

from safeuninstall.base.errors import InvalidInput, SnapshotInvalid
from safeuninstall.base.outcome import Mark
from safeuninstall.context.context import Context
from safeuninstall.operations.results import (
    PruneResult,
    ShownSnapshot,
    SnapshotList,
    SnapshotSummary,
)
from safeuninstall.options import PruneOptions
from safeuninstall.state.snapshot import Snapshot


def snapshot_now(ctx: Context, *, stash: bool) -> Snapshot:
    # Imported here: listing and showing snapshots load none of the transaction layer.
    from safeuninstall.context.analysis import owned_files
    from safeuninstall.environment.installed import installed_distributions
    from safeuninstall.transaction.transaction import SnapshotSpec, take_snapshot

    with ctx.locked():
        installed = installed_distributions(ctx.interpreter)
        spec = SnapshotSpec(
            operation="snapshot",
            stash=sorted(installed) if stash else (),
            shared=owned_files(ctx, installed).shared_paths() if stash else (),
        )
        snap = take_snapshot(ctx, installed, ctx.store.new_folder(), spec)
        ctx.store.set_outcome(snap.id, Mark.TAKEN)
        return snap.with_outcome(Mark.TAKEN)


def list_snapshots(ctx: Context) -> SnapshotList:
    """Every snapshot of this environment, oldest first, with the bytes its stash alone keeps
    on disk (one lstat per stashed file)."""
    loaded = list(ctx.store.iter_heads())
    holdings = ctx.store.holdings([snapshot_id for snapshot_id, _ in loaded])
    summaries = []
    for snapshot_id, snap in loaded:
        if isinstance(snap, SnapshotInvalid):
            summaries.append(
                SnapshotSummary(snapshot_id, "", "", "", (), "unreadable", 0, error=snap.message)
            )
            continue
        summaries.append(
            SnapshotSummary(
                id=snap.id,
                created=snap.created,
                command=shlex.join(snap.command),
                operation=snap.operation,
                removed=snap.removed,
                outcome=snap.outcome,
                packages=snap.packages,
                stash_bytes=holdings.alone.get(snap.id, 0),
                stash_pruned=ctx.store.stash_pruned(snap.id),
            )
        )
    total = holdings.held([snapshot_id for snapshot_id, _ in loaded])
    why = None if summaries or not ctx.store.other_environments() else ctx.store.why_none()
    return SnapshotList(
        tuple(summaries), total_bytes=total, command=ctx.suggest(), none_because=why
    )


def show_snapshot(ctx: Context, reference: str | None) -> ShownSnapshot:
    snap = ctx.store.resolve(reference)
    holdings = ctx.store.holdings([snap.id])
    alone = holdings.alone.get(snap.id, 0)  # the bytes only its stash keeps
    return ShownSnapshot(snap, alone, ctx.store.stash_pruned(snap.id))


def prune(ctx: Context, options: PruneOptions) -> PruneResult:
    from safeuninstall.plans.changes import plan_prune
    from safeuninstall.transaction import retention  # see snapshot_now

    if options.keep is None and options.max_size is None:
        raise InvalidInput("prune needs --keep N and/or --max-size SIZE")
    with ctx.locked():
        entry = ctx.journal().read()
        if not options.dry_run and entry is None:
            ctx.store.remove_unsaved()  # folders of operations that died while stashing
        # This environment's snapshots only (a shared --state-dir holds others' too), and every
        # one that can't be read: whose it is can't be told, so it stays.
        unreadable = set()
        ids: list[str] = []
        for snapshot_id, snap in ctx.store.iter_heads():
            ids.insert(0, snapshot_id)
            if isinstance(snap, SnapshotInvalid):
                unreadable.add(snapshot_id)
        saved = [i for i in ids if i not in unreadable]
        protected = {saved[-1]} if saved else set()  # the latest that is a snapshot at all
        protected |= unreadable
        if entry is not None and entry.snapshot:
            protected.add(entry.snapshot)
        holdings = ctx.store.holdings(ids)
        installed = retention.installed_pins(ctx.interpreter)
        # Those never deleted are not named as kept for their only copies (nor is their size
        # said to be over --max-size because of only copies).
        copies = {
            i: pins
            for i, pins in retention.only_copies(ctx.store, saved, installed).items()
            if i not in protected
        }
        guarded = {} if options.drop_only_copies else copies

        def plan_keeping(only: Iterable[str]) -> list[str]:
            keep, max_size = options.keep, options.max_size
            return plan_prune(
                ids, holdings, protected, keep=keep, max_size=max_size, only_copies=only
            )

        plan = plan_keeping(guarded)
        reached = plan_keeping({})  # what the bounds alone would delete
        if not options.dry_run:
            for snapshot_id in plan:
                shutil.rmtree(ctx.store.folder(snapshot_id).path)
        rest = [i for i in ids if i not in plan]
        over = 0
        if options.max_size is not None and guarded:
            over = max(holdings.held(rest) - options.max_size, 0)
        return PruneResult(
            removed=tuple((i, holdings.held([i])) for i in plan),
            kept=tuple((i, holdings.held([i])) for i in rest),
            protected=tuple(sorted(protected)),
            dry_run=options.dry_run,
            held_before=holdings.held(ids),
            held_after=holdings.held(rest),
            # The only copies the bounds reached: kept, or removed with --drop-only-copies.
            only_copies=tuple((i, copies[i]) for i in reached if i in copies),
            over_max_size=over,
        )
