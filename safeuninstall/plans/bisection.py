"""The largest subset of candidates whose removal the probe accepts, in few probe runs.

``search`` asks ``passes(removed)`` whether the environment without ``removed`` passes the probe
(the caller puts the environment in that state: a restore from the stash costs milliseconds, a
probe run seconds, so runs are what is counted). It assumes what the evidence suggests: each
candidate is needed or not on its own, and a removal passes exactly when it takes no needed one.
So a passing run proves each candidate it removed removable, and a failing run proves that the
ones it removed hold a needed one; nothing else is inferred. The same search finds what
``bisect`` looks for: its changes are the candidates, "removed" is "left as now", and a needed
one is a culprit.

It halves. The first run removes every candidate; failing, the set known to hold a needed one
is halved: its first half is removed with what is proven removable, a pass proves that half
removable and leaves the second holding the needed one, a failure keeps the first half and
sets the second aside, untried. A set of one is a needed candidate (no run: the failures
proved it). Then what was set aside is removed whole with what is proven removable: passing,
the search ends; failing, it holds a needed one and is halved in turn. The search ends on a
passing run of exactly the final state: when its last run was not that, one more run.

Runs: ``bound(n, k)``, at most ``1 + k * (ceil(log2 n) + 1)`` for ``k`` needed among ``n``: the
first run, then for each needed one at most ``ceil(log2 n)`` halvings and one run of what was
set aside (or the closing run). One by one costs ``n``.

The start (nothing removed) must pass for any of this to mean something. A caller that ran it
(``proven``: the removal's baseline) needs no run of it: when every candidate is needed, the
final state is the start, and the search ends without a run. A caller that did not (``bisect``:
the good state is probed only when it must be) has it proven by the first passing run (the
model: removing less cannot fail where removing more passed), else by a run of its own, made
as soon as a second needed one is found with no run passed yet, or at the end: a start that
fails is said then (``start_failed``), not after a search blaming every candidate. That run
stays within the bound: with no run passed, every halving failed, so the second needed one is
the first of the ``n - 1`` set aside, reached in ``floor(log2 (n - 1)) < ceil(log2 n)``
halvings. A caller that knows removing them all fails (``failing``: bisect's first run, the
environment as it is) has made the first run already: one fewer.
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
    start_failed: bool = False  # the start's own run failed: nothing was found


def bound(n: int, k: int, *, failing: bool = False) -> int:
    """The most probe runs ``search`` makes for ``n`` candidates of which ``k`` are needed
    (``failing``: the caller's run of removing them all not counted)."""
    if n == 0:
        return 0
    return (not failing) + k * (math.ceil(math.log2(n)) + 1)


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
    run = _Runs(passes, proven)
    removable: list[str] = []
    needed: list[str] = []
    if not candidates or (not failing and run(frozenset(candidates))):
        return run.close(candidates, list(candidates), needed)
    positive = list(candidates)  # holds a needed one
    aside: list[str] = []  # not judged yet
    while True:
        while len(positive) > 1:
            half = len(positive) // 2
            first, second = positive[:half], positive[half:]
            if run(frozenset(removable + first)):
                removable += first
                positive = second
            else:
                aside = second + aside
                positive = first
        needed.append(positive[0])
        if not run.start_passes(needed):
            return run.failed_start()
        if not aside:
            break
        if run(frozenset(removable + aside)):
            removable += aside
            break
        positive, aside = aside, []
    return run.close(candidates, removable, needed)
