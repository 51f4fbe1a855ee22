"""The largest subset of candidates whose removal the probe accepts, in few probe runs.

``search`` asks ``passes(removed)`` whether the environment without ``removed`` passes the probe
(the caller puts the environment in that state: a restore from the stash costs milliseconds, a
probe run seconds, so runs are what is counted). It assumes what the evidence suggests: each
candidate is needed or not on its own, and a removal passes exactly when it takes no needed one.
So a passing run proves each candidate it removed removable, and a failing run proves that the
ones it removed hold a needed one; nothing else is inferred. The same search finds what
``bisect`` looks for: its changes are the candidates, "removed" is "left as now", and a needed
one is a culprit.

The candidates stand in a line; those not judged yet are the *open* ones. Every run removes all
the candidates proven removable plus the first ``size`` open ones:

- passing, those are removable;
- failing, they hold a needed one: the shortest such *prefix* is remembered, and the next runs
  try shorter prefixes of it; a prefix of one is a needed candidate (no run: the failures proved
  it), set aside, and the search goes on with the open ones after it.

The sizes come from a plan computed for ``n`` candidates (``_plan``, a dynamic programme over the
states ``(table, open ones, shortest failing prefix)``, memoised): in each state, the size whose
worst case over every set of needed ones is least, the worst case counting
``runs - ceil(log2 n) * needed``. The search ends on a passing run of exactly the final state:
when its last run was not that, one more run (the final state was proven once already, step by
step; this proves it whole).

The start (nothing removed) must pass for any of this to mean something. A caller that ran it
(``proven``: the removal's baseline) needs no run of it: when every candidate is needed, the
final state is the start, and the search ends without a run. A caller that did not (``bisect``:
the good state is probed only when it must be) has it proven by the first passing run (the
model: removing less cannot fail where removing more passed), else by a run of its own, made
as soon as a second needed one is found with no run passed yet, or at the end: a start that
fails is said then (``start_failed``), not after a search blaming every candidate. The tables
of the plan: a run passed; none did and the start is proven; none did, it is not, and no needed
one is found, or one. A caller that knows removing them all fails (``failing``: bisect's first
run, the environment as it is) starts in the state where the whole line is the failing prefix.

Runs (the caller's own not counted): ``bound(n, k)``. With the start proven, at most
``2 + k * ceil(log2 n)`` for ``k`` needed among ``n``, for every ``n`` up to ``PLANNED``
(tests/test_bisection.py runs every needed set up to 16, and checks the plan against trying
every size); no needed one costs one run, or two when ``n`` is in ``(3/4 * 2^L, 2^L]``,
``L = ceil(log2 n)`` (e.g. 4, 7-8, 13-16, 25-32): there, starting with all of them would cost
one run more than the bound for some needed set, so the plan starts with a part. Starting
failing with the start unproven (bisect), one needed one costs at most ``1 + ceil(log2 n)``
runs and ``k`` at most ``1 + k * ceil(log2 n)``, except at those ``n``: there no strategy meets
both (for ``n = 4`` proven by trying every adaptive strategy), and the plan keeps the bound of
one needed one by letting two or more cost up to ``spare`` runs more (1 or 2, ``_chosen``),
its tables then also counting the needed ones found, up to two. One by one costs ``n``.

Above ``PLANNED`` candidates (the plan costs ``O(n^2 log n)``), the search halves instead: all
at once; failing, halve the failing set, the second half waits in a pool, and the pool is tried
whole once a needed one is found; at most ``1 + k * (ceil(log2 n) + 1)`` runs, one more when the
start must be proven, one fewer when it starts failing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

from msgspec import Struct

PLANNED = 256  # the most candidates the planned search takes; above it, halving
_NEVER = 1 << 30  # worse than any worst case
_PASSED, _PROVEN, _UNPROVEN = 0, 1, 2  # what proves the start (see the module)


class Bisected(Struct, frozen=True):
    """What ``search`` found, and what it cost."""

    removable: tuple[str, ...]  # in the candidates' order
    needed: tuple[str, ...]
    runs: int  # probe runs
    final_passed: bool  # the last run passed, and was of exactly ``removable`` removed
    start_failed: bool = False  # the start's own run failed: nothing was found


def bound(n: int, k: int, *, failing: bool = False, proven: bool = True) -> int:
    """The most probe runs ``search`` makes for ``n`` candidates of which ``k`` are needed."""
    if n == 0:
        return 0
    log = math.ceil(math.log2(n))
    if n > PLANNED:
        return (not failing) + k * (log + 1) + (not proven)
    plan = _chosen(n, failing, proven)
    if k == 0:
        return 0 if failing else plan.nothing_needed
    return (plan.worst_failing if failing else plan.worst) + k * log + (plan.spare if k > 1 else 0)


_Table = tuple[int, int]  # what proves the start, and the needed ones found (counted to 2)


class _Plan(Struct, frozen=True):
    """For ``n`` candidates: the size of the next run in each state, and what it costs."""

    # sizes[table][open][prefix]: ``prefix``, the shortest prefix of the open ones known to
    # hold a needed one (0: none known)
    sizes: dict[_Table, tuple[tuple[int, ...], ...]]
    # The most ``runs - ceil(log2 n) * needed`` over every set of needed ones, less the spare
    # runs where there are (``spare``: two needed ones or more may cost that many runs more,
    # so that one alone costs one less): from the start, and starting with every candidate
    # failing.
    worst: int
    worst_failing: int
    nothing_needed: int  # the runs when no candidate is needed
    spare: int


@cache
def _chosen(n: int, failing: bool, proven: bool) -> _Plan:
    """The plan the search follows: without spare runs when one needed one costs at most
    ``2 + log2 n`` runs with the caller's first, else with the fewest spare runs for two needed
    ones or more that make it shorter."""

    def worst(plan: _Plan) -> int:
        return plan.worst_failing if failing else plan.worst

    plain = _plan(n, proven, 0)
    if worst(plain) <= 2 - failing:
        return plain
    spared = (_plan(n, proven, spare) for spare in (1, 2))
    return next((plan for plan in spared if worst(plan) < worst(plain)), plain)


@cache
def _plan(n: int, proven: bool, spare: int) -> _Plan:
    """The plan for ``n`` candidates (see the module): a dynamic programme over the states, the
    worst case of ``runs - log * found`` from each on, the closing runs counted."""
    log = math.ceil(math.log2(n)) if n > 1 else 0
    counts = range(3 if spare else 1)
    tables = [(proof, c) for proof in (_PASSED, _PROVEN) for c in counts]
    tables += [] if proven else [(_UNPROVEN, 0), (_UNPROVEN, 1)]
    # value[table][m][f] after a failing run (or none), passed[count][m][f] after a passing
    # one: they differ only where no run is left (the closing run, not needed after a pass or
    # with nothing removable), so from m = 2 on they share their rows.
    value = {t: [[0 if t[0] == _PROVEN else 1]] for t in tables}
    passed: dict[int, list[list[int]]] = {c: [[0]] for c in counts}
    sizes: dict[_Table, list[list[int]]] = {t: [[0]] for t in tables}

    def found(table: _Table, m: int) -> int:
        """The worst case once a needed one is found (no run), ``m`` open ones left."""
        proof, count = table
        less = log + (spare if count == 1 else 0)
        if proof != _UNPROVEN:
            return value[proof, min(count + 1, counts[-1])][m][0] - less
        if count == 0:
            return value[_UNPROVEN, 1][m][0] - less
        return 1 + value[_PROVEN, counts[-1]][m][0] - less  # the start's own run first

    for m in range(1, n + 1):
        for table in tables:
            row = [0] * (m + 1)  # a failing run keeps the table
            size = [0] * (m + 1)
            value[table].append(row)
            sizes[table].append(size)
            row[1] = found(table, m - 1)
            after_pass = passed[min(table[1], counts[-1])]
            for f in (*range(2, m + 1), 0):
                row[f], size[f] = _best_size(row, after_pass, m, f)
        for c in counts:
            once = value[_PASSED, c][1][0], found((_PASSED, c), 0) - 1  # no closing run
            passed[c].append(list(once) if m == 1 else value[_PASSED, c][m])
    plan = {t: tuple(tuple(s) for s in rows) for t, rows in sizes.items()}
    start = (_PROVEN if proven else _UNPROVEN, 0)
    runs, m = 0, n
    while m:  # nothing needed: every run passes
        m -= plan[(_PASSED, 0) if runs else start][m][0]
        runs += 1
    return _Plan(plan, value[start][n][0], value[start][n][n], runs, spare)


def _best_size(row: list[int], passed: list[list[int]], m: int, f: int) -> tuple[int, int]:
    """The worst case from ``m`` open ones with failing prefix ``f``, and the size that gives it.

    After a passing run of ``p`` more candidates the worst case does not grow with ``p`` (fewer
    open ones), after a failing one it does not shrink (a longer failing prefix): the best ``p``
    is where the two cross, found by bisecting (tests/test_bisection.py checks it against trying
    every ``p``). Where several sizes are as good: with no failing prefix the largest (all the
    open ones at once when that costs nothing: the search may end on that run), else the
    smallest."""
    top, keep = (f - 1, 1) if f else (m, 0)  # after a pass, the prefix is f - p

    def after_pass(p: int) -> int:
        return passed[m - p][(f - p) * keep]

    low, high = 1, top + 1  # the first p where failing is the worse
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if row[mid] >= after_pass(mid) else (mid + 1, high)
    cross = low
    below = after_pass(cross - 1) if cross > 1 else _NEVER
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
            low, high = (low, mid) if after_pass(mid) <= best else (mid + 1, high)
        p = low
    else:
        p = cross
    return 1 + best, p


class _Runs:
    """The probe runs made: how many, the last one, and whether the start is proven."""

    def __init__(self, passes: Callable[[frozenset[str]], bool], proven: bool) -> None:
        self.passes = passes
        self.count = 0
        self.last: tuple[frozenset[str], bool] | None = None
        self.proven = proven

    def __call__(self, removed: frozenset[str]) -> bool:
        self.count += 1
        verdict = self.passes(removed)
        self.last = (removed, verdict)
        self.proven |= verdict  # removing less can't fail where removing more passed
        return verdict

    def table(self, removable: list[str], needed: list[str], plan: _Plan) -> _Table:
        if not removable and not self.proven:
            return _UNPROVEN, len(needed)
        return (_PASSED if removable else _PROVEN), min(len(needed), 2 if plan.spare else 0)

    def start_passes(self, needed: list[str]) -> bool:
        """The start's own run, when a second needed one is found with none passed yet."""
        return self.proven or len(needed) < 2 or self(frozenset())

    def failed_start(self) -> Bisected:
        return Bisected((), (), self.count, final_passed=False, start_failed=True)

    def close(self, candidates: Sequence[str], removable: list[str], needed: list[str]) -> Bisected:
        """One more run when the last was not a pass of exactly the final state."""
        final = frozenset(removable)
        if self.last != (final, True) and (final or not self.proven):
            self(final)
        if not final and not self.proven:
            return self.failed_start()
        return Bisected(
            removable=tuple(c for c in candidates if c in final),
            needed=tuple(c for c in candidates if c in needed),
            runs=self.count,
            final_passed=not final or self.last == (final, True),
        )


def search(
    candidates: Sequence[str],
    passes: Callable[[frozenset[str]], bool],
    *,
    failing: bool = False,
    proven: bool = True,
) -> Bisected:
    """The largest removable subset of ``candidates`` (see the module). ``failing``: the caller
    knows removing them all fails; ``proven``: it knows the start passes."""
    if len(candidates) > PLANNED:
        return _halving(candidates, passes, failing, proven)
    run = _Runs(passes, proven)
    plan = _chosen(len(candidates), failing, proven) if candidates else None
    removable: list[str] = []
    needed: list[str] = []
    open_ = list(candidates)
    prefix = len(open_) if failing else 0  # of open_, known to hold a needed one (0: none)
    while open_:
        if prefix == 1:
            needed.append(open_.pop(0))
            prefix = 0
            if not run.start_passes(needed):
                return run.failed_start()
            continue
        assert plan is not None
        size = plan.sizes[run.table(removable, needed, plan)][len(open_)][prefix]
        if run(frozenset(removable + open_[:size])):
            removable += open_[:size]
            del open_[:size]
            prefix = prefix - size if prefix else 0
        else:
            prefix = size
    return run.close(candidates, removable, needed)


def _halving(
    candidates: Sequence[str],
    passes: Callable[[frozenset[str]], bool],
    failing: bool,
    proven: bool,
) -> Bisected:
    """The search above ``PLANNED`` candidates (see the module)."""
    run = _Runs(passes, proven)
    removable: list[str] = []
    needed: list[str] = []
    if not failing and run(frozenset(candidates)):
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
        if not run.start_passes(needed):
            return run.failed_start()
        if not pool:
            break
        if run(frozenset(removable + pool)):
            removable += pool
            break
        positive, pool = pool, []
    return run.close(candidates, removable, needed)
