"""``check``, ``probe``, ``doctor`` and ``audit``: judge the environment, change nothing."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from msgspec.structs import replace

from ..analysis import (
    analyse,
    installed_view,
    library_index,
    loadable_snapshots,
    owned_files,
    with_default,
)
from ..backend import shell_line
from ..context import Context
from ..derived import as_baseline, dropped_notes
from ..environment import census, installed_distributions
from ..errors import SnapshotInvalid
from ..libraries import hollow_distributions, ownership
from ..outcome import Outcome
from ..plan import plan_removal
from ..presence import PRESENCE_CACHE_FILE, PresenceCache
from ..probe import ProbeSettings, run_all
from ..recordcache import RECORD_CACHE_FILE, RecordCache
from ..requirements import collect
from ..results import ProbeRuns, RemovalResult, Result
from ..sizes import Weighing

if TYPE_CHECKING:
    from ..audit import AuditReport
    from ..doctor import DoctorReport


def check(ctx: Context, names: Sequence[str], *, strict: bool) -> RemovalResult:
    """The impact report of removing ``names``, changing nothing."""
    request = collect(names, (), ctx.cwd, ctx.environ)
    installed = installed_distributions(ctx.interpreter)
    removal = plan_removal(request.wanted, installed)
    result = RemovalResult(
        command="check",
        outcome=Outcome.CHECKED,
        python=str(ctx.python),
        removed=tuple(f"{n}=={installed[n].version}" for n in removal.remove),
        absent=removal.absent,
        expanded=removal.expanded,
        messages=(*request.notes, *removal.notes),
    )
    if not removal.remove:
        return replace(
            result, messages=(*result.messages, "none of the named packages is installed")
        )
    report = analyse(ctx, installed, removal.remove).report
    refused = strict and report.refused_by_strict
    messages: tuple[str, ...] = ()
    if report.unmet:
        messages = (
            "safe-uninstall would refuse this removal: it leaves the requirements above unmet "
            "(name their dependents too, or pass --allow-unmet)",
        )
    return replace(
        result,
        outcome=Outcome.REFUSED_STRICT if refused else result.outcome,
        impact=report,
        messages=messages,
    )


def probe_now(ctx: Context, configured: ProbeSettings, names: Sequence[str] = ()) -> Result:
    """Run the probes now. With ``names``: the probe that a removal of them would run, judged
    as its baseline would be (a derived probe's candidates that fail are dropped, and said);
    nothing is removed."""
    installed = installed_distributions(ctx.interpreter)
    messages: list[str] = []
    if names:
        request = collect(names, (), ctx.cwd, ctx.environ)  # as a removal reads them
        plan = plan_removal(request.wanted, installed)
        messages += [*request.notes, *plan.notes]
        messages += [f"not installed: {name}" for name in plan.absent]
        report = analyse(ctx, installed, plan.remove).report if plan.remove else None
        affected = report.affected if report is not None else ()
        settings = with_default(configured, installed, affected, plan.remove)
    else:
        settings = with_default(configured, installed, None)
    results = run_all(settings, ctx.interpreter, ctx.child_env())
    if names:
        results = [as_baseline(r) for r in results]
    passed = all(r.passed for r in results)
    return Result(
        command="probe",
        outcome=Outcome.PASSED if passed else Outcome.FAILED,
        python=str(ctx.python),
        probes=ProbeRuns(
            notes=(*settings.notes, *dropped_notes(results)),
            disabled=settings.disabled,
            planned=settings.probes,
            after=tuple(results),
        ),
        messages=tuple(messages),
    )


def doctor(ctx: Context) -> DoctorReport:
    """Everything broken in the environment at once, and the one command that repairs it."""
    # Here, not at the top: it loads packaging.requirements, 40 ms that check and probe skip.
    from ..doctor import doubled_findings, examine, plan_repair

    installed = installed_distributions(ctx.interpreter)
    index = library_index(ctx)
    owned = owned_files(ctx, installed)
    snapshots = loadable_snapshots(ctx)  # newest first
    libraries = (index, owned, ctx.interpreter.executable)
    presence = PresenceCache(ctx.store.root / PRESENCE_CACHE_FILE)
    hollow = hollow_distributions(owned, installed, presence)
    report = examine(installed, ctx.interpreter.markers, libraries, snapshots, hollow)
    report.findings += doubled_findings(installed, snapshots)
    index.save()
    if not ctx.read_only:
        presence.save()
    if report.healthy:
        return report
    view = installed_view(installed, owned, doubled=True, hollow=hollow)
    repair = plan_repair(report.findings, snapshots, view)
    if repair is None:
        return report
    if repair.snapshot is not None:
        report.repair_snapshot = repair.snapshot
        report.repair_command = ctx.suggest("rollback", repair.snapshot)
        report.repair_also = list(repair.also)
    else:
        report.repair_command = shell_line(ctx.backend.install_argv(repair.install, offline=False))
    return report


def audit(ctx: Context, configured: ProbeSettings, *, load: bool) -> AuditReport:
    """The whole environment in one report (audit.py); with ``load``, what a probe process
    really maps. Reads only: no lock is taken, nothing is written into the environment (the
    probe runs without writing bytecode)."""
    site_dirs = [str(s) for s in ctx.interpreter.site_dirs]
    # The walk of the site folders (the sizes) starts first, in a child process, and runs
    # beside all that follows; leaving the block stops it, whatever happened.
    with Weighing(site_dirs) as weighing:
        from .. import retention
        from ..audit import StashHolding, audit_environment, holders_of_libraries

        installed = installed_distributions(ctx.interpreter)
        index = library_index(ctx)
        # the RECORD cache read, never written: audit writes nothing
        owned = ownership(installed, RecordCache(ctx.store.root / RECORD_CACHE_FILE))
        notes: list[str] = []
        probe_paths: set[str] | None = None
        runs = None
        if load:
            holders = holders_of_libraries(index, owned)
            settings = with_default(configured, installed, holders)
            if configured.probes or configured.disabled:
                notes += settings.notes
            elif settings.probes:
                notes.append(
                    "--load: no probe is configured; the derived probe imports the modules and "
                    f"entry points of the {len(holders)} distributions that hold shared libraries"
                    + (", and runs torch's CUDA check" if "torch" in installed else "")
                )
            # No bytecode written into the environment by what the probe imports.
            env = {**ctx.child_env(), "PYTHONDONTWRITEBYTECODE": "1"}
            runs = run_all(settings, ctx.interpreter, env)
            maps = [r.libraries for r in runs if r.libraries is not None]
            if maps:
                probe_paths = {path for libraries in maps for path in libraries}
            else:
                notes.append(
                    "--load: no probe process said what it mapped (no Python probe ran, or this "
                    "system has no /proc/self/maps): the loaded copies are the library model's"
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
    ids = [i for i, snap in ctx.store.iter_loadable() if not isinstance(snap, SnapshotInvalid)]
    holdings = ctx.store.holdings(ids)
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
            "audit read may be half-changed; `safe-uninstall recover` finishes an interrupted one"
        )
    return replace(
        report,
        stash_bytes=holdings.held(ids),
        stashes=tuple(StashHolding(i, retention.alone(holdings, i)) for i in ids),  # newest first
        probe=tuple(runs) if runs is not None else None,
        mapped=None if probe_paths is None else tuple(sorted(probe_paths)),
        notes=(*report.notes, *notes),
    )
