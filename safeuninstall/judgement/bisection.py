"""The largest subset of candidates whose removal the probe accepts, in few probe runs.

``search`` asks ``passes(removed)`` whether the environment without ``removed`` passes the probe
(the caller puts the environment in that state: a restore from the stash costs milliseconds, a
probe run seconds, so runs are what is counted). It assumes what the evidence suggests: each
candidate is needed or not on its own, and a removal passes exactly when it takes no needed one.
So a passing run proves each candidate it removed removable, and a failing run proves that the
ones it removed hold a needed one; nothing else is inferred.

The candidates stand in a line; those not judged yet are the *open* ones. Every run removes all
the candidates proven removable plus the first ``size`` open ones:

- passing, those are removable;
- failing, they hold a needed one: the shortest such *prefix* is remembered, and the next runs
  try shorter prefixes of it; a prefix of one is a needed candidate (no run: the failures proved
  it), set aside, and the search goes on with the open ones after it.

The sizes come from a plan computed for ``n`` candidates (``_plan``, a dynamic programme over the
states ``(open ones, shortest failing prefix, nothing proven removable yet)``, memoised): in each
state, the size whose worst case over every set of needed ones is least, the worst case counting
``runs - ceil(log2 n) * needed``. The search ends on a passing run of exactly the final state:
when its last run was not that, one more run (the final state was proven once already, step by
step; this proves it whole). When every candidate is needed, the final state is the one before
the change, which the baseline passed: no run.

Runs (the baseline not counted; it runs with or without bisection, and may come from the cache):
at most ``2 + k * ceil(log2 n)`` for ``k`` needed among ``n`` (``bound`` is the plan's own worst
case, which is within that for every ``n`` up to ``PLANNED``; tests/test_bisection.py runs every
needed set up to 16). No
needed one costs one run, or two when ``n`` is in ``(3/4 * 2^L, 2^L]``, ``L = ceil(log2 n)``
(e.g. 4, 7-8, 13-16, 25-32): there, starting with all of them costs one run more than the bound
for some needed set (for ``n = 4`` for any strategy, proven by trying every one), so the plan
starts with a part. One-by-one trying costs ``n``.

Above ``PLANNED`` candidates (the plan costs ``O(n^2 log n)``), the search halves instead: all
at once; failing, halve the failing set, the second half waits in a pool, and the pool is tried
whole once a needed one is found; at most ``1 + k * (ceil(log2 n) + 1)`` runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

from msgspec import Struct

PLANNED = 256  # the most candidates the planned search takes; above it, halving
_NEVER = 1 << 30  # worse than any worst case


class Bisected(Struct, frozen=True):
    """What ``search`` found, and what it cost."""

    removable: tuple[str, ...]  # in the candidates' order
    needed: tuple[str, ...]
    runs: int  # probe runs
    final_passed: bool  # the last run passed, and was of exactly ``removable`` removed


def bound(n: int, k: int) -> int:
    """The most probe runs ``search`` makes for ``n`` candidates of which ``k`` are needed."""
    if n == 0:
        return 0
    log = math.ceil(math.log2(n))
    if n > PLANNED:
        return 1 + k * (log + 1) if n > 1 else 1
    plan = _plan(n)
    return plan.nothing_needed if k == 0 else plan.worst + k * log


class _Plan(Struct, frozen=True):
    """For ``n`` candidates: the size of the next run in each state, and what it costs."""

    # sizes[empty][open][prefix]: ``empty``, no candidate proven removable yet; ``prefix``,
    # the shortest prefix of the open ones known to hold a needed one (0: none known)
    sizes: tuple[tuple[tuple[int, ...], ...], ...]
    worst: int  # the most ``runs - ceil(log2 n) * needed`` over every set of needed ones
    nothing_needed: int  # the runs when no candidate is needed


@cache
def _plan(n: int) -> _Plan:
    """The plan for ``n`` candidates (see the module): a dynamic programme over the states, the
    worst case of ``runs - log * found`` from each on, the closing run counted.

    After a passing run of ``p`` more candidates the worst case does not grow with ``p`` (fewer
    open ones), after a failing one it does not shrink (a longer failing prefix): the best ``p``
    is where the two cross, found by bisecting (tests/test_bisection.py checks it against trying
    every ``p``). Where several sizes are as good: with no failing prefix the largest (all the
    open ones at once when that costs nothing: the search may end on that run), else the
    smallest."""
    log = math.ceil(math.log2(n)) if n > 1 else 0
    # value[empty][m][f] after a failing run (or the baseline), passed[m][f] after a passing
    # one: they differ only where no run is left (the closing run, not needed after a pass or
    # with nothing removable), so from m = 2 on they share their rows.
    value: list[list[list[int]]] = [[[1]], [[0]]]
    passed: list[list[int]] = [[0]]
    sizes: list[list[list[int]]] = [[[0]], [[0]]]
    for m in range(1, n + 1):
        for empty in (0, 1):
            row = [0] * (m + 1)  # a failing run keeps ``empty``
            size = [0] * (m + 1)
            value[empty].append(row)
            sizes[empty].append(size)
            row[1] = -log + value[empty][m - 1][0]
            for f in (*range(2, m + 1), 0):
                top, keep = (f - 1, 1) if f else (m, 0)  # after a pass, the prefix is f - p
                low, high = 1, top + 1  # the first p where failing is the worse
                while low < high:
                    mid = (low + high) // 2
                    if row[mid] >= passed[m - mid][(f - mid) * keep]:
                        high = mid
                    else:
                        low = mid + 1
                cross = low
                below = passed[m - cross + 1][(f - cross + 1) * keep] if cross > 1 else _NEVER
                at = row[cross] if cross <= top else _NEVER
                best = min(below, at)
                if not f:  # the largest p as good: the last p from cross with row[p] == best
                    p = cross - 1
                    if at == best:
                        low, high = cross, top
                        while low < high:
                            mid = (low + high + 1) // 2
                            low, high = (mid, high) if row[mid] <= best else (low, mid - 1)
                        p = low
                elif below == best:  # the smallest p as good: the first with its pass == best
                    low, high = 1, cross - 1
                    while low < high:
                        mid = (low + high) // 2
                        if passed[m - mid][(f - mid) * keep] <= best:
                            high = mid
                        else:
                            low = mid + 1
                    p = low
                else:
                    p = cross
                row[f], size[f] = 1 + best, p
        passed.append([value[0][1][0], -log] if m == 1 else value[0][m])
    plan = tuple(tuple(tuple(s) for s in table) for table in sizes)
    runs, m = 0, n
    while m:  # nothing needed: every run passes
        m -= plan[runs == 0][m][0]
        runs += 1
    return _Plan(plan, value[1][n][0], runs)


class _Runs:
    """The probe runs made: how many, and the last one."""

    def __init__(self, passes: Callable[[frozenset[str]], bool]) -> None:
        self.passes = passes
        self.count = 0
        self.last: tuple[frozenset[str], bool] | None = None

    def __call__(self, removed: frozenset[str]) -> bool:
        self.count += 1
        verdict = self.passes(removed)
        self.last = (removed, verdict)
        return verdict

    def close(self, candidates: Sequence[str], removable: list[str], needed: list[str]) -> Bisected:
        """One more run when the last was not a pass of exactly the final state."""
        final = frozenset(removable)
        if final and self.last != (final, True):
            self(final)
        return Bisected(
            removable=tuple(c for c in candidates if c in final),
            needed=tuple(c for c in candidates if c in needed),
            runs=self.count,
            final_passed=not final or self.last == (final, True),
        )


def search(candidates: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> Bisected:
    """The largest removable subset of ``candidates`` (see the module)."""
    if len(candidates) > PLANNED:
        return _halving(candidates, passes)
    run = _Runs(passes)
    sizes = _plan(len(candidates)).sizes if candidates else ()
    removable: list[str] = []
    needed: list[str] = []
    open_ = list(candidates)
    failing = 0  # the shortest prefix of open_ known to hold a needed one (0: none known)
    while open_:
        if failing == 1:
            needed.append(open_.pop(0))
            failing = 0
            continue
        size = sizes[not removable][len(open_)][failing]
        if run(frozenset(removable + open_[:size])):
            removable += open_[:size]
            del open_[:size]
            failing = failing - size if failing else 0
        else:
            failing = size
    return run.close(candidates, removable, needed)


def _halving(candidates: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> Bisected:
    """The search above ``PLANNED`` candidates (see the module)."""
    run = _Runs(passes)
    removable: list[str] = []
    needed: list[str] = []
    if run(frozenset(candidates)):
        return run.close(candidates, list(candidates), needed)
    positive = list(candidates)  # holds a needed one
    pool: list[str] = []  # not judged yet
    while True:
        while len(positive) > 1:
            half = len(positive) // 2
            first, second = positive[:half], positive[half:]
            if run(frozenset(removable + first)):
                removable += first
                positive = second
            else:
                pool = second + pool
                positive = first
        needed.append(positive[0])
        if not pool:
            break
        if run(frozenset(removable + pool)):
            removable += pool
            break
        positive, pool = pool, []
    return run.close(candidates, removable, needed)
