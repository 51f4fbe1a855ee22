"""Metric probes: a command whose last line is a number (throughput, a cost, a score), run
several times. After a change its runs are judged against the baseline's, measured in the same
operation, by a decision that holds on a busy machine (``decide``):

- a regression counts only when the median is worse than the baseline's by more than the
  allowed regression AND the runs show it at the stated level (``SIGNIFICANCE``, one-sided):
  the baseline's runs, moved by the limit, are stochastically better than the runs after (a
  Mann-Whitney U test, significance.py). It fails like a failing probe;
- the change is within the limit when the runs after are significantly better than that moved
  baseline;
- neither: undecided. Where runs can be added (``interleaved``), they are, a pair at a time, up
  to ``max_runs`` a side; still undecided there, the verdict is INCONCLUSIVE: never a pass,
  never a regression.

Two samples without any spread (a deterministic number, two runs a side or more) need no test:
their medians decide. ``interleaved`` runs the two states A, B, B, A, A, B, ... after one
warm-up run that is not counted, so a drift of the machine's load falls on both sides (a linear
drift cancels in each four runs, and the state changes every second run only).

Pure: parsing a run's output and judging the numbers. Running the command is probe.py's part,
switching states the caller's.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence

import msgspec
from msgspec import Struct

from safeuninstall.probe.significance import p_greater, p_two_sided

DEFAULT_RUNS = 3
DEFAULT_MAX_RUNS = 15  # a side, when runs are added until the answer is decided
DEFAULT_MAX_REGRESSION = 10.0  # percent
SIGNIFICANCE = 0.01  # the level a regression must reach (one-sided; see the module)
WITHIN_LEVEL = 0.05  # the level "within the limit" must reach (one-sided)


class Metric(Struct, frozen=True):
    """How a metric probe is run and judged."""

    runs: int = DEFAULT_RUNS
    max_regression: float = DEFAULT_MAX_REGRESSION  # percent of the baseline median
    lower_is_better: bool = False
    max_runs: int = DEFAULT_MAX_RUNS  # a side, where runs can be added

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_is_better else "higher is better"


class Verdict(enum.Enum):
    """How the runs after a change compare with the baseline's."""

    WITHIN = "within-limit"  # shown not worse than the limit allows
    REGRESSED = "regressed"  # worse than the limit, and significantly so
    INCONCLUSIVE = "inconclusive"  # neither could be shown


class Decision(Struct, frozen=True):
    """``decide``'s answer, with the numbers it rests on."""

    verdict: Verdict
    baseline: float  # the baseline's median
    median: float  # the median after
    regression: float  # percent worse than the baseline (negative: better)
    p_value: float | None  # two-sided: do the two differ at all (None: no test was needed)
    why: str = ""  # a failing verdict, for a person: a regression, a number out of range


class MetricRuns(Struct, frozen=True):
    """The numbers one metric probe printed, run after run, and how they were judged."""

    values: tuple[float, ...]  # each run's number, in order (a run without one ends the list)
    median: float | None  # None: a run printed no number, or failed
    baseline: float | None = None  # the baseline's median, once judged against it
    # Percent worse than the baseline (negative: better), once judged against it.
    regression: float | None = None
    why: str = ""  # why it fails, for a person; empty when it does not
    baseline_values: tuple[float, ...] = ()  # the baseline's runs it was judged against
    p_value: float | None = None  # the Mann-Whitney U test's, two-sided
    verdict: Verdict | None = None  # once judged
    warmup: float | None = None  # the number of the warm-up run, not counted

    @property
    def inconclusive(self) -> bool:
        return self.verdict is Verdict.INCONCLUSIVE

    def summary(self) -> str:
        runs = ", ".join(number_text(v) for v in self.values) or "none"
        base = ", ".join(number_text(v) for v in self.baseline_values)
        if self.median is None or self.why:  # the why says the rest
            return f"runs: {runs}" + (f"; baseline runs: {base}" if base else "")
        wide = spread(self.values)
        shown = f"; spread {wide:.1f}%" if wide is not None else ""
        text = f"median {number_text(self.median)} (runs: {runs}{shown})"
        if self.baseline is not None and self.regression is not None:
            text += f"; baseline {number_text(self.baseline)}" + (
                f" (runs: {base})" if base else ""
            )
            text += f": {change_text(self.regression)}"
            if self.p_value is not None:
                text += f", p = {self.p_value:.2g}"
            if self.verdict is not None:
                text += f"; {self.verdict.value}"
        if self.warmup is not None:
            text += f"; warm-up {number_text(self.warmup)} not counted"
        return text

    @property
    def regression_percent(self) -> float | None:
        return _rounded(self.regression)

    @property
    def ratio(self) -> float | None:
        """The median against the baseline's."""
        return ratio(self.baseline, self.median)

    @property
    def rounded_p_value(self) -> float | None:
        return None if self.p_value is None else round(self.p_value, 6)

    @property
    def baseline_spread_percent(self) -> float | None:
        return _rounded(spread(self.baseline_values))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def number_text(value: float) -> str:
    return f"{value:.6g}"


def change_text(regression: float) -> str:
    if regression > 0:
        return f"{regression:.1f}% worse"
    return f"{-regression:.1f}% better" if regression < 0 else "no change"


def ratio(baseline: float | None, after: float | None) -> float | None:
    """The median after over the baseline's (None where it means nothing)."""
    if baseline is None or after is None or baseline == 0:
        return None
    value = after / baseline
    return round(value, 6) if math.isfinite(value) else None


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


def median(values: Sequence[float]) -> float:
    """The median, which stays finite for finite values: the middle two are halved before they
    are added (statistics.median adds them first, and 1e308 + 1e308 is inf)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return ordered[middle - 1] / 2 + ordered[middle] / 2


def spread(values: Sequence[float]) -> float | None:
    """How far the runs spread: (highest - lowest) in percent of their median's size (None:
    fewer than two runs, or a median of 0, or a spread too wide to be a number)."""
    if len(values) < 2:
        return None
    middle = median(values)
    if middle == 0:
        return None
    value = 100.0 * (max(values) - min(values)) / abs(middle)
    return value if math.isfinite(value) else None


def noise_note(metric: Metric, baseline: Sequence[float]) -> str:
    """What to do when the baseline's own runs spread wider than the limit ("" when not)."""
    wide = spread(baseline)
    if wide is None or wide <= metric.max_regression:
        return ""
    return (
        f"the baseline's own runs spread {wide:.1f}% ({number_text(min(baseline))} to "
        f"{number_text(max(baseline))}), wider than the {metric.max_regression:g}% allowed: "
        "expect inconclusive answers; give more runs (--metric-runs, --metric-max-runs), a "
        "wider limit (--max-regression), or a steadier workload (a longer one, a quieter machine)"
    )


def measured(values: Sequence[float], runs: int) -> MetricRuns:
    """All ``runs`` runs printed a number: their median counts."""
    assert len(values) == runs and runs > 0
    return MetricRuns(tuple(values), median(values))


def regression(metric: Metric, baseline: float, after: float) -> float:
    """How much worse ``after`` is than ``baseline``, in percent of the baseline (negative:
    better). From a baseline of 0, any worsening is infinitely worse. NaN where the numbers are
    too far apart to be subtracted (``decide`` fails that)."""
    worse = after - baseline if metric.lower_is_better else baseline - after
    if baseline == 0:
        return 0.0 if worse == 0 else math.copysign(math.inf, worse)
    value = 100.0 * worse / abs(baseline)
    return value if math.isfinite(value) else math.nan


def decide(metric: Metric, baseline: Sequence[float], after: Sequence[float]) -> Decision:
    """``after``'s runs against ``baseline``'s (see the module)."""
    before, now = median(baseline), median(after)
    worse = regression(metric, before, now)
    limit = metric.max_regression
    if math.isnan(worse):
        why = (
            f"the metric's numbers are too far apart to compare ({number_text(before)} -> "
            f"{number_text(now)}: the difference is not a finite number); a failing probe"
        )
        return Decision(Verdict.REGRESSED, before, now, worse, None, why)
    if len(baseline) > 1 and len(after) > 1 and _steady(baseline) and _steady(after):
        verdict = Verdict.REGRESSED if worse > limit else Verdict.WITHIN
        return _decision(metric, verdict, before, now, worse, None)
    sign = -1.0 if metric.lower_is_better else 1.0  # so that greater is better
    moved = [sign * v - limit / 100.0 * abs(before) for v in baseline]  # at the limit
    better = [sign * v for v in after]
    if worse > limit and p_greater(moved, better) <= SIGNIFICANCE:
        verdict = Verdict.REGRESSED
    elif worse <= limit and p_greater(better, moved) <= WITHIN_LEVEL:
        verdict = Verdict.WITHIN
    else:
        verdict = Verdict.INCONCLUSIVE
    return _decision(metric, verdict, before, now, worse, p_two_sided(baseline, after))


def _steady(values: Sequence[float]) -> bool:
    return min(values) == max(values)


def _decision(
    metric: Metric,
    verdict: Verdict,
    before: float,
    now: float,
    worse: float,
    p_value: float | None,
) -> Decision:
    limit = metric.max_regression
    shown = f"{number_text(before)} -> {number_text(now)}, {metric.direction}"
    if p_value is not None:
        shown += f", p = {p_value:.2g}"
    if verdict is Verdict.REGRESSED:
        why = (
            f"the metric regressed {worse:.1f}% against its baseline ({shown}; at most "
            f"{limit:g}% allowed"
            + (f", significant at the {SIGNIFICANCE:.0%} level)" if p_value is not None else ")")
        )
    elif verdict is Verdict.INCONCLUSIVE:
        why = (
            f"INCONCLUSIVE: the metric's runs show neither a regression beyond the {limit:g}% "
            f"allowed (at the {SIGNIFICANCE:.0%} level) nor a change within it (at the "
            f"{WITHIN_LEVEL:.0%} level): {change_text(worse)} ({shown})"
        )
    else:
        why = ""
    return Decision(verdict, before, now, worse, p_value, why)


def judged(metric: Metric, baseline: MetricRuns | None, after: MetricRuns) -> MetricRuns:
    """``after`` against ``baseline`` by ``decide``: ``why`` says it fails when it regressed,
    and when the runs could not tell (inconclusive is never a pass). A run without a number
    failed already."""
    if after.median is None or baseline is None or baseline.median is None:
        return after
    return with_decision(after, baseline.values, decide(metric, baseline.values, after.values))


def with_decision(after: MetricRuns, baseline: Sequence[float], decision: Decision) -> MetricRuns:
    return msgspec.structs.replace(
        after,
        baseline=decision.baseline,
        regression=decision.regression,
        why=decision.why,
        baseline_values=tuple(baseline),
        p_value=decision.p_value,
        verdict=decision.verdict,
    )


# -- two states, interleaved ---------------------------------------------------------------------

# One run in a state: its number, or why it failed.
Sample = Callable[[bool], "float | str"]


class Compared(Struct, frozen=True):
    """The runs of two states, interleaved, and how the second compares with the first."""

    runs: MetricRuns  # the second state's, judged against the first's (``baseline_values``)
    baseline_failed: bool = False  # a run of the first state failed: nothing was judged


def interleaved(metric: Metric, sample: Sample, *, after_first: bool) -> Compared:
    """Runs of the baseline's state (``sample(False)``) and the changed one (``sample(True)``)
    until ``decide`` decides, or each side has ``metric.max_runs`` (see the module).
    ``after_first``: the changed state is the one reached now, so it begins (no switch)."""
    first = after_first
    warm = sample(first)
    if isinstance(warm, str):
        return _failed(first, warm, (), ())
    values: dict[bool, list[float]] = {False: [], True: []}
    order = (first, not first, not first, first)
    count = 0
    cap = max(metric.runs, metric.max_runs)
    while True:
        while min(len(values[False]), len(values[True])) < metric.runs or count % 2:
            state = order[count % 4]
            got = sample(state)
            if isinstance(got, str):
                return _failed(state, got, values[False], values[True])
            values[state].append(got)
            count += 1
        runs = MetricRuns(tuple(values[True]), median(values[True]), warmup=warm)
        decision = decide(metric, values[False], values[True])
        if decision.verdict is not Verdict.INCONCLUSIVE or len(values[True]) >= cap:
            return Compared(with_decision(runs, values[False], decision))
        metric = msgspec.structs.replace(metric, runs=len(values[True]) + 1)


def _failed(state: bool, why: str, baseline: Sequence[float], after: Sequence[float]) -> Compared:
    runs = MetricRuns(tuple(after), None, why=why, baseline_values=tuple(baseline))
    return Compared(runs, baseline_failed=not state)
