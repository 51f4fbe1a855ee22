"""``snapshot``, ``snapshots``, ``show`` and ``prune``: the snapshots themselves."""

from __future__ import annotations

import shutil

from ..backend import shell_line
from ..context import Context
from ..environment import installed_distributions
from ..errors import InvalidInput, SnapshotInvalid
from ..journal import Journal
from ..libraries import ownership
from ..options import PruneOptions
from ..plan import plan_prune
from ..results import PruneResult, SnapshotList, SnapshotSummary
from ..snapshot import Snapshot
from ..transaction import SnapshotSpec, take_snapshot


def snapshot_now(ctx: Context, *, stash: bool) -> Snapshot:
    with ctx.locked():
        installed = installed_distributions(ctx.interpreter)
        spec = SnapshotSpec(
            operation="snapshot",
            stash=sorted(installed) if stash else (),
            shared=ownership(installed).shared_paths() if stash else (),
        )
        snap = take_snapshot(ctx, installed, ctx.store.new_folder(), spec)
        ctx.store.set_outcome(snap.id, "taken")
        return snap.with_outcome("taken")


def list_snapshots(ctx: Context) -> SnapshotList:
    summaries = []
    for snapshot_id, snap in ctx.store.iter_loadable():
        if isinstance(snap, SnapshotInvalid):
            summaries.append(
                SnapshotSummary(snapshot_id, "", "", "", (), "unreadable", 0, error=snap.message)
            )
            continue
        summaries.append(
            SnapshotSummary(
                id=snap.id,
                created=snap.created,
                command=shell_line(snap.command),
                operation=snap.operation,
                removed=snap.removed,
                outcome=snap.outcome,
                packages=len(snap.packages),
            )
        )
    return SnapshotList(tuple(summaries))


def show_snapshot(ctx: Context, reference: str | None) -> Snapshot:
    return ctx.store.load(ctx.store.resolve_id(reference))


def prune(ctx: Context, options: PruneOptions) -> PruneResult:
    if options.keep is None and options.max_size is None:
        raise InvalidInput("prune needs --keep N and/or --max-size SIZE")
    with ctx.locked():
        entry = Journal(ctx.store.root).read()
        if not options.dry_run and entry is None:
            ctx.store.remove_unsaved()  # folders of operations that died while stashing
        ids = ctx.store.ids()
        saved = [i for i in ids if ctx.store.snapshot_path(i).is_file()]
        protected = {saved[-1]} if saved else set()  # the latest that is a snapshot at all
        if entry is not None and entry.snapshot:
            protected.add(entry.snapshot)
        holdings = ctx.store.holdings(ids)
        plan = plan_prune(ids, holdings, protected, keep=options.keep, max_size=options.max_size)
        if not options.dry_run:
            for snapshot_id in plan:
                shutil.rmtree(ctx.store.folder(snapshot_id))
        rest = [i for i in ids if i not in plan]
        return PruneResult(
            removed=tuple((i, holdings.held([i])) for i in plan),
            kept=tuple((i, holdings.held([i])) for i in rest),
            protected=tuple(sorted(protected)),
            dry_run=options.dry_run,
            held_before=holdings.held(ids),
            held_after=holdings.held(rest),
        )
