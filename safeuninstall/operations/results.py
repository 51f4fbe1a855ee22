"""What each operation returns: frozen, built once at its end, rendered by the CLI.

Their ``--json`` payloads (operations/payloads.py) read these values by name: a property here
is a value the contract publishes that is computed from the fields (the pins a restore brought
back, the bytes a prune freed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from msgspec import Struct, field

from safeuninstall.base.outcome import Outcome
from safeuninstall.environment.sizes import count_text
from safeuninstall.operations.endings.run import RAN
from safeuninstall.operations.endings.trial import TRY_PASSES, TRY_UNMET
from safeuninstall.operations.endings.uninstall import KEPT_NEEDED, PASSED, REFUSED_UNMET, REMOVED
from safeuninstall.probe.kinds import ProbeKind

# Annotations only (the payloads read results by attribute; nothing decodes them): a command
# that renders a result loads none of the machinery that built another kind of result.
if TYPE_CHECKING:
    from safeuninstall.libraries.index import Drift
    from safeuninstall.plans.changes import RollbackPlan, SnapshotChoice
    from safeuninstall.plans.diff import Change, Diff
    from safeuninstall.probe.metric import MetricRuns
    from safeuninstall.probe.runner import Probe, ProbeResult
    from safeuninstall.reports.doctor import Finding
    from safeuninstall.reports.impact import ImpactReport, Unmet
    from safeuninstall.reports.needs import Cleanup
    from safeuninstall.state.snapshot import Snapshot
    from safeuninstall.transaction.restore import RestoreReport, Verification
    from safeuninstall.transaction.retention import Kept
    from safeuninstall.transaction.transaction import Restored


class ProbeRuns(Struct, frozen=True):
    """The probes around a change: what was chosen, and each run's results."""

    notes: tuple[str, ...] = ()  # why these probes (a derived probe explains itself)
    disabled: bool = False  # --no-probe
    planned: tuple[Probe, ...] = ()  # the probes chosen (a derived one lists its candidates)
    baseline: tuple[ProbeResult, ...] = ()
    after: tuple[ProbeResult, ...] = ()  # after the change
    after_restore: tuple[ProbeResult, ...] = ()
    after_restore_skipped: str | None = None  # why the probe after a restore was not run

    @property
    def derived_after(self) -> ProbeResult | None:
        """The derived probe's run after the change (the ``probe`` command's run), if that is
        what ran."""
        runs = self.after
        return runs[0] if len(runs) == 1 and runs[0].probe.kind is ProbeKind.DERIVED else None


class Result(Struct, frozen=True, kw_only=True):
    """What every operation reports: how it ended and what the user should know or run."""

    command: str  # "uninstall", "check", "rollback", "recover", "probe"
    outcome: Outcome
    python: str
    # the environment as a person names it (Context.where): the folder of a --target or
    # --prefix run, else the interpreter
    environment: str = ""
    snapshot: str | None = None
    removed: tuple[str, ...] = ()  # name==version
    probes: ProbeRuns = field(default_factory=ProbeRuns)
    restored: Restored | None = None
    next_command: str | None = None
    messages: tuple[str, ...] = ()
    kept: Kept | None = None  # what the snapshots keep on disk after it (retention.py)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    @property
    def outcome_text(self) -> str:
        """What happened, for a person: the outcome's text, said more exactly where the
        outcome alone would overstate it (a removal that no probe judged)."""

        derived = self.probes.derived_after
        if derived is not None:
            return self._derived_text(derived)
        unmet = self._unmet_refused()
        if unmet and self.outcome is TRY_UNMET:
            return f"the change would break the environment: {unmet}; nothing was changed"
        if unmet:
            return f"refused: {unmet}; nothing was changed"
        if self.outcome is TRY_PASSES and not self.probes.after:
            why = "--no-probe" if self.probes.disabled else "no probe applies"
            return (
                f"no probe judged the change ({why}); it was undone: back where it started, "
                "verified"
            )
        if self.outcome is KEPT_NEEDED and not self.probes.after:
            why = "no probe (--no-probe)" if self.probes.disabled else "no probe applies"
            return f"removed what nothing needs, kept what is needed; {why}"
        if self.probes.after or self.outcome not in (REMOVED, PASSED):
            return self.outcome.text
        if self.outcome is PASSED:
            return "probes disabled (--no-probe)" if self.probes.disabled else "no probe to run"
        if self.probes.disabled:
            return "removed without a probe (--no-probe)"
        return "removed; no probe applies"

    def _unmet_refused(self) -> str:
        """A refusal for unmet requirements, said once and exactly: how many, whose."""
        impact = self.impact_report()
        refusals = (REFUSED_UNMET, TRY_UNMET)
        if self.outcome not in refusals or impact is None or not impact.unmet:
            return ""
        dependents = ", ".join(sorted({u.dependent for u in impact.unmet}))
        return (
            f"it would leave {count_text(len(impact.unmet), 'requirement')} of {dependents} unmet"
        )

    def _derived_text(self, run: ProbeResult) -> str:
        """The outcome said of the derived probe: that it was derived, how many candidates
        judged, which failed."""

        judged, dropped = len(run.judged), len(run.dropped)
        if self.outcome in (REMOVED, PASSED, RAN):
            removed = {REMOVED: "removed; ", RAN: "the command ran; "}.get(self.outcome, "")
            # Dropped after a change: failed before it. Passing now, the change fixed them.
            fixed = [c.candidate.name for c in run.dropped if c.passed]
            if fixed and self.outcome is RAN:
                return f"{removed}{_fixed_text(fixed, judged)}"
            if not judged:
                return (
                    f"{removed}no probe applies: every candidate of the derived probe fails "
                    "before the change"
                )
            also = f", {dropped} dropped" if dropped else ""
            count = f"{judged} candidate{'s' if judged != 1 else ''}"
            return f"{removed}the derived probe passed ({count} judged{also})"
        failed = run.regressed
        if failed and "the probe failed" in self.outcome.text:
            names = ", ".join(c.candidate.name for c in failed[:3])
            if len(failed) > 3:
                names += f" and {len(failed) - 3} more"
            return self.outcome.text.replace(
                "the probe failed", f"the derived probe failed ({names})"
            )
        return self.outcome.text

    @property
    def restore(self) -> RestoreReport | None:
        return self.restored.report if self.restored is not None else None

    @property
    def verification(self) -> Verification | None:
        return self.restored.verification if self.restored is not None else None

    @property
    def restored_pins(self) -> list[str]:
        """What the restore brought back, from a stash or reinstalled."""
        return self.restored.restored_pins if self.restored is not None else []

    def impact_report(self) -> ImpactReport | None:
        """The impact report of what the operation removes, for those that make one."""
        return None


class RemovalResult(Result, frozen=True, kw_only=True):
    """An uninstall, or its impact report alone (``check``)."""

    absent: tuple[str, ...] = ()  # named, but not installed
    impact: ImpactReport | None = None
    drift: tuple[Drift, ...] = ()  # libraries the probe loaded from elsewhere after the removal
    diagnosis: tuple[Finding, ...] = ()  # what a failing probe missed, and who provided it
    expanded: tuple[tuple[str, tuple[str, ...]], ...] = ()  # each pattern and what it matched
    cleanup: Cleanup | None = None  # --keep-needed: kept, removed, why, probe runs
    orphans: tuple[str, ...] = ()  # --with-orphans: the dependencies added

    def impact_report(self) -> ImpactReport | None:
        return self.impact

    @property
    def patterns(self) -> dict[str, tuple[str, ...]]:
        return dict(self.expanded)

    @property
    def dependents(self) -> tuple[str, ...]:
        return self.impact.dependents if self.impact else ()


class RollbackResult(Result, frozen=True, kw_only=True):
    """A rollback, or a recover: back to a snapshot's exact set."""

    rollback_plan: RollbackPlan | None = None
    choice: SnapshotChoice | None = None  # why a plain rollback returns to the snapshot it does
    impact: ImpactReport | None = None  # of what the rollback uninstalls
    undo: Restored | None = None  # a failed rollback put back as it was before it

    def impact_report(self) -> ImpactReport | None:
        return self.impact


class RunResult(Result, frozen=True, kw_only=True):
    """A command run under guard (``run -- COMMAND``): what it changed, how it exited, and how
    the change was judged and, when it failed, undone."""

    argv: tuple[str, ...] = ()
    exit_status: int | None = None  # the command's own (None: it did not run); -N: signal N
    change: RollbackPlan | None = None  # the snapshot against the environment the command left
    unmet: tuple[Unmet, ...] = ()  # requirements the change left unmet

    @property
    def run(self) -> RunResult:
        """The command's own part of the report (the payload nests it under ``run``)."""
        return self

    @property
    def added(self) -> tuple[str, ...]:
        return self.change.added if self.change else ()

    @property
    def changed(self) -> tuple[str, ...]:
        return self.change.changed if self.change else ()

    @property
    def missing(self) -> tuple[str, ...]:
        """What the command removed (``removed`` is the operation's own)."""
        return self.change.missing if self.change else ()


def _fixed_text(fixed: Sequence[str], judged: int) -> str:
    """A change that made failing candidates pass: the best news a guarded change gives."""
    was, now = ("failed", "passes") if len(fixed) == 1 else ("all failed", "pass")
    rest = f"; {count_text(judged, 'other candidate')} passed" if judged else ""
    return (
        f"it fixed what the probe found broken: {', '.join(fixed)} {was} before the change "
        f"and {now} now{rest}"
    )


class SnapshotSummary(Struct, frozen=True):
    """One line of ``snapshots``: a saved snapshot and how its operation ended."""

    id: str
    created: str
    command: str
    operation: str
    removed: tuple[str, ...]
    outcome: str
    packages: int
    error: str | None = None
    stash_bytes: int = 0  # bytes only this snapshot's stash keeps (no other link to them)
    stash_pruned: str | None = None  # why the retention policy dropped its stash


class SnapshotList(Struct, frozen=True):
    snapshots: tuple[SnapshotSummary, ...]
    total_bytes: int = 0  # bytes all these stashes keep on disk (each file counted once)
    command: str = "safe-uninstall"  # how a command for this environment begins (Context.suggest())
    # None of this environment's: why, when the state folder holds another's (Store.why_none)
    none_because: str | None = None


class _OfSnapshot(Struct, frozen=True):
    """A result that is a snapshot and more: its payload reads the snapshot's keys as its own."""

    snapshot: Snapshot

    def __getattr__(self, name: str) -> object:
        return getattr(self.snapshot, name)


class ShownSnapshot(_OfSnapshot, frozen=True):
    """``show``: one snapshot, with what its stash alone keeps on disk."""

    stash_bytes: int
    stash_pruned: str | None  # why the retention policy dropped its stash


class SnapshotTaken(_OfSnapshot, frozen=True):
    """``snapshot``: the snapshot taken, and what the retention policy did after it."""

    kept: Kept | None = None
    messages: tuple[str, ...] = ()  # the policy did not run, and why


class PruneResult(Struct, frozen=True):
    """Snapshots removed and kept by ``prune``, with the bytes each held on its own."""

    removed: tuple[tuple[str, int], ...]  # (snapshot id, bytes it held on its own)
    kept: tuple[tuple[str, int], ...]
    protected: tuple[str, ...]  # never removed: the latest, the journal's
    dry_run: bool
    held_before: int = 0  # bytes all snapshots kept on disk
    held_after: int = 0  # bytes the remaining snapshots keep on disk
    # (snapshot id, pins): stashes holding the only copy of distributions whose names are not
    # installed now, none of them a snapshot never deleted anyway (the latest, the journal's);
    # kept unless --drop-only-copies (then removed, and listed here still).
    only_copies: tuple[tuple[str, tuple[str, ...]], ...] = ()
    over_max_size: int = 0  # bytes the rest hold beyond --max-size, because those stay

    @property
    def freed(self) -> int:
        return self.held_before - self.held_after

    @property
    def removed_snapshots(self) -> list[dict[str, object]]:
        return [{"id": i, "bytes": b} for i, b in self.removed]

    @property
    def kept_snapshots(self) -> list[dict[str, object]]:
        return [{"id": i, "bytes": b} for i, b in self.kept]

    @property
    def only_copy_snapshots(self) -> list[dict[str, object]]:
        return [{"id": i, "pins": pins} for i, pins in self.only_copies]


# What a side of ``diff`` is: what is installed, a snapshot of the environment, or a file
# that describes an environment (a snapshot.toml from elsewhere, a pylock.toml, requirements).
SideKind = Literal["now", "snapshot", "file"]


class DiffResult(Struct, frozen=True):
    """``diff A B``: the two sides compared (a snapshot id, ``now``, or a file's path) and what
    changed; what a file side said that was left out of the comparison."""

    before: str
    after: str
    diff: Diff
    before_kind: SideKind = "snapshot"
    after_kind: SideKind = "now"
    set_aside: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[Change, ...]:
        return self.diff.changes

    @property
    def counts(self) -> dict[str, int]:
        return self.diff.counts

    @property
    def unchanged(self) -> int:
        return self.diff.unchanged

    @property
    def not_compared(self) -> tuple[str, ...]:
        return self.diff.not_compared


class Culprit(Struct, frozen=True):
    """One unit whose change makes the probe fail: its distributions as in the good snapshot
    and as now (a name absent from one side is left out of it)."""

    names: tuple[str, ...]
    good: tuple[str, ...]  # name==version in the good snapshot
    bad: tuple[str, ...]  # name==version now


class Round(Struct, frozen=True):
    """One bisect round: the units left as they are now (every other one as GOOD had it), its
    verdict, and a metric's runs of both states (the round's and GOOD's, interleaved)."""

    bad: tuple[str, ...]
    passed: bool
    inconclusive: bool = False  # a metric's runs could not tell: neither passed nor failed
    metric: MetricRuns | None = None
    confirms: str = ""  # the culprit this round tries on its own, before it is named

    @property
    def verdict(self) -> str:
        return "inconclusive" if self.inconclusive else "passed" if self.passed else "failed"

    @property
    def confirming(self) -> str | None:
        return self.confirms or None


class BisectResult(Result, frozen=True, kw_only=True):
    """``bisect GOOD``: the units the changes since GOOD form, each probe round (the units
    left as they are now, and its verdict), the culprits, and those that did not reproduce on
    their own."""

    good: str = ""
    units: tuple[tuple[str, ...], ...] = ()
    rounds: tuple[Round, ...] = ()
    culprits: tuple[Culprit, ...] = ()
    not_confirmed: tuple[Culprit, ...] = ()  # found by the search, but not on their own
    confirmed: bool = False  # a round with only the culprits brought back passed
    failure: str = ""  # the probe's output where it fails (the environment as it was)
    not_bisected: tuple[str, ...] = ()  # same version, other files: no stash tells them apart

    @property
    def bisect(self) -> BisectResult:
        """The search's own part of the report (the payload nests it under ``bisect``)."""
        return self


class StateChange(Struct, frozen=True):
    """One distribution a described state has otherwise: its version here, at the start, and
    in the file (None: absent from that side)."""

    name: str
    here: str | None
    there: str | None


class StateTried(Result, frozen=True, kw_only=True):
    """``try --state FILE``: the environment switched to the state FILE describes, judged
    against the start, and brought back. The verdict is the outcome and ``probes.after``
    (a metric's runs of both states, interleaved); ``state`` says what differed."""

    file: str = ""
    changes: tuple[StateChange, ...] = ()
    not_compared: tuple[str, ...] = ()  # same version, other files: no stash tells them apart

    @property
    def state(self) -> StateTried:
        """The state's own part of the report (the payload nests it under ``state``)."""
        return self
