"""--keep-needed's search: the largest removable subset, in at most
bisection.bound(n, k) <= 2 + k * ceil(log2 n) probe runs, ending on a passing run of exactly
the final state."""

from __future__ import annotations

import functools
import itertools
import math

import pytest

from safeuninstall.plans import bisection
from safeuninstall.plans.bisection import bound, search

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


PASSED, PROVEN, UNPROVEN = 0, 1, 2


@pytest.mark.parametrize(("proven", "spare"), [(True, 0), (False, 0), (False, 1), (False, 2)])
@pytest.mark.parametrize("n", range(1, 21))
def test_the_plan_bisects_to_the_best_size(n: int, proven: bool, spare: int) -> None:
    # The plan bisects for the best size (the module); trying every size finds the same.
    log = _log2(n)
    cap = 2 if spare else 0

    @functools.cache
    def worst(proof: int, count: int, m: int, f: int, passed: bool) -> tuple[int, int]:
        if m == 0:
            return (0 if passed else 1) if proof == PASSED else int(proof == UNPROVEN), 0
        if f == 1:  # a needed one found
            less = log + (spare if count == 1 else 0)
            if proof != UNPROVEN:
                return worst(proof, min(count + 1, cap), m - 1, 0, passed)[0] - less, 0
            if count == 0:
                return worst(UNPROVEN, 1, m - 1, 0, False)[0] - less, 0
            return 1 + worst(PROVEN, cap, m - 1, 0, False)[0] - less, 0  # the start's run
        top = f - 1 if f else m
        cases = [
            1
            + max(
                worst(PASSED, min(count, cap), m - p, f - p if f else 0, True)[0],
                worst(proof, count, m, p, False)[0],
            )
            for p in range(1, top + 1)
        ]
        best = min(cases)
        sizes = [p for p in range(1, top + 1) if cases[p - 1] == best]
        return best, sizes[0] if f else sizes[-1]

    plan = bisection._plan(n, proven, spare)
    start = PROVEN if proven else UNPROVEN
    assert plan.worst == worst(start, 0, n, 0, False)[0]
    assert plan.worst_failing == worst(start, 0, n, n, False)[0]
    for (proof, count), table in plan.sizes.items():
        for m in range(1, n + 1):
            for f in (0, *range(2, m + 1)):
                assert table[m][f] == worst(proof, count, m, f, False)[1]


@pytest.mark.parametrize("n", range(1, 17))
def test_starting_failing_with_the_start_unproven_every_needed_set_up_to_16(n: int) -> None:
    # bisect's search: its first run (every candidate removed) failed, and nothing proved the
    # start. One needed one costs at most 1 + log2 n runs; two or more at most
    # 1 + k log2 n, and the plan's spare runs more where that is the price of the first.
    names = NAMES[:n]
    log = _log2(n)
    top = n > 3 * 2**log // 4  # n in (3/4 * 2^L, 2^L]
    spare = bisection._chosen(n, True, False).spare
    assert spare == 0 or (top and n >= 4)
    for k in range(1, n + 1):
        for chosen in itertools.combinations(names, k):
            seen: list[frozenset[str]] = []
            found = search(names, _probe(set(chosen), seen), failing=True, proven=False)
            assert found.needed == chosen and not found.start_failed
            assert found.runs == len(seen) <= bound(n, k, failing=True, proven=False)
            assert found.runs <= 1 + k * log + (spare if k > 1 else 0)
            assert found.final_passed
            assert frozenset(names) not in seen  # the caller's run is not made again
    assert bound(n, 1, failing=True, proven=False) == 1 + log


@pytest.mark.parametrize("n", [1, 2, 5, 8, 16, 100, bisection.PLANNED + 1])
def test_a_start_that_fails_is_said_by_the_second_needed_one(n: int) -> None:
    seen: list[frozenset[str]] = []
    found = search(
        NAMES[:n] if n <= 16 else [f"p{i}" for i in range(n)],
        lambda removed: seen.append(removed) or False,
        failing=True,
        proven=False,
    )
    assert found.start_failed and not found.needed and not found.final_passed
    assert seen[-1] == frozenset()  # the start's own run
    assert found.runs == len(seen) <= 2 * (_log2(n) + 1) + 1


def test_four_candidates_need_one_run_more_whatever_the_strategy() -> None:
    # Every adaptive strategy, against every set of needed ones among 4, starting failing with
    # the start unproven: some set costs 2 + k log2 n runs, one more than elsewhere (so the
    # plan's worst case is the best there is), and one needed one can cost 1 + log2 n only if
    # two may cost one more.
    units = range(4)
    every = [frozenset(c) for k in range(1, 5) for c in itertools.combinations(units, k)]
    tries = [frozenset(c) for k in range(5) for c in itertools.combinations(units, k)]

    def best(spare: int) -> int:
        @functools.cache
        def worst(left: frozenset[frozenset[int]], last: frozenset[int] | None) -> int:
            if len(left) == 1:
                (needed,) = left
                final = frozenset(units) - needed
                closing = last != final if final else last is None
                return closing - 2 * len(needed) - (spare if len(needed) > 1 else 0)
            cases = []
            for t in tries:
                passing = frozenset(h for h in left if not h & t)
                if passing and passing != left:
                    cases.append(1 + max(worst(passing, t), worst(left - passing, None)))
            return min(cases)

        return worst(frozenset(every), None)

    assert best(0) == 2 == bisection._plan(4, False, 0).worst_failing
    assert best(1) == 1 == bisection._plan(4, False, 1).worst_failing


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
