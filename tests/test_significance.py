"""The Mann-Whitney U test of significance.py against reference p-values, and the metric's
decision (metric.decide, metric.interleaved) on seeded synthetic samples: no timing anywhere.

The reference p-values were computed once with scipy 1.17.1:
``scipy.stats.mannwhitneyu(x, y, alternative=..., method="exact"|"asymptotic")``, and for
samples with ties (where scipy's exact method does not apply) with
``scipy.stats.permutation_test((x, y), U, permutation_type="independent",
alternative="greater", n_resamples=numpy.inf)``, every split enumerated.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable

import pytest

from safeuninstall.probe.metric import (
    Metric,
    Sample,
    Verdict,
    decide,
    interleaved,
    measured,
    median,
    noise_note,
    spread,
)
from safeuninstall.probe.significance import p_greater, p_two_sided, u_statistic

SEPARATED = ([5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0])
MIXED = ([1.1, 2.4, 3.3, 0.7, 5.0], [0.5, 1.9, 2.2, 0.1, 3.0, 0.8])
TIES = ([3.0, 3.0, 4.0, 5.0], [1.0, 3.0, 3.0, 2.0])
TIES_2 = ([10.0, 10.0, 12.0, 12.0, 12.0, 9.0], [9.0, 9.0, 10.0, 11.0, 8.0])
# 15 and 16 values (31 in all: the normal approximation), with ties
LARGE = (
    [10.0, 10.6, 9.5, 8.2, 9.1, 8.0, 10.1, 12.7, 9.0, 8.8, 11.0, 10.7, 10.2, 8.1, 9.9],
    [10.4, 6.3, 8.1, 5.2, 6.4, 5.3, 8.5, 6.5, 9.5, 9.3, 8.6, 4.0, 7.9, 8.9, 9.2, 5.9],
)


@pytest.mark.parametrize(
    ("sample", "u", "greater", "two_sided"),
    [
        (SEPARATED, 16.0, 0.014285714285714285, 0.02857142857142857),  # exact
        (MIXED, 22.0, 0.12337662337662336, 0.24675324675324672),  # exact
        (TIES, 14.0, 0.08571428571428572, None),  # every split, ties counted
        (TIES_2, 24.0, 0.06060606060606061, None),
        (LARGE, 199.0, 0.0009558733582870253, 0.0019117467165740505),  # asymptotic
    ],
)
def test_p_values_match_scipy(
    sample: tuple[list[float], list[float]], u: float, greater: float, two_sided: float | None
) -> None:
    x, y = sample
    assert u_statistic(x, y) == u
    assert p_greater(x, y) == pytest.approx(greater, rel=1e-9)
    if two_sided is not None:
        assert p_two_sided(x, y) == pytest.approx(two_sided, rel=1e-9)


def test_the_other_side_and_no_evidence() -> None:
    x, y = SEPARATED
    assert p_greater(y, x) == pytest.approx(1.0)
    assert p_greater([1.0] * 20, [1.0] * 20) == 1.0  # every value tied: nothing to tell
    assert p_greater([], [1.0]) == 1.0


# -- the median, at the float extremes --------------------------------------------------------


def test_the_median_is_the_median_not_the_mean() -> None:
    runs = measured([1.0, 2.0, 10.0], 3)
    assert runs.median == 2.0  # the mean would be 4.33
    assert measured([10.0, 1.0, 2.0, 40.0], 4).median == 6.0  # the mean would be 13.25


def test_the_median_of_huge_numbers_stays_finite() -> None:
    assert median([1e308, 1e308]) == 1e308
    assert median([1.7e308, 1.6e308, -1e308, 1.5e308]) == pytest.approx(1.55e308)


@pytest.mark.parametrize(
    ("baseline", "after", "lower"),
    [
        ([1e308, 1e308], [1.0, 1.0], False),  # a median that overflowed passed this as NaN
        ([1.5e308, 1.6e308], [-1.5e308, -1.5e308], False),  # the difference overflows
        ([-1.7e308, -1.7e308, -1.6e308], [1.7e308, 1.7e308, 1.6e308], True),
    ],
)
def test_a_step_that_is_not_finite_fails(
    baseline: list[float], after: list[float], lower: bool
) -> None:
    decision = decide(Metric(lower_is_better=lower), baseline, after)
    assert decision.verdict is Verdict.REGRESSED
    assert decision.why
    assert "inf" not in decision.why.replace("infinite", "")  # numbers, said as such
    assert "nan" not in decision.why


def test_an_overflowing_difference_is_said_as_such() -> None:
    decision = decide(Metric(), [1.5e308, 1.6e308], [-1.5e308, -1.5e308])
    assert "too far apart to compare" in decision.why
    assert "a failing probe" in decision.why


# -- the decision on synthetic samples ---------------------------------------------------------


def _noisy(rng: random.Random, noise: float) -> Callable[[float], float]:
    """A run's number: ``level`` times a factor uniform in [1 - noise, 1 + noise]."""
    return lambda level: level * (1 + noise * rng.uniform(-1, 1))


def _verdicts(
    factor: float,
    noise: float,
    seeds: range,
    *,
    drift: float = 0.0,
    metric: Metric | None = None,
) -> collections.Counter[Verdict]:
    """Interleaved runs of a baseline at 100 and a state at ``100 * factor``, each seed; the
    machine slows by ``drift`` of the level every run when given."""
    verdicts: collections.Counter[Verdict] = collections.Counter()
    for seed in seeds:
        sample = _drifting(_noisy(random.Random(seed), noise), factor, drift)
        compared = interleaved(metric or Metric(), sample, after_first=True)
        assert compared.runs.verdict is not None
        verdicts[compared.runs.verdict] += 1
    return verdicts


def _drifting(draw: Callable[[float], float], factor: float, drift: float) -> Sample:
    clock = [0]

    def sample(after: bool) -> float:
        clock[0] += 1
        return draw(100.0 * (factor if after else 1.0) * (1 - drift * clock[0]))

    return sample


def test_equal_states_with_30_percent_noise_never_regress() -> None:
    """Runs spread 30 % as the shared machine's did (uniform in 85-115 %): over 500 seeds, no
    change or inconclusive, never a regression; and mostly decided."""
    verdicts = _verdicts(1.0, 0.15, range(500))
    assert verdicts[Verdict.REGRESSED] == 0
    assert verdicts[Verdict.WITHIN] > 400


def test_equal_states_with_plus_or_minus_30_percent_noise_rarely_regress() -> None:
    """Noise of +-30 % (a spread of 86 %, wider than any measured): over 500 seeds at most
    one false regression (the levels are per look, and up to 13 looks are made), and the
    confirmation round of bisect stands behind it."""
    verdicts = _verdicts(1.0, 0.30, range(500))
    assert verdicts[Verdict.REGRESSED] <= 1
    assert verdicts[Verdict.WITHIN] > 200


def test_a_2x_slowdown_with_30_percent_noise_is_found() -> None:
    verdicts = _verdicts(0.5, 0.30, range(200))
    assert verdicts == {Verdict.REGRESSED: 200}


def test_lower_is_better_finds_a_cost_that_doubled() -> None:
    verdicts = _verdicts(2.0, 0.30, range(100), metric=Metric(lower_is_better=True))
    assert verdicts == {Verdict.REGRESSED: 100}


def test_a_drift_in_time_is_no_regression_when_interleaved() -> None:
    """The machine gets 1.5 % slower every run (a third slower by the end of 30 runs): the
    baseline's runs, first, would look faster. Interleaved: never a regression."""
    verdicts = _verdicts(1.0, 0.05, range(300), drift=0.015)
    assert verdicts[Verdict.REGRESSED] == 0
    # The same drift with every baseline run first, every run after it then: a regression.
    draw, runs = _noisy(random.Random(1), 0.05), Metric().max_runs
    baseline = [draw(100.0 * (1 - 0.015 * t)) for t in range(runs)]
    after = [draw(100.0 * (1 - 0.015 * t)) for t in range(runs, 2 * runs)]
    assert decide(Metric(), baseline, after).verdict is Verdict.REGRESSED


def test_runs_are_added_until_decided_and_interleaved() -> None:
    """Steady numbers are decided by their medians at the first look; noisy ones take more
    runs, A and B in turn after a warm-up, never more than the cap."""
    seen: list[bool] = []

    def sample(after: bool) -> float:
        seen.append(after)
        return 100.0

    compared = interleaved(Metric(runs=3), sample, after_first=True)
    assert compared.runs.verdict is Verdict.WITHIN
    assert seen == [True, True, False, False, True, True, False]  # warm-up, then B A A B B A
    assert compared.runs.warmup == 100.0
    assert len(compared.runs.values) == len(compared.runs.baseline_values) == 3

    rng = random.Random(3)
    capped = interleaved(
        Metric(runs=3, max_runs=7),
        lambda after: 100.0 * rng.uniform(0.7, 1.3) * (0.85 if after else 1.0),
        after_first=False,
    )
    assert capped.runs.verdict is Verdict.INCONCLUSIVE
    assert len(capped.runs.values) == len(capped.runs.baseline_values) == 7
    assert "INCONCLUSIVE" in capped.runs.why


def test_a_failing_run_ends_the_comparison_on_its_side() -> None:
    def sample(after: bool) -> float | str:
        return "the metric command failed with exit code 1" if not after else 1.0

    compared = interleaved(Metric(), sample, after_first=True)
    assert compared.baseline_failed
    assert compared.runs.median is None
    assert compared.runs.why == "the metric command failed with exit code 1"


def test_a_baseline_noisier_than_the_limit_is_said_with_what_to_do() -> None:
    note = noise_note(Metric(max_regression=10), [1.02e7, 1.27e7, 1.15e7])
    assert note.startswith("the baseline's own runs spread 21.7% (1.02e+07 to 1.27e+07)")
    assert "wider than the 10% allowed" in note
    for advice in ("--metric-runs", "--metric-max-runs", "--max-regression", "steadier workload"):
        assert advice in note
    assert noise_note(Metric(max_regression=25), [1.02e7, 1.27e7, 1.15e7]) == ""
    assert spread([5.0]) is None


def test_the_spread_of_the_runs_is_shown() -> None:
    assert measured([10.0, 12.0, 11.0], 3).summary() == "median 11 (runs: 10, 12, 11; spread 18.2%)"
    assert measured([10.0], 1).summary() == "median 10 (runs: 10)"
