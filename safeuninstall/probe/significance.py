"""The Mann-Whitney U test: is one sample of a metric's runs stochastically greater than
another? It compares ranks, not values, so one run thrown far off by the machine's load counts
as one rank: the test asv (``asv continuous``) uses for the same question.

Exact for small samples: the distribution of U over every way of splitting the pooled runs
into two samples of these sizes, counted group of tied values by group (so ties are exact too).
Larger samples: the normal approximation, with the variance corrected for ties and a
continuity correction (as ``scipy.stats.mannwhitneyu(method="asymptotic")``).

The standard library only: scipy has the same test, but it is tens of megabytes in the tool's
own environment for one function of a few dozen lines.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import cache

EXACT_MAX = 24  # the most runs in both samples together for which the exact test is counted


def u_statistic(x: Sequence[float], y: Sequence[float]) -> float:
    """U of ``x``: the pairs (one run of each) where x's is greater, a tie counting a half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def p_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """The one-sided p-value that ``x`` is stochastically greater than ``y``: the probability
    of a U at least as large as the one seen when both come from one distribution."""
    if not x or not y:
        return 1.0
    u = u_statistic(x, y)
    if len(x) + len(y) <= EXACT_MAX:
        if len(set(x) | set(y)) == len(x) + len(y):
            counts = _untied(len(x), len(y))
            return sum(counts[math.ceil(u) :]) / math.comb(len(x) + len(y), len(x))
        return _exact_at_least(u, x, y)
    return _normal_at_least(u, x, y)


def p_two_sided(x: Sequence[float], y: Sequence[float]) -> float:
    """The two-sided p-value that ``x`` and ``y`` differ: twice the smaller one-sided one."""
    return min(1.0, 2.0 * min(p_greater(x, y), p_greater(y, x)))


def _ties(x: Sequence[float], y: Sequence[float]) -> list[int]:
    """The sizes of the groups of equal values in the pooled sample, in increasing order."""
    counts = Counter([*x, *y])
    return [counts[value] for value in sorted(counts)]


@cache
def _untied(n: int, m: int) -> tuple[int, ...]:
    """How many splits give each U (0 to n * m) when no two values are equal: the largest
    value is in x (it beats all m of y: U - m from the rest) or in y (it beats nothing)."""
    if n == 0 or m == 0:
        return (1,) + (0,) * (n * m)
    in_x, in_y = _untied(n - 1, m), _untied(n, m - 1)
    return tuple(
        (in_x[u - m] if 0 <= u - m < len(in_x) else 0) + (in_y[u] if u < len(in_y) else 0)
        for u in range(n * m + 1)
    )


def _exact_at_least(u: float, x: Sequence[float], y: Sequence[float]) -> float:
    """P(U >= u) over every split of the pooled values into samples of len(x) and len(y).

    The groups of tied values are taken in increasing order; choosing ``j`` of a group of ``t``
    for x (in C(t, j) ways) adds to 2U: 2 for each of y's values below, 1 for each of y's in
    the group. The state is (values of x chosen so far, 2U so far)."""
    n = len(x)
    ways: dict[tuple[int, int], int] = {(0, 0): 1}
    seen = 0
    for t in _ties(x, y):
        step: dict[tuple[int, int], int] = {}
        for (chosen, twice_u), count in ways.items():
            below = seen - chosen  # y's values below this group
            for j in range(min(t, n - chosen) + 1):
                key = (chosen + j, twice_u + j * (2 * below + t - j))
                step[key] = step.get(key, 0) + count * math.comb(t, j)
        ways = step
        seen += t
    wanted = round(2 * u)
    at_least = sum(
        count for (chosen, twice_u), count in ways.items() if chosen == n and twice_u >= wanted
    )
    return at_least / math.comb(len(x) + len(y), n)


def _normal_at_least(u: float, x: Sequence[float], y: Sequence[float]) -> float:
    """P(U >= u) by the normal approximation, ties and continuity corrected."""
    n, m = len(x), len(y)
    total = n + m
    tied = sum(t**3 - t for t in _ties(x, y))
    variance = n * m / 12.0 * ((total + 1) - tied / (total * (total - 1)))
    if variance <= 0:  # every value equal: no evidence either way
        return 1.0
    z = (u - n * m / 2.0 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))
