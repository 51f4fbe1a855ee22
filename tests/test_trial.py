"""What a try says its change would do, from why it was undone, how the return ended, and the
metric's verdict (operations/trial.py): pure, without an environment."""

from __future__ import annotations

from pathlib import Path

import pytest

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
)
from safeuninstall.operations.trial import tried
from safeuninstall.probe.metric import Metric, MetricRuns, Verdict
from safeuninstall.probe.runner import ProbeResult, metric_probe, python_probe


def _metric(verdict: Verdict, regression: float, p_value: float | None) -> ProbeResult:
    probe = metric_probe("python bench.py", "--probe-metric", Path("/"), Metric())
    runs = MetricRuns(
        (1.0, 2.0, 3.0), 2.0, baseline=2.0, regression=regression, p_value=p_value, verdict=verdict
    )
    passed = verdict is Verdict.WITHIN
    return ProbeResult(probe, passed, 0, False, 0.1, "", metric=runs)


def _code(passed: bool) -> ProbeResult:
    return ProbeResult(
        python_probe("import x", "--probe"), passed, 0 if passed else 1, False, 0, ""
    )


SLOWER = _metric(Verdict.REGRESSED, 30.0, 0.001)
UNDECIDED = _metric(Verdict.INCONCLUSIVE, 8.0, 0.4)
FASTER = _metric(Verdict.WITHIN, -30.0, 0.001)
SAME = _metric(Verdict.WITHIN, -1.0, 0.8)


@pytest.mark.parametrize(
    ("cause", "after", "outcome"),
    [
        (Cause.TRIED, [], TRY_PASSES),
        (Cause.TRIED, [_code(True), SAME], TRY_PASSES),
        (Cause.TRIED, [_code(True), FASTER], TRY_FASTER),
        (Cause.PROBE_FAILED, [_code(False)], TRY_BREAKS),
        (Cause.PROBE_FAILED, [SLOWER], TRY_SLOWER),
        (Cause.PROBE_FAILED, [_code(False), SLOWER], TRY_BREAKS),  # breaks says more
        (Cause.INCONCLUSIVE, [UNDECIDED], TRY_INCONCLUSIVE),
        (Cause.UNMET, [], TRY_BREAKS),
        (Cause.COMMAND_FAILED, [], TRY_BREAKS),
        (Cause.DRIFT, [_code(True)], TRY_BREAKS),
        (Cause.HOLLOW, [], TRY_BREAKS),
        (Cause.INTERRUPTED, [], TRY_INTERRUPTED),
        (Cause.CONCURRENT, [], TRY_STOPPED),
        (Cause.ERROR, [], TRY_STOPPED),
        (Cause.FAILED, [], TRY_STOPPED),
    ],
)
def test_a_verified_return_says_what_the_change_would_do(
    cause: Cause, after: list[ProbeResult], outcome: Outcome
) -> None:
    assert tried(cause, Ending.RESTORED, after) is outcome
    assert outcome.undone  # never offered to roll back to as a change that stands


@pytest.mark.parametrize("cause", list(Cause))
@pytest.mark.parametrize(
    ("ending", "outcome"),
    [
        (Ending.INCOMPLETE, TRY_INCOMPLETE),
        (Ending.RESTORED_EXCEPT_ASIDE, TRY_INCOMPLETE),
        (Ending.NOT_UNDONE, TRY_NOT_RETURNED),
    ],
)
def test_a_return_that_falls_short_says_so_whatever_the_verdict(
    cause: Cause, ending: Ending, outcome: Outcome
) -> None:
    assert tried(cause, ending, [SLOWER]) is outcome
    assert outcome.exit_code == 4


@pytest.mark.parametrize("cause", list(Cause))
def test_every_cause_a_change_is_undone_for_has_a_try_outcome(cause: Cause) -> None:
    assert tried(cause, Ending.RESTORED, []).id.startswith("try-")
