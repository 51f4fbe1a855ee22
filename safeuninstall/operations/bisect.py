"""``bisect GOOD``: which of the changes since snapshot GOOD make the probe fail.

It snapshots the environment as it starts, stashing every distribution a state may uninstall
(hard links: so the start can always come back, offline, and be proven by hashes), and keeps
the journal on that snapshot throughout: a process killed at any point is brought back to the
start by ``recover``.
The changes since GOOD are grouped into units that can be applied apart (culprits.units), and
culprits.find chooses the states to probe: each is reached like a rollback to a snapshot made
of the start with some units as GOOD had them (Transaction.return_to: uninstall what it lacks,
bring back what it has, from a stash first, verify). At the end, and on Ctrl-C or SIGTERM, the
environment returns to the start and is verified.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from safeuninstall.base.errors import BaselineProbeFailed, InvalidInput, NotRestorable
from safeuninstall.base.outcome import Cause, Ending, Endings, Outcome
from safeuninstall.context.analysis import (
    installed_sides,
    owned_files,
    requirements_of,
    sharing_files,
)
from safeuninstall.context.context import Context
from safeuninstall.environment.backend import find_links_offer
from safeuninstall.environment.installed import (
    InstalledDistribution,
    RequirementIndex,
    Source,
    census,
    installed_distributions,
    read_requires,
)
from safeuninstall.environment.sizes import count_text
from safeuninstall.operations.endings.bisect import (
    BISECT,
    BISECT_CONCURRENT_KEPT,
    BISECT_INCOMPLETE,
    BISECT_INCONCLUSIVE,
    BISECT_INTERRUPTED,
    BISECT_STOPPED,
    BISECTED,
)
from safeuninstall.operations.endings.trial import TRY, TRY_INCOMPLETE, TRY_NOT_RETURNED
from safeuninstall.operations.endings.uninstall import DRY_RUN
from safeuninstall.operations.results import (
    BisectResult,
    Culprit,
    ProbeRuns,
    Result,
    Round,
    StateChange,
    StateTried,
)
from safeuninstall.operations.trial import metric_lines, tried
from safeuninstall.options import BisectOptions
from safeuninstall.plans.bisection import bound
from safeuninstall.plans.changes import RollbackPlan, plan_restore
from safeuninstall.plans.culprits import Found, find, units
from safeuninstall.plans.diff import ChangeKind, Diff, Side, compare, snapshot_sides
from safeuninstall.probe.derived import against, as_baseline, derive
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.probe.metric import noise_note
from safeuninstall.probe.runner import (
    Probe,
    ProbeResult,
    ProbeSettings,
    RunSettings,
    compare_states,
    run_all,
    run_probe,
)
from safeuninstall.state import described
from safeuninstall.state.snapshot import PackageEntry, Snapshot, Target
from safeuninstall.state.stash import package_entry
from safeuninstall.transaction.guard import Change, Guard, SwitchFailed, Words
from safeuninstall.transaction.others import ChangedByOthers
from safeuninstall.transaction.transaction import (
    Restored,
    SnapshotSpec,
    Transaction,
    rewritten,
    stash_index,
)


def bisect(ctx: Context, configured: ProbeSettings, options: BisectOptions) -> BisectResult:
    needs = "bisect needs a probe that passes in the good snapshot and fails now"
    with _locked(ctx, configured, options, needs) as good:
        bisecting = _Bisect(ctx, configured, options, good)
        return bisecting.plan() if options.dry_run else bisecting.run()


@contextlib.contextmanager
def _locked(
    ctx: Context,
    configured: ProbeSettings,
    options: BisectOptions,
    needs: str,
    kept: str = "kept as it is, not bisected",
) -> Iterator[_Good]:
    """What bisect and try --state refuse before anything (an externally managed environment,
    no probe: ``needs`` says why one is needed, an unfinished operation), then, under the
    lock, the good state (``kept``: what is said of what no stash tells apart)."""
    ctx.refuse_externally_managed()
    if configured.disabled:
        raise InvalidInput(f"{needs}, and --no-probe leaves it none; nothing was changed")
    ctx.backend.find_links = [*options.find_links]
    with ctx.locked():
        ctx.refuse_if_unfinished()
        yield _Good.of(ctx, options.good, kept)


class _Good(NamedTuple):
    """The state the probe passes in: a snapshot of this environment, or one a file describes
    (state/described.py), held in memory as a snapshot of its versions with no stash of its
    own: what a stash of this environment holds comes from it, the rest from the index or the
    --find-links folders."""

    snapshot: Snapshot
    named: str  # "snapshot 3", "the file A.txt": how messages say it
    unversioned: frozenset[str] = frozenset()  # names the file gives no version of: kept
    notes: tuple[str, ...] = ()  # what the file set aside

    @classmethod
    def of(cls, ctx: Context, reference: str, kept: str) -> _Good:
        if not described.is_file_reference(reference):
            snap = ctx.store.resolve(reference)
            return cls(snap, f"snapshot {snap.id}")
        state = described.read(Path(reference))
        markers = ctx.interpreter.markers
        installed = installed_distributions(ctx.interpreter)
        chosen = state.select(markers, {name: d.source for name, d in installed.items()})
        unversioned = frozenset(n for n, p in chosen.items() if p.version is None)
        # An index source is matched by version alone: a lock file may name the index URL.
        packages = tuple(
            msgspec.structs.replace(e, source=Source(kind="index"))
            if e.source.kind == "index"
            else e
            for e in state.entries(markers)
        )
        interpreter = ctx.interpreter
        snap = Snapshot(
            id=state.path,
            created="",
            tool_version="",
            command=(),
            operation="file",
            target=Target(str(ctx.python), interpreter.prefix, state.python or ""),
            packages=packages,
        )
        notes = [f"{state.path}: {line}" for line in state.set_aside]
        notes += state.unversioned(chosen, kept)
        return cls(snap, f"the file {state.path}", unversioned, tuple(notes))


# How a change by another process is said: it may be found at any switch, or at the end.
_DURING = "during the bisect"
_Made = TypeVar("_Made", bound=Result)


class _Sides(NamedTuple):
    """One side of the change, as the units are formed from it: each distribution's version
    and files, and the names each requires."""

    sides: Mapping[str, Side]
    requires: Callable[[str], set[str]]


class _MoveFailed(Exception):
    """A state could not be reached and proven: the search stops, and the start comes back."""


class _InstallerFailed(_MoveFailed):
    """The installer failed at a switch (its error, or what it reported done and left undone):
    once the start is back, the same command is the one that goes on, when it works."""


class _Inconclusive(Exception):
    """A metric's runs could not tell a round's state from GOOD's: nothing can be named."""


class _Bisect:
    # How messages say when another process's change was found.
    _during = _DURING
    _command = "bisect"  # the results' ``command``, the journal's and the snapshot's name

    def __init__(
        self, ctx: Context, settings: ProbeSettings, options: BisectOptions, good: _Good
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.options = options
        self.good = good.snapshot
        self.named = good.named
        self.unversioned = good.unversioned
        self.units: dict[str, tuple[str, ...]] = {}
        self.start: Snapshot | None = None
        self.at: frozenset[str] = frozenset()  # the units as they are now, where it stands
        self.switched: set[str] = set()  # the units some switch brought to GOOD's versions
        self.baseline: list[ProbeResult] | None = None  # a metric's: measured in GOOD's state
        self.failure = ""  # the probe's output now
        self.good_failure = ""  # the probe's output in GOOD's state, where it fails there
        self.messages: list[str] = []
        self.probes = ProbeRuns()
        self.rounds: list[Round] = []  # as they ended, for an interrupt
        self.not_confirmed: dict[str, str] = {}  # a culprit of the search: how it did alone
        self.noise = ""  # what to do about a baseline noisier than the limit, said once
        self.messages += good.notes

    @contextlib.contextmanager
    def _prepared(
        self, endings: Endings, words: Words
    ) -> Iterator[tuple[Transaction, tuple[str, ...]]]:
        """The guarded change, prepared: the start snapshotted, the units grouped, the probe
        known, what cannot come back refused. Yields the transaction and what is not switched
        (same version, other files). Journaled, and its snapshot listed, under the command's
        name (a try --state is a try): ``recover`` takes it back to the start. Another
        process's change found before any switch is
        raised as one that changed nothing (the transaction is given up)."""
        read = census(self.ctx.interpreter)  # first: a change after it shows later
        installed = installed_distributions(self.ctx.interpreter)
        spec = self._spec(installed)
        change = Change(
            endings, self._command, words, read, installed, spec, offline=self.options.offline
        )
        self.guard = guard = Guard(self.ctx, change, self.messages)
        with guard.guarded() as txn:
            guard.prepare()
            self.start = start = guard.snapshot
            now = _Sides(snapshot_sides(start), lambda name: self._stash_requires(start, name))
            not_switched = self._group(txn.unchanged, now)
            if not self.settings.probes:
                self.settings = self._derived(txn.unchanged, installed)
            self._refuse_what_cannot_come_back(txn)
            try:
                yield txn, not_switched
            except ChangedByOthers as err:
                if txn.changed:
                    raise
                then = "nothing was changed: run it again"
                raise ChangedByOthers(err.changes, during=self._during, then=then) from None

    def run(self) -> BisectResult:
        words = Words("bisect", "any change", "the first switch")
        with self._prepared(BISECT, words) as (txn, not_bisected):
            try:
                return self._searched(txn, not_bisected)
            except ChangedByOthers as err:
                if not txn.changed:  # given up with the transaction: nothing to keep
                    raise
                outcome = BISECT_CONCURRENT_KEPT
                recover = self._left_for_others(txn, err, outcome)
                return self._result(outcome, None, not_bisected, None, recover)

    def _searched(self, txn: Transaction, not_bisected: tuple[str, ...]) -> BisectResult:
        """The search, and the end it leads to. A change by another process, found at any
        switch or at the return, is raised (ChangedByOthers): nothing of it is undone."""
        try:
            found = self._search(txn)
        except KeyboardInterrupt:
            if not txn.changed:
                raise
            return self._back(txn, BISECT_INTERRUPTED, None, not_bisected)
        except ChangedByOthers:
            raise
        except _MoveFailed as err:
            self.messages.append(str(err))
            again = shlex.join(self.ctx.command) if isinstance(err, _InstallerFailed) else None
            return self._back(txn, BISECT_STOPPED, None, not_bisected, again)
        except _Inconclusive as err:
            self.messages.append(str(err))
            return self._back(txn, BISECT_INCONCLUSIVE, None, not_bisected)
        except Exception as err:  # an error of ours, or the disk: the start comes back
            if not txn.changed:
                raise
            self.messages.append(f"the bisect stopped on an error: {err}")
            return self._back(txn, BISECT_STOPPED, None, not_bisected)
        return self._found(txn, found, not_bisected)

    def plan(self) -> BisectResult:
        """--dry-run: the units, where each version GOOD has would come from, the probe and the
        bound on its rounds. Nothing is written: no snapshot, no journal, no stash."""
        ctx = self.ctx
        installed = installed_distributions(ctx.interpreter)
        root = Path(ctx.interpreter.prefix)
        self.start = msgspec.structs.replace(  # now, in memory only
            self.good,
            id="now",
            packages=tuple(package_entry(d, root) for _, d in sorted(installed.items())),
        )

        requires = _requires_each(requirements_of(ctx, installed))
        said = _said_unchanged
        now = _Sides(installed_sides(ctx, installed), lambda name: requires.get(name, set()))
        not_bisected = self._group(said, now)
        if not self.settings.probes:
            self.settings = self._derived(said, installed)
        self.messages += self._plan_lines(installed)
        result = self._result(DRY_RUN, None, not_bisected, None)
        return msgspec.structs.replace(result, snapshot=None)

    def _plan_lines(self, installed: Mapping[str, InstalledDistribution]) -> list[str]:
        assert self.start is not None
        wanted = self._state(frozenset())
        entries = [e for e in wanted.packages if self.start.package(e.name) != e]
        restore = plan_restore(
            entries, stash_index(self.ctx, entries, [wanted]), preferred_snapshot=wanted.id
        )
        stashed = count_text(len(self._spec(installed).stash), "distribution")
        probes = ", ".join(p.label for p in self.settings.probes)
        lines = [
            f"--dry-run: would snapshot the start, stashing {stashed} (hard links), then probe "
            f"states between {self.named} and now with {probes}",
        ]
        lines += [
            f"{e.pin} from a stash (snapshot {candidates[0].snapshot_id})"
            for e, candidates in restore.from_stash
        ]
        offered = find_links_offer(self.options.find_links)
        for e in restore.reinstall:
            if _offered(e, offered):
                lines.append(f"{e.pin} from --find-links")
            else:
                offline = " (refused with --offline)" if self.options.offline else ""
                lines.append(f"{e.pin} from the index{offline}")
        absent = [n for names in self.units.values() for n in names if not self.good.package(n)]
        lines += [f"{n}: not in {self.named}, uninstalled for its state" for n in absent]
        return [*lines, self._bound_line()]

    def _bound_line(self) -> str:
        """The most rounds the search takes (bisection.bound, and the first round: now)."""
        n = len(self.units)
        first = self._judged_against_good()
        rounds = [1 + bound(n, k, failing=True) for k in (1, 2) if k <= n]
        line = f"at most {rounds[0]} rounds for one culprit among {count_text(n, 'unit')}"
        if len(rounds) > 1:
            line += f", {rounds[1]} for two"
        if first:
            line += (
                f"; first, a run in the state of {self.named}, which the probe is judged against"
            )
        return line

    def _spec(self, installed: Mapping[str, InstalledDistribution]) -> SnapshotSpec:
        """The start's snapshot stashes what any state may uninstall: the changed
        distributions, and those that list a file one of them lists (a restore brings them
        back whole). The rest is never touched."""
        owned = owned_files(self.ctx, installed)
        changed = [
            name
            for name, dist in installed.items()
            if (entry := self.good.package(name)) is None or entry.version != dist.version
        ]
        stash = sorted({*changed, *sharing_files(owned, changed)})
        return SnapshotSpec(
            operation=self._command, stash=stash, shared=owned.shared_paths(of=stash)
        )

    def _group(self, unchanged: Callable[[str], str], now: _Sides) -> tuple[str, ...]:
        """The changes since GOOD in units; the same-version ones whose files differ, which
        are not bisected, returned. Refused when no unit is left (said by ``unchanged``)."""
        good = self.good
        then = _Sides(snapshot_sides(good), lambda name: self._stash_requires(good, name))
        diff = compare(then.sides, now.sides)
        self.units = units(
            [
                c.name
                for c in diff.changes
                if c.kind is not ChangeKind.FILES_DIFFER and c.name not in self.unversioned
            ],
            _ties(diff, (then, now)),
        )
        if not self.units:
            raise InvalidInput(
                unchanged(
                    f"no distribution changed its version, nor came or went, between "
                    f"{self.named} and now"
                )
            )
        self.at = frozenset(self.units)
        return tuple(c.name for c in diff.of_kind(ChangeKind.FILES_DIFFER))

    def _found(self, txn: Transaction, found: Found, not_bisected: tuple[str, ...]) -> BisectResult:
        if found.now_passes:
            return self._refused(
                txn, "the probe passes now: there is no failure to bisect", self.failure
            )
        if found.good_fails:
            return self._refused(
                txn,
                f"the probe fails in {self.named} too: it cannot tell what changed since",
                self.good_failure,
            )
        if self.not_confirmed and not found.culprits:
            return self._back(txn, BISECT_INCONCLUSIVE, found, not_bisected)
        return self._back(txn, BISECTED, found, not_bisected)

    def _refused(self, txn: Transaction, why: str, detail: str) -> BisectResult:
        """Nothing to bisect: raised (BaselineProbeFailed), leaving nothing behind. Before any
        switch the transaction is given up; after one, the start comes back, proven, and then
        the snapshot and the journal go (a start that could not be proven keeps them, for
        ``recover``: BISECT_INCOMPLETE; another process's change found then is kept, raised
        as ChangedByOthers)."""
        if not txn.changed:
            raise BaselineProbeFailed(txn.unchanged(why), detail=detail)
        restored = self._return(txn)
        assert restored is not None
        if not restored.ok:
            outcome = BISECT_INCOMPLETE
            return self._result(outcome, None, (), restored, self._for_recover(txn, outcome))
        txn.discard()
        raise BaselineProbeFailed(
            f"{why}; to judge it, the bisect switched to the state of {self.named} "
            f"and back: {_proven(restored)}; nothing is left behind (no snapshot, no journal)",
            detail=detail,
        )

    # -- the units -----------------------------------------------------------------------

    def _stash_requires(self, snap: Snapshot, name: str) -> set[str]:
        """The names ``name`` requires in ``snap``, read from its stash (any marker or extra
        counts: a tie too many only makes a unit larger)."""
        entry = snap.package(name)
        if entry is None or entry.stash is None or not entry.dist_info:
            return set()
        return _required_names(
            self.ctx.store.folder(snap.id).holding(
                f"{entry.stash.folder}/{entry.dist_info}/METADATA"
            )
        )

    # -- the states ----------------------------------------------------------------------

    def _state(self, bad: frozenset[str]) -> Snapshot:
        """The start with every unit not in ``bad`` as GOOD had it. GOOD's entries come
        without their stash: its own snapshot, found by the restore, vouches for it."""
        assert self.start is not None
        packages = {e.name: e for e in self.start.packages}
        for key, names in self.units.items():
            if key in bad:
                continue
            for name in names:
                entry = self.good.package(name)
                if entry is None:
                    packages.pop(name, None)
                else:
                    packages[name] = msgspec.structs.replace(entry, stash=None)
        return msgspec.structs.replace(
            self.start, packages=tuple(sorted(packages.values(), key=lambda e: e.name))
        )

    def _refuse_what_cannot_come_back(self, txn: Transaction) -> None:
        """Before any change: every version GOOD has must be able to come back (from a stash;
        else from the index, unless --offline)."""
        assert self.start is not None
        wanted = self._state(frozenset())
        entries = [
            e for e in wanted.packages if self.start.package(e.name) != e and e.stash is None
        ]
        if self.options.offline:
            index = stash_index(self.ctx, entries, [wanted])
            unheld = plan_restore(entries, index, preferred_snapshot=wanted.id).reinstall
            offered = find_links_offer(self.options.find_links)
            missing = [e for e in unheld if not _offered(e, offered)]
            if missing:
                nor = ", nor does --find-links" if self.options.find_links else ""
                raise NotRestorable(
                    txn.unchanged(
                        f"no stash holds {', '.join(e.pin for e in missing)} of "
                        f"{self.named}{nor}, and --offline forbids the index"
                    )
                )
        cannot = txn.cannot_come_back(wanted, entries, offline=self.options.offline)
        if cannot:
            raise NotRestorable(
                txn.unchanged(
                    f"not every version of {self.named} can be brought back: " + "; ".join(cannot)
                )
            )

    def _move(self, txn: Transaction, bad: frozenset[str]) -> None:
        """Switch to the state with ``bad`` as now and the rest as GOOD had it, proven. A change
        by another process, since the last switch or during this one, stops it there
        (ChangedByOthers): a switch on would undo it, as would the return to the start."""
        if bad == self.at:
            return
        wanted = self._state(bad)
        before = self.at, set(self.switched)

        def starting() -> None:
            # Counted as switched before it begins: an interrupt or another process's change
            # during the switch leaves the environment somewhere between, and the return and
            # the check of what no switch touched must take the switch as made.
            self.at = bad
            self.switched |= set(self.units) - bad

        try:
            self.guard.measure_in(wanted, during=self._during, purpose="probe", starting=starting)
        except SwitchFailed as err:
            if err.unchanged:
                self.at, self.switched = before
            if err.installer is not None:  # the installer failed, not the probe, nor others
                raise _InstallerFailed(
                    f"{err.message}: the installer failed, nothing was judged; run it again "
                    f"once {self.ctx.backend.name} does what it reports"
                ) from None
            raise _MoveFailed(err.message) from None

    def _probe(self, txn: Transaction, bad: frozenset[str], confirms: str = "") -> bool | None:
        """The probe in the state with ``bad`` as now, judged: True when it passes, None when
        a metric cannot tell the state from GOOD's. ``confirms``: the culprit it tries alone."""
        self._move(txn, bad)
        ctx = self.ctx
        left = ", ".join(self._named(bad)) or "none"
        ctx.emit("probe", f"probe running, as now: {left}")
        txn.probing()
        results = self._round(txn, bad)
        metric = next((r.metric for r in results if r.metric is not None), None)
        inconclusive = metric is not None and metric.inconclusive
        passed = all(r.passed for r in results)
        done = Round(self._named(bad), passed, inconclusive, metric, confirms)
        self.rounds.append(done)
        ctx.emit("probe", f"probe with {left} as now: {done.verdict.upper()}")
        if not bad and not passed:
            self.good_failure = _failure_text(results)
        if bad == frozenset(self.units) and not passed:
            self.failure = _failure_text(results)
        return None if inconclusive else passed

    def _round(self, txn: Transaction, bad: frozenset[str]) -> list[ProbeResult]:
        """Each probe in the state with ``bad`` as now, judged against GOOD: the others first,
        in that state; a metric, when they pass, by runs of both states interleaved."""
        how = RunSettings(self.settings.timeout, self.ctx.child_env())
        probes = self.settings.probes
        results: list[ProbeResult | None] = [None] * len(probes)
        for index, probe in enumerate(probes):
            if probe.metric is None or self.baseline is None:
                ran = run_probe(probe, self.ctx.interpreter, settings=how)
                results[index] = (
                    ran if self.baseline is None else against(self.baseline[index], ran)
                )
        if all(r.passed for r in results if r is not None):
            for index, probe in enumerate(probes):
                if results[index] is None:
                    results[index] = self._compared(
                        probe,
                        how,
                        lambda after: self._move(txn, bad if after else frozenset()),
                        after_first=self.at == bad,
                        failed=lambda why: (
                            f"the metric failed in {self.named}'s state, where it passed "
                            f"before: {why}; no round can be judged"
                        ),
                    )
        return [r for r in results if r is not None]

    def _compared(
        self,
        probe: Probe,
        how: RunSettings,
        switch: Callable[[bool], None],
        *,
        after_first: bool,
        failed: Callable[[str], str],
    ) -> ProbeResult:
        """A metric in a state against GOOD's (bisect's round) or the start's (try), their
        runs interleaved (runner.compare_states): ``switch`` moves between the two, a few
        links. A failure in the state before stops it (``failed`` says so, given why); its
        noise note is said once."""
        compared = compare_states(probe, self.ctx.interpreter, how, switch, after_first=after_first)
        if compared.baseline_failed:
            raise _MoveFailed(failed(compared.baseline_failed))
        self._noted(compared.noise)
        return compared.result  # its output is the changed state's, where it ran

    def _noted(self, note: str) -> None:
        if note and not self.noise:
            self.noise = note
            self.messages.append(note)

    def _inconclusive_why(self) -> str:
        """The last round could not tell: which, why, and what then."""
        metric = next(p.metric for p in self.settings.probes if p.metric is not None)
        number, last = len(self.rounds), self.rounds[-1]
        runs, left = last.metric, ", ".join(last.bad) or "none"
        assert runs is not None
        return (
            f"round {number} (as now: {left}) could not be told apart from "
            f"{self.named} in {len(runs.values)} runs a side: {runs.why}. Nothing is named. "
            f"What then: more runs (--metric-max-runs, {metric.max_runs} now), a wider limit "
            f"(--max-regression, {metric.max_regression:g}% now) if a change that small does "
            "not matter, or a steadier workload (longer runs, a quieter machine)"
        )

    def _named(self, keys: frozenset[str]) -> tuple[str, ...]:
        """The units ``keys`` as the header names them: each unit's names joined by "+"."""
        return tuple("+".join(names) for key, names in self.units.items() if key in keys)

    def _derived(
        self, unchanged: Callable[[str], str], installed: Mapping[str, InstalledDistribution]
    ) -> ProbeSettings:
        """No probe given nor configured: the one derived from the changes, as for a removal
        of what GOOD had (derived.py): the changed distributions installed now, what requires
        any changed one, and torch's own check where torch is installed. Refused when that is
        nothing."""
        changed, dependents = self._changed_and_dependents(installed)
        present = sorted(name for name in changed if name in installed)
        refused = (
            "bisect needs a probe that passes in the good snapshot and fails now: none is given "
            "(--probe, --probe-cmd, --probe-metric) or configured, and none can be derived from "
            f"the changes since {self.named}: "
        )
        kept = sorted({*present, *dependents})
        return self._planned(unchanged, installed, kept, present, refused)

    def _changed_and_dependents(
        self, installed: Mapping[str, InstalledDistribution]
    ) -> tuple[set[str], set[str]]:
        """The distributions the units change, and those installed that require any of them."""
        changed = {name for names in self.units.values() for name in names}
        required_by = requirements_of(self.ctx, installed)
        return changed, {d for name in changed for d, _ in required_by.get(name, ())}

    def _planned(
        self,
        unchanged: Callable[[str], str],
        installed: Mapping[str, InstalledDistribution],
        kept: list[str],
        removed: list[str],
        refused: str,
    ) -> ProbeSettings:
        """The probe derived as for a removal of ``removed`` that keeps ``kept``; refused
        (``refused``, then why each found nothing) when nothing can be derived."""
        probes, notes = derive(installed, kept, removed)
        if not probes:
            raise InvalidInput(unchanged(refused + "; ".join(notes)))
        self.probes = msgspec.structs.replace(self.probes, notes=notes, planned=probes)
        return ProbeSettings(probes=probes, timeout=self.settings.timeout, notes=notes)

    def _judged_against_good(self) -> bool:
        """A metric, or a derived probe's candidates, are judged against a run in GOOD's state,
        made before the search."""
        return any(
            p.metric is not None or p.kind is ProbeKind.DERIVED for p in self.settings.probes
        )

    def _search(self, txn: Transaction) -> Found:
        if self._judged_against_good():
            # A metric, or a derived probe's candidates, are judged against GOOD's run, first.
            self._move(txn, frozenset())
            self.ctx.emit("baseline", "baseline probe running, as " + self.named)
            ran = run_all(self.settings, self.ctx.interpreter, self.ctx.child_env())
            baseline = [as_baseline(r) for r in ran]
            self.probes = msgspec.structs.replace(self.probes, baseline=tuple(baseline))
            if not all(r.passed for r in baseline):
                self.good_failure = _failure_text(baseline)
                return Found(good_fails=True)
            self.baseline = baseline
            for result in baseline:
                if result.probe.metric is not None and result.metric is not None:
                    self._noted(noise_note(result.probe.metric, result.metric.values))
        order = list(self.units)
        # The first state probed is the start itself: no move while nothing changed yet.
        metric = any(p.metric is not None for p in self.settings.probes)
        found = find(
            order,
            lambda bad: self._probe(txn, bad),
            good_proven=self.baseline is not None,
            steady=not metric,
            alone=lambda key: self._probe(txn, frozenset({key}), confirms=key),
        )
        if found.inconclusive:
            raise _Inconclusive(self._inconclusive_why())
        self.not_confirmed = {
            key: "passed" if verdict else "inconclusive" for key, verdict in found.not_confirmed
        }
        return found

    # -- the end -------------------------------------------------------------------------

    def _back(
        self,
        txn: Transaction,
        outcome: Outcome,
        found: Found | None,
        not_bisected: tuple[str, ...],
        again: str | None = None,
    ) -> BisectResult:
        """Back to the start, verified; the result, naming ``again`` (the command that goes
        on from the start) when there is one (BISECT_INCOMPLETE when the start could not be
        proven: the journal stays, for ``recover``). A change by another process since the
        last switch, or during the return, is raised (ChangedByOthers)."""
        restored = self._return(txn)
        if restored is not None and not restored.ok:
            recover = self._for_recover(txn, BISECT_INCOMPLETE)
            return self._result(BISECT_INCOMPLETE, found, not_bisected, restored, recover)
        if txn.interrupted and outcome is BISECTED:
            outcome = BISECT_INTERRUPTED
        self.messages += self._written_in_place()
        txn.finish(outcome)
        return self._result(outcome, found, not_bisected, restored, again)

    def _written_in_place(self) -> list[str]:
        """The units no switch touched whose files were replaced or written in place since the
        start (by the probe, say): the return did not touch them either, so they are not as
        the start had them. Found by a stat of each file against the one the stash hasher
        recorded, and by their bytes where the ctime alone moved (transaction.rewritten)."""
        assert self.start is not None
        never = {n for key, names in self.units.items() if key not in self.switched for n in names}
        kept = tuple(e for e in self.start.packages if e.name in never)
        if not kept:
            return []
        now = installed_distributions(self.ctx.interpreter)
        snap = msgspec.structs.replace(self.start, packages=kept)
        written = rewritten(self.ctx, snap, now, RollbackPlan((), (), (), (), ()))
        return [
            f"NOT as at the start: files of {name}=={now[name].version} were replaced or written "
            "in place since the bisect began (no switch touched it, nor did the return)"
            for name in written
        ]

    def _return(self, txn: Transaction) -> Restored | None:
        """The start again, in one batch, proven (None: nothing was changed). A change by
        another process since the last switch, or during the return, is raised
        (ChangedByOthers): the return would undo it, or did not make the start."""
        assert self.start is not None
        if not txn.changed:
            return None
        txn.check_others(during=self._during)
        restored, failed = self.guard.switch(self.start, during=self._during, all_or_nothing=False)
        if failed is not None:
            self.messages.append(failed)
        return restored

    def _left_for_others(self, txn: Transaction, changed: ChangedByOthers, outcome: Outcome) -> str:
        """Another process changed the environment: going on, or back, would undo its work.
        Ends as ``outcome``, for ``recover`` (``_for_recover``)."""
        self.messages.append(
            f"{changed.message}: the {self.guard.change.words.noun} stopped there and undid "
            "nothing of it; the environment is as the last switch and that process left it, "
            "and `recover` returns it to the start (undoing that change too)"
        )
        return self._for_recover(txn, outcome)

    def _for_recover(self, txn: Transaction, outcome: Outcome) -> str:
        """Ends as ``outcome``, the journal kept: ``recover``, the command returned, takes the
        environment back to the start when the user says so."""
        txn.finish(outcome, keep_journal=True)
        return self.ctx.suggest("recover")

    def _made(
        self,
        kind: type[_Made],
        outcome: Outcome,
        restored: Restored | None,
        next_command: str | None,
        **own: Any,
    ) -> _Made:
        """A result of ``kind``: the fields bisect and try --state share, and its ``own``."""
        assert self.start is not None
        return kind(
            command=self._command,
            outcome=outcome,
            python=str(self.ctx.python),
            snapshot=self.start.id,
            probes=self.probes,
            restored=restored,
            next_command=next_command,
            messages=tuple(self.messages),
            **own,
        )

    def _result(
        self,
        outcome: Outcome,
        found: Found | None,
        not_bisected: tuple[str, ...],
        restored: Restored | None,
        next_command: str | None = None,
    ) -> BisectResult:
        culprits: tuple[Culprit, ...] = ()
        if found is not None and outcome is BISECTED:
            culprits = tuple(self._culprit(self.units[key]) for key in found.culprits)
            next_command = self._bring_back(culprits)
            if not found.final_passed:
                self.messages.append(
                    "no round had only the culprits brought back pass: the changes may act "
                    "together, or the probe is not steady"
                )
        for key, verdict in self.not_confirmed.items():
            self.messages.append(
                f"{'+'.join(self.units[key])}: the search found it, but on its own (the good "
                f"snapshot with only it as now) the probe {_ALONE[verdict]}: not confirmed, "
                "not named"
            )
        if not_bisected:
            self.messages.append(
                "same version, other files since the good snapshot (not bisected): "
                + ", ".join(not_bisected)
            )
        return self._made(
            BisectResult,
            outcome,
            restored,
            next_command,
            good=self.good.id,
            units=tuple(self.units.values()),
            rounds=tuple(self.rounds),
            culprits=culprits,
            not_confirmed=tuple(self._culprit(self.units[key]) for key in self.not_confirmed),
            confirmed=found.final_passed if found is not None else False,
            failure=self.failure,
            not_bisected=not_bisected,
        )

    def _culprit(self, names: Sequence[str]) -> Culprit:
        assert self.start is not None
        good = tuple(e.pin for n in names if (e := self.good.package(n)) is not None)
        bad = tuple(e.pin for n in names if (e := self.start.package(n)) is not None)
        return Culprit(tuple(names), good, bad)

    def _bring_back(self, culprits: Sequence[Culprit]) -> str:
        """The one command that keeps everything else and brings back GOOD's versions of the
        culprits: guarded by ``run``, so a failure is undone too."""
        pins = [pin for c in culprits for pin in c.good]
        had = {pin.partition("==")[0] for pin in pins}
        added = sorted(n for c in culprits for n in c.names if n not in had)  # since GOOD
        links = [arg for folder in self.options.find_links for arg in ("--find-links", folder)]
        install = ["uv", "pip", "install", "--no-deps", *links, *pins]
        if not added:
            return self.ctx.suggest("run", "--", *install)
        if not pins:
            return self.ctx.suggest("uninstall", *added)  # a name may be a subcommand's
        script = shlex.join(["uv", "pip", "uninstall", *added]) + " && " + shlex.join(install)
        return self.ctx.suggest("run", "--", "sh", "-c", script)


def _offered(entry: PackageEntry, offered: set[tuple[str, Version]]) -> bool:
    """Whether a --find-links folder has a file of ``entry``'s version (``1.0`` is ``1.0.0``)."""
    try:
        return (entry.name, Version(entry.version)) in offered
    except InvalidVersion:
        return False


def _said_unchanged(said: str) -> str:
    return f"{said}; nothing was changed"


def _ties(diff: Diff, sides: Sequence[_Sides]) -> dict[str, set[str]]:
    """Changed names tied to others: a requirement either way (in GOOD or now), or a path
    both list."""
    changed = {c.name for c in diff.changes}
    ties: dict[str, set[str]] = {name: set() for name in changed}
    for side in sides:
        owners: dict[str, set[str]] = {}
        for name in changed:
            one = side.sides.get(name)
            for path in one.files or () if one is not None else ():
                owners.setdefault(path, set()).add(name)
            for required in side.requires(name):
                if required in changed:
                    ties[name].add(required)
                    ties[required].add(name)
        for names in owners.values():
            for name in names:
                ties[name] |= names
    return ties


def _requires_each(index: RequirementIndex) -> dict[str, set[str]]:
    """Each installed distribution's required names, from the installed set's requirement
    index (required name -> its dependents)."""
    requires: dict[str, set[str]] = {}
    for required, dependents in index.items():
        for dependent, _ in dependents:
            requires.setdefault(dependent, set()).add(required)
    return requires


def _required_names(metadata: Path) -> set[str]:
    """The names a METADATA file's Requires-Dist lines name (none: it cannot be read)."""
    try:
        lines = read_requires(metadata)
    except OSError:
        return set()
    names: set[str] = set()
    for line in lines:
        try:
            names.add(canonicalize_name(Requirement(line).name))
        except InvalidRequirement:
            continue
    return names


def _proven(restored: Restored) -> str:
    """What a verified return to the start proved: the installed set, and the files brought
    back. (The files of distributions no switch touched are not hashed: a switch never wrote
    them, and hashing them all would cost as much as reading the environment's every byte.)"""
    assert restored.verification is not None
    files = count_text(restored.verification.files_checked, "file")
    return f"the installed set is the start's again, and the {files} brought back hash-checked"


_ALONE = {"passed": "passed", "inconclusive": "could not tell it from the good state"}


def _failure_text(results: Sequence[ProbeResult]) -> str:
    """Each failing probe: what it is and how it ended, then what it printed."""
    lines = []
    for r in results:
        if not r.passed:
            lines.append(f"{r.probe.label} -- {r.summary()}")
            lines += [o for o in r.failure_outputs() if o]
    return "\n".join(lines)


# -- try --state FILE ---------------------------------------------------------------------


def try_state(ctx: Context, configured: ProbeSettings, options: BisectOptions) -> StateTried:
    """``try --state FILE``: the environment switched to the state FILE describes, every
    difference at once, judged against the start (the probes; a metric by runs of both states
    interleaved), then ALWAYS back to the start, verified. It is a bisect of one round over
    all the units, through the same guard and switches; its verdict is try's outcome."""
    needs = "try --state needs a probe to judge the file's state"
    with _locked(ctx, configured, options, needs, kept="kept as it is, not switched") as good:
        return _TryState(ctx, configured, options, good).tried()


_TRYING = "during the try"


class _TryState(_Bisect):
    """The file's state is GOOD's (``self._state(frozenset())``); the start is every unit as
    now. The probes run at the start first (the baseline the file's state is judged against),
    then in the file's state; a metric's runs alternate between the two."""

    _during = _TRYING
    _command = "try"

    def tried(self) -> StateTried:
        words = Words("try", "any change", "the switch to the file's state")
        with self._prepared(TRY, words) as (txn, not_compared):
            self.messages.append(
                f"tried: the state of {self.named}: " + _changes_text(self._changes())
            )
            try:
                after, cause = self._judged(txn)
            except ChangedByOthers as err:
                if not txn.changed:
                    raise
                outcome = TRY_NOT_RETURNED
                recover = self._left_for_others(txn, err, outcome)
                return self._tried_result(outcome, not_compared, None, recover)
            return self._back_from(txn, cause, after, not_compared)

    def _judged(self, txn: Transaction) -> tuple[tuple[ProbeResult, ...], Cause]:
        """The verdict on the file's state, and why the try ends: the probes' cause, or an
        interrupt, a state that could not be reached, an error. Before any change, an error is
        raised as it is (nothing to undo)."""
        try:
            after = self._trial(txn)
        except KeyboardInterrupt:
            if not txn.changed:
                raise
            self.messages.append("interrupted: back to the start")
            return (), Cause.INTERRUPTED
        except ChangedByOthers:
            raise
        except _MoveFailed as err:
            if not txn.changed:  # the metric failed at the start, before any switch
                raise BaselineProbeFailed(txn.unchanged(str(err))) from None
            self.messages.append(str(err))
            return (), Cause.FAILED
        except Exception as err:  # an error of ours, or the disk: the start comes back
            if not txn.changed:
                raise
            self.messages.append(f"the try stopped on an error: {err}")
            return (), Cause.ERROR
        return after, Cause.TRIED if all(r.passed for r in after) else Cause.PROBE_FAILED

    def _trial(self, txn: Transaction) -> tuple[ProbeResult, ...]:
        """The probes at the start (a failure there refuses the try, nothing changed), then in
        the file's state, judged against the start; a metric, when the others pass, by runs of
        both states interleaved."""
        ctx = self.ctx
        how = RunSettings(self.settings.timeout, ctx.child_env())
        plain = [p for p in self.settings.probes if p.metric is None]
        if plain:
            ctx.emit("baseline", "baseline probe running, at the start")
        before = [as_baseline(run_probe(p, ctx.interpreter, settings=how)) for p in plain]
        self.probes = msgspec.structs.replace(self.probes, baseline=tuple(before))
        if not all(r.passed for r in before):
            raise BaselineProbeFailed(
                txn.unchanged(
                    "the probe already fails here, before any change, so it cannot judge "
                    f"{self.named}'s state (`bisect FILE` finds which differences make it fail)"
                ),
                detail=_failure_text(before),
            )
        after: list[ProbeResult] = []
        if plain:
            self._move(txn, frozenset())
            ctx.emit("probe", f"probe running, in the state of {self.named}")
            txn.probing()
            ran = [run_probe(p, ctx.interpreter, settings=how) for p in plain]
            after = [against(b, r) for b, r in zip(before, ran, strict=True)]
        if all(r.passed for r in after):
            metrics = [p for p in self.settings.probes if p.metric is not None]
            after += [self._measured(txn, probe, how) for probe in metrics]
        self.probes = msgspec.structs.replace(self.probes, after=tuple(after))
        return tuple(after)

    def _measured(self, txn: Transaction, probe: Probe, how: RunSettings) -> ProbeResult:
        """A metric in the file's state against the start, their runs interleaved."""
        there, here = frozenset[str](), frozenset(self.units)

        def switch(after: bool) -> None:
            self._move(txn, there if after else here)
            if after:
                txn.probing()

        self.ctx.emit("probe", f"metric runs, the start and {self.named}'s state in turn")
        return self._compared(
            probe,
            how,
            switch,
            after_first=self.at == there,
            failed=lambda why: (
                f"the metric failed at the start, where the try began: {why}; nothing can be judged"
            ),
        )

    def _derived(
        self, unchanged: Callable[[str], str], installed: Mapping[str, InstalledDistribution]
    ) -> ProbeSettings:
        """No probe given nor configured: the one derived as for a removal of what the file's
        state lacks: the changed distributions both states have and what requires any changed
        one and stays (not what the file's state uninstalls: its import failing there is the
        switch, not a break), with torch's own check where torch is among them."""
        changed, dependents = self._changed_and_dependents(installed)
        removed = sorted(n for n in changed if n in installed and not self.good.package(n))
        kept = sorted({*changed, *dependents} - set(removed))
        refused = (
            "try --state needs a probe to judge the file's state: none is given (--probe, "
            "--probe-cmd, --probe-metric) or configured, and none can be derived from how "
            f"{self.named} differs: "
        )
        return self._planned(unchanged, installed, kept, removed, refused)

    def _back_from(
        self,
        txn: Transaction,
        cause: Cause,
        after: Sequence[ProbeResult],
        not_compared: tuple[str, ...],
    ) -> StateTried:
        """Back to the start, verified; the verdict as try names it (trial.tried), or
        TRY_INCOMPLETE when the start could not be proven (the journal stays, for
        ``recover``). A change by another process found now is left as it is."""
        try:
            restored = self._return(txn)
        except ChangedByOthers as err:
            outcome = TRY_NOT_RETURNED
            recover = self._left_for_others(txn, err, outcome)
            return self._tried_result(outcome, not_compared, None, recover)
        if restored is not None and not restored.ok:
            recover = self._for_recover(txn, TRY_INCOMPLETE)
            return self._tried_result(TRY_INCOMPLETE, not_compared, restored, recover)
        if txn.interrupted and cause is not Cause.INTERRUPTED:
            self.messages.append("an interrupt arrived during the return; it finished first")
            cause = Cause.INTERRUPTED
        outcome = tried(cause, Ending.RESTORED, after)
        if restored is not None:
            self.messages.append(_proven(restored))
        self.messages += metric_lines(after)
        txn.finish(outcome)
        return self._tried_result(outcome, not_compared, restored)

    def _tried_result(
        self,
        outcome: Outcome,
        not_compared: tuple[str, ...],
        restored: Restored | None,
        next_command: str | None = None,
    ) -> StateTried:
        if not_compared:
            self.messages.append(
                f"same version, other files than {self.named} (not switched): "
                + ", ".join(not_compared)
            )
        return self._made(
            StateTried,
            outcome,
            restored,
            next_command,
            file=self.good.id,
            changes=self._changes(),
            not_compared=not_compared,
        )

    def _changes(self) -> tuple[StateChange, ...]:
        """Each distribution the file's state has otherwise: its version here and there."""
        assert self.start is not None
        start, good = self.start, self.good
        names = sorted(n for unit in self.units.values() for n in unit)
        return tuple(
            StateChange(
                name,
                e.version if (e := start.package(name)) is not None else None,
                e.version if (e := good.package(name)) is not None else None,
            )
            for name in names
        )


def _changes_text(changes: Sequence[StateChange]) -> str:
    """``part0 2.0 -> 1.0, part5 (absent) -> 1.0``: each change, here then there."""
    return ", ".join(f"{c.name} {c.here or '(absent)'} -> {c.there or '(absent)'}" for c in changes)
