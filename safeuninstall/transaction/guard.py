"""The guarded change: the one lifecycle every change-making operation goes through.

An operation describes its change (``Change``: what to snapshot, what it is called, how its
endings are named) and supplies the step that makes and judges it; the guard does the rest,
the same way for a removal, a guarded command, a rollback, a cleanup search and a bisect:

1. ``guarded``: the transaction (journal, snapshot, stash); an interrupt before any change
   gives it all up, one after a change is reported as such.
2. ``prepare``: the snapshot (under the installer's lock when asked), the baseline the probe
   judges against, then the last look for another process's change before anything changes.
3. ``attempt``: the step runs; it says whether the change stands, is kept on request, or must
   be undone, and for what cause. Another process's change (ChangedByOthers), an interrupt or
   an error of ours while it runs is a cause too.
4. ``undo``: everything the change did comes back in one batch, interrupts held, verified by
   hashes; the outcome is the operation's (cause, ending); a restore that could not be
   verified keeps the journal for ``recover``; a change that cannot come back whole is left
   as it is (``NotUndone``), never half undone.
5. ``switch``: a move to another state within the change (bisect's states, the states a
   metric's runs alternate between: ``measure_in``), in one batch, proven, then checked for
   another process's change. An installer that reports success and leaves undone what it was
   asked is its own failure there (SwitchFailed.installer), never another process's change.

What another process changed is noticed by one check (Transaction.check_others) and means the
same everywhere: the operation stops where it is, names the change, and undoes nothing of it.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from safeuninstall.base.errors import (
    BaselineProbeFailed,
    Interrupted,
    InterruptedAfterChange,
    NotRestorable,
)
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation, Outcome, OutcomeTableError
from safeuninstall.context.analysis import failure_text
from safeuninstall.context.baseline import BaselineCache, Begun
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import InstalledDistribution, names_in
from safeuninstall.libraries.index import ownership
from safeuninstall.probe.derived import as_baseline
from safeuninstall.probe.runner import Probe, ProbeResult, RunSettings, compare_states
from safeuninstall.state.journal import Entry
from safeuninstall.state.snapshot import PackageEntry, Snapshot
from safeuninstall.transaction.others import ChangedByOthers
from safeuninstall.transaction.transaction import Restored, SnapshotSpec, Transaction, take_snapshot


@dataclass(frozen=True)
class Words:
    """How the messages name the change: ``noun`` ("removal"), what an interrupt before any
    change came ``before`` ("anything was removed"), what it came ``after`` ("the uninstall had
    started"), and what a refusal before any change leaves (``unchanged``)."""

    noun: str
    before: str
    after: str
    unchanged: str = "nothing was changed"


@dataclass(frozen=True)
class Change:
    """What an operation changes, described before it begins."""

    endings: Endings  # the operation's outcomes: its table names how the change ends
    journal: str  # the journal's and the snapshot's name for the operation
    words: Words
    read: frozenset[str]  # the census taken just before ``installed`` was read
    installed: Mapping[str, InstalledDistribution]
    spec: SnapshotSpec
    offline: bool
    installer_locked: bool = False  # the snapshot is taken under the installer's own lock
    recovering: Entry | None = None  # a recover: the journal entry it finishes
    # Another process changed the environment while the step ran, with the change in place,
    # and the operation cannot tell its own change from theirs (a command's): kept as it is,
    # named, as this outcome. None, or the change not in place (a metric's runs had left the
    # state before it, ``Guard.at_change``): the operation undoes only its own (a removal puts
    # back what it removed), proven beside theirs.
    kept_for_others: Outcome | None = None
    undoes: bool = True  # False: it finishes another operation's undo (a recover) and has none

    @property
    def operation(self) -> Operation:
        return self.endings.operation


@dataclass(frozen=True)
class Stands:
    """The change stands, as ``outcome`` (removed, ran, rolled back)."""

    outcome: Outcome


@dataclass(frozen=True)
class Kept:
    """Judged a failure and kept on request (``--keep-on-failure``), as ``outcome``."""

    outcome: Outcome


Verdict = Stands | Kept | Cause


@dataclass(frozen=True)
class Back:
    """What an undo brings back. ``entries``: those of the snapshot, in one batch, with
    ``intact`` (distributions that share files with them) checked whole; None: the whole
    snapshot's installed set again (what was added goes, ``also`` is installed again).
    ``all_or_nothing``: refuse (NotUndone) unless everything can come back."""

    entries: Sequence[PackageEntry] | None = None
    intact: Sequence[str] = ()
    also: Sequence[str] = ()
    all_or_nothing: bool = False


@dataclass(frozen=True)
class Ended:
    """Where the guarded change ended: the outcome, the proof of an undo (or a switch), and
    the one command that goes on from here."""

    outcome: Outcome
    restored: Restored | None = None
    next_command: str | None = None


class SwitchFailed(Exception):
    """A state within the change could not be reached and proven (``Guard.measure_in``):
    ``message`` says why; ``unchanged``: nothing was changed (it could not come back whole);
    ``installer``: the installer's failure that stopped it (its error, or what it reported
    done and left undone), None when it was not the installer's."""

    def __init__(
        self, message: str, *, unchanged: bool = False, installer: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.unchanged = unchanged
        self.installer = installer


class NotUndone(Exception):
    """The change had to be undone and cannot come back whole (``why``): left as it is."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass
class Guard:
    """One guarded change (see the module). ``messages``: the operation's own list, which
    the guard adds to."""

    ctx: Context
    change: Change
    messages: list[str] = field(default_factory=list)
    txn: Transaction = field(init=False)
    # Where a metric's runs left the environment (``compared``): in the state the change
    # made, or, once proven, back in the one before it (an undo then has nothing to bring back).
    at_change: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        self.txn = Transaction(self.ctx, self.change.journal, self.change.recovering)

    @property
    def snapshot(self) -> Snapshot:
        assert self.txn.snapshot is not None
        return self.txn.snapshot

    @contextlib.contextmanager
    def guarded(self) -> Iterator[Transaction]:
        """The transaction, for the whole change. Leaving on an interrupt before any change
        gives it up (nothing was changed, said so); after one, it is reported as such (a step
        that waits for interrupts restores first)."""
        txn, words = self.txn, self.change.words
        txn.expect(self.change.read)
        try:
            with txn:
                yield txn
        except KeyboardInterrupt:
            if txn.changed:
                raise InterruptedAfterChange(
                    f"interrupted after {words.after}, outside the steps that wait for an interrupt"
                ) from None
            raise Interrupted(txn.unchanged(f"interrupted before {words.before}")) from None

    def prepare(
        self,
        baseline: Callable[[], tuple[ProbeResult, ...]] = tuple,
        more: Callable[[], Sequence[str]] = tuple,
    ) -> tuple[ProbeResult, ...]:
        """The snapshot, the ``baseline``'s results, then the last look before anything
        changes: the census expected, and ``more`` (what else the operation finds changed by
        another process). Returns the baseline's results."""
        change = self.change
        lock = self.ctx.installer_locked() if change.installer_locked else None
        with lock if lock is not None else contextlib.nullcontext() as missing:
            if missing is not None:
                self.messages.append(missing)
            self.txn.snapshot_before(change.installed, change.spec)
        results = baseline()
        self.txn.check_others(
            during=f"while this {change.words.noun} prepared it",
            then=f"{change.words.unchanged}: run it again",
            more=more(),
        )
        return results

    def baseline(
        self,
        begun: Begun | None,
        cache: BaselineCache,
        *,
        must_pass: bool = True,
    ) -> tuple[ProbeResult, ...]:
        """The baseline's results, taken as a baseline (derived.as_baseline), waited for
        (said: the wait can be long). A fresh run that passed is cached. ``must_pass``: a
        failing baseline cannot judge the change, which is refused before it begins; else it
        is the caller's to report."""
        if begun is None:
            return ()
        running = begun.running
        if running is not None and not running.finished:
            self.ctx.emit("baseline", "baseline probe running: waiting for it to finish")
        ran = begun.results()
        results = tuple(as_baseline(r) for r in ran)
        passed = all(r.passed for r in results)
        if must_pass and not passed:
            words = self.change.words
            raise BaselineProbeFailed(
                "the probe already fails before any change, so it cannot judge this "
                f"{words.noun}; {words.unchanged}",
                detail=failure_text(results),
            )
        if running is not None and passed:
            cache.put(begun.settings, begun.fingerprint, ran)
        return results

    def attempt(self, step: Callable[[], Verdict], undo: Callable[[Cause], Ended]) -> Ended:
        """Make and judge the change (``step``); ``undo`` it for the cause it names, or for
        another process's change, an interrupt or an error of ours while it ran. Raised before
        the step began a change (Transaction.changed): the transaction gives it up (a command
        that could not be started)."""
        self._check_endings()
        words, messages = self.change.words, self.messages
        try:
            verdict = step()
        except (KeyboardInterrupt, Exception) as err:
            if not self.txn.changed:
                raise
            if isinstance(err, ChangedByOthers):  # nothing of theirs is undone
                kept = self.change.kept_for_others
                if kept is not None and self.at_change:
                    return self.kept_for_others(err, kept)
                # What the change did comes back, no more; when a metric's runs had left the
                # state before it, nothing of it is left to keep: the undo only proves it.
                messages.append(err.message)
                return undo(Cause.CONCURRENT)
            if isinstance(err, KeyboardInterrupt):
                messages.append(f"interrupted: undoing the {words.noun}")
                return undo(Cause.INTERRUPTED)
            # Whatever broke, what the change did is undone first.
            messages.append(f"unexpected error after {words.after}: {err!r}")
            return undo(Cause.ERROR)
        if isinstance(verdict, Stands):
            self._decided(verdict.outcome)
            return Ended(verdict.outcome)
        if isinstance(verdict, Kept):
            return self.kept(verdict.outcome)
        return undo(verdict)

    def _check_endings(self) -> None:
        """Every ending ``attempt`` can give the change by itself (an interrupt, an error of
        ours, another process's change) has its outcome in the operation's table: checked
        before the step begins, so that none is missing when it is reached."""
        change = self.change
        # Another process's change is undone around when the change is not kept for it, or
        # not in place (a metric's runs had left the state before it).
        causes = (Cause.INTERRUPTED, Cause.ERROR, Cause.CONCURRENT)
        missing = change.endings.missing(causes, (Ending.RESTORED, Ending.INCOMPLETE))
        if missing:
            raise OutcomeTableError(
                f"{change.operation.value}: no outcome for {', '.join(missing)}"
            )

    def kept(self, outcome: Outcome, back_to: Snapshot | None = None) -> Ended:
        """A failure kept as it is, on request: the rollback that undoes it (to ``back_to``,
        default the snapshot) is named."""
        self._decided(outcome)
        back = (back_to or self.snapshot).id
        return Ended(outcome, next_command=self.ctx.suggest("rollback", back))

    def _decided(self, outcome: Outcome) -> None:
        """The change stands as ``outcome``, decided: written with interrupts held, so that one
        arriving now changes nothing of it (neither undoes it nor leaves the journal)."""
        with self.txn.interrupts_deferred():
            self.txn.finish(outcome)

    def undo(
        self,
        cause: Cause,
        back: Back,
        *,
        judge: Callable[[Restored], Outcome | None] = lambda restored: None,
        aside: Callable[[], list[str]] = list,
        ended: Callable[[Cause, Ending], Outcome] | None = None,
        not_undone: Callable[[str], Ended] | None = None,
    ) -> Ended:
        """Undo the change for ``cause``: ``back`` in one batch, interrupts held, verified.
        ``judge``: what the operation makes of a verified undo (an outcome that replaces the
        table's, or None); ``aside``: the second dist-info folders not put back, said;
        ``ended``: the outcome of a (cause, ending) when the operation names its own (``try``:
        its verdict on the change), else its table's.
        When ``back.all_or_nothing`` and something cannot come back (why), the change is left
        as it is: ``not_undone`` ends it, interrupts still held (an interrupt must not cut
        that ending short: its outcome, and no journal, say the state is known); without
        one, NotUndone is raised."""
        assert self.change.undoes, "a change that has no undo was asked to undo"
        txn, messages = self.txn, self.messages
        if not self.at_change:  # a metric's runs left the state before it, proven: nothing
            back = Back(entries=(), intact=back.intact)  # of it to bring back, only the proof
        with txn.interrupts_deferred():
            # Another process's change stands: only this change's own comes back, and the
            # proof takes theirs as it is.
            changed = self.txn.others_changed() if cause is Cause.CONCURRENT else frozenset()
            theirs = names_in(changed)
            try:
                restored = self._back(back, theirs)
            except NotUndone as err:
                if not_undone is None:
                    raise
                return not_undone(err.why)
            if restored.verification is None:  # an error of ours stopped it half way
                messages.append(stopped(restored))
            left_aside = aside() if restored.ok else []
            ending = (
                Ending.INCOMPLETE
                if not restored.ok
                else Ending.RESTORED_EXCEPT_ASIDE
                if left_aside
                else Ending.RESTORED
            )
            outcome = ended(cause, ending) if ended else self.change.endings[cause, ending]
            if restored.ok:
                outcome = judge(restored) or outcome
            # Unverified, the journal stays: other commands are refused until ``recover``.
            txn.finish(outcome, keep_journal=not restored.ok)
        if restored.ok:
            messages.append(self._claim(restored, bool(left_aside), theirs))
            messages += left_aside
        if txn.interrupted:
            messages.append("an interrupt arrived during the restore; it finished first")
        return Ended(
            outcome, restored, next_command=None if restored.ok else self.ctx.suggest("recover")
        )

    def _back(self, back: Back, theirs: frozenset[str]) -> Restored:
        txn, snap, offline = self.txn, self.snapshot, self.change.offline
        if back.entries is not None:
            own = {e.name for e in back.entries}
            return txn.restore(
                snap, back.entries, back.intact, offline=offline, theirs=theirs - own
            )
        try:
            restored, failed = txn.return_to(
                snap, offline=offline, also=back.also, all_or_nothing=back.all_or_nothing
            )
        except NotRestorable as err:
            raise NotUndone(err.message) from None
        if failed is not None:
            self.messages.append(failed)
        return restored

    def _claim(self, restored: Restored, aside: bool, theirs: Collection[str] = ()) -> str:
        """What a verified undo proved: the installed set, and the bytes it brought back."""
        files = restored.verification.files_checked if restored.verification else 0
        but = (
            f", but for what another process changed ({', '.join(sorted(theirs))}: left as it is)"
            if theirs
            else ""
        )
        hashed = (
            f", and the {files} files brought back match their hashes"
            if files != 1
            else ", and the 1 file brought back matches its hash"
        )
        return (
            f"the installed set is back as snapshot {self.snapshot.id} has it{but}"
            + (hashed if files else "")
            + (", except:" if aside else "")
        )

    def switch(
        self,
        wanted: Snapshot,
        *,
        during: str,
        all_or_nothing: bool = True,
        reached: Callable[[Restored, str | None], None] = lambda restored, failed: None,
    ) -> tuple[Restored, str | None]:
        """Move to ``wanted``'s installed set within the change, in one batch, interrupts
        held, proven; then the check for another process's change, on the census the proof
        was made on (ChangedByOthers, ``during`` it). NotRestorable when ``all_or_nothing``
        and something cannot come back (nothing was changed then). ``reached`` is told the
        proof before that check, so that the caller knows where the environment is when the
        check raises. Returns the proof and the installer's failure (Transaction.return_to):
        what it reported done and left undone is its failure, expected as it is, never taken
        for another process's change by that check."""
        txn = self.txn
        with txn.interrupts_deferred():
            restored, failed = txn.return_to(
                wanted, offline=self.change.offline, all_or_nothing=all_or_nothing
            )
            reached(restored, failed)
        # A restore stopped by an error of ours made no census: one is taken now.
        proven = restored.left if restored.verification is not None else None
        txn.check_others(proven, during=during)
        return restored, failed

    def measure_in(
        self,
        wanted: Snapshot,
        *,
        during: str,
        purpose: str = "measure",
        starting: Callable[[], None] = lambda: None,
        reached: Callable[[Restored, str | None], None] = lambda restored, failed: None,
    ) -> None:
        """``switch`` to a state within the change, to ``purpose`` in it (a metric's runs,
        bisect's probe). Another process's change since the last look stops it before it
        begins (ChangedByOthers: a switch would undo it); then ``starting`` is called, and
        ``reached`` as in ``switch``. SwitchFailed when the state cannot be reached and
        proven; an interrupt held during the switch is obeyed once it is done
        (KeyboardInterrupt; one noted before it was the operation's to say)."""
        txn = self.txn
        txn.check_others(during=during)
        starting()
        noted, txn.interrupted = txn.interrupted, False
        try:
            restored, failed = self.switch(wanted, during=during, reached=reached)
        except NotRestorable as err:
            message = f"a state to {purpose} could not be reached: {err.message}"
            raise SwitchFailed(message, unchanged=True) from None
        finally:
            arrived = txn.interrupted
            txn.interrupted = noted or arrived
        if failed is not None or not restored.ok:
            why = failed or restored.error or "the environment does not match it"
            raise SwitchFailed(
                f"a state to {purpose} could not be reached and proven: {why}", installer=failed
            )
        if arrived:
            raise KeyboardInterrupt

    def compared(
        self, probe: Probe, how: RunSettings, changed: Snapshot, *, stands: bool = False
    ) -> ProbeResult:
        """A metric judged by runs of the state before the change (the snapshot's) and the
        state it made (``changed``), interleaved (runner.compare_states: a warm-up first, not
        counted, runs added until decided or the cap), each switch as ``measure_in``. The
        environment ends in the state the change made, where the verdict is acted on; on an
        interrupt too when the change ``stands`` then (a rollback's, as when its probe is
        interrupted). Said besides: a failure in the state before, a noisy baseline, and where
        the runs left the environment when another process's change stops them."""
        assert probe.metric is not None
        ctx, noun, messages = self.ctx, self.change.words.noun, self.messages
        ctx.emit("probe", f"metric running: before and after the {noun}, in turn: {probe.label}")
        switch = partial(self._switch_between, changed)
        try:
            compared = compare_states(
                probe, ctx.interpreter, how, switch, after_first=self.at_change
            )
            switch(True)  # its first check may find another process's change: as any switch
        except ChangedByOthers:  # nothing is switched after it: where the runs left it, said
            if not self.at_change:
                messages.append(
                    f"the metric's runs had switched back to the state before the {noun} for a "
                    f"run: its change is not in place, and the environment is as snapshot "
                    f"{self.snapshot.id} has it, with that process's change"
                )
            raise
        except KeyboardInterrupt:
            if stands:
                switch(True)
            raise
        if compared.baseline_failed:
            messages.append(
                f"the metric failed in the state before the {noun}, where it passed before it: "
                f"{compared.baseline_failed}; it does not judge this {noun} reliably"
            )
        if compared.noise:
            messages.append(compared.noise)
        return compared.result

    def _switch_between(self, changed: Snapshot, after: bool) -> None:
        """For a metric's runs: move to the state the change made (``after``, ``changed``) or
        back to the one before it (the snapshot), as ``measure_in``; nothing where it is
        already. Until the state before is proven, the change counts as made (``at_change``)."""
        if after == self.at_change:
            return

        def reached(restored: Restored, failed: str | None) -> None:
            self.at_change = after or failed is not None or not restored.ok

        def starting() -> None:
            self.at_change = True

        during = (
            "while the metric's runs switched between the states before and after the "
            + self.change.words.noun
        )
        wanted = changed if after else self.snapshot
        self.measure_in(wanted, during=during, starting=starting, reached=reached)

    @contextlib.contextmanager
    def stashed_state(
        self, installed: Mapping[str, InstalledDistribution], stash: Sequence[str]
    ) -> Iterator[Snapshot]:
        """The state the change made, with a stash of ``stash`` (what it added or changed) so
        that a metric's runs can switch back to it, in a folder no history lists (not saved:
        a rollback never chooses it, and one a killed process leaves is deleted as unsaved);
        deleted when the runs end."""
        ctx = self.ctx
        spec = SnapshotSpec(
            operation=self.change.journal, stash=stash, shared=ownership(installed).shared_paths()
        )
        made = take_snapshot(ctx, installed, ctx.store.new_folder(), spec, save=False)
        try:
            yield made
        finally:
            shutil.rmtree(ctx.store.folder(made.id).path, ignore_errors=True)

    def kept_for_others(
        self, err: ChangedByOthers, outcome: Outcome, back_to: Snapshot | None = None
    ) -> Ended:
        """Another process changed the environment while the change was judged, with the
        change in place (``at_change``): the verdict judged another environment, and undoing
        the change would undo that process's work as if this one had done it. Nothing is
        undone (said): kept as ``outcome``, and the rollback to ``back_to`` (default the
        snapshot) is named."""
        noun, back = self.change.words.noun, back_to or self.snapshot
        self.messages += [
            f"{err.message}: the probe judged another environment",
            f"nothing was undone: the environment is as the {noun} and that process left it; "
            f"the rollback named below returns it to snapshot {back.id}, undoing that "
            "process's change too",
        ]
        return self.kept(outcome, back)


def stopped(restored: Restored) -> str:
    """An error of ours stopped a restore half way."""
    return (
        f"the restore stopped on an unexpected error ({restored.error}): the environment is "
        "only partly restored"
    )
