"""How a rollback (``rollback``) and a recover (``recover``) end: each its own table, since a
recover finishes another operation's undo and says so in its own words."""

from __future__ import annotations

from safeuninstall.base.errors import EXIT_OK, EXIT_PROBE_FAILS_AFTER_ROLLBACK
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation

# Put back as the rollback's own snapshot records the state before it, but a second dist-info
# folder the rollback removed is only kept aside (a snapshot holds one version per name): not
# everything, so not exit 3. Restored and verified, then another process changed the
# environment while the probe ran (concurrent/kept): it matches the snapshot no more, and the
# probe judged another environment; nothing is undone (an undo would undo that process's work
# too), as run-concurrent-kept.
ROLLBACK = Endings(
    Operation.ROLLBACK,
    "rollback-",
    grid=(
        (Cause.PROBE_FAILED, Cause.INCONCLUSIVE, Cause.FAILED, Cause.CONCURRENT),
        (Ending.RESTORED, Ending.INCOMPLETE, Ending.RESTORED_EXCEPT_ASIDE),
    ),
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
        # The metric's runs had switched back to the state before the rollback when another
        # process changed the environment: the rollback's change was no longer in place.
        (Cause.CONCURRENT, Ending.RESTORED): (
            "another process changed the environment while the metric's runs had undone the "
            "rollback's change: it stays undone, verified; that process's change is left as "
            "it is; run the rollback again"
        ),
        (Cause.CONCURRENT, Ending.INCOMPLETE): (
            "another process changed the environment while the metric's runs had undone the "
            "rollback's change, and the proof that it is undone is INCOMPLETE"
        ),
        (Cause.CONCURRENT, Ending.RESTORED_EXCEPT_ASIDE): (
            "another process changed the environment while the metric's runs had undone the "
            "rollback's change: it stays undone as its snapshot records it, verified, but NOT "
            "the second dist-info folder it removed (kept aside); that process's change is "
            "left as it is; run the rollback again"
        ),
    },
    ids={(Cause.ERROR, Ending.INCOMPLETE): "rollback-incomplete"},
)
# A recover that could not make the environment match the snapshot: its journal stays, and it
# is run again.
RECOVER = Endings(
    Operation.RECOVER,
    "recover-",
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
ALREADY_MATCHES = ROLLBACK.other(
    "already-matches", "the installed set already matches the snapshot", EXIT_OK, Ending.UNCHANGED
)
ROLLED_BACK = ROLLBACK.other(
    "rolled-back",
    # what the verification proved: not the bytes of what the rollback never touched
    "rolled back; the installed set matches the snapshot, and each restored file its hash",
    EXIT_OK,
    Ending.STANDS,
)
ROLLED_BACK_PROBE_FAILS = ROLLBACK.other(
    "rolled-back-probe-fails",
    "rolled back; the installed set matches the snapshot, and each restored file its hash, "
    "but the probe fails in that state",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.STANDS,
)
ROLLED_BACK_PROBE_INTERRUPTED = ROLLBACK.other(
    "rolled-back-probe-interrupted",
    "rolled back; the probe after it was interrupted",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.STANDS,
)
NOTHING_TO_ROLL_BACK = ROLLBACK.other(
    "nothing-to-roll-back",
    "nothing to roll back: no change since a snapshot is still in effect",
    EXIT_OK,
    Ending.UNCHANGED,
)
NOTHING_TO_RECOVER = RECOVER.other(
    "nothing-to-recover", "nothing to recover", EXIT_OK, Ending.UNCHANGED
)
RECOVERED = RECOVER.other(
    "recovered",
    # what the verification proved: not the bytes of what the operation never touched
    "recovered; the installed set matches the snapshot, and each restored file its hash",
    EXIT_OK,
    Ending.STANDS,
)
RECOVERED_PROBE_FAILS = RECOVER.other(
    "recovered-probe-fails",
    "recovered; the installed set matches the snapshot, and each restored file its hash, "
    "but the probe fails in that state",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.STANDS,
)
RECOVERED_PROBE_INTERRUPTED = RECOVER.other(
    "recovered-probe-interrupted",
    "recovered; the probe after it was interrupted",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.STANDS,
)

# The rows a rollback and a recover name themselves (a recover has no undo of its own: the
# guard reaches none of its rows).
ROLLBACK_INCOMPLETE = ROLLBACK[Cause.ERROR, Ending.INCOMPLETE]
ROLLBACK_CONCURRENT_KEPT = ROLLBACK[Cause.CONCURRENT, Ending.KEPT]
ROLLBACK_FAILED_NOT_UNDONE = ROLLBACK[Cause.FAILED, Ending.NOT_UNDONE]
RECOVER_FELL_SHORT = RECOVER[Cause.FAILED, Ending.INCOMPLETE]
RECOVER_INCOMPLETE = RECOVER[Cause.ERROR, Ending.INCOMPLETE]
RECOVER_CONCURRENT_KEPT = RECOVER[Cause.CONCURRENT, Ending.KEPT]
