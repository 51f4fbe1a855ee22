"""How a bisect ends (``bisect GOOD``): where it started, or it says how to get there."""

from __future__ import annotations

from safeuninstall.base.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_UNCHANGED
from safeuninstall.base.outcome import Cause, Ending, Endings, Operation

BISECT = Endings(
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
BISECTED = BISECT.other(
    "bisected",
    "found what makes the probe fail; the installed set is back where it started, verified",
    EXIT_OK,
    Ending.RETURNED,
    Operation.BISECT,
)
BISECT_INCOMPLETE = BISECT.other(
    "bisect-incomplete",
    "the environment is NOT back where the bisect started",
    EXIT_INCOMPLETE,
    Ending.INCOMPLETE,
    Operation.BISECT,
)

BISECT_INTERRUPTED = BISECT[Cause.INTERRUPTED, Ending.RETURNED]
BISECT_STOPPED = BISECT[Cause.FAILED, Ending.RETURNED]
# A metric's runs could not tell whether a round's state is worse than allowed, or no culprit
# the search found fails on its own: nothing is named, neither a culprit nor a pass.
BISECT_INCONCLUSIVE = BISECT[Cause.INCONCLUSIVE, Ending.RETURNED]
# The probe fails in the good snapshot too: nothing to bisect. The command fails with the
# probe's output, and leaves no snapshot behind to carry this as its note.
BISECT_REFUSED = BISECT[Cause.PROBE_FAILED, Ending.RETURNED]
BISECT_CONCURRENT_KEPT = BISECT[Cause.CONCURRENT, Ending.KEPT]
