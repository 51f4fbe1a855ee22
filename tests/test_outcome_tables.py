"""The outcomes built from their operations' tables: every outcome exactly as published (its
id, text, exit code, ending, cause and operation), each declared by its operation (none in the
bottom layer), and a table that leaves a combination out, or a row an operation names that its
table lacks, fails when it is built (at import), not when an operation ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from safeuninstall.base import outcome as base
from safeuninstall.base.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_RESTORED
from safeuninstall.base.outcome import (
    Cause,
    Ending,
    Endings,
    Key,
    Operation,
    Outcome,
    OutcomeTableError,
    by_id,
    parse_note,
)
from safeuninstall.operations.endings.bisect import BISECT
from safeuninstall.operations.endings.rollback import RECOVER, ROLLBACK
from safeuninstall.operations.endings.run import RUN
from safeuninstall.operations.endings.trial import TRY
from safeuninstall.operations.endings.uninstall import REMOVED, UNINSTALL

FIXTURE = Path(__file__).parent / "fixtures" / "outcomes.json"
TABLES = (UNINSTALL, ROLLBACK, RECOVER, RUN, BISECT, TRY)


def _row(outcome: Outcome) -> dict[str, object]:
    return {
        "id": outcome.id,
        "text": outcome.text,
        "exit_code": outcome.exit_code,
        "ending": outcome.ending.name,
        "cause": None if outcome.cause is None else outcome.cause.name,
        "operation": None if outcome.operation is None else outcome.operation.name,
    }


def test_every_outcome_is_as_published() -> None:
    published = json.loads(FIXTURE.read_text(encoding="utf-8"))
    rows = sorted((_row(outcome) for outcome in Outcome), key=lambda row: str(row["id"]))
    assert rows == sorted(published, key=lambda row: str(row["id"]))


def test_every_outcome_is_its_operation_s_and_none_is_declared_in_the_bottom_layer() -> None:
    declared = [outcome for table in TABLES for outcome in table]
    assert sorted(o.id for o in declared) == sorted(o.id for o in Outcome)
    assert not [v for v in vars(base).values() if isinstance(v, (Endings, Outcome))]


def test_a_note_is_read_back_as_the_outcome_it_was_written_from() -> None:
    assert parse_note(REMOVED.id) is REMOVED
    assert parse_note(RECOVER[Cause.FAILED, Ending.INCOMPLETE].id).id == "incomplete"


def test_an_outcome_is_read_only() -> None:
    with pytest.raises(AttributeError):
        REMOVED.exit_code = EXIT_OK


def _table(texts: dict[Key, str], **more: object) -> Endings:
    return Endings(
        Operation.RUN,
        "run-",
        grid=((Cause.UNMET, Cause.ERROR), (Ending.RESTORED, Ending.INCOMPLETE)),
        texts=texts,
        **more,  # type: ignore[arg-type]
    )


ALL = {
    (Cause.UNMET, Ending.RESTORED): "unmet, restored",
    (Cause.UNMET, Ending.INCOMPLETE): "unmet, incomplete",
    (Cause.ERROR, Ending.RESTORED): "error, restored",
    (Cause.ERROR, Ending.INCOMPLETE): "error, incomplete",
}


def test_a_complete_table_names_each_outcome_by_its_phrases() -> None:
    table = _table(ALL)
    restored = table[Cause.UNMET, Ending.RESTORED]
    assert _row(restored) == {
        "id": "run-unmet-restored",
        "text": "unmet, restored",
        "exit_code": EXIT_RESTORED,
        "ending": "RESTORED",
        "cause": "UNMET",
        "operation": "RUN",
    }
    incomplete = table[Cause.ERROR, Ending.INCOMPLETE]
    assert (incomplete.id, incomplete.text, incomplete.exit_code) == (
        "run-error-incomplete",
        "error, incomplete",
        EXIT_INCOMPLETE,
    )
    assert table[Cause.ERROR, Ending.INCOMPLETE] is incomplete  # one object per row


def test_a_table_missing_a_combination_of_its_grid_fails_when_built() -> None:
    texts = {key: text for key, text in ALL.items() if key != (Cause.ERROR, Ending.INCOMPLETE)}
    with pytest.raises(OutcomeTableError, match="run: no outcome for error/incomplete"):
        _table(texts)


def test_a_row_named_with_no_text_fails_when_taken() -> None:
    with pytest.raises(OutcomeTableError, match="run: no outcome for unmet/kept"):
        _table(ALL)[Cause.UNMET, Ending.KEPT]


def test_an_override_for_a_combination_with_no_text_fails_when_built() -> None:
    with pytest.raises(OutcomeTableError, match="run: no outcome for hollow/restored"):
        _table(ALL, ids={(Cause.HOLLOW, Ending.RESTORED): "run-hollow"})


def test_every_combination_each_table_says_it_reaches_has_its_outcome() -> None:
    for table in TABLES:
        for cause, ending in table.reached:
            outcome = table[cause, ending]
            assert (outcome.operation, outcome.cause, outcome.ending) == (
                table.operation,
                cause,
                ending,
            )


def test_the_tables_refuse_an_id_taken_twice() -> None:
    run = _table(ALL)
    run.other("removed", "removed again", EXIT_OK, Ending.STANDS)
    others = [table for table in TABLES if table is not RUN]
    with pytest.raises(OutcomeTableError, match="an id is taken twice: removed"):
        by_id(*others, run)


def test_the_tables_leave_no_operation_out() -> None:
    with pytest.raises(OutcomeTableError, match="the tables are those of"):
        by_id(*(table for table in TABLES if table is not BISECT))
