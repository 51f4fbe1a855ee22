"""``safe-uninstall PACKAGE...``: remove, probe, and restore everything in one batch if the
probe fails.

1. Under the lock: the installed set, what to remove, whether that leaves a requirement unmet
   (then no baseline begins: the removal is refused), the baseline probe begun (or taken over
   from the head start, or from the cache), the impact report, the probe derived from it.
2. ``--strict``, unmet requirements (unless ``--allow-unmet``) and ``--dry-run`` stop there,
   nothing changed.
3. The transaction: snapshot and stash, the baseline must pass, uv uninstalls, the probe
   judges; a failure, drift, a hollow neighbour, an error or an interrupt restores all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from safeuninstall.base.errors import InvalidInput, NotRestorable
from safeuninstall.context.baseline import HeadStart
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import (
    InstalledDistribution,
    census,
    easy_install_eggs,
    installed_distributions,
    without_metadata,
)
from safeuninstall.environment.legacy import DESCRIBED
from safeuninstall.environment.requirements import read_request
from safeuninstall.operations.endings.uninstall import NOTHING_TO_DO
from safeuninstall.operations.results import RemovalResult
from safeuninstall.operations.uninstall import keep_needed
from safeuninstall.operations.uninstall.removal import Attempt, Removal
from safeuninstall.options import COMMANDS, UninstallOptions
from safeuninstall.plans.changes import RemovalPlan, plan_removal
from safeuninstall.probe.runner import ProbeSettings
from safeuninstall.state.stash import legacy_refusal


def uninstall(
    ctx: Context,
    configured: ProbeSettings,
    options: UninstallOptions,
    early: HeadStart | None = None,
) -> RemovalResult:
    """Remove ``options.names``, judged by the probes; restore everything if they fail.

    ``early``: the baseline begun by ``baseline.head_start`` before the environment was
    read. It is taken over if it is the one this call would begin, else cancelled.
    """
    request = options.request or read_request(
        options.names, options.requirement_files, ctx.cwd, ctx.environ
    )
    ctx.refuse_externally_managed()
    with ctx.locked(on_wait=early.baseline.cancel if early else None) as waited:
        ctx.refuse_if_unfinished()
        before = census(ctx.interpreter)  # first: a change after it shows in a later census
        installed = installed_distributions(ctx.interpreter)
        plan = _without_empty_records(
            plan_removal(
                request.wanted, installed, commands=[c for c in COMMANDS if c != "uninstall"]
            ),
            installed,
        )
        for text, names in plan.expanded:  # said before anything happens
            ctx.emit("plan", f"pattern {text!r} matches: {', '.join(names)}")
        _refuse_legacy(ctx, installed, plan.remove)
        _refuse_what_the_tool_runs_on(ctx, installed, plan.remove)
        _refuse_absent_under_strict(options, plan)
        _refuse_without_metadata(ctx, plan)
        removal = Removal(ctx, options, (installed, before), plan)
        removal.messages += [*request.notes, *plan.notes, *_legacy_notes(ctx, installed, plan)]
        if options.with_orphans and plan.remove:
            removal.add_orphans()
            plan = removal.plan
        if options.keep_needed and plan.remove:
            keep_needed.plan(removal)
            if not removal.plan.remove:
                removal.messages.append(
                    "nothing to try: every candidate is needed (kept, each with its reason)"
                )
                return removal.result(NOTHING_TO_DO)
        ctx.refuse_deleting_the_interpreter([installed[n] for n in removal.plan.remove])
        if not plan.remove:
            if not request.wanted:
                removal.messages.append("nothing to do: no packages to uninstall")
            elif not plan.empty_record:
                removal.messages.append("nothing to do: none of the named packages is installed")
            return removal.result(NOTHING_TO_DO)
        if not removal.leaves_unmet(early):
            removal.begin_configured(configured, early, waited)
        try:
            stopped = removal.judge_before(configured)
            if stopped is not None:
                return stopped
            removal.begin_derived()
            return removal.apply(keep_needed.KeepNeeded if removal.cleanup is not None else Attempt)
        finally:
            removal.stop_baseline()  # no probe outlives the removal, whatever way it ends


def _without_empty_records(
    plan: RemovalPlan, installed: Mapping[str, InstalledDistribution]
) -> RemovalPlan:
    """A distribution whose RECORD lists no file is left alone, with a note: uv says it
    uninstalled it and removes nothing (pip: "No files were found to uninstall")."""
    empty = [name for name in plan.remove if _lists_nothing(installed[name])]
    if not empty:
        return plan
    notes = [
        f"{name}: its RECORD lists no file, so uv removes nothing of it; left as it is"
        for name in empty
    ]
    return msgspec.structs.replace(
        plan,
        remove=tuple(n for n in plan.remove if n not in empty),
        empty_record=tuple(empty),
        notes=(*plan.notes, *notes),
    )


def _lists_nothing(dist: InstalledDistribution) -> bool:
    try:
        if (dist.dist_info / "RECORD").stat().st_size > 4096:
            return False  # a RECORD of only blank lines is never this long
        return not dist.record()
    except OSError:  # missing or unreadable: the stash says so, before any change
        return False


def _refuse_absent_under_strict(options: UninstallOptions, plan: RemovalPlan) -> None:
    """With --strict, a name that is not installed is an error (a job's typo), not a skip."""
    if options.strict and plan.absent:
        hints = "".join(f"; {note}" for note in plan.notes if "did you mean" in note)
        raise InvalidInput(
            f"--strict: not installed: {', '.join(plan.absent)}{hints}; nothing was removed"
        )


def _refuse_without_metadata(ctx: Context, plan: RemovalPlan) -> None:
    """A name that only a dist-info folder without METADATA carries: uv removes that folder
    and what its RECORD lists, but a snapshot keeps distributions, and this one cannot be
    read as one (its version, its requirements); nothing is removed, and the message says how
    to remove it without the safety net."""
    found = without_metadata(ctx.interpreter, plan.absent) if plan.absent else {}
    if not found:
        return
    folders = "; ".join(f"{name}: {folder} has no METADATA" for name, folder in found.items())
    raise NotRestorable(
        f"{folders}: uv removes such a folder by its name, but without METADATA it is no "
        "distribution a snapshot can keep and give back; nothing was removed. To remove it "
        f"without that safety net: uv pip uninstall --python {ctx.python} {' '.join(found)}"
    )


def _refuse_legacy(
    ctx: Context, installed: Mapping[str, InstalledDistribution], remove: Sequence[str]
) -> None:
    """A legacy install (legacy.py) is removed like any other where its removal can be undone;
    where uv refuses it, would stop half way, or would delete what a stash cannot give back,
    nothing is removed."""
    refused = {
        name: refusal
        for name in remove
        if (refusal := legacy_refusal(installed[name], ctx.backend.name)) is not None
    }
    if not refused:
        return
    message = "; ".join(r.message for r in refused.values())
    if all(r.uv_removes_it for r in refused.values()):
        message += (
            ". To remove it without that safety net: "
            f"uv pip uninstall --python {ctx.python} {' '.join(refused)}"
        )
    raise NotRestorable(message)


def _refuse_what_the_tool_runs_on(
    ctx: Context, installed: Mapping[str, InstalledDistribution], remove: Sequence[str]
) -> None:
    """In the environment the tool runs from, what it requires (click, msgspec...) is removed
    only with the tool itself: without them it cannot start, so no rollback, recover or
    restore could undo the removal (the probe, which imports the user's packages, passes).
    --allow-unmet does not change that: it lets the probe judge, and nothing would be left to
    judge with."""
    if "safe-uninstall" in remove:
        return  # the tool goes with them: what the user asked
    runs_on = ctx.runs_on(installed)
    needed = [name for name in remove if name in runs_on]
    if not needed:
        return
    raise NotRestorable(
        f"safe-uninstall runs from this environment and needs {', '.join(needed)}: without "
        f"{'it' if len(needed) == 1 else 'them'} it cannot start, so nothing could roll the "
        "removal back; nothing was removed. Run safe-uninstall from an environment of its own, "
        f"with --python {ctx.python}, or name safe-uninstall too to remove it with them"
    )


def _legacy_notes(
    ctx: Context, installed: Mapping[str, InstalledDistribution], plan: RemovalPlan
) -> list[str]:
    """What a person should know of the legacy installs named: how uv removes each, what its
    top_level.txt lists that uv skips, and an easy_install egg that uv does not list."""
    notes = []
    for name in plan.remove:
        dist = installed[name]
        if not dist.legacy:
            continue
        legacy = dist.legacy_removal()
        count = len(legacy.files)
        how = f"{dist.name} {dist.version} is {DESCRIBED[dist.layout]}: uv deletes {count} " + (
            "file" if count == 1 else "files"
        )
        if legacy.pth_line is not None:
            how += " and takes its line out of easy-install.pth"
        notes.append(how + "; the snapshot keeps them, hashed")
        notes += [
            f"{dist.name}: top_level.txt lists {entry!r}, which is no top-level name: uv "
            "skips it, and so does the snapshot"
            for entry in legacy.skipped
        ]
    eggs = easy_install_eggs(ctx.interpreter) if plan.absent else {}
    notes += [
        f"{name}: {eggs[name]} is an easy_install egg, which uv neither lists nor removes "
        f"(pip does: {ctx.python} -m pip uninstall {name})"
        for name in plan.absent
        if name in eggs
    ]
    return notes
