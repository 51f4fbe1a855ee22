"""The report of an operation: a removal (uninstall, try), run, rollback, recover, and the
probe and check commands, which change nothing. What was planned, what breaks, the probes
around the change, a restore and its verification, what the snapshots keep, the outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safeuninstall.cli.render.impact import impact_lines
from safeuninstall.cli.render.paint import Paint, plain
from safeuninstall.cli.render.probes import derived_block, probe_lines
from safeuninstall.cli.render.snapshots import kept_lines
from safeuninstall.environment.sizes import count_text
from safeuninstall.probe.kinds import ProbeKind

if TYPE_CHECKING:
    from safeuninstall.operations.results import RemovalResult, Result, RollbackResult
    from safeuninstall.reports.needs import Cleanup
    from safeuninstall.transaction.transaction import Restored


def operation(
    result: Result, *, verbose: bool, quiet: bool, paint: Paint = plain, brief: bool = False
) -> str:
    """The report of an operation; ``brief`` (a terminal, without -v): a plain removal that
    went well in a few lines, as uv says it (anything else is reported whole)."""
    outcome = paint(result.outcome_text, _tone(result.exit_code))
    headline = f"{result.command}: {outcome}"
    if quiet:
        lines = [headline]
        if result.next_command:
            lines.append(f"to finish: {result.next_command}")
        return "\n".join(lines)
    summary = _plain_removal(result, headline) if brief else None
    if summary is not None:
        return summary
    removal, rollback = _removal(result), _rollback(result)
    runs, impact = result.probes, result.impact_report()
    lines = [f"environment: {result.environment or result.python}", *_plan_lines(result)]
    if impact is not None:
        lines += impact_lines(impact, verbose=verbose)
    lines += _probes_around_the_change(result, verbose, paint)
    if removal is not None:
        lines += [f"drift: {d.describe()}" for d in removal.drift]
        lines += [f"diagnosis: {f.describe()}" for f in removal.diagnosis]
    lines += _restore_lines(result.restored, paint)
    if rollback is not None and rollback.undo is not None:
        lines.append("putting the environment back as it was before:")
        lines += ["  " + line for line in _restore_lines(rollback.undo, paint)]
    lines += probe_lines("probe after the restore", runs.after_restore, verbose, paint)
    if runs.after_restore_skipped:
        lines.append(f"probe after the restore: {runs.after_restore_skipped}")
    lines += _cleanup_lines(removal.cleanup if removal is not None else None)
    lines += result.messages
    lines += kept_lines(result.kept)
    lines.append(headline)
    if result.next_command:
        said = "to finish the job, run"
        if result.outcome.id == "bisected":
            said = "to bring back the good versions of the culprits, keeping the rest"
        lines.append(f"{said}: {result.next_command}")
    return "\n".join(lines)


def _tone(exit_code: int) -> str:
    return "good" if exit_code == 0 else "warn" if exit_code == 3 else "bad"


def _removal(result: Result) -> RemovalResult | None:
    from safeuninstall.operations.results import RemovalResult  # loaded with any result

    return result if isinstance(result, RemovalResult) else None


def _rollback(result: Result) -> RollbackResult | None:
    from safeuninstall.operations.results import RollbackResult

    return result if isinstance(result, RollbackResult) else None


def _plan_lines(result: Result) -> list[str]:
    """What the operation set out to change: the snapshot, the one a plain rollback chose and
    those it passed over, what the names given matched, and what is removed or restored."""
    lines = [f"snapshot: {result.snapshot}"] if result.snapshot else []
    removal, rollback = _removal(result), _rollback(result)
    choice = rollback.choice if rollback is not None else None
    if choice is not None:
        lines += [f"passed over: {s.snapshot}: {s.reason}" for s in choice.skipped]
        if choice.snapshot is not None:
            lines.append(f"chosen: {choice.snapshot}: {choice.reason}")
        else:
            lines.append(choice.reason)
    if removal is not None:
        lines += [f"pattern {text!r} matches: {', '.join(ns)}" for text, ns in removal.expanded]
        lines += [f"not installed, skipped: {name}" for name in removal.absent]
        if removal.orphans:
            lines.append(f"orphans, removed too (--with-orphans): {', '.join(removal.orphans)}")
    plan = rollback.rollback_plan if rollback is not None else None
    if plan is not None:
        lines += [f"added since the snapshot, to remove: {name}" for name in plan.added]
        lines += [f"changed since the snapshot, to replace: {name}" for name in plan.changed]
        lines += [f"missing, to restore: {name}" for name in plan.missing]
    elif result.removed:
        # Nothing is removed when the removal is only shown, checked or refused.
        verb = "removing" if result.snapshot else "would remove"
        lines.append(f"{verb}: {', '.join(result.removed)}")
    return lines


def _probes_around_the_change(result: Result, verbose: bool, paint: Paint) -> list[str]:
    """Why these probes, a derived probe's candidates, and the runs before and after."""
    runs = result.probes
    lines = [f"probe: {note}" for note in runs.notes]
    for probe in runs.planned if result.command != "probe" or not runs.after else ():
        if probe.kind is ProbeKind.DERIVED:  # the probe command lists them with their results
            lines += derived_block(probe)
    lines += probe_lines("baseline probe", runs.baseline, verbose, paint)
    after = "probe" if result.command == "probe" else "probe after the change"
    lines += probe_lines(after, runs.after, verbose, paint, every=result.command == "probe")
    return lines


def _plain_removal(result: Result, headline: str) -> str | None:
    """What was removed in uv's form, the probe's verdict, the snapshot and how to undo it,
    the outcome; None where there is more to say (what breaks, a restore, a pattern's
    expansion, orphans, a cleanup): the whole report then."""
    removal = _removal(result)
    impact = removal.impact if removal is not None else None
    if (
        removal is None
        or result.command != "uninstall"
        or result.exit_code != 0
        or not (result.removed and result.snapshot)
        or result.restored is not None
        or removal.drift
        or removal.diagnosis
        or removal.cleanup is not None
        or removal.orphans
        or removal.expanded
        or (impact is not None and (impact.library_changes or impact.unmet))
    ):
        return None
    lines = [f"Uninstalled {count_text(len(result.removed), 'package')}"]
    lines += [f" - {pin}" for pin in result.removed]
    lines += [f"not installed, skipped: {name}" for name in removal.absent]
    lines += [f"probe: {r.probe.label} -- {r.summary()}" for r in result.probes.after]
    lines += result.messages
    start = result.kept.command if result.kept is not None else "safe-uninstall"
    lines.append(f"snapshot {result.snapshot}: `{start} rollback` puts it back")
    lines.append(headline)
    return "\n".join(lines)


def _restore_lines(restored: Restored | None, paint: Paint) -> list[str]:
    if restored is None:
        return []
    lines = []
    r = restored.report
    if r.from_stash:
        lines.append(f"restored from the stash: {', '.join(r.from_stash)}")
    if r.reinstalled:
        lines.append(f"reinstalled: {', '.join(r.reinstalled)}")
    if r.failed:
        lines.append(paint(f"could NOT be restored: {', '.join(r.failed)}", "bad"))
    lines += [f"note: {note}" for note in r.notes]
    v = restored.verification
    if v is not None and v.ok:
        lines.append(
            "verified: the installed set equals the snapshot; "
            + (
                "1 restored file matches its recorded sha256"
                if v.files_checked == 1
                else f"{v.files_checked} restored files match their recorded sha256"
            )
        )
    elif v is not None:
        lines.append(paint("verification FAILED: the environment differs from the snapshot", "bad"))
        lines += ["  " + line for line in v.describe()]
    return lines


def _cleanup_lines(cleanup: Cleanup | None) -> list[str]:
    """--keep-needed: what was kept and why, what was removed, what it cost."""
    if cleanup is None:
        return []
    # A candidate kept as inconclusive is not said to be needed: its reason says what it is.
    lines = [
        f"kept{'' if k.why == 'inconclusive' else ', needed'}: {k.name}: {k.reason}"
        for k in cleanup.kept
    ]
    if not (cleanup.trials or cleanup.removed):  # a dry run, or nothing left to try
        lines.append(f"to try: {', '.join(cleanup.tried) or 'nothing'}")
        return lines
    removed = ", ".join(cleanup.removed) or "nothing"
    lines.append(f"removed, nothing needs it: {removed}")
    n, runs = len(cleanup.tried), cleanup.probe_runs
    if n:
        again = f"; {cleanup.reruns} more to confirm a failure" if cleanup.reruns else ""
        lines.append(
            f"probe runs: {runs} for {n} tried (at most {cleanup.bound}; one by one: {n}){again}"
        )
    return lines
