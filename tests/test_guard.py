"""The guarded change's own rules, on a stand-in transaction: which endings it can reach, what
it does with an error before and after the change began, and with another process's change."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from safeuninstall.base.outcome import Cause, Ending, Endings, Outcome, OutcomeTableError
from safeuninstall.operations.endings.bisect import BISECT, BISECTED
from safeuninstall.operations.endings.run import RUN, RUN_CONCURRENT_KEPT
from safeuninstall.operations.endings.uninstall import REMOVED, UNINSTALL
from safeuninstall.transaction.guard import Back, Change, Ended, Guard, Stands, Words
from safeuninstall.transaction.others import ChangedByOthers


class _Txn:
    """What the guard asks of a transaction, recorded."""

    def __init__(self, changed: bool) -> None:
        self.changed = changed
        self.finished: list[Outcome] = []
        self.snapshot = type("Snap", (), {"id": "0007"})()

    def finish(self, outcome: Outcome, *, keep_journal: bool = False) -> None:
        self.finished.append(outcome)

    @contextlib.contextmanager
    def interrupts_deferred(self) -> Iterator[None]:
        yield


class _Ctx:
    def suggest(self, *words: str) -> str:
        return "safe-uninstall " + " ".join(words)


def _guard(endings: Endings, *, changed: bool, kept: Outcome | None = None) -> Guard:
    change = Change(
        endings,
        endings.operation.value,
        Words("change", "any change", "the change had started"),
        frozenset(),
        {},
        spec=None,  # type: ignore[arg-type]  # never snapshotted here
        offline=True,
        kept_for_others=kept,
    )
    guard = object.__new__(Guard)
    guard.ctx = _Ctx()  # type: ignore[assignment]
    guard.change = change
    guard.messages = []
    guard.txn = _Txn(changed)  # type: ignore[assignment]
    return guard


def _undo(cause: Cause) -> Ended:
    return Ended(UNINSTALL[cause, Ending.RESTORED])


def test_a_table_without_an_ending_the_guard_reaches_is_refused_before_the_step() -> None:
    ran: list[bool] = []
    guard = _guard(BISECT, changed=False)

    def step() -> Any:
        ran.append(True)
        return Stands(BISECTED)

    with pytest.raises(OutcomeTableError, match="bisect: no outcome for interrupted/restored"):
        guard.attempt(step, _undo)
    assert ran == []


@pytest.mark.parametrize("endings", [UNINSTALL, RUN], ids=["uninstall", "run"])
def test_the_operations_that_attempt_through_the_guard_have_every_ending_it_reaches(
    endings: Endings,
) -> None:
    kept = RUN_CONCURRENT_KEPT if endings is RUN else None
    guard = _guard(endings, changed=True, kept=kept)
    ended = guard.attempt(lambda: Stands(REMOVED), _undo)
    assert ended.outcome is REMOVED


def test_an_error_before_the_change_began_is_raised_not_undone() -> None:
    guard = _guard(UNINSTALL, changed=False)
    undone: list[Cause] = []

    def step() -> Any:
        raise OSError("the command could not be started")

    def undo(cause: Cause) -> Ended:
        undone.append(cause)
        return _undo(cause)

    with pytest.raises(OSError):
        guard.attempt(step, undo)
    assert undone == []


@pytest.mark.parametrize(
    ("raised", "cause"),
    [(KeyboardInterrupt(), Cause.INTERRUPTED), (OSError("disk"), Cause.ERROR)],
)
def test_an_interrupt_or_an_error_after_the_change_began_is_undone_for_its_cause(
    raised: BaseException, cause: Cause
) -> None:
    guard = _guard(UNINSTALL, changed=True)
    undone: list[Cause] = []

    def step() -> Any:
        raise raised

    def undo(cause: Cause) -> Ended:
        undone.append(cause)
        return _undo(cause)

    guard.attempt(step, undo)
    assert undone == [cause]


def test_another_process_s_change_is_kept_and_named_where_the_operation_cannot_tell_it_apart() -> (
    None
):
    guard = _guard(RUN, changed=True, kept=RUN_CONCURRENT_KEPT)

    def step() -> Any:
        raise ChangedByOthers(["appeared: leftpad-2.0.dist-info"], during="during the run")

    ended = guard.attempt(step, lambda cause: pytest.fail("nothing of theirs is undone"))
    assert ended.outcome is RUN_CONCURRENT_KEPT
    assert ended.next_command == "safe-uninstall rollback 0007"
    assert guard.txn.finished == [RUN_CONCURRENT_KEPT]  # type: ignore[attr-defined]
    assert "appeared: leftpad-2.0.dist-info" in guard.messages[0]
    assert "nothing was undone" in guard.messages[1]


def test_another_process_s_change_during_a_removal_puts_back_only_what_it_removed() -> None:
    guard = _guard(UNINSTALL, changed=True)
    undone: list[Cause] = []

    def step() -> Any:
        raise ChangedByOthers(["appeared: leftpad-2.0.dist-info"], during="during the removal")

    def undo(cause: Cause) -> Ended:
        undone.append(cause)
        return _undo(cause)

    guard.attempt(step, undo)
    assert undone == [Cause.CONCURRENT]


def test_an_undo_ends_with_the_outcome_of_the_change_s_own_table() -> None:
    """The guard names an undo's ending from the table the change carries, not from a list of
    every operation's: a table of its own (registered nowhere) gives the outcome."""
    texts = {
        (cause, ending): f"{cause.name} {ending.name}"
        for cause in (Cause.INTERRUPTED, Cause.ERROR, Cause.CONCURRENT)
        for ending in (Ending.RESTORED, Ending.INCOMPLETE)
    }
    grid = (
        (Cause.INTERRUPTED, Cause.ERROR, Cause.CONCURRENT),
        (Ending.RESTORED, Ending.INCOMPLETE),
    )
    own = Endings(UNINSTALL.operation, "own-", grid=grid, texts=texts)
    guard = _guard(own, changed=True)
    guard.txn.interrupted = False
    short = type("Short", (), {"ok": False, "verification": object()})()
    guard._back = lambda back, theirs: short  # type: ignore[method-assign]

    def step() -> Any:
        raise OSError("disk")

    ended = guard.attempt(step, lambda cause: guard.undo(cause, Back()))
    assert ended.outcome is own[Cause.ERROR, Ending.INCOMPLETE]
    assert ended.outcome.id == "own-error-incomplete"
    assert guard.txn.finished == [ended.outcome]  # type: ignore[attr-defined]
