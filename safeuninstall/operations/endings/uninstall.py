"""How a removal ends (``safe-uninstall PACKAGE...``), and the outcomes of the commands that
judge without changing anything (``check``, ``probe``), which the other operations share
where they end the same way (a dry run, a refusal)."""

from __future__ import annotations

from safeuninstall.base.errors import (
    EXIT_OK,
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    EXIT_UNCHANGED,
)
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation

UNINSTALL = Endings(
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
NOTHING_TO_DO = UNINSTALL.other("nothing-to-do", "nothing to do", EXIT_OK, Ending.UNCHANGED)
DRY_RUN = UNINSTALL.other("dry-run", "dry run: nothing was changed", EXIT_OK, Ending.UNCHANGED)
REFUSED_STRICT = UNINSTALL.other(
    "refused-strict", "refused (--strict): nothing was changed", EXIT_UNCHANGED, Ending.UNCHANGED
)
REFUSED_UNMET = UNINSTALL.other(
    "refused-unmet",
    "refused: it would leave requirements unmet; nothing was changed",
    EXIT_UNCHANGED,
    Ending.UNCHANGED,
)
CHECKED = UNINSTALL.other("checked", "checked: nothing was changed", EXIT_OK, Ending.UNCHANGED)
REMOVED = UNINSTALL.other("removed", "removed; every probe passed", EXIT_OK, Ending.STANDS)
# --keep-needed: what nothing needs is removed, the rest kept (each with its reason)
KEPT_NEEDED = UNINSTALL.other(
    "removed-kept-needed",
    "removed what nothing needs, kept what is needed; the probe passed",
    EXIT_OK,
    Ending.STANDS,
)
RESTORED_PROBE_FAILS = UNINSTALL.other(
    "restored-probe-fails",
    "the probe failed after the removal; all was restored and verified, but the probe "
    "still fails in the restored state",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.RESTORED,
)
# -- probe
PASSED = UNINSTALL.other("passed", "every probe passed", EXIT_OK, Ending.UNCHANGED)
FAILED = UNINSTALL.other("failed", "a probe failed", EXIT_UNCHANGED, Ending.UNCHANGED)

# The rows a removal names itself (the others its guard reaches by cause). A metric whose runs
# could not tell (probe/metric.py) is never a pass: undone, or kept on request, under its own
# outcomes, so that a script tells it from a regression.
PROBE_FAILED_KEPT = UNINSTALL[Cause.PROBE_FAILED, Ending.KEPT]
INCONCLUSIVE_KEPT = UNINSTALL[Cause.INCONCLUSIVE, Ending.KEPT]
