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

import heapq
import os
from collections.abc import Mapping, Sequence

import msgspec

from safeuninstall.base.errors import (
    BaselineProbeFailed,
    EnvironmentChanged,
    Interrupted,
    InterruptedAfterChange,
    InvalidInput,
    NotRestorable,
)
from safeuninstall.base.outcome import Cause, Ending, Operation, Outcome
from safeuninstall.environment.installed import (
    InstalledDistribution,
    RequirementIndex,
    census,
    census_change,
    easy_install_eggs,
    ensure_writable,
    installed_distributions,
    without_metadata,
)
from safeuninstall.environment.legacy import DESCRIBED
from safeuninstall.environment.requirements import read_request
from safeuninstall.environment.sizes import count_text
from safeuninstall.judgement.bisection import bound, search
from safeuninstall.judgement.derived import (
    after_settings,
    as_baseline,
    dropped_notes,
    judged_after,
    to_the_end,
)
from safeuninstall.judgement.doctor import Finding, diagnose
from safeuninstall.judgement.impact import removal_closure, unmet_in
from safeuninstall.judgement.kinds import ProbeKind
from safeuninstall.judgement.libraries import Drift
from safeuninstall.judgement.needs import (
    Cleanup,
    Needed,
    Trial,
    judge,
    loaded_by_probe,
    orphans,
    required,
    together,
)
from safeuninstall.judgement.plan import NEVER_MATCHED, RemovalPlan, plan_removal
from safeuninstall.judgement.probe import ProbeResult, ProbeSettings, run_all, start
from safeuninstall.operations.results import ProbeRuns, RemovalResult
from safeuninstall.options import COMMANDS, UninstallOptions
from safeuninstall.session import baseline
from safeuninstall.session.analysis import (
    Analysis,
    analyse,
    failure_text,
    library_index,
    loadable_snapshots,
    owned_files,
    requirements_of,
    with_default,
)
from safeuninstall.session.baseline import (
    BaselineCache,
    Begun,
    DerivedPlans,
    HeadStart,
    fingerprint,
)
from safeuninstall.session.context import Context
from safeuninstall.state.snapshot import Snapshot
from safeuninstall.state.stash import legacy_refusal
from safeuninstall.transaction.transaction import Restored, SnapshotSpec, Transaction


def uninstall(
    ctx: Context,
    configured: ProbeSettings,
    options: UninstallOptions,
    early: HeadStart | None = None,
) -> RemovalResult:
    """Remove ``options.names``, judged by the probes; restore everything if they fail.

    ``early``: the baseline begun by ``baseline.head_start`` before the operations were
    imported. It is taken over if it is the one this call would begin, else cancelled.
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
        removal = _Removal(ctx, options, (installed, before), plan)
        removal.messages += [*request.notes, *plan.notes, *_legacy_notes(ctx, installed, plan)]
        if options.with_orphans and plan.remove:
            removal.add_orphans()
            plan = removal.plan
        if options.keep_needed and plan.remove:
            removal.keep_needed()
            if not removal.plan.remove:
                removal.messages.append(
                    "nothing to try: every candidate is needed (kept, each with its reason)"
                )
                return removal.result(Outcome.NOTHING_TO_DO)
        if not plan.remove:
            if not request.wanted:
                removal.messages.append("nothing to do: no packages to uninstall")
            elif not plan.empty_record:
                removal.messages.append("nothing to do: none of the named packages is installed")
            return removal.result(Outcome.NOTHING_TO_DO)
        if not removal.leaves_unmet(early):
            removal.begin_configured(configured, early, waited)
        try:
            stopped = removal.judge_before(configured)
            if stopped is not None:
                return stopped
            removal.begin_derived(early, waited)
            return removal.apply()
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


class _Removal:
    """One removal's state, from the plan to its result."""

    def __init__(
        self,
        ctx: Context,
        options: UninstallOptions,
        read: tuple[Mapping[str, InstalledDistribution], frozenset[str]],
        plan: RemovalPlan,
    ) -> None:
        """``read``: the installed set, and the census taken just before it was read."""
        self.ctx = ctx
        self.options = options
        self.installed, self.census = read
        self.plan = plan
        # Before anything reads them: a RECORD rewritten after this (a reinstall of the same
        # version, which the census does not see) stops the removal before uv reads it.
        self.records = _record_stats(self.installed, plan.remove)
        self.cache = BaselineCache(ctx.store.root)
        self.begun: Begun | None = None
        self.fingerprint = ""
        self.analysis: Analysis | None = None
        self.requirements: RequirementIndex | None = None
        self.settings = ProbeSettings()
        self.after = ProbeSettings()  # what runs after the change (derived.after_settings)
        self.messages: list[str] = []
        self.cleanup: Cleanup | None = None  # --keep-needed
        self.orphans: tuple[str, ...] = ()  # --with-orphans

    def add_orphans(self) -> None:
        """--with-orphans: the dependencies that the removal leaves unrequired, unrequested
        and unloaded join it, listed before anything happens; judged like every removal."""

        ctx = self.ctx
        self.requirements = self.requirements or requirements_of(self.ctx, self.installed)
        index = library_index(ctx)
        markers = ctx.interpreter.markers
        # Never an orphan: the tool and uv (as patterns never match them), and in the tool's
        # own environment what it runs on: removing that would break the restore itself.
        spare = set(NEVER_MATCHED) | ctx.runs_on(self.installed)
        found = orphans(
            self.installed,
            markers,
            self.plan.remove,
            self.requirements,
            (index, owned_files(ctx, self.installed)),
            spare=spare,
        )
        index.save()
        ctx.emit("plan", f"orphans, removed too: {', '.join(found.found) or 'none'}")
        if found.spared:
            spared = (
                f"orphans left installed: {', '.join(found.spared)} (the tool, uv and, in the "
                "tool's own environment, what it runs on are never added: name them to remove "
                "them)"
            )
            ctx.emit("plan", spared)
            self.messages.append(spared)
        self.orphans = found.found
        self.plan = msgspec.structs.replace(self.plan, remove=(*self.plan.remove, *found.found))
        self.records.update(_record_stats(self.installed, found.found))

    def keep_needed(self) -> None:
        """--keep-needed: the candidates that metadata or the library model shows as needed
        are kept, with their reasons; the plan is what is left to try."""

        ctx, candidates = self.ctx, self.plan.remove
        self.requirements = self.requirements or requirements_of(self.ctx, self.installed)
        index = library_index(ctx)
        kept, tried = judge(
            self.installed,
            ctx.interpreter.markers,
            candidates,
            self.requirements,
            (index, owned_files(ctx, self.installed)),
        )
        index.save()
        for needed in kept:
            ctx.emit("plan", f"kept, needed: {needed.name}: {needed.reason}")
        ctx.emit("plan", f"to try: {', '.join(tried) or 'nothing'}")
        self.cleanup = Cleanup(candidates=candidates, kept=kept, tried=tried, removed=())
        self.plan = msgspec.structs.replace(self.plan, remove=tried)

    def result(self, outcome: Outcome) -> RemovalResult:
        return RemovalResult(
            command="uninstall",
            outcome=outcome,
            python=str(self.ctx.python),
            environment=self.ctx.where,
            removed=tuple(f"{n}=={self.installed[n].version}" for n in self.plan.remove),
            absent=self.plan.absent,
            expanded=self.plan.expanded,
            impact=self.analysis.report if self.analysis else None,
            cleanup=self.cleanup,
            orphans=self.orphans,
            probes=ProbeRuns(notes=self.settings.notes, planned=self.settings.probes),
            messages=tuple(self.messages),
        )

    # -- before any change ---------------------------------------------------------------

    def leaves_unmet(self, early: HeadStart | None) -> bool:
        """Whether the removal leaves a requirement unmet, and so will be refused: asked before
        any baseline begins, so that a refused removal runs no probe (a head start is stopped
        at once)."""
        if self.options.allow_unmet:
            return False
        self.requirements = requirements_of(self.ctx, self.installed)  # the impact report's too
        markers = self.ctx.interpreter.markers
        if not unmet_in(self.requirements, self.installed, markers, self.plan.remove):
            return False
        if early is not None:
            early.baseline.cancel()
        return True

    def begin_configured(
        self, configured: ProbeSettings, early: HeadStart | None, waited: bool
    ) -> None:
        """Configured probes are known now: their baseline starts before the impact report,
        so it overlaps the report, the snapshot and the stash."""
        if not configured.probes:
            return
        ctx = self.ctx
        self.fingerprint = fingerprint(ctx.interpreter, ctx.environ)
        self.begun = baseline.take_over(early, ctx, configured, self.fingerprint, waited)
        if self.begun is None and not (self.options.dry_run or self.options.strict):
            self.begun = baseline.begin(
                configured, ctx, self.cache, self.fingerprint, fresh=self.options.fresh_baseline
            )

    def judge_before(self, configured: ProbeSettings) -> RemovalResult | None:
        """The impact report and the probe it implies; a result when the removal stops here
        (--strict, --dry-run), None when it goes ahead."""
        self.analysis = analyse(self.ctx, self.installed, self.plan.remove, self.requirements)
        report = self.analysis.report
        self.settings = with_default(configured, self.installed, report.affected, report.removed)
        if self.options.strict and report.refused_by_strict:
            self.messages.append("--strict: the impact report finds breakage or drift")
            return self.result(Outcome.REFUSED_STRICT)
        if report.unmet and not self.options.allow_unmet:
            self.messages += self._refused_unmet()
            return self.result(Outcome.REFUSED_UNMET)
        if report.unmet:
            judged_by = (
                "nothing judges the removal (--no-probe)"
                if self.settings.disabled
                else "the probe judges the removal"
            )
            self.messages.append(
                f"--allow-unmet: {_requirements(len(report.unmet))} left unmet; {judged_by}"
            )
        if self.options.dry_run:
            return self.result(Outcome.DRY_RUN)
        ensure_writable(self.ctx.interpreter)
        self.ctx.backend.check_available()
        return None

    def _refused_unmet(self) -> list[str]:
        """Why the removal is refused, and the two commands that would go ahead."""
        assert self.analysis is not None
        unmet = self.analysis.report.unmet
        dependents = sorted({u.dependent for u in unmet})
        names = self.plan.remove
        markers = self.ctx.interpreter.markers
        closure = removal_closure(self.installed, markers, names, self.requirements)
        verdict = "--dry-run: the removal would be refused" if self.options.dry_run else "refused"
        return [
            f"{verdict}: it leaves {_requirements(len(unmet))} of {', '.join(dependents)} "
            "unmet (listed above); nothing was removed",
            "to remove the dependents too: " + _removal_command(self.ctx, closure),
            "to remove only "
            + ", ".join(names)
            + ", the probe judging it: "
            + _removal_command(self.ctx, names, "--allow-unmet"),
        ]

    def begin_derived(self, early: HeadStart | None, waited: bool) -> None:
        """The derived probe is known from the impact report: its baseline begins now, unless
        the head start began this very one (a plan of an earlier derivation, DerivedPlans)."""
        if self.begun is not None or not self.settings.probes:
            if early is not None and early.baseline is not self.begun:
                early.baseline.cancel()  # a plan, and nothing (or configured probes) now
            return
        ctx = self.ctx
        self.fingerprint = self.fingerprint or fingerprint(ctx.interpreter, ctx.environ)
        self.begun = baseline.take_over(early, ctx, self.settings, self.fingerprint, waited)
        if self.begun is not None:
            return  # begun from the plan of this very probe: it is stored already
        self.begun = baseline.begin(
            self.settings, ctx, self.cache, self.fingerprint, fresh=self.options.fresh_baseline
        )
        if any(p.kind is ProbeKind.DERIVED for p in self.settings.probes):
            DerivedPlans(ctx.store.root).put(self.options, ctx.interpreter, self.settings)

    def stop_baseline(self) -> None:
        if self.begun is not None:
            self.begun.cancel()

    def _refuse_changed_by_others(self) -> None:
        """The last look before anything is removed: the environment the snapshot holds and
        the baseline judged must still be the one there."""
        there = census(self.ctx.interpreter)
        changes = [census_change(self.census, there)]
        now = _record_stats(self.installed, self.plan.remove)
        # A dist-info folder that went is the census's to say; one still there with another
        # RECORD is what the census can't see.
        rewritten = [
            name
            for name, key in now.items()
            if key != self.records.get(name) and str(self.installed[name].dist_info) in there
        ]
        if rewritten:
            changes.append(f"RECORD rewritten: {', '.join(rewritten)}")
        change = "; ".join(c for c in changes if c)
        if change:
            raise EnvironmentChanged(
                "another process changed the environment while this removal prepared it "
                f"({change}); nothing was removed: run it again"
            )

    def expected_after(self, removed: Sequence[str] | None = None) -> frozenset[str]:
        """The census once the removal is done (of ``removed``, default the plan's): the same
        less the removed dist-info folders."""
        names = self.plan.remove if removed is None else removed
        gone = {str(self.installed[name].dist_info) for name in names}
        return self.census - gone

    def _baseline_results(self) -> list[ProbeResult]:
        """The baseline must pass: else the probe cannot judge this removal. (A derived probe
        passes as a baseline when it ran: what fails in it is dropped, see derived.py.)"""
        running = self.begun.running if self.begun is not None else None
        if running is not None and not running.finished:  # said: the wait can be long
            self.ctx.emit("baseline", "baseline probe running: waiting for it to finish")
            # Nothing else to do meanwhile: the diagnosis of a failing probe imports doctor
            # and packaging's requirement parser, 15-80 ms between that probe and its restore.
        ran = self.begun.results() if self.begun is not None else []
        results = [as_baseline(r) for r in ran]
        if not all(r.passed for r in results):
            raise BaselineProbeFailed(
                "the probe already fails before any change, so it cannot judge this removal",
                detail=failure_text(results),
            )
        if self.begun is not None and self.begun.running is not None:
            self.cache.put(self.settings, self.fingerprint, ran)
        # Stopping at the first failure leaves out what a kept environment still breaks.
        self.after = after_settings(
            self.settings, results, stop_at_failure=not self.options.keep_on_failure
        )
        return results

    # -- the change ----------------------------------------------------------------------

    def apply(self) -> RemovalResult:
        assert self.analysis is not None
        txn = Transaction(self.ctx, "uninstall")
        try:
            with txn:
                spec = SnapshotSpec(
                    operation="uninstall",
                    stash=self.plan.remove,
                    removed=self.plan.remove,
                    shared=self.analysis.owned.shared_paths(of=self.plan.remove),
                    # Kept aside (hard links), they record that the state before had them: a
                    # recover leaves them. (A name it removes is refused when doubled.)
                    doubled=[
                        n
                        for n, d in self.installed.items()
                        if d.doubled and n not in self.plan.remove
                    ],
                )
                snap = txn.snapshot_before(self.installed, spec)
                baseline_results = self._baseline_results()
                self._refuse_changed_by_others()
                kind = _Bisecting if self.cleanup is not None else _Attempt
                return kind(self, txn, snap, baseline_results).run()
        except KeyboardInterrupt:
            if txn.changed:
                raise InterruptedAfterChange(
                    "interrupted after the uninstall had started, outside the steps that wait "
                    "for an interrupt"
                ) from None
            raise Interrupted(txn.unchanged("interrupted before anything was removed")) from None
        finally:
            self.stop_baseline()


def _record_stats(
    installed: Mapping[str, InstalledDistribution], names: Sequence[str]
) -> dict[str, tuple[int, ...] | None]:
    """The stat of each RECORD (None where there is none to stat): what uv will read to know
    what to delete, and what the snapshot read to know what to keep. Not its ctime: the stash
    hard-links it, which sets that."""
    found: dict[str, tuple[int, ...] | None] = {}
    for name in names:
        try:
            info = os.stat(installed[name].dist_info / "RECORD")
            found[name] = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        except OSError:
            found[name] = None
    return found


def _requirements(count: int) -> str:
    return f"{count} requirement{'' if count == 1 else 's'}"


def _removal_command(ctx: Context, names: Sequence[str], *flags: str) -> str:
    """The command that removes ``names``; a name that is also a subcommand's needs
    ``uninstall`` named first."""
    command = ("uninstall",) if any(name in COMMANDS for name in names) else ()
    return ctx.suggest(*command, *flags, *names)


class _Attempt:
    """The removal under way: uninstall, probe, and the restore when it must be undone."""

    def __init__(
        self, removal: _Removal, txn: Transaction, snap: Snapshot, baseline: list[ProbeResult]
    ) -> None:
        self.removal = removal
        self.ctx = removal.ctx
        self.txn = txn
        self.snap = snap
        self.runs = ProbeRuns(
            notes=(*removal.settings.notes, *dropped_notes(baseline)),
            disabled=removal.settings.disabled,
            planned=removal.settings.probes,
            baseline=tuple(baseline),
        )
        self.ran: list[ProbeResult] = []
        self.drift: tuple[Drift, ...] = ()
        self.diagnosis: tuple[Finding, ...] = ()

    def run(self) -> RemovalResult:
        """Uninstall and judge; on failure, error or interrupt, restore."""
        messages = self.removal.messages
        try:
            failed = self.txn.uninstall(self.snap.removed)
            changed = None
            if failed is None:  # the environment re-read once: what uv left, what others did
                now = census(self.ctx.interpreter)
                failed = self._still_installed(now)
                changed = None if failed else self._changed_by_others(now)
            if failed is not None:
                messages.append(failed)
                cause = Cause.FAILED
            elif changed is not None:
                messages.append(changed)
                cause = Cause.CONCURRENT
            else:
                judged = self._judge()
                if judged is None:
                    return self._result(Outcome.REMOVED)
                if isinstance(judged, Outcome):
                    return self._kept()
                cause = judged
        except KeyboardInterrupt:
            messages.append("interrupted: restoring what was removed")
            cause = Cause.INTERRUPTED
        except Exception as err:  # whatever broke, what was removed comes back first
            messages.append(f"unexpected error after the uninstall started: {err!r}")
            cause = Cause.ERROR
        return self._restore(cause)

    def _result(
        self, outcome: Outcome, restored: Restored | None = None, next_command: str | None = None
    ) -> RemovalResult:
        return msgspec.structs.replace(
            self.removal.result(outcome),
            snapshot=self.snap.id,
            probes=self.runs,
            drift=self.drift,
            diagnosis=self.diagnosis,
            restored=restored,
            next_command=next_command,
        )

    def _gone(self) -> Sequence[str]:
        """What is removed now, of what the snapshot stashed."""
        return self.snap.removed

    def _still_installed(self, now: frozenset[str], names: Sequence[str] = ()) -> str | None:
        """What the installer left of what it said it removed (``names``, default all):
        dist-info folders still in the census ``now``."""
        installed = self.removal.installed
        left = [
            name for name in names or self.snap.removed if str(installed[name].dist_info) in now
        ]
        if not left:
            return None
        return (
            f"{self.ctx.backend.name} reported success, but {', '.join(left)} is still "
            "installed: nothing of it was removed"
        )

    def _changed_by_others(self, now: frozenset[str] | None = None) -> str | None:
        """What another process changed since the removal began (by the census ``now``, else
        one taken now), or None: a probe's verdict on an environment that is not the one the
        removal left judges nothing."""
        now = census(self.ctx.interpreter) if now is None else now
        change = census_change(self.removal.expected_after(self._gone()), now)
        if not change:
            return None
        return f"another process changed the environment during the removal ({change})"

    def _judge(self) -> Cause | Outcome | None:
        """None when the removal stands; probe-failed-kept when it failed and stays on
        request; else the cause to restore for: hollow, probe failed or drift."""
        removal, messages = self.removal, self.removal.messages
        assert removal.analysis is not None
        self.txn.probing()
        hollow = removal.analysis.left_hollow()
        if hollow:
            messages.append(
                "the removal deleted files that stay listed by "
                + ", ".join(hollow)
                + " (shared paths): they are installed but hollow"
            )
            return Cause.HOLLOW
        after, env_print = self._probe()
        changed = self._changed_by_others()
        if changed is not None:
            messages.append(changed + "; the probe judged another environment")
            return Cause.CONCURRENT
        drifted = removal.analysis.drift(self.runs.baseline, after)
        self.drift = tuple(drifted)
        self.runs = msgspec.structs.replace(self.runs, after=tuple(after))
        passed = all(r.passed for r in after)
        if any(r.probe.kind is ProbeKind.PYTHON and r.libraries is None for r in after):
            messages.append(
                "which libraries the probe loaded is unknown here (no /proc/self/maps): "
                "drift detection is off, only the probe's exit code counts"
            )
        if not passed:
            self.diagnosis = tuple(self._diagnose(after))
        elif drifted and not removal.options.allow_drift:
            messages.append(
                "the probe passed, but on other copies of libraries (drift); "
                "--allow-drift accepts that"
            )
        else:
            removal.cache.put(removal.after, env_print, self.ran)
            if not after:  # no probe ran for the hasher to overlap: see Transaction.stop_hashing
                self.txn.stop_hashing()
            self.txn.finish(Outcome.REMOVED)
            return None
        if removal.options.keep_on_failure:
            return Outcome.PROBE_FAILED_KEPT
        return Cause.PROBE_FAILED if not passed else Cause.DRIFT

    def _probe(self) -> tuple[list[ProbeResult], str]:
        """The probe after the removal, and the fingerprint of the environment it ran in,
        taken while it runs (a passing probe is cached as that environment's baseline)."""
        ctx, settings = self.ctx, self.removal.after
        if not settings.probes:
            return [], ""
        ctx.emit("probe", "probe running: " + ", ".join(p.label for p in settings.probes))
        running = start(settings, ctx.interpreter, ctx.child_env())
        try:
            env_print = fingerprint(ctx.interpreter, ctx.environ)
            ran = running.results()
        except BaseException:
            running.cancel()
            raise
        self.ran = ran  # as run: the new environment's baseline, if the removal stands
        after = judged_after(self.runs.baseline, ran)
        verdict = "passed" if all(r.passed for r in after) else "FAILED"
        ctx.emit("probe", f"probe after the removal: {verdict}")
        return after, env_print

    def _diagnose(self, after: Sequence[ProbeResult]) -> list[Finding]:
        outputs = (o for r in after if not r.passed for o in r.failure_outputs())
        return diagnose(outputs, [self.snap, *loadable_snapshots(self.ctx)])

    def _kept(self) -> RemovalResult:
        self.txn.finish(Outcome.PROBE_FAILED_KEPT)
        return self._result(
            Outcome.PROBE_FAILED_KEPT, next_command=self.ctx.suggest("rollback", self.snap.id)
        )

    def _restore(self, cause: Cause) -> RemovalResult:
        """Bring back everything the removal took in one batch, verify, probe again."""
        txn, snap, removal = self.txn, self.snap, self.removal
        assert removal.analysis is not None
        entries = [e for name in self._gone() if (e := snap.package(name)) is not None]
        with txn.interrupts_deferred():
            restored = txn.restore(
                snap, entries, removal.analysis.report.hollow, offline=removal.options.offline
            )
            next_command: str | None = self._recover()
            if restored.verification is None:  # an error of ours stopped it half way
                outcome = Outcome.ended(Operation.UNINSTALL, cause, Ending.INCOMPLETE)
                removal.messages.append(_stopped(restored))
            else:
                self.runs = self._probe_after_restore(restored)
                ended = Ending.RESTORED if restored.ok else Ending.INCOMPLETE
                outcome = Outcome.ended(Operation.UNINSTALL, cause, ended)
                next_command = None if restored.ok else next_command
                if restored.ok and not all(r.passed for r in self.runs.after_restore):
                    # Exit 5, not 4: the environment is the snapshot again, proven by hashes.
                    outcome = Outcome.RESTORED_PROBE_FAILS
                    removal.messages.append(
                        "the environment equals the snapshot again, yet the probe fails after "
                        "the restore: it does not judge this environment reliably"
                    )
            # Unverified, the journal stays: other commands are refused until ``recover``.
            txn.finish(outcome, keep_journal=not restored.ok)
        if txn.interrupted:
            removal.messages.append("an interrupt arrived during the restore; it finished first")
        return self._result(outcome, restored=restored, next_command=next_command)

    def _recover(self) -> str:
        return self.ctx.suggest("recover")

    def _probe_after_restore(self, restored: Restored) -> ProbeRuns:
        """After a verified restore, the probe runs again, unless the restore is proven to be,
        byte for byte, the environment the baseline passed in."""
        removal, runs, ctx = self.removal, self.runs, self.ctx
        settings = to_the_end(removal.after)  # a failure here is a surprise: say all of it
        if not restored.ok or not settings.probes:
            return runs
        assert restored.verification is not None
        proven = (
            not restored.report.reinstalled
            and not removal.options.probe_after_restore
            and all(r.passed and not r.cached for r in runs.baseline)
        )
        final: tuple[ProbeResult, ...] = ()
        skipped = None
        if proven:
            # Every restored file came from a hash-checked stash and the installed set equals
            # the snapshot. Running the probe again would prove nothing more and cost a run.
            skipped = (
                "not run again: the restore is proven identical to the state the baseline "
                f"passed in ({count_text(restored.verification.files_checked, 'file')} "
                "hash-checked, the "
                "installed set equal to the snapshot); --probe-after-restore runs it anyway"
            )
        else:
            ran = run_all(settings, ctx.interpreter, ctx.child_env())
            final = tuple(judged_after(runs.baseline, ran))
        env_print = fingerprint(ctx.interpreter, ctx.environ)
        if final:
            removal.cache.put(settings, env_print, final)
        else:
            removal.cache.put(removal.settings, env_print, runs.baseline)
        return msgspec.structs.replace(runs, after_restore=final, after_restore_skipped=skipped)


def _stopped(restored: Restored) -> str:
    return (
        f"the restore stopped on an unexpected error ({restored.error}): the environment is "
        "only partly restored"
    )


class _Stop(Exception):
    """The search can't go on (the installer failed, another process changed the environment,
    a partial restore was not verified): everything is restored, for ``cause``."""

    def __init__(self, cause: Cause, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


class _Bisecting(_Attempt):
    """--keep-needed: bisection.search finds the largest subset of the candidates tried whose
    removal passes (its first run removes them all, or for some counts a part of them), each
    tried before what it requires (``_search_order``).
    Between two runs the environment is moved by restoring from this transaction's own stash
    (verified against the snapshot less what stays removed) and by uninstalling; one snapshot
    for it all, so one ``rollback`` undoes the whole cleanup. An interrupt, an error or a
    failing final run restores everything: the environment ends in the final state proven by
    a passing probe, or in the snapshot's."""

    def __init__(
        self, removal: _Removal, txn: Transaction, snap: Snapshot, baseline: list[ProbeResult]
    ) -> None:
        super().__init__(removal, txn, snap, baseline)
        self.state: frozenset[str] = frozenset()  # removed now
        self.trials: list[Trial] = []
        self.found_needed: list[Needed] = []  # by the baseline's load map, then the search
        self.tried: tuple[str, ...] = snap.removed
        self.units = 0  # what the search moves: candidates sharing a file go together
        self.sharing: dict[str, tuple[str, ...]] = {}  # the candidates sharing files, together
        self.needed_units = 0
        self.last: tuple[frozenset[str], bool] | None = None  # the last probe run's state

    def _loaded_by_baseline(self) -> list[Needed]:
        """Candidates whose files the baseline probe loaded: removing one changes what the
        probe loads, which fails the removal unless --allow-drift; known without a run. And
        what those need in turn (their requirements, their libraries, files they list), by
        the static evidence judge weighed the others with."""
        removal = self.removal
        if removal.options.allow_drift or removal.analysis is None:
            return []
        libraries = [p for r in self.runs.baseline for p in r.libraries or ()]
        analysis = removal.analysis
        found = loaded_by_probe(self.snap.removed, libraries, analysis.owned, removal.installed)
        if not found:
            return []
        assert removal.requirements is not None
        more, _ = judge(
            removal.installed,
            self.ctx.interpreter.markers,
            [name for name in self.snap.removed if name not in found],
            removal.requirements,
            (analysis.index, analysis.owned),
            staying={**self._kept_before(), **found},
        )
        found.update((needed.name, needed) for needed in more)
        return [found[name] for name in self.snap.removed if name in found]

    def _kept_before(self) -> dict[str, Needed]:
        """The candidates kept so far: by the static evidence, the load map, the search."""
        cleanup = self.removal.cleanup
        kept = [*(cleanup.kept if cleanup is not None else ()), *self.found_needed]
        return {needed.name: needed for needed in kept}

    def _with_requirements_kept(
        self, removed: frozenset[str], units: Mapping[str, tuple[str, ...]]
    ) -> tuple[frozenset[str], dict[str, Needed]]:
        """What a run that sets out to remove ``removed`` removes: not a candidate that one
        staying requires (transitively), nor, with it, the others of its unit. (That, and
        those kept, each with its reason.)"""
        removal = self.removal
        assert removal.requirements is not None
        unit_of = {name: unit for unit in units.values() for name in unit}
        kept: dict[str, Needed] = {}
        gone = removed
        while True:
            found, _ = required(
                removal.installed,
                self.ctx.interpreter.markers,
                [name for name in self.snap.removed if name in gone],
                removal.requirements,
                {**self._kept_before(), **kept},
            )
            if not found:
                return gone, kept
            kept.update(found)
            for name in found:
                for other in unit_of.get(name, ()):
                    if other not in kept:
                        kept[other] = Needed(
                            other,
                            (
                                f"it lists files in common with {name} (kept): alone, its removal "
                                f"would leave {name} hollow",
                            ),
                            "shared-file",
                        )
            gone = gone - kept.keys()

    def _search_order(self, units: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """``units`` in the order the search takes them: each before the units it keeps by
        staying (what it requires, transitively), and those that keep each other (a cycle of
        requirements) merged into one, since none of them can go without the others.

        The search tries the ones proven removable plus a first part of the others. In this
        order nothing after that part keeps a unit of it: a run removes all it sets out to,
        less what the candidates found needed keep (and keep in the end anyway). Named in
        another order, a requirement tried before its requirer was kept by it: that run
        removed nothing of it, proved nothing, and the search blamed the next candidate."""
        assert self.removal.requirements is not None
        names = frozenset(n for unit in units.values() for n in unit)
        unit_of = {name: key for key, unit in units.items() for name in unit}
        requiring = {  # what requires a candidate, or an extra (which may require one)
            unit_of[dependent]
            for target, lines in self.removal.requirements.items()
            for dependent, line in lines
            if dependent in names and (target in names or "[" in line)
        }
        always = self._with_requirements_kept(names, units)[1].keys()
        keeps: dict[str, set[str]] = {key: set() for key in units}
        for key in requiring:  # the others keep nothing
            kept = self._with_requirements_kept(names - set(units[key]), units)[1]
            keeps[key] = {unit_of[name] for name in kept if name not in always} - {key}
        group = {key: key for key in units}  # a cycle's units, under its first one
        for key in units:
            for other in keeps[key]:
                if key in keeps[other] and group[other] == other:
                    group[other] = group[key]
        merged: dict[str, list[str]] = {}
        for key in units:
            merged.setdefault(group[key], []).append(key)
        after = {
            first: {group[k] for key in keys for k in keeps[key]} - {first}
            for first, keys in merged.items()
        }
        waiting = dict.fromkeys(merged, 0)  # how many units not placed yet keep each
        for later in after.values():
            for key in later:
                waiting[key] += 1
        position = {key: i for i, key in enumerate(units)}
        ready = [position[key] for key in merged if not waiting[key]]
        heapq.heapify(ready)
        placed: list[str] = []
        keys = list(units)
        while ready:  # the first one named that no unit still to place keeps
            first = keys[heapq.heappop(ready)]
            placed.append(first)
            for key in after[first]:
                waiting[key] -= 1
                if not waiting[key]:
                    heapq.heappush(ready, position[key])
        placed += [key for key in merged if key not in placed]  # none is lost, whatever
        order: dict[str, tuple[str, ...]] = {}
        for first in placed:
            members = tuple(n for key in merged[first] for n in units[key])
            order["+".join(members)] = members
        return order

    def _gone(self) -> Sequence[str]:
        return sorted(self.state)

    def run(self) -> RemovalResult:
        messages = self.removal.messages
        try:
            self.found_needed = self._loaded_by_baseline()
            for needed in self.found_needed:
                self.ctx.emit("plan", f"kept, needed: {needed.name}: {needed.reason}")
            loaded = {n.name for n in self.found_needed}
            self.tried = tuple(n for n in self.snap.removed if n not in loaded)
            if not self.tried:
                messages.append("nothing to try: every candidate is needed")
                self.txn.finish(Outcome.NOTHING_TO_DO)
                return self._result(Outcome.NOTHING_TO_DO)
            assert self.removal.analysis is not None
            self.sharing = together(self.tried, self.removal.analysis.owned)
            units = self._search_order(self.sharing)
            self.units = len(units)

            def removes(chosen: frozenset[str]) -> frozenset[str]:
                names = frozenset(n for unit in chosen for n in units[unit])
                return self._with_requirements_kept(names, units)[0]

            found = search(list(units), lambda chosen: self._passes(removes(chosen)))
            self.needed_units = len(found.needed)
            self.found_needed += [
                Needed(name, (self._why_needed(name, units[unit]),), "probe")
                for unit in found.needed
                for name in units[unit]
            ]
            # The search moved units as if each were needed or not on its own; what stays
            # keeps what it requires, in every run (the probe judged that) and at the end.
            chosen = frozenset(n for unit in found.removable for n in units[unit])
            final, kept = self._with_requirements_kept(chosen, units)
            self.found_needed += [kept[name] for name in self.snap.removed if name in kept]
            if not found.final_passed:
                messages.append(
                    "the probe failed on the final state the search found (the candidates' "
                    "needs are not independent, or the probe is not reliable): restoring all"
                )
                return self._restore(Cause.PROBE_FAILED)
            if not final:
                messages.append("every candidate tried is needed: restoring them all")
                return self._restore(Cause.NEEDED)
            assert self.state == final  # the search's last run probed it (see _passes)
            stayed = [name for name in self.snap.removed if name in final]
            if len(stayed) < len(self.snap.removed):  # the history names what stayed removed
                self.ctx.store.set_removed(self.snap.id, stayed)
            self.txn.finish(self._outcome())
            return self._result(self._outcome())
        except _Stop as stop:
            messages.append(stop.message)
            return self._restore(stop.cause)
        except KeyboardInterrupt:
            messages.append("interrupted during the search: restoring what was removed")
            return self._restore(Cause.INTERRUPTED)
        except Exception as err:  # whatever broke, what was removed comes back first
            messages.append(f"unexpected error during the search: {err!r}")
            return self._restore(Cause.ERROR)

    def _outcome(self) -> Outcome:
        cleanup = self.removal.cleanup
        kept = bool(self.found_needed or (cleanup is not None and cleanup.kept))
        return Outcome.KEPT_NEEDED if kept else Outcome.REMOVED

    def _result(
        self, outcome: Outcome, restored: Restored | None = None, next_command: str | None = None
    ) -> RemovalResult:
        result = super()._result(outcome, restored, next_command)
        cleanup = self.removal.cleanup
        assert cleanup is not None
        installed = self.removal.installed
        final = tuple(n for n in self.snap.removed if n in self.state) if restored is None else ()
        cleanup = msgspec.structs.replace(
            cleanup,
            kept=(*cleanup.kept, *self.found_needed),
            tried=self.tried,
            removed=final,
            probe_runs=len(self.trials),
            bound=bound(self.units, self.needed_units),
            trials=tuple(self.trials),
        )
        return msgspec.structs.replace(
            result,
            removed=tuple(f"{n}=={installed[n].version}" for n in final),
            cleanup=cleanup,
        )

    def _why_needed(self, name: str, unit: Sequence[str]) -> str:
        """The failure of the smallest failing run that removed ``name``; and the candidates
        that share files with it, which go and stay with it."""
        failed = [t for t in self.trials if not t.passed and name in t.removed]
        text = "the probe fails without it (bisection)"
        if failed:
            text += ": " + min(failed, key=lambda t: len(t.removed)).why
        sharing = next(u for u in self.sharing.values() if name in u)
        others = [n for n in unit if n != name and n in sharing]
        if others:
            text += f" (tried together with {', '.join(others)}: they list files in common)"
        others = [n for n in unit if n not in sharing]
        if others:
            text += f" (tried together with {', '.join(others)}: they require each other)"
        return text

    def _passes(self, removed: frozenset[str]) -> bool:
        """Put the environment in the state without ``removed``, probe it, judge it. Without
        a run: removing nothing is the snapshot's state, which the baseline passed; the state
        probed last, which the environment is still in, has its verdict."""
        if not removed:
            return True
        if self.last is not None and self.last[0] == removed == self.state:
            return self.last[1]
        passed = self._probed(removed)
        self.last = (removed, passed)
        return passed

    def _probed(self, removed: frozenset[str]) -> bool:
        self._move_to(removed)
        if not self.removal.after.probes:  # no probe: the static evidence alone judged
            return True
        self.txn.probing()
        shown = ", ".join(sorted(removed))
        after, _ = self._probe()
        changed = self._changed_by_others()
        if changed is not None:
            raise _Stop(Cause.CONCURRENT, changed + "; the probe judged another environment")
        assert self.removal.analysis is not None
        drifted = self.removal.analysis.drift(self.runs.baseline, after)
        passed = all(r.passed for r in after) and not (
            drifted and not self.removal.options.allow_drift
        )
        self.runs = msgspec.structs.replace(self.runs, after=tuple(after))
        self.drift = tuple(drifted) if passed else ()
        failure = failure_text(after).strip()  # the last line says it: an exception, mostly
        why = failure.splitlines()[-1] if failure else ""
        if drifted and not passed and not why:
            why = "drift: " + drifted[0].describe()
        self.trials.append(Trial(tuple(sorted(removed)), passed, why))
        verdict = "passed" if passed else "FAILED"
        self.ctx.emit("bisect", f"run {len(self.trials)}: without {shown}: {verdict}")
        return passed

    def _move_to(self, removed: frozenset[str]) -> None:
        """Restore what ``removed`` leaves out (from the stash, verified), uninstall the rest."""
        back = sorted(self.state - removed)
        if back:
            snap, staying = self.snap, self.state & removed  # removed after the restore
            wanted = msgspec.structs.replace(
                snap, packages=tuple(e for e in snap.packages if e.name not in staying)
            )
            entries = [e for name in back if (e := snap.package(name)) is not None]
            with self.txn.interrupts_deferred():
                restored = self.txn.restore(
                    wanted, entries, (), offline=self.removal.options.offline
                )
            if not restored.ok:
                problems = (
                    "; ".join(restored.verification.describe())
                    if restored.verification
                    else restored.error
                )
                raise _Stop(
                    Cause.ERROR, f"bringing back {', '.join(back)} was not verified: {problems}"
                )
            self.state = self.state - set(back)
            if self.txn.interrupted:
                raise KeyboardInterrupt
        more = [name for name in self.snap.removed if name in removed - self.state]
        if more:
            # Counted as gone before the uninstall starts: an interrupt held back while uv runs
            # is raised as txn.uninstall returns, and the restore brings back only these.
            self.state = self.state | set(more)
            failed = self.txn.uninstall(more)
            if failed is None:
                failed = self._still_installed(census(self.ctx.interpreter), more)
            if failed is not None:
                raise _Stop(Cause.FAILED, failed)
