"""Which changes between a good state and now make the probe fail: the units the changes form,
and the search over them.

``find`` asks ``passes(bad)``: does the probe pass with the units in ``bad`` as they are now and
every other unit as it was in the good state? (The caller puts the environment in that state.)
It assumes what a bisection must: each unit breaks the probe on its own or not at all, so the
probe passes exactly when ``bad`` holds no culprit. A passing run clears every unit it left bad;
a failing one proves a culprit among them.

The first run is the environment as it is (every unit bad), which must fail. Then halving: the
set known to hold a culprit is split, the first half left bad (with what is cleared already);
passing, it is cleared and
the second half holds the culprit; failing, the first half does, and the second waits in a pool.
A culprit found, the pool is tried whole: passing, the search is over, and that run was of
exactly the state with only the culprits brought back. Runs: ``2 + ceil(log2 n)`` at most for one
culprit among ``n`` units, ``1 + k * (ceil(log2 n) + 1)`` for ``k``; one more when no run has
passed by the second culprit, to prove the good state passes at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from msgspec import Struct


class Found(Struct, frozen=True):
    """What ``find`` found, and each run it made (the units left bad, and whether it passed)."""

    culprits: tuple[str, ...] = ()
    harmless: tuple[str, ...] = ()
    runs: tuple[tuple[tuple[str, ...], bool], ...] = ()
    now_passes: bool = False  # the first run passed: nothing to find
    good_fails: bool = False  # the good state itself fails: nothing to find
    # A run was of exactly the culprits brought back (every other unit bad), and passed.
    final_passed: bool = False


class _Runs:
    def __init__(self, order: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> None:
        self._order = order
        self._passes = passes
        self.made: list[tuple[tuple[str, ...], bool]] = []

    def __call__(self, bad: Iterable[str]) -> bool:
        chosen = frozenset(bad)
        verdict = self._passes(chosen)
        self.made.append((tuple(u for u in self._order if u in chosen), verdict))
        return verdict

    def found(self, **fields: object) -> Found:
        return Found(runs=tuple(self.made), **fields)  # type: ignore[arg-type]


def find(units: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> Found:
    """The culprits among ``units`` (see the module)."""
    run = _Runs(units, passes)
    if run(units):
        return run.found(now_passes=True)
    harmless: list[str] = []
    culprits: list[str] = []
    positive = list(units)  # holds a culprit
    pool: list[str] = []  # not judged yet
    proven_good = False  # a run passed: the good state passes too
    while True:
        while len(positive) > 1:
            half = len(positive) // 2
            first, second = positive[:half], positive[half:]
            if run(harmless + first):
                harmless += first
                positive = second
                proven_good = True
            else:
                pool = second + pool
                positive = first
        culprits.append(positive[0])
        if not pool:
            break
        if run(harmless + pool):
            harmless += pool
            proven_good = True
            break
        if not proven_good:
            if not run(()):
                return run.found(good_fails=True)
            proven_good = True
        positive, pool = pool, []
    # Every unit a culprit: the good state is the answer, and must pass.
    if not harmless and not proven_good and not run(()):
        return run.found(good_fails=True)
    final = tuple(u for u in units if u in harmless)
    if harmless and run.made[-1] != (final, True):
        run(final)
    return run.found(
        culprits=tuple(u for u in units if u in culprits),
        harmless=final,
        final_passed=(final, True) in run.made,
    )


def units(changed: Iterable[str], ties: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """The changed names in units that can be applied apart: names tied (a requirement, shared
    files) to each other, directly or through others, form one. Each unit is keyed by its first
    name, names sorted."""
    names = sorted(set(changed))
    parent = {n: n for n in names}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name in names:
        for other in ties.get(name, ()):
            if other in parent and other != name:
                a, b = root(name), root(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    grouped: dict[str, list[str]] = {}
    for name in names:
        grouped.setdefault(root(name), []).append(name)
    return {members[0]: tuple(members) for members in grouped.values()}
