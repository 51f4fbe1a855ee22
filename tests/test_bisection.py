"""--keep-needed's search (issue 15): the largest removable subset, in at most
bisection.bound(n, k) probe runs, ending on a passing run of exactly the final state."""

from __future__ import annotations

import itertools
import math

import pytest

from safeuninstall.bisection import bound, search

NAMES = tuple(f"pkg{i:02d}" for i in range(16))


def _probe(needed: set[str], seen: list[frozenset[str]]):  # type: ignore[no-untyped-def]
    def passes(removed: frozenset[str]) -> bool:
        seen.append(removed)
        return not removed & needed

    return passes


@pytest.mark.parametrize("k", [0, 1, 2, 4])
def test_every_needed_set_of_16_is_found_within_the_bound(k: int) -> None:
    worst = 0
    for chosen in itertools.combinations(NAMES, k):
        needed = set(chosen)
        seen: list[frozenset[str]] = []
        found = search(NAMES, _probe(needed, seen))
        assert set(found.needed) == needed
        assert set(found.removable) == set(NAMES) - needed
        assert found.runs == len(seen) <= bound(16, k)
        assert found.final_passed
        assert seen[-1] == frozenset(found.removable) or not found.removable
        worst = max(worst, found.runs)
    # The bound is reached: it is the algorithm's, not a loose one.
    assert worst == bound(16, k)
    assert bound(16, k) == {0: 1, 1: 6, 2: 11, 4: 21}[k]


def test_the_bound_for_one_needed_is_two_plus_log2_n() -> None:
    for n in range(2, 40):
        assert bound(n, 1) == 2 + math.ceil(math.log2(n))


def test_fewer_runs_than_one_by_one() -> None:
    # One-by-one trying costs n = 16 runs; the search, for one needed, at most 6.
    seen: list[frozenset[str]] = []
    found = search(NAMES, _probe({"pkg07"}, seen))
    assert found.runs <= 6 < len(NAMES)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_small_sets(n: int) -> None:
    names = NAMES[:n]
    for k in range(n + 1):
        for chosen in itertools.combinations(names, k):
            found = search(names, _probe(set(chosen), []))
            assert set(found.needed) == set(chosen)
            assert found.runs <= bound(n, k)


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
