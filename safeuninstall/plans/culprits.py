"""Which changes between a good state and now make the probe fail: the units the changes form,
and the search over them.

``find`` asks ``passes(bad)``: does the probe pass with the units in ``bad`` as they are now and
every other unit as it was in the good state? (The caller puts the environment in that state.)
A metric may answer neither (None: its runs could not tell): the search stops there, and
nothing is named. Each culprit the search finds is then probed on its own (the good state with
only it bad): the search proves the culprits together are enough, this that each is needed.
It assumes what a bisection must: each unit breaks the probe on its own or not at all, so the
probe passes exactly when ``bad`` holds no culprit. The first run is the environment as it is
(every unit bad), which must fail; then bisection.search, the search ``--keep-needed`` makes,
narrows the culprits down: a unit left bad is a candidate removed, a culprit a needed one. The
good state is probed only when no run has passed by the second culprit found, or at the end.
Runs, the first counted: at most ``1 + k * (ceil(log2 n) + 1)`` for ``k`` culprits among ``n``
units (bisection.bound). A caller that probed the good state first (a metric's baseline) says
so, and no run of it is made here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from msgspec import Struct

from safeuninstall.plans.bisection import search

# A round's verdict: the probe passed, failed, or (a metric) could not tell: None.
Verdict = bool | None


class Found(Struct, frozen=True):
    """What ``find`` found, and each run it made (the units left bad, and its verdict)."""

    culprits: tuple[str, ...] = ()  # each confirmed on its own
    runs: tuple[tuple[tuple[str, ...], Verdict], ...] = ()
    now_passes: bool = False  # the first run passed: nothing to find
    good_fails: bool = False  # the good state itself fails: nothing to find
    # A run was of exactly the culprits brought back (every other unit bad), and passed.
    final_passed: bool = False
    # Found by the search but not on its own: with the verdict of that run (passed, None).
    not_confirmed: tuple[tuple[str, Verdict], ...] = ()
    inconclusive: bool = False  # a run of the search could not tell: it stopped there
    alone_runs: int = 0  # the runs, last in ``runs``, that tried a culprit on its own


class _Undecided(Exception):
    """A run of the search could not tell: nothing it would go on to infer would hold."""


def find(
    units: Sequence[str],
    passes: Callable[[frozenset[str]], Verdict],
    *,
    good_proven: bool = False,
    steady: bool = True,
    alone: Callable[[str], Verdict] | None = None,
) -> Found:
    """The culprits among ``units`` (see the module), each confirmed on its own: the good
    state with only that unit bad must fail (``alone``, by default ``passes``); one that
    passes there, or cannot be told apart, is not named. ``good_proven``: the caller probed the
    good state, and it passed. ``steady``: a verdict is the same every run (not a metric's),
    so a run already made of exactly that state confirms it."""
    made: list[tuple[tuple[str, ...], Verdict]] = []

    def run(bad: frozenset[str]) -> bool:
        verdict = passes(bad)
        made.append((tuple(u for u in units if u in bad), verdict))
        if verdict is None:
            raise _Undecided
        return verdict

    try:
        if run(frozenset(units)):
            return Found(runs=tuple(made), now_passes=True)
        found = search(units, run, failing=True, proven=good_proven)
    except _Undecided:
        return Found(runs=tuple(made), inconclusive=True)
    if found.start_failed:
        return Found(runs=tuple(made), good_fails=True)
    confirmed: list[str] = []
    not_confirmed: list[tuple[str, Verdict]] = []
    searched = len(made)
    for unit in found.needed:
        if steady and ((unit,), False) in made:
            confirmed.append(unit)
            continue
        verdict = alone(unit) if alone is not None else passes(frozenset({unit}))
        made.append(((unit,), verdict))
        if verdict is False:
            confirmed.append(unit)
        else:
            not_confirmed.append((unit, verdict))
    return Found(
        culprits=tuple(confirmed),
        runs=tuple(made),
        final_passed=found.final_passed,
        not_confirmed=tuple(not_confirmed),
        alone_runs=len(made) - searched,
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
