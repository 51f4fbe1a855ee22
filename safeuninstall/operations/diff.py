"""``diff``: what changed between two snapshots, or between a snapshot and the environment now.

A snapshot's files are known from its stash (each file's sha256 as kept); the environment's
now from the installed RECORDs (the hashes each install wrote down), so nothing is hashed here.
Bytecode and the metadata folder (RECORD, INSTALLER, REQUESTED, direct_url.json, an installer's
own notes) are left out: they differ whenever anything is recompiled or installed again from
elsewhere, and the version already says what the metadata would.
"""

from __future__ import annotations

from safeuninstall.judgement.diff import Side, compare, snapshot_sides
from safeuninstall.operations.results import DiffResult
from safeuninstall.session.analysis import installed_sides
from safeuninstall.session.context import Context

NOW = "now"


def diff(ctx: Context, first: str | None, second: str | None) -> DiffResult:
    """No reference: the latest snapshot against now; one: that snapshot against now; two:
    the first against the second (either may be ``now``)."""
    before_ref = first if first is not None else "latest"
    after_ref = second if second is not None else NOW
    before_label, before = _side(ctx, before_ref)
    after_label, after = _side(ctx, after_ref)
    return DiffResult(before_label, after_label, compare(before, after))


def _side(ctx: Context, reference: str) -> tuple[str, dict[str, Side]]:
    if reference == NOW:
        return NOW, installed_sides(ctx)
    snap = ctx.store.resolve(reference)
    return snap.id, snapshot_sides(snap)
