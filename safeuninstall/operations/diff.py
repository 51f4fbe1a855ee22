"""``diff``: what changed between two snapshots, or between a snapshot and the environment now.

A snapshot's files are known from its stash (each file's sha256 as kept); the environment's
now from the installed RECORDs (the hashes each install wrote down), so nothing is hashed here.
Bytecode and the metadata folder (RECORD, INSTALLER, REQUESTED, direct_url.json, an installer's
own notes) are left out: they differ whenever anything is recompiled or installed again from
elsewhere, and the version already says what the metadata would.
"""

from __future__ import annotations

from pathlib import Path

from safeuninstall.environment.installed import InstalledDistribution, installed_distributions
from safeuninstall.judgement.diff import UNKNOWN, Side, compare, compared, snapshot_sides
from safeuninstall.operations.results import DiffResult
from safeuninstall.session.context import Context
from safeuninstall.state.stash import relative_to_root

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


def installed_sides(ctx: Context) -> dict[str, Side]:
    """Each installed distribution, with its files as its RECORD lists them."""
    root = Path(ctx.interpreter.prefix)
    return {
        name: _installed_side(dist, root)
        for name, dist in installed_distributions(ctx.interpreter).items()
    }


def _installed_side(dist: InstalledDistribution, root: Path) -> Side:
    if dist.legacy:
        return Side(dist.version)
    try:
        record = dist.record()
    except OSError:  # no RECORD, or not one to trust: its files are not known
        return Side(dist.version)
    files: dict[str, str] = {}
    size = 0
    for entry in record:
        rel = relative_to_root(dist.site_dir / entry.path, root)
        if rel is None:
            continue  # outside the environment: no snapshot keeps it either
        if compared(rel):
            files[rel] = entry.sha256 or UNKNOWN
            size += entry.size or 0
    return Side(dist.version, files, size)
