"""Metric probes: a command whose last line is a number (throughput, a cost, a score), run a
few times; the median counts. After a change it is judged against the baseline median measured
in the same operation: worse by more than the allowed regression, it fails like a failing probe.

Pure: parsing a run's output and judging medians. Running the command is probe.py's part.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import msgspec
from msgspec import Struct

DEFAULT_RUNS = 3
DEFAULT_MAX_REGRESSION = 10.0  # percent


class Metric(Struct, frozen=True):
    """How a metric probe is run and judged."""

    runs: int = DEFAULT_RUNS
    max_regression: float = DEFAULT_MAX_REGRESSION  # percent of the baseline median
    lower_is_better: bool = False

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_is_better else "higher is better"


class MetricRuns(Struct, frozen=True):
    """The numbers one metric probe printed, run after run, and how they were judged."""

    values: tuple[float, ...]  # each run's number, in order (a run without one ends the list)
    median: float | None  # None: a run printed no number, or failed
    baseline: float | None = None  # the baseline's median, once judged against it
    # Percent worse than the baseline (negative: better), once judged against it.
    regression: float | None = None
    why: str = ""  # why it fails, for a person; empty when it does not

    def summary(self) -> str:
        runs = ", ".join(number_text(v) for v in self.values) or "none"
        if self.median is None or self.why:  # the why says the rest
            return f"runs: {runs}"
        text = f"median {number_text(self.median)} (runs: {runs})"
        if self.baseline is not None and self.regression is not None:
            change = (
                f"{self.regression:.1f}% worse"
                if self.regression > 0
                else f"{-self.regression:.1f}% better"
                if self.regression < 0
                else "no change"
            )
            text += f"; baseline {number_text(self.baseline)}: {change}"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "values": list(self.values),
            "median": self.median,
            "baseline_median": self.baseline,
            "regression_percent": None if self.regression is None else round(self.regression, 3),
            "why": self.why,
        }


def number_text(value: float) -> str:
    return f"{value:.6g}"


def read_number(stdout: str) -> float | None:
    """The number on the last non-empty line of ``stdout``; None if that line is not one (or
    is not finite: nan and inf compare with nothing)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = float(lines[-1])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def no_number_why(stdout: str) -> str:
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return "the metric printed nothing: its last line must be a number"
    return f"the metric's last line is not a number: {lines[-1][:80]!r}"


def measured(values: Sequence[float], runs: int) -> MetricRuns:
    """All ``runs`` runs printed a number: their median counts."""
    assert len(values) == runs and runs > 0
    return MetricRuns(tuple(values), statistics.median(values))


def regression(metric: Metric, baseline: float, after: float) -> float:
    """How much worse ``after`` is than ``baseline``, in percent of the baseline (negative:
    better). From a baseline of 0, any worsening is infinitely worse."""
    worse = after - baseline if metric.lower_is_better else baseline - after
    if baseline == 0:
        return 0.0 if worse == 0 else math.copysign(math.inf, worse)
    return 100.0 * worse / abs(baseline)


def judged(metric: Metric, baseline: MetricRuns | None, after: MetricRuns) -> MetricRuns:
    """``after`` against ``baseline``: ``why`` says it fails when it is worse by more than
    ``metric.max_regression`` percent. A run without a number failed already."""
    if after.median is None or baseline is None or baseline.median is None:
        return after
    worse = regression(metric, baseline.median, after.median)
    judged_runs = msgspec.structs.replace(after, baseline=baseline.median, regression=worse)
    if worse > metric.max_regression:
        why = (
            f"the metric regressed {worse:.1f}% against its baseline "
            f"({number_text(baseline.median)} -> {number_text(after.median)}, "
            f"{metric.direction}; at most {metric.max_regression:g}% allowed)"
        )
        return msgspec.structs.replace(judged_runs, why=why)
    return judged_runs
