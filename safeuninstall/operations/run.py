"""``run -- COMMAND``: any change to the environment (an install, an upgrade) guarded like a
removal.

1. Under the lock: the installed set, the baseline probe begun (the configured probes, else the
   probe derived from every installed distribution: what the command changes is not known
   yet), the snapshot with every installed file kept (hard links, taken under uv's own lock),
   the stash hashed before the command can write into a file in place.
2. The command runs against the environment (VIRTUAL_ENV and PATH set, context.child_env), its
   output passed through; Ctrl-C, SIGTERM and a hang-up are passed on to it.
3. The environment is compared with the snapshot: distributions added, changed (another
   version or build, or files replaced), removed. A non-zero exit, an interrupt, a requirement
   the change leaves unmet (impact.unmet_after_change) or a probe that fails (the configured
   one, else the probe derived from what changed, as for a removal) puts the environment back
   as the snapshot has it, in one batch, proven by hashes (Transaction.return_to).
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import msgspec

from safeuninstall.base import process
from safeuninstall.base.errors import CommandNotStarted, InvalidInput
from safeuninstall.base.outcome import Cause, Ending, Outcome
from safeuninstall.context import baseline
from safeuninstall.context.analysis import analyse, snapshot_view, with_default
from safeuninstall.context.baseline import BaselineCache, Begun, fingerprint
from safeuninstall.context.context import Context
from safeuninstall.environment.backend import shell_line
from safeuninstall.environment.installed import (
    InstalledDistribution,
    census,
    ensure_writable,
    installed_distributions,
)
from safeuninstall.environment.sizes import count_text
from safeuninstall.libraries.index import ownership
from safeuninstall.operations.endings.run import (
    RAN,
    RAN_NO_CHANGE,
    RUN,
    RUN_COMMAND_FAILED_KEPT,
    RUN_COMMAND_FAILED_UNCHANGED,
    RUN_CONCURRENT_KEPT,
    RUN_INCONCLUSIVE_KEPT,
    RUN_NOT_UNDONE,
    RUN_PROBE_FAILED_KEPT,
    RUN_UNMET_KEPT,
)
from safeuninstall.operations.endings.uninstall import DRY_RUN
from safeuninstall.operations.results import ProbeRuns, RunResult
from safeuninstall.operations.trial import metric_lines, tried
from safeuninstall.options import RunOptions
from safeuninstall.plans.changes import RollbackPlan, plan_rollback
from safeuninstall.probe.derived import (
    derive,
    dropped_notes,
    judged_apart,
    judged_change,
    stopping_after_change,
    undecided,
)
from safeuninstall.probe.runner import Probe, ProbeResult, ProbeSettings, RunSettings, run_all
from safeuninstall.reports.impact import Unmet, unmet_after_change
from safeuninstall.state.stash import kept_aside, not_put_back
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
from safeuninstall.transaction.transaction import SnapshotSpec, rewritten


def run(ctx: Context, configured: ProbeSettings, options: RunOptions) -> RunResult:
    """Run ``options.argv`` against the environment; undo its change if it fails."""
    _refuse_unknown_command(ctx, options.argv)
    ctx.refuse_externally_managed()
    with ctx.locked():
        ctx.refuse_if_unfinished()
        command = _Run(ctx, configured, options)
        if options.dry_run:
            command.messages += command.plan_lines()
            return command.result(DRY_RUN)
        ensure_writable(ctx.interpreter)
        ctx.backend.check_available()  # a restore needs it: before anything runs
        return command.run()


def _refuse_unknown_command(ctx: Context, argv: Sequence[str]) -> None:
    """The command must be found before any snapshot is taken, on the PATH it will run with."""
    if not argv:
        raise InvalidInput("run needs a command: safe-uninstall run [OPTIONS] -- COMMAND [ARGS]...")
    path = ctx.child_env().get("PATH", "")
    found = shutil.which(argv[0], path=path) if os.sep not in argv[0] else argv[0]
    if found is None:
        raise InvalidInput(
            f"{argv[0]}: command not found (searched the PATH it would run with, the "
            "environment's scripts first); nothing was changed"
        )
    program = Path(ctx.cwd, found)
    if not program.is_file() or not os.access(program, os.X_OK):  # a folder is "executable"
        raise InvalidInput(f"{argv[0]}: not an executable file; nothing was changed")


class _Run:
    """One guarded command, from the plan to its result."""

    def __init__(self, ctx: Context, configured: ProbeSettings, options: RunOptions) -> None:
        self.ctx = ctx
        self.configured = configured
        self.options = options
        self.census = census(ctx.interpreter)  # first: a change after it shows in a later one
        self.installed = installed_distributions(ctx.interpreter)
        # Before the command: it may take away the modules that working this out imports.
        self.runs_on = frozenset(ctx.runs_on(self.installed))
        # What the command will change is unknown: the derived baseline covers everything.
        settings = with_default(configured, self.installed, sorted(self.installed))
        self.settings = msgspec.structs.replace(
            settings,
            notes=tuple(
                _said_of_a_change(n, "every installed distribution") for n in settings.notes
            ),
        )
        self.cache = BaselineCache(ctx.store.root)
        self.runs = ProbeRuns(
            notes=self.settings.notes,
            disabled=self.settings.disabled,
            planned=self.settings.probes,
        )
        self.messages: list[str] = []
        self.begun: Begun | None = None

    def result(self, outcome: Outcome, **parts: object) -> RunResult:
        result = RunResult(
            command="try" if self.options.always_undo else "run",
            outcome=outcome,
            python=str(self.ctx.python),
            environment=self.ctx.where,
            argv=self.options.argv,
            probes=self.runs,
            messages=tuple(self.messages),
        )
        return msgspec.structs.replace(result, **parts)

    def plan_lines(self) -> list[str]:
        """What a run would do, for --dry-run."""
        probes = ", ".join(p.label for p in self.settings.probes) or "none"
        return [
            f"--dry-run: would snapshot {count_text(len(self.installed), 'distribution')}, "
            "keeping every "
            "installed file (hard links)",
            f"would run the baseline probe ({probes}), then: {shell_line(self.options.argv)}",
            f"  with VIRTUAL_ENV={self.ctx.interpreter.prefix} and "
            f"{self.ctx.interpreter.scripts} first on PATH",
            "would then compare the environment with the snapshot: a non-zero exit, an "
            "interrupt, a requirement left unmet or a failing probe (the configured one, else "
            "the one derived from what changed) restores it in one batch"
            + (" (--keep-on-failure: keeps it)" if self.options.keep_on_failure else ""),
        ]

    def change(self) -> Change:
        """The command's change, described for the guard: every installed file kept (hard
        links), under uv's lock (no uv changes the venv meanwhile)."""
        spec = SnapshotSpec(
            operation="run",
            stash=sorted(self.installed),
            shared=ownership(self.installed).shared_paths(),
            # The command may remove them (uv removes every folder of a name): their files are
            # kept, though an undo brings back one version per name.
            doubled=[n for n, d in self.installed.items() if d.doubled],
        )
        words = Words(
            "run", "the command ran", "the command had started", "the command did not run"
        )
        return Change(
            RUN,
            "run",
            words,
            self.census,
            self.installed,
            spec,
            offline=self.options.offline,
            installer_locked=True,
            kept_for_others=RUN_CONCURRENT_KEPT,
        )

    def run(self) -> RunResult:
        ctx = self.ctx
        guard = Guard(ctx, self.change(), self.messages)
        try:
            with guard.guarded() as txn:
                if self.settings.probes:  # overlaps the snapshot and the stash's hashing
                    self.begun = baseline.begin(
                        self.settings,
                        ctx,
                        self.cache,
                        fingerprint(ctx.interpreter, ctx.environ),
                        fresh=self.options.fresh_baseline,
                    )
                results = guard.prepare(lambda: guard.baseline(self.begun, self.cache))
                txn.hashed()
                return _Attempt(self, guard, results).run()
        finally:
            if self.begun is not None:
                self.begun.cancel()


class _Attempt:
    """The command run, its change judged, and undone when it must be."""

    def __init__(self, command: _Run, guard: Guard, before: tuple[ProbeResult, ...]) -> None:
        self.command = command
        self.ctx = command.ctx
        self.guard = guard
        self.txn = guard.txn
        self.snap = guard.snapshot
        command.runs = msgspec.structs.replace(
            command.runs,
            notes=(*command.runs.notes, *dropped_notes(before)),
            baseline=before,
        )
        self.status: int | None = None
        self.change: RollbackPlan | None = None
        self.rewritten: tuple[str, ...] = ()
        self.unmet: tuple[Unmet, ...] = ()

    def _result(self, outcome: Outcome, **parts: object) -> RunResult:
        return self.command.result(
            outcome,
            snapshot=self.snap.id,
            exit_status=self.status,
            change=self.change,
            unmet=self.unmet,
            **parts,
        )

    def run(self) -> RunResult:
        ended = self.guard.attempt(self._run, self._restore)
        return self._result(ended.outcome, restored=ended.restored, next_command=ended.next_command)

    def _run(self) -> Verdict:
        """The command, then the judgement of what it changed."""
        passed_on = self._command()
        now = self._compare()
        judged = self._judge(passed_on, now)
        if judged is None and self.command.options.always_undo:
            return Cause.TRIED  # try: it passes, and is undone all the same
        return Stands(RAN) if judged is None else judged

    def _command(self) -> list[int]:
        """Run the command; the signals passed on to it."""
        ctx, argv = self.ctx, self.command.options.argv
        self.txn.changing("command")
        ctx.emit("command", f"running: {shell_line(argv)}")
        stdout = 2 if self.command.options.output_to_stderr else None
        try:
            self.status, passed_on = process.run_command(
                argv,
                env=ctx.child_env(),
                cwd=ctx.cwd,
                stdout=stdout,
                marker=process.guard_marker(ctx.interpreter.prefix, self.snap.id),
            )
        except OSError as err:  # exec failed (a script's interpreter missing): nothing ran
            self.txn.not_started()
            raise CommandNotStarted(
                f"the command could not be started: {shell_line(argv)}: "
                f"{err.strerror or err}; it did not run, nothing was changed"
            ) from None
        ctx.emit("command", f"the command {_exit_text(self.status)}")
        return passed_on

    def _compare(self) -> dict[str, InstalledDistribution]:
        """The environment against the snapshot: distributions added, changed, removed, and
        those of the same version whose files were replaced."""
        ctx = self.ctx
        # First: a change after it shows in a later one. What it shows is the command's own.
        self.txn.expect(census(ctx.interpreter))
        now = installed_distributions(ctx.interpreter)
        view = snapshot_view(now, ownership(now), self.snap, ctx.interpreter.prefix)
        self.change = change = plan_rollback(self.snap, view)
        self.rewritten = rewritten(self.ctx, self.snap, now, change)
        messages = self.command.messages
        before = self.command.installed
        messages += [f"the command added {n}=={now[n].version}" for n in change.added]
        messages += [
            f"the command changed {n}: {before[n].version} -> {now[n].version}"
            if before[n].version != now[n].version
            else f"the command changed {n} {now[n].version} (another build or layout)"
            for n in change.changed
        ]
        messages += [f"the command removed {n}=={before[n].version}" for n in change.missing]
        messages += [
            f"the command replaced or rewrote files of {n}=={now[n].version}"
            for n in self.rewritten
        ]
        return now

    def _judge(
        self, passed_on: Sequence[int], now: dict[str, InstalledDistribution]
    ) -> Verdict | None:
        """None when the change stands; where it ends without a restore (a failed command
        that changed nothing, a failure kept on request); else the cause to restore for:
        interrupted, command failed, unmet or probe failed."""
        command, messages = self.command, self.command.messages
        options = command.options
        assert self.change is not None
        changed = not self.change.empty or bool(self.rewritten)
        if passed_on:
            names = ", ".join(signal.Signals(s).name for s in passed_on)
            messages.append(f"interrupted ({names}, passed on to the command)")
            return Cause.INTERRUPTED
        gone = [n for n in self.change.missing if n in command.runs_on]
        if gone and "safe-uninstall" not in self.change.missing:
            messages.append(
                f"the command removed {', '.join(gone)}, which safe-uninstall runs on here: "
                "without it the tool cannot start, so nothing could undo the change later; "
                "undone, whatever --keep-on-failure or --allow-unmet say"
            )
            return Cause.UNMET
        if self.status != 0:
            messages.append(f"the command {_exit_text(self.status)}")
            if not changed:
                return Stands(RUN_COMMAND_FAILED_UNCHANGED)
            return (
                Kept(RUN_COMMAND_FAILED_KEPT) if options.keep_on_failure else Cause.COMMAND_FAILED
            )
        if not changed:
            return Stands(RAN_NO_CHANGE)
        self.unmet = unmet_after_change(command.installed, now, self.ctx.interpreter.markers)
        if self.unmet:
            messages += [f"unmet after the command: {u.describe()}" for u in self.unmet]
            if not options.allow_unmet:
                return Kept(RUN_UNMET_KEPT) if options.keep_on_failure else Cause.UNMET
            messages.append("--allow-unmet: the probe judges the change")
        passed = self._probed(now)
        if not isinstance(passed, bool):
            return passed
        if not passed and undecided(self.command.runs.after):
            messages.append("the metric's runs could not tell: inconclusive is never a pass")
            if options.keep_on_failure:
                return Kept(RUN_INCONCLUSIVE_KEPT)
            return Cause.INCONCLUSIVE
        if not passed:
            if options.keep_on_failure:
                return Kept(RUN_PROBE_FAILED_KEPT)
            return Cause.PROBE_FAILED
        return None

    def _probed(self, now: dict[str, InstalledDistribution]) -> bool | Verdict:
        """The probe after the command (True: it passes), then the check for another
        process's change while it ran (ChangedByOthers: the guard keeps it all, named); or
        the verdict when a state to measure the metric in could not be reached."""
        try:
            passed = self._probe(now)
            # What changed since the comparison is not the command's: undoing it all would
            # undo that process's work as if the command had done it (Change.kept_for_others).
            self.txn.check_others(during="while the probe ran")
        except SwitchFailed as err:
            self.command.messages.append(err.message)
            return Cause.ERROR
        return passed

    def _probe(self, now: dict[str, InstalledDistribution]) -> bool:
        """The probe after the command: the configured one, else the one derived from what
        changed (what it added and changed, and what requires or loads what it changed or
        removed), judged against the baseline. True when it passes."""
        command, ctx = self.command, self.ctx
        settings = command.settings if self.command.configured.probes else self._derived(now)
        if not self.command.configured.probes and not command.options.keep_on_failure:
            settings = stopping_after_change(settings, command.runs.baseline)  # verdict known
        if not settings.probes:
            command.runs = msgspec.structs.replace(
                command.runs, notes=(*command.runs.notes, *settings.notes)
            )
            return True
        self.txn.probing()
        ctx.emit("probe", "probe running: " + ", ".join(p.label for p in settings.probes))
        after = self._judged(settings, now)
        passed = all(r.passed for r in after)
        ctx.emit("probe", f"probe after the command: {'passed' if passed else 'FAILED'}")
        command.runs = msgspec.structs.replace(
            command.runs,
            notes=(*command.runs.notes, *settings.notes)
            if settings is not command.settings
            else command.runs.notes,
            planned=settings.probes,
            after=tuple(after),
        )
        return passed

    def _judged(
        self, settings: ProbeSettings, now: dict[str, InstalledDistribution]
    ) -> list[ProbeResult]:
        """Each probe run and judged against the baseline; a metric, once the others pass, by
        runs of the states before and after the command, interleaved (``_compared``)."""
        ctx, baseline = self.ctx, self.command.runs.baseline
        if not self.command.configured.probes:  # derived: never a metric
            ran = run_all(settings, ctx.interpreter, ctx.child_env())
            return [judged_change(baseline, r) for r in ran]
        metric = any(p.metric is not None for p in settings.probes)
        if metric and self.rewritten:
            self.command.messages.append(
                "the metric's runs were not interleaved with the state before the command: it "
                "rewrote files of a distribution in place, which a switch cannot tell apart"
            )
        how = RunSettings(settings.timeout, ctx.child_env())
        return judged_apart(
            settings,
            baseline,
            lambda plain: run_all(plain, ctx.interpreter, ctx.child_env()),
            None if self.rewritten else partial(self._compared, how=how, now=now),
        )

    def _compared(
        self, probe: Probe, *, how: RunSettings, now: dict[str, InstalledDistribution]
    ) -> ProbeResult:
        """A metric judged by runs of the snapshot's state and the command's, interleaved
        (Guard.compared). The command's state is switched back to from a stash of what it
        added or changed (Guard.stashed_state), kept only while the runs last."""
        assert self.change is not None
        with self.guard.stashed_state(now, [*self.change.added, *self.change.changed]) as made:
            return self.guard.compared(probe, how, made)

    def _derived(self, now: dict[str, InstalledDistribution]) -> ProbeSettings:
        """The probe derived from what changed, as for a removal of the versions it replaced
        or removed: their dependents and library consumers (the impact report), and what it
        added or changed itself. And the distributions whose candidates failed before the
        command: not judged, but tried again, so that a command that fixed them says so."""
        if self.command.settings.disabled:
            return self.command.settings
        assert self.change is not None
        change = self.change
        replaced = [*change.changed, *change.missing, *self.rewritten]
        report = analyse(self.ctx, self.command.installed, replaced).report if replaced else None
        failed_before = {
            c.candidate.distribution
            for r in self.command.runs.baseline
            for c in r.candidates
            if c.status == "failed"  # not one that did not finish: it would cost its time limit
        }
        affected = {
            *change.added,
            *change.changed,
            *self.rewritten,
            *(report.affected if report else ()),
            *failed_before,
        }
        probes, notes = derive(now, sorted(n for n in affected if n in now), replaced)
        notes = tuple(_said_of_a_change(n, "what the change affects") for n in notes)
        return ProbeSettings(probes=probes, timeout=self.command.settings.timeout, notes=notes)

    def _restore(self, cause: Cause) -> Ended:
        """Put the environment back as the snapshot has it, in one batch, and prove it. What
        it brings back is read with interrupts held, as the undo runs: a second Ctrl-C there
        waits for the undo too."""
        ended = self._ended if self.command.options.always_undo else None
        with self.txn.interrupts_deferred():
            back = Back(also=self._rewritten_now(), all_or_nothing=True)
            return self.guard.undo(
                cause,
                back,
                aside=self._second_folders_gone,
                ended=ended,
                not_undone=self._not_undone,
            )

    def _second_folders_gone(self) -> list[str]:
        """The second dist-info folders there before the command that are gone now, said as
        not put back (a snapshot records one version per name): kept aside in the run's
        snapshot folder (it keeps every one: the command may remove it), else lost with that
        folder. An undo returns only what the command changed, so a folder it left alone is
        not among them; unlike a rollback's (rollback._kept_aside_by), which says every folder
        its snapshot kept aside."""
        gone = [
            folder.name
            for dist in self.command.installed.values()
            for folder in dist.doubled
            if not os.path.lexists(folder)
        ]
        if not gone:
            return []
        snapshot_dir = self.ctx.store.folder(self.snap.id)
        kept = set(kept_aside(snapshot_dir))
        lost = [  # kept by every snapshot taken: gone only with the snapshot folder
            f"{name}, a second dist-info folder before the command, is not put back, and its "
            "files are not kept"
            for name in sorted(set(gone) - kept)
        ]
        return [*not_put_back(snapshot_dir, self.snap.id, sorted(kept & set(gone))), *lost]

    def _not_undone(self, why: str) -> Ended:
        """Something the command changed cannot come back: its change is left whole rather
        than half undone (an uninstall first would leave the environment worse than the
        command did)."""
        ctx, messages = self.ctx, self.command.messages
        folder = ctx.store.folder(self.snap.id).path
        gone = not folder.is_dir()
        if gone:
            messages.append(
                f"the tool's state folder lost snapshot {self.snap.id} while the command ran "
                f"({folder} is gone, its stash with it)"
            )
        messages += [
            f"cannot undo the command's change: {why}",
            "nothing was undone: the environment is as the command left it (its change is "
            "listed above)",
        ]
        # The environment is in a known state, the command's: no journal for ``recover``.
        if self.command.options.always_undo:
            outcome = self._ended(Cause.ERROR, Ending.NOT_UNDONE)
        else:
            outcome = RUN_NOT_UNDONE
        self.txn.finish(outcome)
        return Ended(outcome, next_command=None if gone else ctx.suggest("rollback", self.snap.id))

    def _ended(self, cause: Cause, ending: Ending) -> Outcome:
        """try's verdict on the change, with the metric's numbers."""
        self.command.messages += metric_lines(self.command.runs.after)
        return tried(cause, ending, self.command.runs.after)

    def _rewritten_now(self) -> Sequence[str]:
        """The distributions whose files the command replaced, also when the comparison did
        not run (an interrupt, an error)."""
        if self.change is not None:
            return self.rewritten
        try:
            now = installed_distributions(self.ctx.interpreter)
            view = snapshot_view(now, ownership(now), self.snap, self.ctx.interpreter.prefix)
            return rewritten(self.ctx, self.snap, now, plan_rollback(self.snap, view))
        except Exception:  # the restore goes on with what the installed set shows
            return ()


def _said_of_a_change(note: str, source: str) -> str:
    """A derived probe's note (derived.py speaks of a removal) said of a change."""
    return note.replace("what the removal affects", source).replace(
        "importing what is removed", "importing what changed"
    )


def _exit_text(status: int | None) -> str:
    if status is None:
        return "did not run"
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return "exited with status 0" if status == 0 else f"exited with status {status}"
