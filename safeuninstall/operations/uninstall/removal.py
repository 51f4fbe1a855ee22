"""One removal, from its plan to its result: the checks before any change, the baseline, the
snapshot, then the attempt (uninstall, probe, and the restore of all of it when it must be
undone). ``command.py`` makes the plan; ``keep_needed.py`` is the attempt of ``--keep-needed``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import msgspec

from safeuninstall.base.outcome import Cause, Ending, Outcome
from safeuninstall.context import baseline
from safeuninstall.context.analysis import (
    Analysis,
    analyse,
    library_index,
    loadable_snapshots,
    owned_files,
    requirements_of,
    with_default,
)
from safeuninstall.context.baseline import BaselineCache, Begun, HeadStart, fingerprint
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import (
    InstalledDistribution,
    RequirementIndex,
    census,
    ensure_writable,
)
from safeuninstall.environment.sizes import count_text
from safeuninstall.libraries.index import Drift
from safeuninstall.operations.endings.trial import TRY_RESTORED_PROBE_FAILS
from safeuninstall.operations.endings.uninstall import (
    DRY_RUN,
    INCONCLUSIVE_KEPT,
    PROBE_FAILED_KEPT,
    REFUSED_STRICT,
    REFUSED_UNMET,
    REMOVED,
    RESTORED_PROBE_FAILS,
    UNINSTALL,
)
from safeuninstall.operations.results import ProbeRuns, RemovalResult
from safeuninstall.operations.trial import metric_lines, refused, tried
from safeuninstall.options import COMMANDS, UninstallOptions
from safeuninstall.plans.changes import NEVER_MATCHED, RemovalPlan
from safeuninstall.probe.derived import (
    after_settings,
    dropped_notes,
    judged_after,
    judged_apart,
    to_the_end,
    undecided,
)
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.probe.runner import (
    Probe,
    ProbeResult,
    ProbeSettings,
    RunSettings,
    run_all,
    start,
)
from safeuninstall.reports.doctor import Finding, also_in, diagnose
from safeuninstall.reports.impact import allowed_unmet, removal_closure, unmet_in
from safeuninstall.reports.needs import Cleanup, orphans
from safeuninstall.transaction.guard import (
    Back,
    Change,
    Ended,
    Guard,
    Kept,
    Stands,
    SwitchFailed,
    Verdict,
    Words,
)
from safeuninstall.transaction.transaction import (
    Restored,
    SnapshotSpec,
    left_installed,
    still_installed,
)


class Removal:
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

    def result(self, outcome: Outcome) -> RemovalResult:
        if self.options.always_undo:  # try: a refusal for unmet requirements is its verdict
            outcome = refused(outcome)
        return RemovalResult(
            command="try" if self.options.always_undo else "uninstall",
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
            return self.result(REFUSED_STRICT)
        if report.unmet and not self.options.allow_unmet:
            self.messages += self._refused_unmet()
            return self.result(REFUSED_UNMET)
        if report.unmet:
            no_probe = self.settings.disabled
            self.messages.append(allowed_unmet(report.unmet, "the removal", no_probe=no_probe))
        if self.options.dry_run:
            return self.result(DRY_RUN)
        ensure_writable(self.ctx.interpreter)
        self.ctx.backend.check_available()
        return None

    def _refused_unmet(self) -> list[str]:
        """Why the removal is refused, and the two commands that would go ahead."""
        assert self.analysis is not None
        names = self.plan.remove
        markers = self.ctx.interpreter.markers
        closure = removal_closure(self.installed, markers, names, self.requirements)
        # The refusal itself is the outcome's line (results.outcome_text): said once.
        verb = "try" if self.options.always_undo else ""
        return [
            f"to {verb or 'remove'} the dependents too: "
            + _removal_command(self.ctx, closure, verb=verb),
            f"to {verb or 'remove'} only "
            + ", ".join(names)
            + ", the probe judging it: "
            + _removal_command(self.ctx, names, "--allow-unmet", verb=verb),
        ]

    def begin_derived(self) -> None:
        """The derived probe is known from the impact report: its baseline begins now."""
        if self.begun is not None or not self.settings.probes:
            return
        ctx = self.ctx
        self.fingerprint = self.fingerprint or fingerprint(ctx.interpreter, ctx.environ)
        self.begun = baseline.begin(
            self.settings, ctx, self.cache, self.fingerprint, fresh=self.options.fresh_baseline
        )

    def stop_baseline(self) -> None:
        if self.begun is not None:
            self.begun.cancel()

    def _records_rewritten(self) -> list[str]:
        """The last look before anything is removed, beside the census: a RECORD of what it
        removes rewritten since it was read (a reinstall of the same version, which the census
        does not see; a dist-info folder that went is the census's to say)."""
        there = census(self.ctx.interpreter)
        now = _record_stats(self.installed, self.plan.remove)
        rewritten = [
            name
            for name, key in now.items()
            if key != self.records.get(name) and str(self.installed[name].dist_info) in there
        ]
        return [f"RECORD rewritten: {', '.join(rewritten)}"] if rewritten else []

    def _baseline_results(self, guard: Guard) -> tuple[ProbeResult, ...]:
        """The baseline must pass: else the probe cannot judge this removal. (A derived probe
        passes as a baseline when it ran: what fails in it is dropped, see derived.py.)"""
        results = guard.baseline(self.begun, self.cache)
        # Stopping at the first failure leaves out what a kept environment still breaks.
        self.after = after_settings(
            self.settings, results, stop_at_failure=not self.options.keep_on_failure
        )
        return results

    # -- the change ----------------------------------------------------------------------

    def change(self) -> Change:
        """The removal, described for the guard."""
        assert self.analysis is not None
        spec = SnapshotSpec(
            operation="uninstall",
            stash=self.plan.remove,
            removed=self.plan.remove,
            shared=self.analysis.owned.shared_paths(of=self.plan.remove),
            # Kept aside (hard links), they record that the state before had them: a recover
            # leaves them. (A name it removes is refused when doubled.)
            doubled=[
                n for n, d in self.installed.items() if d.doubled and n not in self.plan.remove
            ],
        )
        words = Words(
            "removal", "anything was removed", "the uninstall had started", "nothing was removed"
        )
        return Change(
            UNINSTALL,
            "uninstall",
            words,
            self.census,
            self.installed,
            spec,
            offline=self.options.offline,
        )

    def apply(self, attempt: type[Attempt]) -> RemovalResult:
        """Snapshot, check the baseline, and make the change by ``attempt``."""
        guard = Guard(self.ctx, self.change(), self.messages)
        try:
            with guard.guarded():
                baseline_results = guard.prepare(
                    lambda: self._baseline_results(guard), more=self._records_rewritten
                )
                return attempt(self, guard, baseline_results).run()
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


def _removal_command(ctx: Context, names: Sequence[str], *flags: str, verb: str = "") -> str:
    """The command that removes ``names`` (or ``verb``s it: ``try``); a name that is also a
    subcommand's needs ``uninstall`` named first."""
    command = (verb,) if verb else ("uninstall",) if any(n in COMMANDS for n in names) else ()
    return ctx.suggest(*command, *flags, *names)


class Attempt:
    """The removal under way: uninstall, probe, and the restore when it must be undone.

    A metric probe is judged by runs of the state before the removal and the state after it,
    interleaved (runner.compare_states): the environment is switched between the two from
    this transaction's own stash (Guard.switch), and ends in the state after the removal
    before its verdict is acted on."""

    interleaves = True  # the metric's runs switch between the two states

    def __init__(self, removal: Removal, guard: Guard, baseline: Sequence[ProbeResult]) -> None:
        self.removal = removal
        self.ctx = removal.ctx
        self.guard = guard
        self.txn = guard.txn
        self.snap = guard.snapshot
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
        ended = self.guard.attempt(self._remove, self._restore)
        return self._result(ended.outcome, ended.restored, ended.next_command)

    def _remove(self) -> Verdict:
        """The uninstall, then the judgement of what it left."""
        failed = self.txn.uninstall(self.snap.removed)
        if failed is None:  # the environment re-read once: what uv left, what others did
            now = census(self.ctx.interpreter)
            failed = self._still_installed(now)
            if failed is None:
                self.txn.check_others(now, during="during the removal")
        if failed is not None:
            self.removal.messages.append(failed)
            return Cause.FAILED
        return self._judge()

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
        return self.snap.removed if self.guard.at_change else ()

    def _still_installed(self, now: frozenset[str]) -> str | None:
        """What the installer left of what it said it removed: dist-info folders still in the
        census ``now`` (left_installed, as Transaction.return_to checks it)."""
        installed = self.removal.installed
        taken = frozenset(str(installed[name].dist_info) for name in self.snap.removed)
        left = left_installed(taken, now, self.snap.removed)
        return still_installed(self.ctx.backend.name, left) if left else None

    def _judge(self) -> Verdict:
        """Whether the removal stands, is kept on request as it failed, or is restored for a
        cause: hollow, probe failed, drift, inconclusive. A change by
        another process while the probe ran is raised (ChangedByOthers): a probe's verdict on
        an environment that is not the one the removal left judges nothing."""
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
        try:
            after, env_print = self._probe()
        except SwitchFailed as err:
            messages.append(err.message)
            return Cause.ERROR
        self.txn.check_others(
            during="during the removal", then="the probe judged another environment"
        )
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
            messages += self._passed_on_the_interpreter_s_own(after)
            removal.cache.put(removal.after, env_print, self.ran)
            if removal.options.always_undo:  # try: it passes, and is undone all the same
                return Cause.TRIED
            if not after:  # no probe ran for the hasher to overlap: see Transaction.stop_hashing
                self.txn.stop_hashing()
            return Stands(REMOVED)
        if not passed and undecided(after):
            messages.append("the metric's runs could not tell: inconclusive is never a pass")
            if removal.options.keep_on_failure:
                return Kept(INCONCLUSIVE_KEPT)
            return Cause.INCONCLUSIVE
        if removal.options.keep_on_failure:
            return Kept(PROBE_FAILED_KEPT)
        return Cause.PROBE_FAILED if not passed else Cause.DRIFT

    def _probe(self) -> tuple[list[ProbeResult], str]:
        """The probe after the removal, and the fingerprint of the environment it ran in,
        taken while it runs (a passing probe is cached as that environment's baseline). A
        metric, once the others pass, by runs of both states interleaved (``_compared``)."""
        ctx, settings = self.ctx, self.removal.after
        if not settings.probes:
            return [], ""
        ctx.emit("probe", "probe running: " + ", ".join(p.label for p in settings.probes))
        env_print = ""

        def run(plain: ProbeSettings) -> list[ProbeResult]:
            nonlocal env_print
            running = start(plain, ctx.interpreter, ctx.child_env())
            try:
                env_print = env_print or fingerprint(ctx.interpreter, ctx.environ)
                ran = running.results()
            except BaseException:
                running.cancel()
                raise
            self.ran = self.ran or ran  # as run: the new environment's baseline, if it stands
            return ran

        self.ran = []
        compared = self._compared if self.interleaves else None
        after = judged_apart(settings, self.runs.baseline, run, compared)
        verdict = "passed" if all(r.passed for r in after) else "FAILED"
        ctx.emit("probe", f"probe after the removal: {verdict}")
        return after, env_print

    def _compared(self, probe: Probe) -> ProbeResult:
        """A metric judged by runs of the snapshot's state and the removal's (the snapshot less
        what it removed), interleaved (Guard.compared): the removal's is switched back to from
        this transaction's own stash."""
        snap, removed = self.snap, set(self.snap.removed)
        left = msgspec.structs.replace(
            snap, packages=tuple(e for e in snap.packages if e.name not in removed)
        )
        how = RunSettings(self.removal.after.timeout, self.ctx.child_env())
        return self.guard.compared(probe, how, left)

    def _passed_on_the_interpreter_s_own(self, after: Sequence[ProbeResult]) -> list[str]:
        """With --target or --prefix: a module removed from the folder that the interpreter's
        own site-packages holds too is imported from there, so a probe that passes says
        nothing of the folder: said, module by module."""
        own = self.ctx.interpreter.own_site_dirs
        if not after or not own:
            return []
        where = self.ctx.interpreter.prefix
        return [
            f"the probe passed, but {module} (of {name}, removed from {where}) is also in the "
            f"interpreter's own site-packages, {path}: an import finds that copy, so the pass "
            "says nothing of the folder"
            for name, module, path in also_in(self.snap, self.removal.plan.remove, own)
        ]

    def _diagnose(self, after: Sequence[ProbeResult]) -> list[Finding]:
        outputs = (o for r in after if not r.passed for o in r.failure_outputs())
        return diagnose(outputs, [self.snap, *loadable_snapshots(self.ctx)])

    def _restore(self, cause: Cause) -> Ended:
        """Bring back everything the removal took in one batch, verify, probe again."""
        removal = self.removal
        assert removal.analysis is not None
        entries = [e for name in self._gone() if (e := self.snap.package(name)) is not None]
        back = Back(entries, removal.analysis.report.hollow)
        ended = self._ended if removal.options.always_undo else None
        return self.guard.undo(cause, back, judge=self._probed_after_restore, ended=ended)

    def _ended(self, cause: Cause, ending: Ending) -> Outcome:
        """try's verdict on the change, with the metric's numbers."""
        self.removal.messages += metric_lines(self.runs.after)
        return tried(cause, ending, self.runs.after)

    def _probed_after_restore(self, restored: Restored) -> Outcome | None:
        """The probe again after a verified restore (unless proven needless): one that fails
        on the snapshot's state again does not judge this environment reliably."""
        self.runs = self._probe_after_restore(restored)
        if all(r.passed for r in self.runs.after_restore):
            return None
        # Exit 5, not 4: the environment is the snapshot again, proven by hashes.
        self.removal.messages.append(
            "the environment equals the snapshot again, yet the probe fails after the restore: "
            "it does not judge this environment reliably"
        )
        return (
            TRY_RESTORED_PROBE_FAILS if self.removal.options.always_undo else RESTORED_PROBE_FAILS
        )

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
