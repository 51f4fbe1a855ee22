"""``check``, ``probe`` and ``doctor``: judge the environment, change nothing."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from safeuninstall.context.analysis import (
    analyse,
    installed_view,
    library_index,
    loadable_snapshots,
    owned_files,
    with_default,
)
from safeuninstall.context.context import Context
from safeuninstall.environment.backend import shell_line
from safeuninstall.environment.installed import installed_distributions
from safeuninstall.environment.requirements import collect
from safeuninstall.libraries.index import hollow_distributions
from safeuninstall.operations.endings.uninstall import CHECKED, FAILED, PASSED, REFUSED_STRICT
from safeuninstall.operations.results import ProbeRuns, RemovalResult, Result
from safeuninstall.plans.changes import plan_removal
from safeuninstall.probe.derived import as_baseline, dropped_notes
from safeuninstall.probe.runner import ProbeSettings, run_all
from safeuninstall.reports.doctor import (
    DoctorReport,
    Finding,
    doubled_findings,
    examine,
    plan_repair,
)


def check(ctx: Context, names: Sequence[str], *, strict: bool) -> RemovalResult:
    """The impact report of removing ``names``, changing nothing."""
    request = collect(names, (), ctx.cwd, ctx.environ)
    installed = installed_distributions(ctx.interpreter)
    removal = plan_removal(request.wanted, installed)
    result = RemovalResult(
        command="check",
        outcome=CHECKED,
        python=str(ctx.python),
        environment=ctx.where,
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
        outcome=REFUSED_STRICT if refused else result.outcome,
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
        outcome=PASSED if passed else FAILED,
        python=str(ctx.python),
        environment=ctx.where,
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
    installed = installed_distributions(ctx.interpreter)
    index = library_index(ctx)
    owned = owned_files(ctx, installed)
    snapshots = loadable_snapshots(ctx)  # newest first
    libraries = (index, owned, ctx.interpreter.executable)
    hollow = hollow_distributions(owned, installed)
    report = examine(installed, ctx.interpreter.markers, libraries, snapshots, hollow)
    report.findings += [
        # Without a snapshot to return to, the installer's own removal, aimed at this
        # environment as every command the tool prints is.
        f if f.snapshot else replace(f, command=shell_line(ctx.backend.uninstall_argv([f.what])))
        for f in doubled_findings(installed, snapshots)
    ]
    if _unfinished(ctx, report):
        return report
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
        argv = ctx.backend.install_argv(repair.install, offline=False, reinstall=repair.reinstall)
        report.repair_command = shell_line(argv)
        if repair.drop:  # one line, in that order: the uninstall deletes the shared files
            drop = shell_line(ctx.backend.uninstall_argv(repair.drop))
            report.repair_command = f"{drop} && {report.repair_command}"
    return report


def _unfinished(ctx: Context, report: DoctorReport) -> bool:
    """An operation's journal first: one under way (another process holds the environment's
    lock) leaves nothing to repair yet; one that died is repaired by ``recover``, which every
    other command asks for first (a rollback it named was refused)."""

    journal = ctx.journal()
    entry = journal.read()
    if entry is None:
        return False
    running = ctx.operation_running()
    report.findings.insert(0, Finding("running" if running else "unfinished", entry.describe(), ""))
    report.repair_command = None if running else journal.recover_command(entry, ctx.suggest)
    return True
