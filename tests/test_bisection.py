"""--keep-needed's search: the largest removable subset, in at most
bisection.bound(n, k) <= 2 + k * ceil(log2 n) probe runs, ending on a passing run of exactly
the final state."""

from __future__ import annotations

import functools
import itertools
import math

import pytest

from safeuninstall.judgement import bisection
from safeuninstall.judgement.bisection import bound, search

NAMES = tuple(f"pkg{i:02d}" for i in range(16))


def _probe(needed: set[str], seen: list[frozenset[str]]):  # type: ignore[no-untyped-def]
    def passes(removed: frozenset[str]) -> bool:
        seen.append(removed)
        return not removed & needed

    return passes


def _log2(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


@pytest.mark.parametrize("n", range(1, 17))
def test_every_needed_set_up_to_16_is_found_within_the_bound(n: int) -> None:
    names = NAMES[:n]
    worst = {k: 0 for k in range(n + 1)}
    for k in range(n + 1):
        for chosen in itertools.combinations(names, k):
            needed = set(chosen)
            seen: list[frozenset[str]] = []
            found = search(names, _probe(needed, seen))
            assert set(found.needed) == needed
            assert set(found.removable) == set(names) - needed
            assert found.runs == len(seen) <= bound(n, k) <= 2 + k * _log2(n)
            assert found.final_passed
            assert seen[-1] == frozenset(found.removable) or not found.removable
            worst[k] = max(worst[k], found.runs)
    # The bound is reached for one needed: it is the search's, not a loose one.
    assert worst[1] == bound(n, 1)
    assert worst[0] == bound(n, 0) <= 2


@pytest.mark.parametrize(("k", "most"), [(0, 2), (1, 6), (2, 10), (4, 18)])
def test_16_candidates_meet_two_plus_k_log2_n_exactly(k: int, most: int) -> None:
    # Halving all at once, then a pool, took 11 runs for 2 needed and 21 for 4.
    runs = [
        search(NAMES, _probe(set(chosen), [])).runs for chosen in itertools.combinations(NAMES, k)
    ]
    assert max(runs) == bound(16, k) == most == 2 + k * 4


@pytest.mark.parametrize("n", [20, 32, 100, bisection.PLANNED])
def test_the_plan_proves_the_bound_for_larger_n(n: int) -> None:
    # The plan's worst case is computed over every needed set (the module): runs - k log2 n.
    assert all(bound(n, k) <= 2 + k * _log2(n) for k in range(1, 5))
    assert bound(n, 0) <= 2


@pytest.mark.parametrize("n", range(1, 21))
def test_the_plan_bisects_to_the_best_size(n: int) -> None:
    # The plan bisects for the best size (the module); trying every size finds the same.
    log = _log2(n)

    @functools.cache
    def worst(m: int, f: int, passed: bool, empty: bool) -> tuple[int, int]:
        if m == 0:
            return (0 if passed or empty else 1), 0
        if f == 1:
            return -log + worst(m - 1, 0, passed, empty)[0], 0
        top = f - 1 if f else m
        cases = [
            1 + max(worst(m - p, f - p if f else 0, True, False)[0], worst(m, p, False, empty)[0])
            for p in range(1, top + 1)
        ]
        best = min(cases)
        sizes = [p for p in range(1, top + 1) if cases[p - 1] == best]
        return best, sizes[0] if f else sizes[-1]

    plan = bisection._plan(n)
    assert plan.worst == worst(n, 0, True, True)[0]
    for empty in (False, True):
        for m in range(1, n + 1):
            for f in (0, *range(2, m + 1)):
                assert plan.sizes[empty][m][f] == worst(m, f, False, empty)[1]


def test_the_bound_for_one_needed_is_two_plus_log2_n() -> None:
    for n in range(2, 40):
        assert bound(n, 1) == 2 + math.ceil(math.log2(n))


def test_nothing_needed_costs_one_run_unless_the_bound_needs_two() -> None:
    ones = [n for n in range(2, 70) if bound(n, 0) == 1]
    assert [n for n in range(2, 70) if n not in ones] == [
        4,
        7,
        8,
        *range(13, 17),
        *range(25, 33),
        *range(49, 65),
    ]
    seen: list[frozenset[str]] = []
    assert search(NAMES[:12], _probe(set(), seen)).runs == 1 and seen == [frozenset(NAMES[:12])]


def test_above_planned_the_search_halves() -> None:
    n = bisection.PLANNED + 1
    names = [f"p{i}" for i in range(n)]
    found = search(names, _probe({"p7", "p200"}, []))
    assert found.needed == ("p7", "p200") and found.final_passed
    assert found.runs <= bound(n, 2) == 1 + 2 * (math.ceil(math.log2(n)) + 1)


def test_fewer_runs_than_one_by_one() -> None:
    # One-by-one trying costs n = 16 runs; the search, for one needed, at most 6.
    seen: list[frozenset[str]] = []
    found = search(NAMES, _probe({"pkg07"}, seen))
    assert found.runs <= 6 < len(NAMES)


def test_no_candidates_no_run() -> None:
    found = search((), _probe(set(), []))
    assert found.runs == 0 == bound(0, 0) and found.final_passed


def test_needs_that_depend_on_each_other_are_still_judged_by_the_final_run() -> None:
    # Not independent: pkg00 and pkg01 can each go, not both; the search keeps one.
    def passes(removed: frozenset[str]) -> bool:
        return not {"pkg00", "pkg01"} <= removed and "pkg05" not in removed

    found = search(NAMES[:8], passes)
    assert found.final_passed and passes(frozenset(found.removable))
    assert "pkg05" in found.needed and len(found.needed) == 2


def test_a_final_state_that_fails_is_reported() -> None:
    # A probe that stops passing (flaky, or the machine changed): the final run fails, and
    # the caller restores everything.
    calls = []

    def passes(removed: frozenset[str]) -> bool:
        calls.append(removed)
        return len(calls) <= 3 and "pkg01" not in removed

    found = search(NAMES[:4], passes)
    assert not found.final_passed
    assert calls[-1] == frozenset(found.removable)
