"""How an operation ended: an outcome, with its text and its exit code.

An outcome is what a command reports (``--json``'s ``outcome``, its ``id``) and what a snapshot's
outcome note records; the text is what a person reads; the exit code says what state the
environment is in (errors.EXIT_CODES). What a caller asks of one is an attribute: whether it
changed nothing, whether its change was undone, and which snapshot a rollback returned to
(``Note``). The ids are a contract: scripts read them, and snapshot folders keep them.

This module holds the words (operations, causes, endings) and the form of a table; each
operation declares its own outcomes beside it (safeuninstall/operations/endings/): a table
(``Endings``) of texts by (cause, ending), whose outcomes, ids and exit codes are formed from
them and checked when the table is built, and the outcomes it ends with for no cause. Every
table is registered once (``register``), which checks that no id is taken twice; a note read
from a snapshot is found among them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator

from msgspec import Struct

from safeuninstall.base.errors import (
    EXIT_INCOMPLETE,
    EXIT_INCONCLUSIVE,
    EXIT_RESTORED,
    EXIT_UNCHANGED,
)


class Operation(enum.Enum):
    """What changes an environment under guard (and names its snapshot's outcome note)."""

    UNINSTALL = "uninstall"
    ROLLBACK = "rollback"
    RECOVER = "recover"
    RUN = "run"
    BISECT = "bisect"
    TRY = "try"


class Cause(enum.Enum):
    """Why a change was judged a failure: undone for it, or kept on request."""

    PROBE_FAILED = enum.auto()  # a probe that passed before fails after
    DRIFT = enum.auto()  # the probe passed only on other copies of libraries
    HOLLOW = enum.auto()  # another distribution's files went with it
    NEEDED = enum.auto()  # --keep-needed: every candidate tried is needed
    UNMET = enum.auto()  # run: the command left requirements unmet
    COMMAND_FAILED = enum.auto()  # run: the guarded command failed
    FAILED = enum.auto()  # the operation's own step failed (the uninstall, the rollback)
    CONCURRENT = enum.auto()  # another process changed the environment meanwhile
    INCONCLUSIVE = enum.auto()  # a metric's runs could not tell, up to their cap
    INTERRUPTED = enum.auto()
    ERROR = enum.auto()  # an unexpected error of ours
    TRIED = enum.auto()  # try: the change passed, and is undone all the same


class Ending(enum.Enum):
    """Where the change stands at the end."""

    UNCHANGED = enum.auto()  # the environment was not changed (refused, dry run, a check)
    STANDS = enum.auto()  # the change was made and stays (removed, ran, rolled back)
    KEPT = enum.auto()  # judged a failure, or not judged, and kept as it is
    RESTORED = enum.auto()  # undone: all put back and verified
    # undone and verified, but a second dist-info folder it removed is only kept aside
    RESTORED_EXCEPT_ASIDE = enum.auto()
    INCOMPLETE = enum.auto()  # undoing it (or finishing it) stopped short
    NOT_UNDONE = enum.auto()  # it had to be undone and cannot be now: left as it is
    # bisect: back where it started, verified. Not undone: like a snapshot taken on request,
    # its snapshot records the state it started from (a rollback may return there)
    RETURNED = enum.auto()


class OutcomeTableError(Exception):
    """An operation's table of endings is inconsistent (raised when the table is built or
    registered, at import), or the tables were never registered."""


# What names an operation's outcome: why it ended, and where the change stands.
Key = tuple[Cause, Ending]


def _phrase(word: Cause | Ending) -> str:
    return word.name.lower().replace("_", "-")


class _Every(type):
    """``Outcome``'s own type: iterating ``Outcome`` gives every registered outcome."""

    def __iter__(cls) -> Iterator[Outcome]:
        return iter(_registered().values())


class Outcome(metaclass=_Every):
    """One outcome: its id, text, exit code and ending, and for one of an operation's table
    the cause and the operation. One object per id, made by the operation's declaration:
    compared by identity, read only. Not a dataclass: ``--json`` writes it as its id
    (envelope.encode), and the schema lists the ids."""

    __slots__ = ("cause", "ending", "exit_code", "id", "operation", "text")

    id: str  # the word ``--json`` and the snapshot's outcome note write
    text: str
    exit_code: int
    ending: Ending
    cause: Cause | None
    operation: Operation | None

    def __init__(
        self,
        id: str,
        text: str,
        exit_code: int,
        ending: Ending,
        cause: Cause | None = None,
        operation: Operation | None = None,
    ) -> None:
        values = {"id": id, "text": text, "exit_code": exit_code, "ending": ending}
        for name, value in (values | {"cause": cause, "operation": operation}).items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"an outcome is read only: {name}")

    def __repr__(self) -> str:
        return f"<Outcome {self.id}>"

    @property
    def changed_nothing(self) -> bool:
        """The environment is as it was before the command."""
        return self.ending is Ending.UNCHANGED

    @property
    def undone(self) -> bool:
        """The change was put back and verified (all of it, or all but a folder kept aside)."""
        return self.ending in (Ending.RESTORED, Ending.RESTORED_EXCEPT_ASIDE)

    @property
    def returned_to(self) -> str | None:
        """Only a rollback's or a recover's note says which snapshot it returned to."""
        return None


class Endings:
    """One operation's outcomes: the texts of its endings for a cause, by (cause, ending), and
    the outcomes it ends with for no cause (removed, dry run: ``other``). An id is the
    operation's prefix, then the cause's phrase and the ending's (``run-unmet-kept``), where
    ``words`` may rename a phrase ("" drops it) and ``ids`` gives the few irregular ones whole.
    An exit code follows from the ending (and an inconclusive metric), unless ``exit_codes``
    says otherwise. ``grid`` is the causes and endings the operation reaches at run time, each
    with each (the guard's undo: the cause is the verdict's, the ending the restore's): each
    must have its text, or building the table fails. A row an operation names itself is taken
    from the table at import (``table[cause, ending]``), so that a missing one fails there."""

    def __init__(
        self,
        operation: Operation,
        prefix: str,
        *,
        grid: tuple[tuple[Cause, ...], tuple[Ending, ...]] = ((), ()),
        texts: dict[Key, str],
        words: dict[Cause | Ending, str] | None = None,
        ids: dict[Key, str] | None = None,
        exit_codes: dict[Key, int] | None = None,
    ) -> None:
        self.operation = operation
        self._others: list[Outcome] = []
        causes, endings = grid
        self.reached = [(c, e) for c in causes for e in endings]
        missing = [key for key in self.reached if key not in texts]
        stray = [key for key in (*(ids or {}), *(exit_codes or {})) if key not in texts]
        if missing or stray:
            raise OutcomeTableError(f"{operation.value}: no outcome for {_named(missing + stray)}")
        words, ids, exit_codes = words or {}, ids or {}, exit_codes or {}
        self._rows: dict[Key, Outcome] = {}
        for (cause, ending), text in texts.items():
            phrases = (words.get(cause, _phrase(cause)), words.get(ending, _phrase(ending)))
            id = ids.get((cause, ending)) or prefix + "-".join(p for p in phrases if p)
            exit_code = exit_codes.get((cause, ending), _exit_code(cause, ending))
            self._rows[cause, ending] = Outcome(id, text, exit_code, ending, cause, operation)

    def __getitem__(self, key: Key) -> Outcome:
        """The outcome of (cause, ending); OutcomeTableError if the table has none."""
        row = self._rows.get(key)
        if row is None:
            raise OutcomeTableError(f"{self.operation.value}: no outcome for {_named([key])}")
        return row

    def missing(self, causes: tuple[Cause, ...], endings: tuple[Ending, ...]) -> list[str]:
        """The combinations of ``causes`` and ``endings`` the table has no outcome for."""
        return [_named([(c, e)]) for c in causes for e in endings if (c, e) not in self._rows]

    def other(
        self,
        id: str,
        text: str,
        exit_code: int,
        ending: Ending,
        operation: Operation | None = None,
    ) -> Outcome:
        """An outcome the operation ends with for no cause, declared with its table."""
        outcome = Outcome(id, text, exit_code, ending, None, operation)
        self._others.append(outcome)
        return outcome

    def __iter__(self) -> Iterator[Outcome]:
        """Every outcome the operation declares: its table's, then the others."""
        yield from self._rows.values()
        yield from self._others


def _named(keys: list[Key]) -> str:
    return ", ".join(f"{_phrase(c)}/{_phrase(e)}" for c, e in keys)


def _exit_code(cause: Cause, ending: Ending) -> int:
    if ending in (Ending.RESTORED, Ending.RETURNED):
        return EXIT_INCONCLUSIVE if cause is Cause.INCONCLUSIVE else EXIT_RESTORED
    return EXIT_UNCHANGED if ending is Ending.UNCHANGED else EXIT_INCOMPLETE


# Every outcome by its id, once the operations' tables are registered.
_BY_ID: dict[str, Outcome] = {}


def register(*tables: Endings) -> None:
    """The tables of every operation, once (``by_id``): a note read from a snapshot may be any
    of their ids. Done when the operations' outcomes are first imported
    (safeuninstall/operations/endings)."""
    if _BY_ID:
        raise OutcomeTableError("the operations' outcomes are registered twice")
    _BY_ID.update(by_id(*tables))


def by_id(*tables: Endings) -> dict[str, Outcome]:
    """Every outcome of ``tables`` by its id: one table an operation, none left out, and no id
    taken twice (OutcomeTableError)."""
    operations = sorted(table.operation.value for table in tables)
    if operations != sorted(operation.value for operation in Operation):
        raise OutcomeTableError(f"the tables are those of {', '.join(operations)}")
    every = [outcome for table in tables for outcome in table]
    ids = [outcome.id for outcome in every]
    twice = sorted({id for id in ids if ids.count(id) > 1})
    if twice:
        raise OutcomeTableError(f"an id is taken twice: {', '.join(twice)}")
    return dict(zip(ids, every, strict=True))


def _registered() -> dict[str, Outcome]:
    if not _BY_ID:
        raise OutcomeTableError(
            "no operation's outcomes are registered: import safeuninstall.operations.endings"
        )
    return _BY_ID


class Mark(enum.Enum):
    """A snapshot's outcome note that is not an operation's outcome."""

    PENDING = "pending"  # its operation has not ended (or was killed: see recover)
    TAKEN = "taken"  # a snapshot taken on request
    # Its operation was undone by a recover that returned to it (the recover's own note
    # says ``recover-to-0007``).
    RECOVERED = "recovered"

    @property
    def id(self) -> str:
        return str(self._value_)

    @property
    def undone(self) -> bool:
        return self is Mark.RECOVERED

    @property
    def returned_to(self) -> str | None:
        return None


class Returned(Struct, frozen=True):
    """The note of a rollback or a recover that returned to ``snapshot`` (``rollback-to-0007``),
    whatever its probe said after."""

    operation: Operation
    snapshot: str

    @property
    def id(self) -> str:
        return f"{self.operation.value}-to-{self.snapshot}"

    @property
    def undone(self) -> bool:
        return False

    @property
    def returned_to(self) -> str | None:
        return self.snapshot


# What a snapshot's outcome note holds.
Note = Outcome | Mark | Returned

# A snapshot id as the store forms it (state/snapshot.py's FORMED_ID).
_RETURNED = re.compile(r"(rollback|recover)-to-([0-9]{4,9})")


def parse_note(text: str) -> Note:
    """The note a snapshot's outcome records, read from its text (the id it was written as);
    ValueError naming the text when it is none this tool writes: a note that says nothing
    known cannot tell whether its change was undone."""
    for mark in Mark:  # first: ``recovered`` in a note is the mark, not a recover's outcome
        if text == mark.value:
            return mark
    outcome = _registered().get(text)
    if outcome is not None:
        return outcome
    returned = _RETURNED.fullmatch(text)
    if returned is not None:
        return Returned(Operation(returned[1]), returned[2])
    shown = text if len(text) <= 64 else text[:64] + "..."
    raise ValueError(f"unknown outcome {shown!r}: not one this tool writes")
