"""``try``: the hypothesis tested before acting. A removal (``try PACKAGE...``) or a guarded
command (``try -- COMMAND``) made and judged as ``uninstall`` and ``run`` make and judge it, then
undone whatever the verdict (their ``always_undo`` option): the return to the start is their
restore, verified by hashes, journaled for ``recover``. Another environment's state
(``try --state FILE``) is reached and left as bisect's switches reach and leave it (bisect.py).
What the change would do is the outcome: this module only names it from why the change was
undone and how the return ended.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from safeuninstall.base.outcome import Cause, Ending, Outcome
from safeuninstall.operations.endings.trial import (
    TRY_BREAKS,
    TRY_FASTER,
    TRY_INCOMPLETE,
    TRY_INCONCLUSIVE,
    TRY_INTERRUPTED,
    TRY_NOT_RETURNED,
    TRY_PASSES,
    TRY_SLOWER,
    TRY_STOPPED,
    TRY_UNMET,
)
from safeuninstall.operations.endings.uninstall import REFUSED_UNMET
from safeuninstall.probe.metric import SIGNIFICANCE, Verdict, change_text, number_text, ratio
from safeuninstall.probe.runner import ProbeResult


class Would(enum.Enum):
    """What the change would do, judged as the removal or the run judges it."""

    PASS = "passes"
    FASTER = "faster"
    BREAK = "breaks"
    SLOWER = "slower"
    INCONCLUSIVE = "inconclusive"


# Why a try's change was undone, beside its own ending (Cause.TRIED: it passed).
_BY_CAUSE = {
    Cause.PROBE_FAILED: TRY_BREAKS,
    Cause.DRIFT: TRY_BREAKS,
    Cause.HOLLOW: TRY_BREAKS,
    Cause.UNMET: TRY_BREAKS,
    Cause.COMMAND_FAILED: TRY_BREAKS,
    Cause.NEEDED: TRY_BREAKS,
    Cause.INCONCLUSIVE: TRY_INCONCLUSIVE,
    Cause.INTERRUPTED: TRY_INTERRUPTED,
    Cause.FAILED: TRY_STOPPED,
    Cause.CONCURRENT: TRY_STOPPED,
    Cause.ERROR: TRY_STOPPED,
    Cause.TRIED: TRY_PASSES,
}


def would(after: Sequence[ProbeResult]) -> Would:
    """The verdict of the probes run after the change: a failure that is only metrics
    regressed is "slower"; a pass where a metric is significantly better is "faster"."""
    failing = [r for r in after if not r.passed]
    metrics = [r.metric for r in failing]
    if failing and all(m is not None and m.inconclusive for m in metrics):
        return Would.INCONCLUSIVE
    if failing and all(m is not None and m.verdict is Verdict.REGRESSED for m in metrics):
        return Would.SLOWER
    if failing:
        return Would.BREAK
    better = [
        r.metric
        for r in after
        if r.metric is not None
        and r.metric.verdict is Verdict.WITHIN
        and (r.metric.regression or 0.0) < 0
        and (r.metric.p_value is None or r.metric.p_value <= SIGNIFICANCE)
    ]
    return Would.FASTER if better else Would.PASS


def tried(cause: Cause, ending: Ending, after: Sequence[ProbeResult]) -> Outcome:
    """A try's outcome: what the change would do (why it was undone, its probes' verdict),
    when the return to the start is verified; else that the return fell short."""
    if ending is Ending.NOT_UNDONE:
        return TRY_NOT_RETURNED
    if ending is not Ending.RESTORED:
        return TRY_INCOMPLETE
    outcome = _BY_CAUSE[cause]
    if outcome is TRY_BREAKS and cause is Cause.PROBE_FAILED:
        verdict = would(after)
        if verdict is Would.SLOWER:
            return TRY_SLOWER
        if verdict is Would.INCONCLUSIVE:
            return TRY_INCONCLUSIVE
    if outcome is TRY_PASSES and would(after) is Would.FASTER:
        return TRY_FASTER
    return outcome


def refused(outcome: Outcome) -> Outcome:
    """A removal refused before any change because it would leave requirements unmet: for a
    try, that is its answer (the change breaks them), nothing having changed."""
    return TRY_UNMET if outcome is REFUSED_UNMET else outcome


def metric_lines(after: Sequence[ProbeResult]) -> list[str]:
    """What each metric says the change would do, in one line with its numbers: the medians,
    their ratio, the change, the p-value, the runs a side."""
    lines = []
    for result in after:
        runs = result.metric
        if runs is None or runs.baseline is None or runs.median is None:
            continue
        shown = ratio(runs.baseline, runs.median)
        line = (
            f"{result.probe.label}, what the change would do: {number_text(runs.baseline)} -> "
            f"{number_text(runs.median)}"
            + (f" (x{shown:.3g}" if shown is not None else " (")
            + f", {change_text(runs.regression or 0.0)})"
        )
        if runs.p_value is not None:
            line += f", p = {runs.p_value:.2g}"
        line += f", {len(runs.values)} runs a side"
        if runs.verdict is not None:
            line += f": {runs.verdict.value}"
        lines.append(line)
    return lines
