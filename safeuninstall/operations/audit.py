"""``audit``: the whole environment in one report, read only (audit.py holds the model).

Its own module, importing little at the top: the sizes' walk, the longest step, starts in a
child process before the rest of the tool is imported (sizes.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from msgspec.structs import replace

from safeuninstall.base.errors import SnapshotInvalid
from safeuninstall.context.analysis import library_index, with_default
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import (
    InstalledDistribution,
    census,
    installed_distributions,
)
from safeuninstall.environment.recordcache import RECORD_CACHE_FILE, RecordCache
from safeuninstall.environment.sizes import Weighing, count_text
from safeuninstall.libraries.index import LibraryIndex, Ownership, ownership
from safeuninstall.probe.runner import ProbeResult, ProbeSettings, run_all
from safeuninstall.reports.audit import (
    AuditReport,
    StashHolding,
    audit_environment,
    holders_of_libraries,
)


def audit(ctx: Context, configured: ProbeSettings, *, load: bool) -> AuditReport:
    """The whole environment in one report (audit.py); with ``load``, what a probe process
    really maps. Reads only: no lock is taken, nothing is written into the environment (the
    probe runs without writing bytecode)."""
    site_dirs = [str(s) for s in ctx.interpreter.site_dirs]
    # The walk of the site folders (the sizes) starts first, in a child process, and runs
    # beside all that follows; leaving the block stops it, whatever happened.
    with Weighing(site_dirs) as weighing:
        installed = installed_distributions(ctx.interpreter)
        index = library_index(ctx)
        # the RECORD cache read, never written: audit writes nothing
        owned = ownership(installed, RecordCache(ctx.store.root / RECORD_CACHE_FILE))
        runs, probe_paths, notes = (
            _load(ctx, configured, installed, index, owned) if load else (None, None, [])
        )
        report = audit_environment(
            installed,
            ctx.interpreter.markers,
            (index, owned, ctx.interpreter.executable),
            python=str(ctx.python),
            prefix=ctx.interpreter.prefix,
            site_dirs=site_dirs,
            probe_paths=probe_paths,
            weighing=weighing,
        )
    # Which snapshots are this environment's, from their heads: nothing else of them is read.
    heads = ctx.store.iter_heads(keep_heads=False)
    ids = [i for i, snap in heads if not isinstance(snap, SnapshotInvalid)]
    holdings = ctx.store.holdings(ids)
    return replace(
        report,
        environment=ctx.where,
        stash_bytes=holdings.held(ids),
        stashes=tuple(StashHolding(i, holdings.alone.get(i, 0)) for i in ids),  # newest first
        probe=tuple(runs) if runs is not None else None,
        mapped=None if probe_paths is None else tuple(sorted(probe_paths)),
        notes=(*report.notes, *notes, *_left_unread(ctx, installed)),
    )


def _load(
    ctx: Context,
    configured: ProbeSettings,
    installed: Mapping[str, InstalledDistribution],
    index: LibraryIndex,
    owned: Ownership,
) -> tuple[list[ProbeResult], set[str] | None, list[str]]:
    """--load: the probe's runs (the configured probe, else the one derived from the
    distributions that hold shared libraries), the real paths its processes mapped (None where
    none said), and the notes on both."""
    notes: list[str] = []
    holders = holders_of_libraries(index, owned)
    settings = with_default(configured, installed, holders)
    if configured.probes or configured.disabled:
        notes += settings.notes
    elif settings.probes:
        notes.append(
            "--load: no probe is configured; the derived probe imports the modules and "
            f"entry points of the {count_text(len(holders), 'distribution')} that hold "
            "shared libraries" + (", and runs torch's CUDA check" if "torch" in installed else "")
        )
    # No bytecode written into the environment by what the probe imports.
    env = {**ctx.child_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    runs = run_all(settings, ctx.interpreter, env)
    maps = [r.libraries for r in runs if r.libraries is not None]
    if not maps:
        notes.append(
            "--load: no probe process said what it mapped (no Python probe ran, or this "
            "system has no /proc/self/maps): the loaded copies are the library model's"
        )
        return runs, None, notes
    return runs, {path for libraries in maps for path in libraries}, notes


def _left_unread(ctx: Context, installed: Mapping[str, InstalledDistribution]) -> list[str]:
    """What the audit could not read as it is: metadata folders that are no distribution, an
    operation under way or interrupted."""
    notes = []
    read = {str(p) for d in installed.values() for p in (d.dist_info, *d.shadowed)}
    unread = sorted(os.path.basename(p) for p in census(ctx.interpreter) - read)
    if unread:
        notes.append(
            f"not read as distributions (no METADATA with a Name and Version that can be "
            f"read): {', '.join(unread)}; their files count as listed by none"
        )
    if os.path.lexists(ctx.own.journal):
        notes.append(
            "an operation is under way or was interrupted (its journal is there): what this "
            f"audit read may be half-changed; `{ctx.suggest('recover')}` finishes an "
            "interrupted one"
        )
    return notes
