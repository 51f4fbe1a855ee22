"""How a guarded command ends (``run -- COMMAND``): as a removal does, for its own causes (the
command failed, it left requirements unmet)."""

from __future__ import annotations

from safeuninstall.base.errors import EXIT_INCOMPLETE, EXIT_OK
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation

# Undone as the run's snapshot records the state before it, but a second dist-info folder the
# command removed is only kept aside (a snapshot holds one version per name): not everything,
# so not exit 3. One per reason, as run-*-restored.
RUN = Endings(
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
            Cause.CONCURRENT,
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
        # The metric's runs had switched back to the state before the command when another
        # process changed the environment: the command's change was no longer in place.
        (Cause.CONCURRENT, Ending.RESTORED): (
            "another process changed the environment while the metric's runs had undone the "
            "command's change: it stays undone, verified; that process's change is left as it "
            "is; run the command again"
        ),
        (Cause.CONCURRENT, Ending.INCOMPLETE): (
            "another process changed the environment while the metric's runs had undone the "
            "command's change, and the proof that it is undone is INCOMPLETE"
        ),
        (Cause.CONCURRENT, Ending.RESTORED_EXCEPT_ASIDE): (
            "another process changed the environment while the metric's runs had undone the "
            "command's change: it stays undone as the snapshot records it, verified, but NOT "
            "a second dist-info folder the command removed (kept aside); that process's "
            "change is left as it is; run the command again"
        ),
    },
)
RAN = RUN.other(
    "ran", "the command ran; every probe passed after its change", EXIT_OK, Ending.STANDS
)
RAN_NO_CHANGE = RUN.other(
    "ran-no-change", "the command ran and changed no distribution", EXIT_OK, Ending.UNCHANGED
)
RUN_NOT_UNDONE = RUN.other(
    "run-not-undone",
    "the command's change had to be undone but cannot be: nothing was undone, the "
    "environment is as the command left it",
    EXIT_INCOMPLETE,
    Ending.NOT_UNDONE,
    Operation.RUN,
)

# The rows a run names itself (the others its guard reaches by cause).
RUN_COMMAND_FAILED_UNCHANGED = RUN[Cause.COMMAND_FAILED, Ending.UNCHANGED]
RUN_COMMAND_FAILED_KEPT = RUN[Cause.COMMAND_FAILED, Ending.KEPT]
RUN_PROBE_FAILED_KEPT = RUN[Cause.PROBE_FAILED, Ending.KEPT]
RUN_INCONCLUSIVE_KEPT = RUN[Cause.INCONCLUSIVE, Ending.KEPT]
RUN_UNMET_KEPT = RUN[Cause.UNMET, Ending.KEPT]
RUN_CONCURRENT_KEPT = RUN[Cause.CONCURRENT, Ending.KEPT]
