"""The outcomes built from their operations' tables: every member exactly as published (its
name, id, text, exit code, ending, cause and operation), and a table that leaves a combination
out fails when it is built, not when an operation ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from safeuninstall.base.errors import EXIT_INCOMPLETE, EXIT_RESTORED
from safeuninstall.base.outcome import (
    _TABLES,
    Cause,
    Ending,
    Key,
    Operation,
    Outcome,
    OutcomeTableError,
    _Endings,
)

FIXTURE = Path(__file__).parent / "fixtures" / "outcomes.json"


def _row(outcome: Outcome) -> dict[str, object]:
    return {
        "name": outcome.name,
        "id": outcome.id,
        "text": outcome.text,
        "exit_code": outcome.exit_code,
        "ending": outcome.ending.name,
        "cause": None if outcome.cause is None else outcome.cause.name,
        "operation": None if outcome.operation is None else outcome.operation.name,
    }


def test_every_member_is_as_published() -> None:
    published = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert [_row(outcome) for outcome in Outcome] == published


def _table(texts: dict[Key, str]) -> _Endings:
    return _Endings(
        Operation.RUN,
        "run-",
        grid=((Cause.UNMET, Cause.ERROR), (Ending.RESTORED, Ending.INCOMPLETE)),
        texts=texts,
    )


ALL = {
    (Cause.UNMET, Ending.RESTORED): "unmet, restored",
    (Cause.UNMET, Ending.INCOMPLETE): "unmet, incomplete",
    (Cause.ERROR, Ending.RESTORED): "error, restored",
    (Cause.ERROR, Ending.INCOMPLETE): "error, incomplete",
}


def test_a_complete_table_names_each_member_by_its_phrases() -> None:
    table = _table(ALL)
    assert table[Cause.UNMET, Ending.RESTORED] == (
        "run-unmet-restored",
        "unmet, restored",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.UNMET,
        Operation.RUN,
    )
    assert table[Cause.ERROR, Ending.INCOMPLETE][:3] == (
        "run-error-incomplete",
        "error, incomplete",
        EXIT_INCOMPLETE,
    )


def test_a_table_missing_a_combination_of_its_grid_fails_when_built() -> None:
    texts = {key: text for key, text in ALL.items() if key != (Cause.ERROR, Ending.INCOMPLETE)}
    with pytest.raises(OutcomeTableError, match="run: no outcome for error/incomplete"):
        _table(texts)


def test_a_member_naming_a_combination_with_no_text_fails_when_built() -> None:
    with pytest.raises(OutcomeTableError, match="run: no outcome for unmet/kept"):
        _table(ALL)[Cause.UNMET, Ending.KEPT]


def test_an_override_for_a_combination_with_no_text_fails_when_built() -> None:
    with pytest.raises(OutcomeTableError, match="run: no outcome for hollow/restored"):
        _Endings(
            Operation.RUN,
            "run-",
            grid=((Cause.UNMET,), (Ending.RESTORED,)),
            texts={(Cause.UNMET, Ending.RESTORED): "unmet, restored"},
            ids={(Cause.HOLLOW, Ending.RESTORED): "run-hollow"},
        )


def test_a_combination_named_besides_the_grid_must_have_its_text() -> None:
    with pytest.raises(OutcomeTableError, match="run: no outcome for concurrent/kept"):
        _Endings(
            Operation.RUN,
            "run-",
            grid=((Cause.UNMET,), (Ending.RESTORED,)),
            also=((Cause.CONCURRENT, Ending.KEPT),),
            texts={(Cause.UNMET, Ending.RESTORED): "unmet, restored"},
        )


def test_ended_finds_every_combination_each_table_says_it_is_asked_for() -> None:
    for table in _TABLES:
        for cause, ending in table.reached:
            outcome = Outcome.ended(table.operation, cause, ending)
            assert (outcome.operation, outcome.cause, outcome.ending) == (
                table.operation,
                cause,
                ending,
            )
