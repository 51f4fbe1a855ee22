"""Which changes between a good state and now make the probe fail: the units the changes form,
and the search over them.

``find`` asks ``passes(bad)``: does the probe pass with the units in ``bad`` as they are now and
every other unit as it was in the good state? (The caller puts the environment in that state.)
It assumes what a bisection must: each unit breaks the probe on its own or not at all, so the
probe passes exactly when ``bad`` holds no culprit. The first run is the environment as it is
(every unit bad), which must fail; then bisection.search, the search ``--keep-needed`` makes,
narrows the culprits down: a unit left bad is a candidate removed, a culprit a needed one. The
good state is probed only when no run has passed by the second culprit found, or at the end.
Runs, the first counted: at most ``2 + k * ceil(log2 n)`` for ``k`` culprits among ``n`` units,
one more when ``n`` is in ``(3/4 * 2^L, 2^L]``, ``L = ceil(log2 n)`` (no strategy does better
there: see bisection). A caller that probed the good state first (a metric's baseline) says
so, and no run of it is made here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from msgspec import Struct

from safeuninstall.judgement.bisection import search


class Found(Struct, frozen=True):
    """What ``find`` found, and each run it made (the units left bad, and whether it passed)."""

    culprits: tuple[str, ...] = ()
    runs: tuple[tuple[tuple[str, ...], bool], ...] = ()
    now_passes: bool = False  # the first run passed: nothing to find
    good_fails: bool = False  # the good state itself fails: nothing to find
    # A run was of exactly the culprits brought back (every other unit bad), and passed.
    final_passed: bool = False


def find(
    units: Sequence[str], passes: Callable[[frozenset[str]], bool], *, good_proven: bool = False
) -> Found:
    """The culprits among ``units`` (see the module). ``good_proven``: the caller probed the
    good state, and it passed."""
    made: list[tuple[tuple[str, ...], bool]] = []

    def run(bad: frozenset[str]) -> bool:
        verdict = passes(bad)
        made.append((tuple(u for u in units if u in bad), verdict))
        return verdict

    if run(frozenset(units)):
        return Found(runs=tuple(made), now_passes=True)
    found = search(units, run, failing=True, proven=good_proven)
    if found.start_failed:
        return Found(runs=tuple(made), good_fails=True)
    return Found(
        culprits=found.needed,
        runs=tuple(made),
        final_passed=found.final_passed,
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
