"""``--keep-needed``: remove what is not needed of the candidates, keep the rest, each with its
reason. First what the metadata and the library model show (``plan``), then, after the
removal's snapshot, a search by probe runs (``KeepNeeded``): reports/needs.py weighs the
evidence, plans/bisection.py chooses the runs.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import msgspec

from safeuninstall.base.outcome import Cause, Outcome
from safeuninstall.context.analysis import failure_text, library_index, owned_files, requirements_of
from safeuninstall.operations.endings.uninstall import KEPT_NEEDED, NOTHING_TO_DO, REMOVED
from safeuninstall.operations.results import RemovalResult
from safeuninstall.operations.uninstall.removal import Attempt, Removal
from safeuninstall.plans.bisection import bound, search
from safeuninstall.probe.derived import undecided
from safeuninstall.probe.runner import ProbeResult
from safeuninstall.reports.needs import (
    INCONCLUSIVE,
    Cleanup,
    Needed,
    Trial,
    judge,
    kept_by_search,
    loaded_by_probe,
    required,
    together,
)
from safeuninstall.transaction.guard import Guard, Stands, SwitchFailed, Verdict
from safeuninstall.transaction.transaction import Restored

_MOVING = "while --keep-needed moved between the states it tries"


def plan(removal: Removal) -> None:
    """--keep-needed: the candidates that metadata or the library model shows as needed
    are kept, with their reasons; the plan is what is left to try."""

    ctx, candidates = removal.ctx, removal.plan.remove
    removal.requirements = removal.requirements or requirements_of(removal.ctx, removal.installed)
    index = library_index(ctx)
    kept, tried = judge(
        removal.installed,
        ctx.interpreter.markers,
        candidates,
        removal.requirements,
        (index, owned_files(ctx, removal.installed)),
    )
    for needed in kept:
        ctx.emit("plan", f"kept, needed: {needed.name}: {needed.reason}")
    ctx.emit("plan", f"to try: {', '.join(tried) or 'nothing'}")
    removal.cleanup = Cleanup(candidates=candidates, kept=kept, tried=tried, removed=())
    removal.plan = msgspec.structs.replace(removal.plan, remove=tried)


class _Stop(Exception):
    """The search can't go on (the installer failed, a partial restore was not verified):
    everything is restored, for ``cause``. (Another process's change is ChangedByOthers:
    what the search removed is restored, nothing of that process's work is undone.)"""

    def __init__(self, cause: Cause, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


class KeepNeeded(Attempt):
    """--keep-needed: bisection.search finds the largest subset of the candidates tried whose
    removal passes (its first run removes them all, or for some counts a part of them), each
    tried before what it requires (``_search_order``).
    Between two runs the guard moves the environment (``_move_to``): from this transaction's
    own stash and by uninstalling, in one batch, proven; one snapshot for it all, so one
    ``rollback`` undoes the whole cleanup. An interrupt, an error or a failing final run
    restores everything: the environment ends in the final state proven by a passing probe,
    or in the snapshot's."""

    # Each run of the search judges one state: a metric's runs there are judged against the
    # baseline's, measured before the search.
    interleaves = False

    def __init__(self, removal: Removal, guard: Guard, baseline: Sequence[ProbeResult]) -> None:
        super().__init__(removal, guard, baseline)
        self.state: frozenset[str] = frozenset()  # removed now
        self.trials: list[Trial] = []
        self.found_needed: list[Needed] = []  # by the baseline's load map, then the search
        self.tried: tuple[str, ...] = self.snap.removed
        self.units = 0  # what the search moves: candidates sharing a file go together
        self.sharing: dict[str, tuple[str, ...]] = {}  # the candidates sharing files, together
        self.needed_units = 0
        self.last: tuple[frozenset[str], bool] | None = None  # the last probe run's state
        self.reruns = 0  # probe runs made again to confirm a failure

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
        ended = self.guard.attempt(self._search, self._restore)
        return self._result(ended.outcome, ended.restored, ended.next_command)

    def _search(self) -> Verdict:
        """The search, and the state it ends in: the cleanup stands, or everything comes back
        for a cause."""
        try:
            return self._searched()
        except _Stop as stop:
            self.removal.messages.append(stop.message)
            return stop.cause

    def _searched(self) -> Verdict:
        messages = self.removal.messages
        self.found_needed = self._loaded_by_baseline()
        for needed in self.found_needed:
            self.ctx.emit("plan", f"kept, needed: {needed.name}: {needed.reason}")
        loaded = {n.name for n in self.found_needed}
        self.tried = tuple(n for n in self.snap.removed if n not in loaded)
        if not self.tried:
            messages.append("nothing to try: every candidate is needed")
            return Stands(NOTHING_TO_DO)
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
            self._why_needed(name, units[unit]) for unit in found.needed for name in units[unit]
        ]
        unsure = [n.name for n in self.found_needed if n.why == INCONCLUSIVE]
        if unsure:
            messages.append(
                f"the metric's runs could not tell whether {', '.join(unsure)} is needed "
                "(kept: inconclusive is never a pass); more runs (--metric-runs), a wider "
                "--max-regression or a steadier workload may tell"
            )
        # The search moved units as if each were needed or not on its own; what stays keeps
        # what it requires, in every run (the probe judged that) and at the end.
        chosen = frozenset(n for unit in found.removable for n in units[unit])
        final, kept = self._with_requirements_kept(chosen, units)
        self.found_needed += [kept[name] for name in self.snap.removed if name in kept]
        if not found.final_passed:
            messages.append(
                "the probe failed on the final state the search found (the candidates' needs "
                "are not independent, or the probe is not reliable): restoring all"
            )
            return Cause.PROBE_FAILED
        if not final and unsure:
            messages.append("no candidate tried was shown removable: restoring them all")
            return Cause.INCONCLUSIVE
        if not final:
            messages.append("every candidate tried is needed: restoring them all")
            return Cause.NEEDED
        assert self.state == final  # the search's last run probed it (see _passes)
        stayed = [name for name in self.snap.removed if name in final]
        if len(stayed) < len(self.snap.removed):  # the history names what stayed removed
            self.ctx.store.set_removed(self.snap.id, stayed)
        return Stands(self._outcome())

    def _outcome(self) -> Outcome:
        cleanup = self.removal.cleanup
        kept = bool(self.found_needed or (cleanup is not None and cleanup.kept))
        return KEPT_NEEDED if kept else REMOVED

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
            reruns=self.reruns,
            bound=bound(self.units, self.needed_units),
            trials=tuple(self.trials),
        )
        return msgspec.structs.replace(
            result,
            removed=tuple(f"{n}=={installed[n].version}" for n in final),
            cleanup=cleanup,
        )

    def _why_needed(self, name: str, unit: Sequence[str]) -> Needed:
        """``name`` kept by the search: the failure of the smallest failing run that removed
        it, or its metric's inconclusive runs (needs.kept_by_search); and the candidates that
        share files with it, which go and stay with it."""
        kind, text = kept_by_search(name, self.trials)
        sharing = next(u for u in self.sharing.values() if name in u)
        others = [n for n in unit if n != name and n in sharing]
        if others:
            text += f" (tried together with {', '.join(others)}: they list files in common)"
        others = [n for n in unit if n not in sharing]
        if others:
            text += f" (tried together with {', '.join(others)}: they require each other)"
        return Needed(name, (text,), kind)

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
        """The verdict on the state without ``removed``. A failure counts only when the probe
        fails again on the same state: one made by chance (a flaky test, a timeout) would keep
        a candidate that is not needed, with a reason that is false."""
        self._move_to(removed)
        if not self.removal.after.probes:  # no probe: the static evidence alone judged
            return True
        self.txn.probing()
        shown = ", ".join(sorted(removed))
        passed, why, unsure = self._verdict()
        if not passed:  # a metric's runs that could not tell may tell on a second go
            run, said = len(self.trials) + 1, "INCONCLUSIVE" if unsure else "FAILED"
            self.ctx.emit("bisect", f"run {run}: without {shown}: {said}; running it again")
            self.reruns += 1
            passed, again, unsure = self._verdict()
            once = f"{said.lower()} once ({why})" if why else f"{said.lower()} once"
            why = again if not passed else f"{once}, then passed when run again"
        self.trials.append(Trial(tuple(sorted(removed)), passed, why, unsure))
        verdict = "passed" if passed else "INCONCLUSIVE" if unsure else "FAILED twice"
        self.ctx.emit("bisect", f"run {len(self.trials)}: without {shown}: {verdict}")
        return passed

    def _verdict(self) -> tuple[bool, str, bool]:
        """One probe run on the environment as it is: whether it passed, why not (the
        probe's last line, or the drift), and whether that is a metric's runs that could not
        tell (derived.undecided), not a failure."""
        after, _ = self._probe()
        self.txn.check_others(
            during="during the removal", then="the probe judged another environment"
        )
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
        unsure = undecided(after) and not (drifted and not self.removal.options.allow_drift)
        if unsure:  # what the metric's runs showed, not the workload's last line (a number)
            why = next(r.metric.why for r in after if not r.passed and r.metric is not None)
        return passed, why, unsure

    def _move_to(self, removed: frozenset[str]) -> None:
        """Move to the snapshot's state less ``removed``: what it leaves out comes back from
        the stash, the rest is uninstalled, in one batch, proven (Guard.measure_in). Another
        process's change, before the move or during it, stops the search (ChangedByOthers):
        what the search removed comes back, nothing of that process's work is undone."""
        snap, before = self.snap, self.state
        wanted = msgspec.structs.replace(
            snap, packages=tuple(e for e in snap.packages if e.name not in removed)
        )

        def starting() -> None:
            # Counted as gone before the move begins: an interrupt held back while it runs is
            # raised once it is done, and the undo must bring back all the move may have taken.
            self.state = before | removed

        def reached(restored: Restored, failed: str | None) -> None:
            if failed is None and restored.ok:
                self.state = removed

        try:
            self.guard.measure_in(
                wanted, during=_MOVING, purpose="try", starting=starting, reached=reached
            )
        except SwitchFailed as err:
            if err.unchanged:
                self.state = before
            if err.installer is not None:  # its error, or what it said done and left
                raise _Stop(Cause.FAILED, err.installer) from None
            raise _Stop(Cause.ERROR, err.message) from None
