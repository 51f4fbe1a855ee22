"""How an operation ended: one member per outcome, each with its text and its exit code.

An outcome is what a command reports (``--json``'s ``outcome``, its ``id``) and what a snapshot's
outcome note records; the text is what a person reads; the exit code says what state the
environment is in (errors.EXIT_CODES). What a caller asks of one is an attribute: whether it
changed nothing, whether its change was undone, and which snapshot a rollback returned to
(``Note``). The ids are a contract: scripts read them, and snapshot folders keep them.

An outcome that ends a change for a cause comes from its operation's table (``_Endings``): a
text per (cause, ending), the id and exit code formed from them, checked when the table is
built, so that ``Outcome.ended`` has a member for every combination an operation asks for.
"""

from __future__ import annotations

import enum
import re

from msgspec import Struct

from safeuninstall.base.errors import (
    EXIT_BREAKS,
    EXIT_INCOMPLETE,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    EXIT_RESTORED,
    EXIT_SLOWER,
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
    """An operation's table of endings is inconsistent: raised when the table is built (at
    import), so that no operation can reach an ending the table has no outcome for."""


# What names an operation's outcome: why it ended, and where the change stands.
Key = tuple[Cause, Ending]


def _phrase(word: Cause | Ending) -> str:
    return word.name.lower().replace("_", "-")


class _Endings:
    """One operation's endings for a cause: their texts, by (cause, ending). An id is the
    operation's prefix, then the cause's phrase and the ending's (``run-unmet-kept``), where
    ``words`` may rename a phrase ("" drops it) and ``ids`` gives the few irregular ones whole.
    An exit code follows from the ending (and an inconclusive metric), unless ``exit_codes``
    says otherwise. ``grid`` is the causes and endings ``Outcome.ended`` is asked for, each
    with each, and ``also`` the single combinations it is asked for besides: each must have
    its text, or building the table fails."""

    def __init__(
        self,
        operation: Operation,
        prefix: str,
        *,
        grid: tuple[tuple[Cause, ...], tuple[Ending, ...]],
        also: tuple[Key, ...] = (),
        texts: dict[Key, str],
        words: dict[Cause | Ending, str] | None = None,
        ids: dict[Key, str] | None = None,
        exit_codes: dict[Key, int] | None = None,
    ) -> None:
        self.operation = operation
        self.texts = texts
        self._prefix = prefix
        self._words = words or {}
        self._ids = ids or {}
        self._exit_codes = exit_codes or {}
        causes, endings = grid
        self.reached = [(c, e) for c in causes for e in endings] + list(also)
        missing = [key for key in self.reached if key not in texts]
        stray = [key for key in (*self._ids, *self._exit_codes) if key not in texts]
        if missing or stray:
            named = ", ".join(f"{_phrase(c)}/{_phrase(e)}" for c, e in missing + stray)
            raise OutcomeTableError(f"{operation.value}: no outcome for {named}")

    def __getitem__(self, key: Key) -> tuple[str, str, int, Ending, Cause, Operation]:
        """A member's value: its id, text, exit code, ending, cause and operation."""
        cause, ending = key
        if key not in self.texts:
            raise OutcomeTableError(
                f"{self.operation.value}: no outcome for {_phrase(cause)}/{_phrase(ending)}"
            )
        phrases = (self._words.get(cause, _phrase(cause)), self._words.get(ending, _phrase(ending)))
        id = self._ids.get(key) or self._prefix + "-".join(p for p in phrases if p)
        exit_code = self._exit_codes.get(key, _exit_code(cause, ending))
        return (id, self.texts[key], exit_code, ending, cause, self.operation)


def _exit_code(cause: Cause, ending: Ending) -> int:
    if ending in (Ending.RESTORED, Ending.RETURNED):
        return EXIT_INCONCLUSIVE if cause is Cause.INCONCLUSIVE else EXIT_RESTORED
    return EXIT_UNCHANGED if ending is Ending.UNCHANGED else EXIT_INCOMPLETE


_UNINSTALL = _Endings(
    Operation.UNINSTALL,
    "",
    grid=(
        (
            Cause.NEEDED,
            Cause.PROBE_FAILED,
            Cause.DRIFT,
            Cause.HOLLOW,
            Cause.INCONCLUSIVE,
            Cause.INTERRUPTED,
            Cause.FAILED,
            Cause.CONCURRENT,
            Cause.ERROR,
        ),
        (Ending.RESTORED, Ending.INCOMPLETE),
    ),
    texts={
        (Cause.NEEDED, Ending.RESTORED): (
            "every candidate tried is needed: all was restored and verified"
        ),
        (Cause.NEEDED, Ending.INCOMPLETE): (
            "every candidate tried is needed, and the restore is INCOMPLETE"
        ),
        (Cause.PROBE_FAILED, Ending.KEPT): (
            "the probe failed after the removal; not restored (--keep-on-failure)"
        ),
        (Cause.PROBE_FAILED, Ending.RESTORED): (
            "the probe failed after the removal: all was restored and verified"
        ),
        (Cause.PROBE_FAILED, Ending.INCOMPLETE): (
            "the probe failed after the removal and the restore is INCOMPLETE"
        ),
        (Cause.DRIFT, Ending.RESTORED): (
            "the probe passed only on other copies of libraries: all was restored"
        ),
        (Cause.DRIFT, Ending.INCOMPLETE): (
            "drift found after the removal and the restore is INCOMPLETE"
        ),
        (Cause.HOLLOW, Ending.RESTORED): (
            "the removal left another distribution hollow: all was restored"
        ),
        (Cause.HOLLOW, Ending.INCOMPLETE): (
            "the removal left another distribution hollow; restore INCOMPLETE"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED): (
            "the metric's runs could not tell whether the removal made it worse "
            "(inconclusive): all was restored and verified"
        ),
        (Cause.INCONCLUSIVE, Ending.INCOMPLETE): (
            "the metric's runs could not tell whether the removal made it worse, and the "
            "restore is INCOMPLETE"
        ),
        (Cause.INCONCLUSIVE, Ending.KEPT): (
            "the metric's runs could not tell whether the removal made it worse; not "
            "restored (--keep-on-failure)"
        ),
        (Cause.INTERRUPTED, Ending.RESTORED): "interrupted: everything was restored and verified",
        (Cause.INTERRUPTED, Ending.INCOMPLETE): "interrupted and the restore is INCOMPLETE",
        (Cause.FAILED, Ending.RESTORED): (
            "the uninstall failed: everything was restored and verified"
        ),
        (Cause.FAILED, Ending.INCOMPLETE): "the uninstall failed and the restore is INCOMPLETE",
        (Cause.CONCURRENT, Ending.RESTORED): (
            "another process changed the environment during the removal: what the removal "
            "took was restored and verified; that process's change stands"
        ),
        (Cause.CONCURRENT, Ending.INCOMPLETE): (
            "another process changed the environment during the removal; restore INCOMPLETE"
        ),
        (Cause.ERROR, Ending.RESTORED): (
            "an error after the uninstall started: all was restored and verified"
        ),
        (Cause.ERROR, Ending.INCOMPLETE): (
            "an error after the uninstall started, and the restore is INCOMPLETE"
        ),
    },
    words={Cause.FAILED: "uninstall-failed"},
    exit_codes={
        (Cause.NEEDED, Ending.RESTORED): EXIT_OK,
        # proven to be as before: nothing changed
        (Cause.FAILED, Ending.RESTORED): EXIT_UNCHANGED,
        (Cause.ERROR, Ending.RESTORED): EXIT_UNCHANGED,
    },
)
_ROLLBACK = _Endings(
    Operation.ROLLBACK,
    "rollback-",
    grid=(
        (Cause.PROBE_FAILED, Cause.INCONCLUSIVE, Cause.FAILED),
        (Ending.RESTORED, Ending.INCOMPLETE, Ending.RESTORED_EXCEPT_ASIDE),
    ),
    also=((Cause.ERROR, Ending.INCOMPLETE), (Cause.CONCURRENT, Ending.KEPT)),
    texts={
        (Cause.ERROR, Ending.INCOMPLETE): "the rollback stopped on an error and is INCOMPLETE",
        (Cause.PROBE_FAILED, Ending.RESTORED): (
            "the probe failed after the rollback: what it changed was put back as it was "
            "before it, verified"
        ),
        (Cause.PROBE_FAILED, Ending.INCOMPLETE): (
            "the probe failed after the rollback, and putting it back is INCOMPLETE"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED): (
            "the metric's runs could not tell whether the rollback made it worse "
            "(inconclusive): what it changed was put back as it was before it, verified"
        ),
        (Cause.INCONCLUSIVE, Ending.INCOMPLETE): (
            "the metric's runs could not tell whether the rollback made it worse, and "
            "putting it back is INCOMPLETE"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED_EXCEPT_ASIDE): (
            "the metric's runs could not tell whether the rollback made it worse: what it"
            " changed was put back as its snapshot records it, verified, but NOT the "
            "second dist-info folder it removed (kept aside)"
        ),
        (Cause.FAILED, Ending.RESTORED): (
            "the rollback could not complete: what it changed was put back as it was "
            "before it, verified"
        ),
        (Cause.FAILED, Ending.INCOMPLETE): (
            "the rollback could not complete, and putting it back is INCOMPLETE"
        ),
        (Cause.PROBE_FAILED, Ending.RESTORED_EXCEPT_ASIDE): (
            "the probe failed after the rollback: what it changed was put back as its "
            "snapshot records it, verified, but NOT the second dist-info folder it "
            "removed (kept aside)"
        ),
        (Cause.FAILED, Ending.RESTORED_EXCEPT_ASIDE): (
            "the rollback could not complete: what it changed was put back as its "
            "snapshot records it, verified, but NOT the second dist-info folder it "
            "removed (kept aside)"
        ),
        (Cause.FAILED, Ending.NOT_UNDONE): (
            "the rollback could not complete, and what it removed cannot come back now: "
            "nothing was undone, the environment matches neither the snapshot nor the "
            "state before it"
        ),
        (Cause.CONCURRENT, Ending.KEPT): (
            "another process changed the environment during the rollback's probe: it no "
            "longer matches the snapshot, and nothing was undone"
        ),
    },
    ids={(Cause.ERROR, Ending.INCOMPLETE): "rollback-incomplete"},
)
_RECOVER = _Endings(
    Operation.RECOVER,
    "recover-",
    grid=((Cause.FAILED, Cause.ERROR), (Ending.INCOMPLETE,)),
    also=((Cause.CONCURRENT, Ending.KEPT),),
    texts={
        (Cause.FAILED, Ending.INCOMPLETE): (
            "the recover could not make the environment match the snapshot: INCOMPLETE"
        ),
        (Cause.ERROR, Ending.INCOMPLETE): "the recover stopped on an error and is INCOMPLETE",
        (Cause.CONCURRENT, Ending.KEPT): (
            "another process changed the environment during the recover's probe: it no "
            "longer matches the snapshot, and nothing was undone"
        ),
    },
    ids={
        (Cause.FAILED, Ending.INCOMPLETE): "incomplete",
        (Cause.ERROR, Ending.INCOMPLETE): "recover-incomplete",
    },
)
_RUN = _Endings(
    Operation.RUN,
    "run-",
    grid=(
        (
            Cause.COMMAND_FAILED,
            Cause.PROBE_FAILED,
            Cause.INCONCLUSIVE,
            Cause.UNMET,
            Cause.INTERRUPTED,
            Cause.ERROR,
        ),
        (Ending.RESTORED, Ending.INCOMPLETE, Ending.RESTORED_EXCEPT_ASIDE),
    ),
    texts={
        (Cause.COMMAND_FAILED, Ending.UNCHANGED): "the command failed, and changed no distribution",
        (Cause.COMMAND_FAILED, Ending.RESTORED): (
            "the command failed: its change was undone, all was restored and verified"
        ),
        (Cause.COMMAND_FAILED, Ending.INCOMPLETE): (
            "the command failed, and undoing its change is INCOMPLETE"
        ),
        (Cause.COMMAND_FAILED, Ending.KEPT): (
            "the command failed; its change was kept (--keep-on-failure)"
        ),
        (Cause.PROBE_FAILED, Ending.RESTORED): (
            "the probe failed after the command: all was restored and verified"
        ),
        (Cause.PROBE_FAILED, Ending.INCOMPLETE): (
            "the probe failed after the command, and the restore is INCOMPLETE"
        ),
        (Cause.PROBE_FAILED, Ending.KEPT): (
            "the probe failed after the command; not restored (--keep-on-failure)"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED): (
            "the metric's runs could not tell whether the command made it worse "
            "(inconclusive): all was restored and verified"
        ),
        (Cause.INCONCLUSIVE, Ending.INCOMPLETE): (
            "the metric's runs could not tell whether the command made it worse, and the "
            "restore is INCOMPLETE"
        ),
        (Cause.INCONCLUSIVE, Ending.KEPT): (
            "the metric's runs could not tell whether the command made it worse; not "
            "restored (--keep-on-failure)"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED_EXCEPT_ASIDE): (
            "the metric's runs could not tell whether the command made it worse: all was "
            "restored as the snapshot records it, verified, but NOT a second dist-info "
            "folder the command removed (kept aside)"
        ),
        (Cause.UNMET, Ending.RESTORED): (
            "the command left requirements unmet: all was restored and verified"
        ),
        (Cause.UNMET, Ending.INCOMPLETE): (
            "the command left requirements unmet, and the restore is INCOMPLETE"
        ),
        (Cause.UNMET, Ending.KEPT): (
            "the command left requirements unmet; not restored (--keep-on-failure)"
        ),
        (Cause.INTERRUPTED, Ending.RESTORED): (
            "interrupted: the command's change was undone, all was restored and verified"
        ),
        (Cause.INTERRUPTED, Ending.INCOMPLETE): (
            "interrupted, and undoing the command's change is INCOMPLETE"
        ),
        (Cause.ERROR, Ending.RESTORED): (
            "an error after the command started: all was restored and verified"
        ),
        (Cause.ERROR, Ending.INCOMPLETE): (
            "an error after the command started, and the restore is INCOMPLETE"
        ),
        (Cause.COMMAND_FAILED, Ending.RESTORED_EXCEPT_ASIDE): (
            "the command failed: its change was undone as the snapshot records it, "
            "verified, but NOT a second dist-info folder the command removed (kept aside)"
        ),
        (Cause.PROBE_FAILED, Ending.RESTORED_EXCEPT_ASIDE): (
            "the probe failed after the command: all was restored as the snapshot records"
            " it, verified, but NOT a second dist-info folder the command removed (kept "
            "aside)"
        ),
        (Cause.UNMET, Ending.RESTORED_EXCEPT_ASIDE): (
            "the command left requirements unmet: all was restored as the snapshot "
            "records it, verified, but NOT a second dist-info folder the command removed "
            "(kept aside)"
        ),
        (Cause.INTERRUPTED, Ending.RESTORED_EXCEPT_ASIDE): (
            "interrupted: the command's change was undone as the snapshot records it, "
            "verified, but NOT a second dist-info folder the command removed (kept aside)"
        ),
        (Cause.ERROR, Ending.RESTORED_EXCEPT_ASIDE): (
            "an error after the command started: all was restored as the snapshot records"
            " it, verified, but NOT a second dist-info folder the command removed (kept "
            "aside)"
        ),
        (Cause.CONCURRENT, Ending.KEPT): (
            "another process changed the environment while the probe ran: the change was "
            "not judged, and nothing was undone"
        ),
    },
)
_BISECT = _Endings(
    Operation.BISECT,
    "bisect-",
    grid=(
        (Cause.INTERRUPTED, Cause.FAILED, Cause.INCONCLUSIVE, Cause.PROBE_FAILED),
        (Ending.RETURNED,),
    ),
    texts={
        (Cause.INTERRUPTED, Ending.RETURNED): (
            "interrupted: the installed set is back where it started, verified"
        ),
        (Cause.FAILED, Ending.RETURNED): (
            "a state to probe could not be reached: the installed set is back where it "
            "started, verified"
        ),
        (Cause.INCONCLUSIVE, Ending.RETURNED): (
            "inconclusive: nothing is named (a round the metric could not tell apart, or "
            "no culprit that fails on its own); the installed set is back where it "
            "started, verified"
        ),
        (Cause.PROBE_FAILED, Ending.RETURNED): (
            "the probe fails in the good snapshot too: the installed set is back where it"
            " started, verified"
        ),
        (Cause.CONCURRENT, Ending.KEPT): (
            "another process changed the environment during the bisect: it was stopped, "
            "and left as it is"
        ),
    },
    words={Ending.RETURNED: "", Cause.FAILED: "stopped", Cause.PROBE_FAILED: "refused"},
    exit_codes={(Cause.PROBE_FAILED, Ending.RETURNED): EXIT_UNCHANGED},
)
_TRY = _Endings(
    Operation.TRY,
    "try-",
    grid=(
        (Cause.TRIED, Cause.PROBE_FAILED, Cause.INCONCLUSIVE, Cause.INTERRUPTED, Cause.ERROR),
        (Ending.RESTORED,),
    ),
    texts={
        (Cause.TRIED, Ending.RESTORED): (
            "the change would pass (every probe passed); it was undone: back where it "
            "started, verified"
        ),
        (Cause.PROBE_FAILED, Ending.RESTORED): (
            "the change would break the environment; it was undone: back where it started, verified"
        ),
        (Cause.INCONCLUSIVE, Ending.RESTORED): (
            "inconclusive: the metric's runs could not tell what the change would do; it "
            "was undone: back where it started, verified"
        ),
        (Cause.INTERRUPTED, Ending.RESTORED): (
            "interrupted: the change was undone: back where it started, verified"
        ),
        (Cause.ERROR, Ending.RESTORED): (
            "the change could not be made or judged (the uninstall failed, another "
            "process changed the environment, an error); it was undone: back where it "
            "started, verified"
        ),
    },
    words={
        Ending.RESTORED: "",
        Cause.TRIED: "passes",
        Cause.PROBE_FAILED: "breaks",
        Cause.ERROR: "stopped",
    },
    exit_codes={
        (Cause.TRIED, Ending.RESTORED): EXIT_OK,
        (Cause.PROBE_FAILED, Ending.RESTORED): EXIT_BREAKS,
    },
)


class Outcome(enum.Enum):
    """Each member: its id, text, exit code, ending, and for one that ends a change for a
    cause, that cause and the operation (``Outcome.ended`` finds it by them; such a member
    is its operation's table's row)."""

    text: str
    exit_code: int
    ending: Ending
    cause: Cause | None
    operation: Operation | None

    def __new__(
        cls,
        id: str,
        text: str,
        exit_code: int,
        ending: Ending,
        cause: Cause | None = None,
        operation: Operation | None = None,
    ) -> Outcome:
        member = object.__new__(cls)
        member._value_ = id
        member.text = text
        member.exit_code = exit_code
        member.ending = ending
        member.cause = cause
        member.operation = operation
        return member

    NOTHING_TO_DO = ("nothing-to-do", "nothing to do", EXIT_OK, Ending.UNCHANGED)
    DRY_RUN = ("dry-run", "dry run: nothing was changed", EXIT_OK, Ending.UNCHANGED)
    REFUSED_STRICT = (
        "refused-strict",
        "refused (--strict): nothing was changed",
        EXIT_UNCHANGED,
        Ending.UNCHANGED,
    )
    REFUSED_UNMET = (
        "refused-unmet",
        "refused: it would leave requirements unmet; nothing was changed",
        EXIT_UNCHANGED,
        Ending.UNCHANGED,
    )
    CHECKED = ("checked", "checked: nothing was changed", EXIT_OK, Ending.UNCHANGED)
    REMOVED = ("removed", "removed; every probe passed", EXIT_OK, Ending.STANDS)
    # --keep-needed: what nothing needs is removed, the rest kept (each with its reason)
    KEPT_NEEDED = (
        "removed-kept-needed",
        "removed what nothing needs, kept what is needed; the probe passed",
        EXIT_OK,
        Ending.STANDS,
    )
    NEEDED_RESTORED = _UNINSTALL[Cause.NEEDED, Ending.RESTORED]
    NEEDED_INCOMPLETE = _UNINSTALL[Cause.NEEDED, Ending.INCOMPLETE]
    PROBE_FAILED_KEPT = _UNINSTALL[Cause.PROBE_FAILED, Ending.KEPT]
    PROBE_FAILED_RESTORED = _UNINSTALL[Cause.PROBE_FAILED, Ending.RESTORED]
    PROBE_FAILED_INCOMPLETE = _UNINSTALL[Cause.PROBE_FAILED, Ending.INCOMPLETE]
    RESTORED_PROBE_FAILS = (
        "restored-probe-fails",
        "the probe failed after the removal; all was restored and verified, but the probe "
        "still fails in the restored state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.RESTORED,
    )
    DRIFT_RESTORED = _UNINSTALL[Cause.DRIFT, Ending.RESTORED]
    DRIFT_INCOMPLETE = _UNINSTALL[Cause.DRIFT, Ending.INCOMPLETE]
    HOLLOW_RESTORED = _UNINSTALL[Cause.HOLLOW, Ending.RESTORED]
    HOLLOW_INCOMPLETE = _UNINSTALL[Cause.HOLLOW, Ending.INCOMPLETE]
    # A metric whose runs could not tell (probe/metric.py): never a pass, so undone; its
    # own outcomes, so that a script tells it from a regression.
    INCONCLUSIVE_RESTORED = _UNINSTALL[Cause.INCONCLUSIVE, Ending.RESTORED]
    INCONCLUSIVE_INCOMPLETE = _UNINSTALL[Cause.INCONCLUSIVE, Ending.INCOMPLETE]
    INCONCLUSIVE_KEPT = _UNINSTALL[Cause.INCONCLUSIVE, Ending.KEPT]
    INTERRUPTED_RESTORED = _UNINSTALL[Cause.INTERRUPTED, Ending.RESTORED]
    INTERRUPTED_INCOMPLETE = _UNINSTALL[Cause.INTERRUPTED, Ending.INCOMPLETE]
    UNINSTALL_FAILED_RESTORED = _UNINSTALL[Cause.FAILED, Ending.RESTORED]
    UNINSTALL_FAILED_INCOMPLETE = _UNINSTALL[Cause.FAILED, Ending.INCOMPLETE]
    CONCURRENT_RESTORED = _UNINSTALL[Cause.CONCURRENT, Ending.RESTORED]
    CONCURRENT_INCOMPLETE = _UNINSTALL[Cause.CONCURRENT, Ending.INCOMPLETE]
    ERROR_RESTORED = _UNINSTALL[Cause.ERROR, Ending.RESTORED]
    ERROR_INCOMPLETE = _UNINSTALL[Cause.ERROR, Ending.INCOMPLETE]
    # -- rollback and recover
    ALREADY_MATCHES = (
        "already-matches",
        "the installed set already matches the snapshot",
        EXIT_OK,
        Ending.UNCHANGED,
    )
    ROLLED_BACK = (
        "rolled-back",
        # what the verification proved: not the bytes of what the rollback never touched
        "rolled back; the installed set matches the snapshot, and each restored file its hash",
        EXIT_OK,
        Ending.STANDS,
    )
    ROLLED_BACK_PROBE_FAILS = (
        "rolled-back-probe-fails",
        "rolled back; the installed set matches the snapshot, and each restored file its hash, "
        "but the probe fails in that state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.STANDS,
    )
    ROLLED_BACK_PROBE_INTERRUPTED = (
        "rolled-back-probe-interrupted",
        "rolled back; the probe after it was interrupted",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.STANDS,
    )
    # A recover that could not make the environment match the snapshot: its journal stays,
    # and it is run again.
    RECOVER_FELL_SHORT = _RECOVER[Cause.FAILED, Ending.INCOMPLETE]
    ROLLBACK_INCOMPLETE = _ROLLBACK[Cause.ERROR, Ending.INCOMPLETE]
    NOTHING_TO_ROLL_BACK = (
        "nothing-to-roll-back",
        "nothing to roll back: no change since a snapshot is still in effect",
        EXIT_OK,
        Ending.UNCHANGED,
    )
    ROLLBACK_PROBE_FAILED_RESTORED = _ROLLBACK[Cause.PROBE_FAILED, Ending.RESTORED]
    ROLLBACK_PROBE_FAILED_INCOMPLETE = _ROLLBACK[Cause.PROBE_FAILED, Ending.INCOMPLETE]
    ROLLBACK_INCONCLUSIVE_RESTORED = _ROLLBACK[Cause.INCONCLUSIVE, Ending.RESTORED]
    ROLLBACK_INCONCLUSIVE_INCOMPLETE = _ROLLBACK[Cause.INCONCLUSIVE, Ending.INCOMPLETE]
    ROLLBACK_INCONCLUSIVE_RESTORED_EXCEPT_ASIDE = _ROLLBACK[
        Cause.INCONCLUSIVE, Ending.RESTORED_EXCEPT_ASIDE
    ]
    ROLLBACK_FAILED_RESTORED = _ROLLBACK[Cause.FAILED, Ending.RESTORED]
    ROLLBACK_FAILED_INCOMPLETE = _ROLLBACK[Cause.FAILED, Ending.INCOMPLETE]
    # Put back as the rollback's own snapshot records the state before it, but a second
    # dist-info folder the rollback removed is only kept aside (a snapshot holds one version
    # per name): not everything, so not exit 3.
    ROLLBACK_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = _ROLLBACK[
        Cause.PROBE_FAILED, Ending.RESTORED_EXCEPT_ASIDE
    ]
    ROLLBACK_FAILED_RESTORED_EXCEPT_ASIDE = _ROLLBACK[Cause.FAILED, Ending.RESTORED_EXCEPT_ASIDE]
    ROLLBACK_FAILED_NOT_UNDONE = _ROLLBACK[Cause.FAILED, Ending.NOT_UNDONE]
    # Restored and verified, then another process changed the environment while the probe
    # ran: it matches the snapshot no more, and the probe judged another environment. Nothing
    # is undone (an undo would undo that process's work too), as run-concurrent-kept.
    ROLLBACK_CONCURRENT_KEPT = _ROLLBACK[Cause.CONCURRENT, Ending.KEPT]
    NOTHING_TO_RECOVER = ("nothing-to-recover", "nothing to recover", EXIT_OK, Ending.UNCHANGED)
    RECOVERED = (
        "recovered",
        # what the verification proved: not the bytes of what the operation never touched
        "recovered; the installed set matches the snapshot, and each restored file its hash",
        EXIT_OK,
        Ending.STANDS,
    )
    RECOVERED_PROBE_FAILS = (
        "recovered-probe-fails",
        "recovered; the installed set matches the snapshot, and each restored file its hash, "
        "but the probe fails in that state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.STANDS,
    )
    RECOVERED_PROBE_INTERRUPTED = (
        "recovered-probe-interrupted",
        "recovered; the probe after it was interrupted",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.STANDS,
    )
    RECOVER_INCOMPLETE = _RECOVER[Cause.ERROR, Ending.INCOMPLETE]
    RECOVER_CONCURRENT_KEPT = _RECOVER[Cause.CONCURRENT, Ending.KEPT]
    # -- run: a command guarded like a removal (operations/run.py)
    RAN = ("ran", "the command ran; every probe passed after its change", EXIT_OK, Ending.STANDS)
    RAN_NO_CHANGE = (
        "ran-no-change",
        "the command ran and changed no distribution",
        EXIT_OK,
        Ending.UNCHANGED,
    )
    RUN_COMMAND_FAILED_UNCHANGED = _RUN[Cause.COMMAND_FAILED, Ending.UNCHANGED]
    RUN_COMMAND_FAILED_RESTORED = _RUN[Cause.COMMAND_FAILED, Ending.RESTORED]
    RUN_COMMAND_FAILED_INCOMPLETE = _RUN[Cause.COMMAND_FAILED, Ending.INCOMPLETE]
    RUN_COMMAND_FAILED_KEPT = _RUN[Cause.COMMAND_FAILED, Ending.KEPT]
    RUN_PROBE_FAILED_RESTORED = _RUN[Cause.PROBE_FAILED, Ending.RESTORED]
    RUN_PROBE_FAILED_INCOMPLETE = _RUN[Cause.PROBE_FAILED, Ending.INCOMPLETE]
    RUN_PROBE_FAILED_KEPT = _RUN[Cause.PROBE_FAILED, Ending.KEPT]
    RUN_INCONCLUSIVE_RESTORED = _RUN[Cause.INCONCLUSIVE, Ending.RESTORED]
    RUN_INCONCLUSIVE_INCOMPLETE = _RUN[Cause.INCONCLUSIVE, Ending.INCOMPLETE]
    RUN_INCONCLUSIVE_KEPT = _RUN[Cause.INCONCLUSIVE, Ending.KEPT]
    RUN_INCONCLUSIVE_RESTORED_EXCEPT_ASIDE = _RUN[Cause.INCONCLUSIVE, Ending.RESTORED_EXCEPT_ASIDE]
    RUN_UNMET_RESTORED = _RUN[Cause.UNMET, Ending.RESTORED]
    RUN_UNMET_INCOMPLETE = _RUN[Cause.UNMET, Ending.INCOMPLETE]
    RUN_UNMET_KEPT = _RUN[Cause.UNMET, Ending.KEPT]
    RUN_INTERRUPTED_RESTORED = _RUN[Cause.INTERRUPTED, Ending.RESTORED]
    RUN_INTERRUPTED_INCOMPLETE = _RUN[Cause.INTERRUPTED, Ending.INCOMPLETE]
    RUN_ERROR_RESTORED = _RUN[Cause.ERROR, Ending.RESTORED]
    RUN_ERROR_INCOMPLETE = _RUN[Cause.ERROR, Ending.INCOMPLETE]
    # Undone as the run's snapshot records the state before it, but a second dist-info folder
    # the command removed is only kept aside (a snapshot holds one version per name): not
    # everything, so not exit 3. One per reason, as run-*-restored.
    RUN_COMMAND_FAILED_RESTORED_EXCEPT_ASIDE = _RUN[
        Cause.COMMAND_FAILED, Ending.RESTORED_EXCEPT_ASIDE
    ]
    RUN_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = _RUN[Cause.PROBE_FAILED, Ending.RESTORED_EXCEPT_ASIDE]
    RUN_UNMET_RESTORED_EXCEPT_ASIDE = _RUN[Cause.UNMET, Ending.RESTORED_EXCEPT_ASIDE]
    RUN_INTERRUPTED_RESTORED_EXCEPT_ASIDE = _RUN[Cause.INTERRUPTED, Ending.RESTORED_EXCEPT_ASIDE]
    RUN_ERROR_RESTORED_EXCEPT_ASIDE = _RUN[Cause.ERROR, Ending.RESTORED_EXCEPT_ASIDE]
    RUN_CONCURRENT_KEPT = _RUN[Cause.CONCURRENT, Ending.KEPT]
    RUN_NOT_UNDONE = (
        "run-not-undone",
        "the command's change had to be undone but cannot be: nothing was undone, the "
        "environment is as the command left it",
        EXIT_INCOMPLETE,
        Ending.NOT_UNDONE,
        None,
        Operation.RUN,
    )
    # -- bisect: it ends where it started, or says how to get there
    BISECTED = (
        "bisected",
        "found what makes the probe fail; the installed set is back where it started, verified",
        EXIT_OK,
        Ending.RETURNED,
        None,
        Operation.BISECT,
    )
    BISECT_INTERRUPTED = _BISECT[Cause.INTERRUPTED, Ending.RETURNED]
    BISECT_STOPPED = _BISECT[Cause.FAILED, Ending.RETURNED]
    # A metric's runs could not tell whether a round's state is worse than allowed, or no
    # culprit the search found fails on its own: nothing is named, neither a culprit nor a pass.
    BISECT_INCONCLUSIVE = _BISECT[Cause.INCONCLUSIVE, Ending.RETURNED]
    # The probe fails in the good snapshot too: nothing to bisect. The command fails with the
    # probe's output, and leaves no snapshot behind to carry this as its note.
    BISECT_REFUSED = _BISECT[Cause.PROBE_FAILED, Ending.RETURNED]
    BISECT_CONCURRENT_KEPT = _BISECT[Cause.CONCURRENT, Ending.KEPT]
    BISECT_INCOMPLETE = (
        "bisect-incomplete",
        "the environment is NOT back where the bisect started",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        None,
        Operation.BISECT,
    )
    # -- try: a removal or a run undone whatever its verdict; the verdict is the outcome
    TRY_PASSES = _TRY[Cause.TRIED, Ending.RESTORED]
    TRY_FASTER = (
        "try-faster",
        "the change would make the metric better, significantly; it was undone: back where it "
        "started, verified",
        EXIT_OK,
        Ending.RESTORED,
    )
    TRY_BREAKS = _TRY[Cause.PROBE_FAILED, Ending.RESTORED]
    TRY_SLOWER = (
        "try-slower",
        "the change would make the metric worse than allowed, significantly; it was undone: "
        "back where it started, verified",
        EXIT_SLOWER,
        Ending.RESTORED,
    )
    TRY_INCONCLUSIVE = _TRY[Cause.INCONCLUSIVE, Ending.RESTORED]
    # Refused before any change, as a removal is, because it would leave requirements unmet:
    # that is what it would do.
    TRY_UNMET = (
        "try-unmet",
        "the change would break the environment: it leaves requirements unmet; nothing was "
        "changed (--allow-unmet lets the probe judge it)",
        EXIT_BREAKS,
        Ending.UNCHANGED,
    )
    TRY_INTERRUPTED = _TRY[Cause.INTERRUPTED, Ending.RESTORED]
    TRY_STOPPED = _TRY[Cause.ERROR, Ending.RESTORED]
    TRY_INCOMPLETE = (
        "try-incomplete",
        "the return to where the try started is INCOMPLETE: the environment differs from it",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        None,
        Operation.TRY,
    )
    TRY_NOT_RETURNED = (
        "try-not-returned",
        "the change cannot be undone: nothing was undone, the environment is as the change left it",
        EXIT_INCOMPLETE,
        Ending.NOT_UNDONE,
        None,
        Operation.TRY,
    )
    # -- probe
    PASSED = ("passed", "every probe passed", EXIT_OK, Ending.UNCHANGED)
    FAILED = ("failed", "a probe failed", EXIT_UNCHANGED, Ending.UNCHANGED)

    @property
    def id(self) -> str:
        """The word ``--json`` and the snapshot's outcome note write."""
        return str(self._value_)

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

    @classmethod
    def ended(cls, operation: Operation, cause: Cause, ending: Ending) -> Outcome:
        """The outcome of ``operation`` ended by ``cause`` as ``ending``
        (``probe-failed-restored``): there is one for each combination in the operation's
        grid and its ``also`` (checked when its table is built)."""
        return _BY_CAUSE[operation, cause, ending]

    @classmethod
    def has(cls, operation: Operation, cause: Cause, ending: Ending) -> bool:
        """Whether ``ended`` has an outcome for the combination."""
        return (operation, cause, ending) in _BY_CAUSE


_TABLES = (_UNINSTALL, _ROLLBACK, _RECOVER, _RUN, _BISECT, _TRY)
_BY_ID = {member.id: member for member in Outcome}
_BY_CAUSE = {
    (member.operation, member.cause, member.ending): member
    for member in Outcome
    if member.operation is not None and member.cause is not None
}


def _check_members(
    tables: tuple[_Endings, ...], members: dict[tuple[Operation, Cause, Ending], Outcome]
) -> None:
    """Each table's every row is one member: no text without its outcome, no id twice."""
    unclaimed = [
        f"{table.operation.value}: {_phrase(cause)}/{_phrase(ending)}"
        for table in tables
        for cause, ending in table.texts
        if (table.operation, cause, ending) not in members
    ]
    if unclaimed or len(Outcome.__members__) != len(Outcome):
        raise OutcomeTableError(f"no member for {', '.join(unclaimed) or 'a repeated id'}")


_check_members(_TABLES, _BY_CAUSE)


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
    outcome = _BY_ID.get(text)
    if outcome is not None:
        return outcome
    returned = _RETURNED.fullmatch(text)
    if returned is not None:
        return Returned(Operation(returned[1]), returned[2])
    shown = text if len(text) <= 64 else text[:64] + "..."
    raise ValueError(f"unknown outcome {shown!r}: not one this tool writes")
