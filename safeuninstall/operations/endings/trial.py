"""How a try ends (``--try``): a removal or a run undone whatever its verdict; the verdict is the
outcome."""

from __future__ import annotations

from safeuninstall.base.errors import (
    EXIT_BREAKS,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    EXIT_SLOWER,
)
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation

TRY = Endings(
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
TRY_FASTER = TRY.other(
    "try-faster",
    "the change would make the metric better, significantly; it was undone: back where it "
    "started, verified",
    EXIT_OK,
    Ending.RESTORED,
)
TRY_SLOWER = TRY.other(
    "try-slower",
    "the change would make the metric worse than allowed, significantly; it was undone: "
    "back where it started, verified",
    EXIT_SLOWER,
    Ending.RESTORED,
)
# Refused before any change, as a removal is, because it would leave requirements unmet: that
# is what it would do.
TRY_UNMET = TRY.other(
    "try-unmet",
    "the change would break the environment: it leaves requirements unmet; nothing was "
    "changed (--allow-unmet lets the probe judge it)",
    EXIT_BREAKS,
    Ending.UNCHANGED,
)
# The return is verified, yet the probe run again at the start fails there: it does not judge
# this environment reliably, so it says nothing of the change (a removal's restored-probe-fails).
TRY_RESTORED_PROBE_FAILS = TRY.other(
    "try-restored-probe-fails",
    "the change was undone: back where it started, verified, but the probe fails there now: it "
    "does not judge this environment reliably, and says nothing of what the change would do "
    "(`probe` runs it alone, at the start)",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    Ending.RESTORED,
)
TRY_INCOMPLETE = TRY.other(
    "try-incomplete",
    "the return to where the try started is INCOMPLETE: the environment differs from it",
    EXIT_INCOMPLETE,
    Ending.INCOMPLETE,
    Operation.TRY,
)
TRY_NOT_RETURNED = TRY.other(
    "try-not-returned",
    "the change cannot be undone: nothing was undone, the environment is as the change left it",
    EXIT_INCOMPLETE,
    Ending.NOT_UNDONE,
    Operation.TRY,
)

TRY_PASSES = TRY[Cause.TRIED, Ending.RESTORED]
TRY_BREAKS = TRY[Cause.PROBE_FAILED, Ending.RESTORED]
TRY_INCONCLUSIVE = TRY[Cause.INCONCLUSIVE, Ending.RESTORED]
TRY_INTERRUPTED = TRY[Cause.INTERRUPTED, Ending.RESTORED]
TRY_STOPPED = TRY[Cause.ERROR, Ending.RESTORED]
