"""How an operation ended: one member per outcome, each with its text and its exit code.

An outcome is what a command reports (``--json``'s ``outcome``, its ``id``) and what a snapshot's
outcome note records; the text is what a person reads; the exit code says what state the
environment is in (errors.EXIT_CODES). What a caller asks of one is an attribute: whether it
changed nothing, whether its change was undone, and which snapshot a rollback returned to
(``Note``). The ids are a contract: scripts read them, and snapshot folders keep them.
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


class Outcome(enum.Enum):
    """Each member: its id, text, exit code, ending, and for one that ends a change for a
    cause, that cause and the operation (``Outcome.ended`` finds it by them)."""

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
    NEEDED_RESTORED = (
        "needed-restored",
        "every candidate tried is needed: all was restored and verified",
        EXIT_OK,
        Ending.RESTORED,
        Cause.NEEDED,
        Operation.UNINSTALL,
    )
    NEEDED_INCOMPLETE = (
        "needed-incomplete",
        "every candidate tried is needed, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.NEEDED,
        Operation.UNINSTALL,
    )
    PROBE_FAILED_KEPT = (
        "probe-failed-kept",
        "the probe failed after the removal; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.PROBE_FAILED,
        Operation.UNINSTALL,
    )
    PROBE_FAILED_RESTORED = (
        "probe-failed-restored",
        "the probe failed after the removal: all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.PROBE_FAILED,
        Operation.UNINSTALL,
    )
    PROBE_FAILED_INCOMPLETE = (
        "probe-failed-incomplete",
        "the probe failed after the removal and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.PROBE_FAILED,
        Operation.UNINSTALL,
    )
    RESTORED_PROBE_FAILS = (
        "restored-probe-fails",
        "the probe failed after the removal; all was restored and verified, but the probe "
        "still fails in the restored state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
        Ending.RESTORED,
    )
    DRIFT_RESTORED = (
        "drift-restored",
        "the probe passed only on other copies of libraries: all was restored",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.DRIFT,
        Operation.UNINSTALL,
    )
    DRIFT_INCOMPLETE = (
        "drift-incomplete",
        "drift found after the removal and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.DRIFT,
        Operation.UNINSTALL,
    )
    HOLLOW_RESTORED = (
        "hollow-restored",
        "the removal left another distribution hollow: all was restored",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.HOLLOW,
        Operation.UNINSTALL,
    )
    HOLLOW_INCOMPLETE = (
        "hollow-incomplete",
        "the removal left another distribution hollow; restore INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.HOLLOW,
        Operation.UNINSTALL,
    )
    # A metric whose runs could not tell (judgement/metric.py): never a pass, so undone; its
    # own outcomes, so that a script tells it from a regression.
    INCONCLUSIVE_RESTORED = (
        "inconclusive-restored",
        "the metric's runs could not tell whether the removal made it worse (inconclusive): "
        "all was restored and verified",
        EXIT_INCONCLUSIVE,
        Ending.RESTORED,
        Cause.INCONCLUSIVE,
        Operation.UNINSTALL,
    )
    INCONCLUSIVE_INCOMPLETE = (
        "inconclusive-incomplete",
        "the metric's runs could not tell whether the removal made it worse, and the "
        "restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.INCONCLUSIVE,
        Operation.UNINSTALL,
    )
    INCONCLUSIVE_KEPT = (
        "inconclusive-kept",
        "the metric's runs could not tell whether the removal made it worse; not "
        "restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.INCONCLUSIVE,
        Operation.UNINSTALL,
    )
    INTERRUPTED_RESTORED = (
        "interrupted-restored",
        "interrupted: everything was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.INTERRUPTED,
        Operation.UNINSTALL,
    )
    INTERRUPTED_INCOMPLETE = (
        "interrupted-incomplete",
        "interrupted and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.INTERRUPTED,
        Operation.UNINSTALL,
    )
    UNINSTALL_FAILED_RESTORED = (
        "uninstall-failed-restored",
        "the uninstall failed: everything was restored and verified",
        EXIT_UNCHANGED,
        Ending.RESTORED,
        Cause.FAILED,
        Operation.UNINSTALL,  # proven to be as before: nothing changed
    )
    UNINSTALL_FAILED_INCOMPLETE = (
        "uninstall-failed-incomplete",
        "the uninstall failed and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.FAILED,
        Operation.UNINSTALL,
    )
    CONCURRENT_RESTORED = (
        "concurrent-restored",
        "another process changed the environment during the removal: all was restored",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.CONCURRENT,
        Operation.UNINSTALL,
    )
    CONCURRENT_INCOMPLETE = (
        "concurrent-incomplete",
        "another process changed the environment during the removal; restore INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.CONCURRENT,
        Operation.UNINSTALL,
    )
    ERROR_RESTORED = (
        "error-restored",
        "an error after the uninstall started: all was restored and verified",
        EXIT_UNCHANGED,
        Ending.RESTORED,
        Cause.ERROR,
        Operation.UNINSTALL,
    )
    ERROR_INCOMPLETE = (
        "error-incomplete",
        "an error after the uninstall started, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.ERROR,
        Operation.UNINSTALL,
    )
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
    RECOVER_FELL_SHORT = (
        "incomplete",
        "the recover could not make the environment match the snapshot: INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.FAILED,
        Operation.RECOVER,
    )
    ROLLBACK_INCOMPLETE = (
        "rollback-incomplete",
        "the rollback stopped on an error and is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.ERROR,
        Operation.ROLLBACK,
    )
    NOTHING_TO_ROLL_BACK = (
        "nothing-to-roll-back",
        "nothing to roll back: no change since a snapshot is still in effect",
        EXIT_OK,
        Ending.UNCHANGED,
    )
    ROLLBACK_PROBE_FAILED_RESTORED = (
        "rollback-probe-failed-restored",
        "the probe failed after the rollback: what it changed was put back as it was before "
        "it, verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.PROBE_FAILED,
        Operation.ROLLBACK,
    )
    ROLLBACK_PROBE_FAILED_INCOMPLETE = (
        "rollback-probe-failed-incomplete",
        "the probe failed after the rollback, and putting it back is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.PROBE_FAILED,
        Operation.ROLLBACK,
    )
    ROLLBACK_INCONCLUSIVE_RESTORED = (
        "rollback-inconclusive-restored",
        "the metric's runs could not tell whether the rollback made it worse "
        "(inconclusive): what it changed was put back as it was before it, verified",
        EXIT_INCONCLUSIVE,
        Ending.RESTORED,
        Cause.INCONCLUSIVE,
        Operation.ROLLBACK,
    )
    ROLLBACK_INCONCLUSIVE_INCOMPLETE = (
        "rollback-inconclusive-incomplete",
        "the metric's runs could not tell whether the rollback made it worse, and "
        "putting it back is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.INCONCLUSIVE,
        Operation.ROLLBACK,
    )
    ROLLBACK_INCONCLUSIVE_RESTORED_EXCEPT_ASIDE = (
        "rollback-inconclusive-restored-except-aside",
        "the metric's runs could not tell whether the rollback made it worse: what it "
        "changed was put back as its snapshot records it, verified, but NOT the "
        "second dist-info folder it removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.INCONCLUSIVE,
        Operation.ROLLBACK,
    )
    ROLLBACK_FAILED_RESTORED = (
        "rollback-failed-restored",
        "the rollback could not complete: what it changed was put back as it was before it, "
        "verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.FAILED,
        Operation.ROLLBACK,
    )
    ROLLBACK_FAILED_INCOMPLETE = (
        "rollback-failed-incomplete",
        "the rollback could not complete, and putting it back is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.FAILED,
        Operation.ROLLBACK,
    )
    # Put back as the rollback's own snapshot records the state before it, but a second
    # dist-info folder the rollback removed is only kept aside (a snapshot holds one version
    # per name): not everything, so not exit 3.
    ROLLBACK_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = (
        "rollback-probe-failed-restored-except-aside",
        "the probe failed after the rollback: what it changed was put back as its snapshot "
        "records it, verified, but NOT the second dist-info folder it removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.PROBE_FAILED,
        Operation.ROLLBACK,
    )
    ROLLBACK_FAILED_RESTORED_EXCEPT_ASIDE = (
        "rollback-failed-restored-except-aside",
        "the rollback could not complete: what it changed was put back as its snapshot "
        "records it, verified, but NOT the second dist-info folder it removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.FAILED,
        Operation.ROLLBACK,
    )
    ROLLBACK_FAILED_NOT_UNDONE = (
        "rollback-failed-not-undone",
        "the rollback could not complete, and what it removed cannot come back now: nothing "
        "was undone, the environment matches neither the snapshot nor the state before it",
        EXIT_INCOMPLETE,
        Ending.NOT_UNDONE,
        Cause.FAILED,
        Operation.ROLLBACK,
    )
    # Restored and verified, then another process changed the environment while the probe
    # ran: it matches the snapshot no more, and the probe judged another environment. Nothing
    # is undone (an undo would undo that process's work too), as run-concurrent-kept.
    ROLLBACK_CONCURRENT_KEPT = (
        "rollback-concurrent-kept",
        "another process changed the environment during the rollback's probe: it no longer "
        "matches the snapshot, and nothing was undone",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.CONCURRENT,
        Operation.ROLLBACK,
    )
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
    RECOVER_INCOMPLETE = (
        "recover-incomplete",
        "the recover stopped on an error and is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.ERROR,
        Operation.RECOVER,
    )
    RECOVER_CONCURRENT_KEPT = (
        "recover-concurrent-kept",
        "another process changed the environment during the recover's probe: it no longer "
        "matches the snapshot, and nothing was undone",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.CONCURRENT,
        Operation.RECOVER,
    )
    # -- run: a command guarded like a removal (operations/run.py)
    RAN = ("ran", "the command ran; every probe passed after its change", EXIT_OK, Ending.STANDS)
    RAN_NO_CHANGE = (
        "ran-no-change",
        "the command ran and changed no distribution",
        EXIT_OK,
        Ending.UNCHANGED,
    )
    RUN_COMMAND_FAILED_UNCHANGED = (
        "run-command-failed-unchanged",
        "the command failed, and changed no distribution",
        EXIT_UNCHANGED,
        Ending.UNCHANGED,
        Cause.COMMAND_FAILED,
        Operation.RUN,
    )
    RUN_COMMAND_FAILED_RESTORED = (
        "run-command-failed-restored",
        "the command failed: its change was undone, all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.COMMAND_FAILED,
        Operation.RUN,
    )
    RUN_COMMAND_FAILED_INCOMPLETE = (
        "run-command-failed-incomplete",
        "the command failed, and undoing its change is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.COMMAND_FAILED,
        Operation.RUN,
    )
    RUN_COMMAND_FAILED_KEPT = (
        "run-command-failed-kept",
        "the command failed; its change was kept (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.COMMAND_FAILED,
        Operation.RUN,
    )
    RUN_PROBE_FAILED_RESTORED = (
        "run-probe-failed-restored",
        "the probe failed after the command: all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.PROBE_FAILED,
        Operation.RUN,
    )
    RUN_PROBE_FAILED_INCOMPLETE = (
        "run-probe-failed-incomplete",
        "the probe failed after the command, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.PROBE_FAILED,
        Operation.RUN,
    )
    RUN_PROBE_FAILED_KEPT = (
        "run-probe-failed-kept",
        "the probe failed after the command; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.PROBE_FAILED,
        Operation.RUN,
    )
    RUN_INCONCLUSIVE_RESTORED = (
        "run-inconclusive-restored",
        "the metric's runs could not tell whether the command made it worse "
        "(inconclusive): all was restored and verified",
        EXIT_INCONCLUSIVE,
        Ending.RESTORED,
        Cause.INCONCLUSIVE,
        Operation.RUN,
    )
    RUN_INCONCLUSIVE_INCOMPLETE = (
        "run-inconclusive-incomplete",
        "the metric's runs could not tell whether the command made it worse, and the "
        "restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.INCONCLUSIVE,
        Operation.RUN,
    )
    RUN_INCONCLUSIVE_KEPT = (
        "run-inconclusive-kept",
        "the metric's runs could not tell whether the command made it worse; not "
        "restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.INCONCLUSIVE,
        Operation.RUN,
    )
    RUN_INCONCLUSIVE_RESTORED_EXCEPT_ASIDE = (
        "run-inconclusive-restored-except-aside",
        "the metric's runs could not tell whether the command made it worse: all was "
        "restored as the snapshot records it, verified, but NOT a second dist-info "
        "folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.INCONCLUSIVE,
        Operation.RUN,
    )
    RUN_UNMET_RESTORED = (
        "run-unmet-restored",
        "the command left requirements unmet: all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.UNMET,
        Operation.RUN,
    )
    RUN_UNMET_INCOMPLETE = (
        "run-unmet-incomplete",
        "the command left requirements unmet, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.UNMET,
        Operation.RUN,
    )
    RUN_UNMET_KEPT = (
        "run-unmet-kept",
        "the command left requirements unmet; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.UNMET,
        Operation.RUN,
    )
    RUN_INTERRUPTED_RESTORED = (
        "run-interrupted-restored",
        "interrupted: the command's change was undone, all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.INTERRUPTED,
        Operation.RUN,
    )
    RUN_INTERRUPTED_INCOMPLETE = (
        "run-interrupted-incomplete",
        "interrupted, and undoing the command's change is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.INTERRUPTED,
        Operation.RUN,
    )
    RUN_ERROR_RESTORED = (
        "run-error-restored",
        "an error after the command started: all was restored and verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.ERROR,
        Operation.RUN,
    )
    RUN_ERROR_INCOMPLETE = (
        "run-error-incomplete",
        "an error after the command started, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        Cause.ERROR,
        Operation.RUN,
    )
    # Undone as the run's snapshot records the state before it, but a second dist-info folder
    # the command removed is only kept aside (a snapshot holds one version per name): not
    # everything, so not exit 3. One per reason, as run-*-restored.
    RUN_COMMAND_FAILED_RESTORED_EXCEPT_ASIDE = (
        "run-command-failed-restored-except-aside",
        "the command failed: its change was undone as the snapshot records it, verified, but "
        "NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.COMMAND_FAILED,
        Operation.RUN,
    )
    RUN_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = (
        "run-probe-failed-restored-except-aside",
        "the probe failed after the command: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.PROBE_FAILED,
        Operation.RUN,
    )
    RUN_UNMET_RESTORED_EXCEPT_ASIDE = (
        "run-unmet-restored-except-aside",
        "the command left requirements unmet: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.UNMET,
        Operation.RUN,
    )
    RUN_INTERRUPTED_RESTORED_EXCEPT_ASIDE = (
        "run-interrupted-restored-except-aside",
        "interrupted: the command's change was undone as the snapshot records it, verified, "
        "but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.INTERRUPTED,
        Operation.RUN,
    )
    RUN_ERROR_RESTORED_EXCEPT_ASIDE = (
        "run-error-restored-except-aside",
        "an error after the command started: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
        Ending.RESTORED_EXCEPT_ASIDE,
        Cause.ERROR,
        Operation.RUN,
    )
    RUN_CONCURRENT_KEPT = (
        "run-concurrent-kept",
        "another process changed the environment while the probe ran: the change was not "
        "judged, and nothing was undone",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.CONCURRENT,
        Operation.RUN,
    )
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
    BISECT_INTERRUPTED = (
        "bisect-interrupted",
        "interrupted: the installed set is back where it started, verified",
        EXIT_RESTORED,
        Ending.RETURNED,
        Cause.INTERRUPTED,
        Operation.BISECT,
    )
    BISECT_STOPPED = (
        "bisect-stopped",
        "a state to probe could not be reached: the installed set is back where it started, "
        "verified",
        EXIT_RESTORED,
        Ending.RETURNED,
        Cause.FAILED,
        Operation.BISECT,
    )
    # A metric's runs could not tell whether a round's state is worse than allowed, or no
    # culprit the search found fails on its own: nothing is named, neither a culprit nor a pass.
    BISECT_INCONCLUSIVE = (
        "bisect-inconclusive",
        "inconclusive: nothing is named (a round the metric could not tell apart, or no culprit "
        "that fails on its own); the installed set is back where it started, verified",
        EXIT_INCONCLUSIVE,
        Ending.RETURNED,
        Cause.INCONCLUSIVE,
        Operation.BISECT,
    )
    # The probe fails in the good snapshot too: nothing to bisect. The command fails with the
    # probe's output, and leaves no snapshot behind to carry this as its note.
    BISECT_REFUSED = (
        "bisect-refused",
        "the probe fails in the good snapshot too: the installed set is back where it "
        "started, verified",
        EXIT_UNCHANGED,
        Ending.RETURNED,
        Cause.PROBE_FAILED,
        Operation.BISECT,
    )
    BISECT_CONCURRENT_KEPT = (
        "bisect-concurrent-kept",
        "another process changed the environment during the bisect: it was stopped, and left "
        "as it is",
        EXIT_INCOMPLETE,
        Ending.KEPT,
        Cause.CONCURRENT,
        Operation.BISECT,
    )
    BISECT_INCOMPLETE = (
        "bisect-incomplete",
        "the environment is NOT back where the bisect started",
        EXIT_INCOMPLETE,
        Ending.INCOMPLETE,
        None,
        Operation.BISECT,
    )
    # -- try: a removal or a run undone whatever its verdict; the verdict is the outcome
    TRY_PASSES = (
        "try-passes",
        "the change would pass (every probe passed); it was undone: back where it started, "
        "verified",
        EXIT_OK,
        Ending.RESTORED,
        Cause.TRIED,
        Operation.TRY,
    )
    TRY_FASTER = (
        "try-faster",
        "the change would make the metric better, significantly; it was undone: back where it "
        "started, verified",
        EXIT_OK,
        Ending.RESTORED,
    )
    TRY_BREAKS = (
        "try-breaks",
        "the change would break the environment; it was undone: back where it started, verified",
        EXIT_BREAKS,
        Ending.RESTORED,
        Cause.PROBE_FAILED,
        Operation.TRY,
    )
    TRY_SLOWER = (
        "try-slower",
        "the change would make the metric worse than allowed, significantly; it was undone: "
        "back where it started, verified",
        EXIT_SLOWER,
        Ending.RESTORED,
    )
    TRY_INCONCLUSIVE = (
        "try-inconclusive",
        "inconclusive: the metric's runs could not tell what the change would do; it was "
        "undone: back where it started, verified",
        EXIT_INCONCLUSIVE,
        Ending.RESTORED,
        Cause.INCONCLUSIVE,
        Operation.TRY,
    )
    # Refused before any change, as a removal is, because it would leave requirements unmet:
    # that is what it would do.
    TRY_UNMET = (
        "try-unmet",
        "the change would break the environment: it leaves requirements unmet; nothing was "
        "changed (--allow-unmet lets the probe judge it)",
        EXIT_BREAKS,
        Ending.UNCHANGED,
    )
    TRY_INTERRUPTED = (
        "try-interrupted",
        "interrupted: the change was undone: back where it started, verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.INTERRUPTED,
        Operation.TRY,
    )
    TRY_STOPPED = (
        "try-stopped",
        "the change could not be made or judged (the uninstall failed, another process changed "
        "the environment, an error); it was undone: back where it started, verified",
        EXIT_RESTORED,
        Ending.RESTORED,
        Cause.ERROR,
        Operation.TRY,
    )
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
        (``probe-failed-restored``); KeyError if there is none, a mistake of the caller's."""
        return _BY_CAUSE[operation, cause, ending]


_BY_ID = {member.id: member for member in Outcome}
_BY_CAUSE = {
    (member.operation, member.cause, member.ending): member
    for member in Outcome
    if member.operation is not None and member.cause is not None
}


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
