"""The largest subset of candidates whose removal the probe accepts, in few probe runs.

``search`` asks ``passes(removed)`` whether the environment without ``removed`` passes the probe
(the caller puts the environment in that state: a restore from the stash costs milliseconds, a
probe run seconds, so runs are what is counted). It assumes what the evidence suggests: each
candidate is needed or not on its own, and a removal passes exactly when it takes no needed one.

1. All ``n`` candidates at once. Passing, that is the answer: one run.
2. Failing, the set holds a needed one: halve it, try the first half (with everything proven
   removable so far). Passing, that half is removable and the other holds the needed one;
   failing, the needed one is in the first half and the other half waits in a pool. At one
   candidate left, that one is needed (no run: the failures proved it).
3. Then the pool is tried at once (with everything removable); passing, done; failing, step 2
   on the pool.
4. The search ends on a passing run of exactly the final state: when its last run was not that,
   one more run (the final state was proven once already, step by step; this proves it whole).
   When every candidate is needed, the final state is the one before the change, which the
   baseline passed: no run.

Runs (the baseline not counted; it runs with or without bisection, and may come from the
cache): one for ``k = 0``; at most ``2 + ceil(log2 n)`` for ``k = 1``; in general at most
``1 + k * (ceil(log2 n) + 1)`` (``bound``): each needed one costs a search of at most
``ceil(log2 n)`` runs and one run of the pool after it. One-by-one trying costs ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from msgspec import Struct


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
    return 1 + k * (math.ceil(math.log2(n)) + 1) if n > 1 else 1


def search(candidates: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> Bisected:
    """The largest removable subset of ``candidates`` (see the module)."""
    runs = 0
    last: tuple[frozenset[str], bool] | None = None

    def run(removed: frozenset[str]) -> bool:
        nonlocal runs, last
        runs += 1
        verdict = passes(removed)
        last = (removed, verdict)
        return verdict

    removable: set[str] = set()
    needed: list[str] = []
    if not candidates or run(frozenset(candidates)):
        return _result(candidates, set(candidates), needed, runs, last)
    positive = list(candidates)  # holds a needed one
    pool: list[str] = []  # not judged yet
    while True:
        while len(positive) > 1:
            half = len(positive) // 2
            first, second = positive[:half], positive[half:]
            if run(frozenset(removable.union(first))):
                removable.update(first)
                positive = second
            else:
                pool = second + pool
                positive = first
        needed.append(positive[0])
        if not pool:
            break
        if run(frozenset(removable.union(pool))):
            removable.update(pool)
            break
        positive, pool = pool, []
    final = frozenset(removable)
    if final and last != (final, True):
        run(final)
    return _result(candidates, removable, needed, runs, last)


def _result(
    candidates: Sequence[str],
    removable: set[str],
    needed: list[str],
    runs: int,
    last: tuple[frozenset[str], bool] | None,
) -> Bisected:
    final = frozenset(removable)
    return Bisected(
        removable=tuple(c for c in candidates if c in removable),
        needed=tuple(c for c in candidates if c in needed),
        runs=runs,
        final_passed=not final or last == (final, True),
    )
