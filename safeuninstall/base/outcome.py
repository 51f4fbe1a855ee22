"""How an operation ended: one member per outcome, each with its text and its exit code.

The value is the word written in ``--json`` and in a snapshot's outcome note; the text is what a
person reads; the exit code says what state the environment is in (errors.EXIT_CODES).
"""

from __future__ import annotations

import enum

from safeuninstall.base.errors import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    EXIT_RESTORED,
    EXIT_UNCHANGED,
)


class Outcome(str, enum.Enum):
    """A str, so an outcome compares equal to its value (``Outcome.REMOVED == "removed"``)."""

    text: str
    exit_code: int

    def __new__(cls, value: str, text: str, exit_code: int) -> Outcome:
        member = str.__new__(cls, value)
        member._value_ = value
        member.text = text
        member.exit_code = exit_code
        return member

    # -- an uninstall (and check)
    NOTHING_TO_DO = ("nothing-to-do", "nothing to do", EXIT_OK)
    DRY_RUN = ("dry-run", "dry run: nothing was changed", EXIT_OK)
    REFUSED_STRICT = ("refused-strict", "refused (--strict): nothing was changed", EXIT_UNCHANGED)
    REFUSED_UNMET = (
        "refused-unmet",
        "refused: it would leave requirements unmet; nothing was changed",
        EXIT_UNCHANGED,
    )
    CHECKED = ("checked", "checked: nothing was changed", EXIT_OK)
    REMOVED = ("removed", "removed; every probe passed", EXIT_OK)
    # --keep-needed: what nothing needs is removed, the rest kept (each with its reason)
    KEPT_NEEDED = (
        "removed-kept-needed",
        "removed what nothing needs, kept what is needed; the probe passed",
        EXIT_OK,
    )
    NEEDED_RESTORED = (
        "needed-restored",
        "every candidate tried is needed: all was restored and verified",
        EXIT_OK,
    )
    NEEDED_INCOMPLETE = (
        "needed-incomplete",
        "every candidate tried is needed, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    PROBE_FAILED_KEPT = (
        "probe-failed-kept",
        "the probe failed after the removal; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
    )
    PROBE_FAILED_RESTORED = (
        "probe-failed-restored",
        "the probe failed after the removal: all was restored and verified",
        EXIT_RESTORED,
    )
    PROBE_FAILED_INCOMPLETE = (
        "probe-failed-incomplete",
        "the probe failed after the removal and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RESTORED_PROBE_FAILS = (
        "restored-probe-fails",
        "the probe failed after the removal; all was restored and verified, but the probe "
        "still fails in the restored state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    )
    DRIFT_RESTORED = (
        "drift-restored",
        "the probe passed only on other copies of libraries: all was restored",
        EXIT_RESTORED,
    )
    DRIFT_INCOMPLETE = (
        "drift-incomplete",
        "drift found after the removal and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    HOLLOW_RESTORED = (
        "hollow-restored",
        "the removal left another distribution hollow: all was restored",
        EXIT_RESTORED,
    )
    HOLLOW_INCOMPLETE = (
        "hollow-incomplete",
        "the removal left another distribution hollow; restore INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    INTERRUPTED_RESTORED = (
        "interrupted-restored",
        "interrupted: everything was restored and verified",
        EXIT_RESTORED,
    )
    INTERRUPTED_INCOMPLETE = (
        "interrupted-incomplete",
        "interrupted and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    UNINSTALL_FAILED_RESTORED = (
        "uninstall-failed-restored",
        "the uninstall failed: everything was restored and verified",
        EXIT_UNCHANGED,  # proven to be as before: nothing changed
    )
    UNINSTALL_FAILED_INCOMPLETE = (
        "uninstall-failed-incomplete",
        "the uninstall failed and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    CONCURRENT_RESTORED = (
        "concurrent-restored",
        "another process changed the environment during the removal: all was restored",
        EXIT_RESTORED,
    )
    CONCURRENT_INCOMPLETE = (
        "concurrent-incomplete",
        "another process changed the environment during the removal; restore INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    ERROR_RESTORED = (
        "error-restored",
        "an error after the uninstall started: all was restored and verified",
        EXIT_UNCHANGED,
    )
    ERROR_INCOMPLETE = (
        "error-incomplete",
        "an error after the uninstall started, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    # -- rollback and recover
    ALREADY_MATCHES = (
        "already-matches",
        "the environment already matches the snapshot",
        EXIT_OK,
    )
    ROLLED_BACK = ("rolled-back", "rolled back; the environment matches the snapshot", EXIT_OK)
    ROLLED_BACK_PROBE_FAILS = (
        "rolled-back-probe-fails",
        "rolled back and verified, but the probe fails in that state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    )
    ROLLED_BACK_PROBE_INTERRUPTED = (
        "rolled-back-probe-interrupted",
        "rolled back; the probe after it was interrupted",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    )
    INCOMPLETE = ("incomplete", "the rollback is INCOMPLETE", EXIT_INCOMPLETE)
    ROLLBACK_INCOMPLETE = (
        "rollback-incomplete",
        "the rollback stopped on an error and is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    NOTHING_TO_ROLL_BACK = (
        "nothing-to-roll-back",
        "nothing to roll back: no change since a snapshot is still in effect",
        EXIT_OK,
    )
    ROLLBACK_PROBE_FAILED_RESTORED = (
        "rollback-probe-failed-restored",
        "the probe failed after the rollback: the environment was put back as it was before "
        "it, verified",
        EXIT_RESTORED,
    )
    ROLLBACK_PROBE_FAILED_INCOMPLETE = (
        "rollback-probe-failed-incomplete",
        "the probe failed after the rollback, and putting it back is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    ROLLBACK_FAILED_RESTORED = (
        "rollback-failed-restored",
        "the rollback could not complete: the environment was put back as it was before it, "
        "verified",
        EXIT_RESTORED,
    )
    ROLLBACK_FAILED_INCOMPLETE = (
        "rollback-failed-incomplete",
        "the rollback could not complete, and putting it back is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    # Put back as the rollback's own snapshot records the state before it, but a second
    # dist-info folder the rollback removed is only kept aside (a snapshot holds one version
    # per name): not everything, so not exit 3.
    ROLLBACK_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = (
        "rollback-probe-failed-restored-except-aside",
        "the probe failed after the rollback: the environment was put back as its snapshot "
        "records it, verified, but NOT the second dist-info folder it removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    ROLLBACK_FAILED_RESTORED_EXCEPT_ASIDE = (
        "rollback-failed-restored-except-aside",
        "the rollback could not complete: the environment was put back as its snapshot "
        "records it, verified, but NOT the second dist-info folder it removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    ROLLBACK_FAILED_NOT_UNDONE = (
        "rollback-failed-not-undone",
        "the rollback could not complete, and what it removed cannot come back now: nothing "
        "was undone, the environment matches neither the snapshot nor the state before it",
        EXIT_INCOMPLETE,
    )
    # Restored and verified, then another process changed the environment while the probe
    # ran: it matches the snapshot no more, and the probe judged another environment. Nothing
    # is undone (an undo would undo that process's work too), as run-concurrent-kept.
    ROLLBACK_CONCURRENT_KEPT = (
        "rollback-concurrent-kept",
        "another process changed the environment during the rollback's probe: it no longer "
        "matches the snapshot, and nothing was undone",
        EXIT_INCOMPLETE,
    )
    NOTHING_TO_RECOVER = ("nothing-to-recover", "nothing to recover", EXIT_OK)
    RECOVERED = ("recovered", "recovered; the environment matches the snapshot", EXIT_OK)
    RECOVERED_PROBE_FAILS = (
        "recovered-probe-fails",
        "recovered and verified, but the probe fails in that state",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    )
    RECOVERED_PROBE_INTERRUPTED = (
        "recovered-probe-interrupted",
        "recovered; the probe after it was interrupted",
        EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    )
    RECOVER_INCOMPLETE = (
        "recover-incomplete",
        "the recover stopped on an error and is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RECOVER_CONCURRENT_KEPT = (
        "recover-concurrent-kept",
        "another process changed the environment during the recover's probe: it no longer "
        "matches the snapshot, and nothing was undone",
        EXIT_INCOMPLETE,
    )
    # -- run: a command guarded like a removal (operations/run.py)
    RAN = ("ran", "the command ran; every probe passed after its change", EXIT_OK)
    RAN_NO_CHANGE = ("ran-no-change", "the command ran and changed no distribution", EXIT_OK)
    RUN_COMMAND_FAILED_UNCHANGED = (
        "run-command-failed-unchanged",
        "the command failed, and changed no distribution",
        EXIT_UNCHANGED,
    )
    RUN_COMMAND_FAILED_RESTORED = (
        "run-command-failed-restored",
        "the command failed: its change was undone, all was restored and verified",
        EXIT_RESTORED,
    )
    RUN_COMMAND_FAILED_INCOMPLETE = (
        "run-command-failed-incomplete",
        "the command failed, and undoing its change is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RUN_COMMAND_FAILED_KEPT = (
        "run-command-failed-kept",
        "the command failed; its change was kept (--keep-on-failure)",
        EXIT_INCOMPLETE,
    )
    RUN_PROBE_FAILED_RESTORED = (
        "run-probe-failed-restored",
        "the probe failed after the command: all was restored and verified",
        EXIT_RESTORED,
    )
    RUN_PROBE_FAILED_INCOMPLETE = (
        "run-probe-failed-incomplete",
        "the probe failed after the command, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RUN_PROBE_FAILED_KEPT = (
        "run-probe-failed-kept",
        "the probe failed after the command; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
    )
    RUN_UNMET_RESTORED = (
        "run-unmet-restored",
        "the command left requirements unmet: all was restored and verified",
        EXIT_RESTORED,
    )
    RUN_UNMET_INCOMPLETE = (
        "run-unmet-incomplete",
        "the command left requirements unmet, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RUN_UNMET_KEPT = (
        "run-unmet-kept",
        "the command left requirements unmet; not restored (--keep-on-failure)",
        EXIT_INCOMPLETE,
    )
    RUN_INTERRUPTED_RESTORED = (
        "run-interrupted-restored",
        "interrupted: the command's change was undone, all was restored and verified",
        EXIT_RESTORED,
    )
    RUN_INTERRUPTED_INCOMPLETE = (
        "run-interrupted-incomplete",
        "interrupted, and undoing the command's change is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    RUN_ERROR_RESTORED = (
        "run-error-restored",
        "an error after the command started: all was restored and verified",
        EXIT_RESTORED,
    )
    RUN_ERROR_INCOMPLETE = (
        "run-error-incomplete",
        "an error after the command started, and the restore is INCOMPLETE",
        EXIT_INCOMPLETE,
    )
    # Undone as the run's snapshot records the state before it, but a second dist-info folder
    # the command removed is only kept aside (a snapshot holds one version per name): not
    # everything, so not exit 3. One per reason, as run-*-restored.
    RUN_COMMAND_FAILED_RESTORED_EXCEPT_ASIDE = (
        "run-command-failed-restored-except-aside",
        "the command failed: its change was undone as the snapshot records it, verified, but "
        "NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    RUN_PROBE_FAILED_RESTORED_EXCEPT_ASIDE = (
        "run-probe-failed-restored-except-aside",
        "the probe failed after the command: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    RUN_UNMET_RESTORED_EXCEPT_ASIDE = (
        "run-unmet-restored-except-aside",
        "the command left requirements unmet: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    RUN_INTERRUPTED_RESTORED_EXCEPT_ASIDE = (
        "run-interrupted-restored-except-aside",
        "interrupted: the command's change was undone as the snapshot records it, verified, "
        "but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    RUN_ERROR_RESTORED_EXCEPT_ASIDE = (
        "run-error-restored-except-aside",
        "an error after the command started: all was restored as the snapshot records it, "
        "verified, but NOT a second dist-info folder the command removed (kept aside)",
        EXIT_INCOMPLETE,
    )
    RUN_CONCURRENT_KEPT = (
        "run-concurrent-kept",
        "another process changed the environment while the probe ran: the change was not "
        "judged, and nothing was undone",
        EXIT_INCOMPLETE,
    )
    RUN_NOT_UNDONE = (
        "run-not-undone",
        "the command's change had to be undone but cannot be: nothing was undone, the "
        "environment is as the command left it",
        EXIT_INCOMPLETE,
    )
    # -- bisect: it ends where it started, or says how to get there
    BISECTED = (
        "bisected",
        "found what makes the probe fail; the environment is back where it started, verified",
        EXIT_OK,
    )
    BISECT_INTERRUPTED = (
        "bisect-interrupted",
        "interrupted: the environment is back where it started, verified",
        EXIT_RESTORED,
    )
    BISECT_STOPPED = (
        "bisect-stopped",
        "a state to probe could not be reached: the environment is back where it started, verified",
        EXIT_RESTORED,
    )
    BISECT_CONCURRENT_KEPT = (
        "bisect-concurrent-kept",
        "another process changed the environment during the bisect: it was stopped, and left "
        "as it is",
        EXIT_INCOMPLETE,
    )
    BISECT_INCOMPLETE = (
        "bisect-incomplete",
        "the environment is NOT back where the bisect started",
        EXIT_INCOMPLETE,
    )
    # -- probe
    PASSED = ("passed", "every probe passed", EXIT_OK)
    FAILED = ("failed", "a probe failed", EXIT_UNCHANGED)

    @classmethod
    def named(cls, value: str) -> Outcome:
        """The member whose value is ``value`` (ValueError if none)."""
        for member in cls:
            if member.value == value:
                return member
        raise ValueError(f"no outcome {value!r}")

    @classmethod
    def after_restore(cls, reason: str, restored: bool) -> Outcome:
        """``<reason>-restored`` or ``<reason>-incomplete`` (reason: probe-failed, drift, ...)."""
        return cls.named(f"{reason}-{'restored' if restored else 'incomplete'}")
