"""The search --keep-needed and bisect make: the largest removable subset, in at most
bisection.bound(n, k) = 1 + k * (ceil(log2 n) + 1) probe runs, ending on a passing run of
exactly the final state."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from safeuninstall.plans.bisection import bound, search

NAMES = tuple(f"pkg{i:02d}" for i in range(16))
# (failing, proven): --keep-needed's, bisect's (its first run made; a metric's baseline proves
# the start, a probe's does not), and the one no caller has.
MODES = [(False, True), (True, False), (True, True), (False, False)]


def _probe(needed: set[str], seen: list[frozenset[str]]) -> Callable[[frozenset[str]], bool]:
    def passes(removed: frozenset[str]) -> bool:
        seen.append(removed)
        return not removed & needed

    return passes


def _check(names: list[str], needed: set[str], failing: bool, proven: bool) -> int:
    """The search over ``names`` finds exactly ``needed`` within the bound, ending on a
    passing run of the final state; its runs."""
    seen: list[frozenset[str]] = []
    found = search(names, _probe(needed, seen), failing=failing, proven=proven)
    assert set(found.needed) == needed and not found.start_failed
    assert set(found.removable) == set(names) - needed
    assert found.runs == len(seen) <= bound(len(names), len(needed), failing=failing)
    assert found.final_passed
    assert not found.removable or seen[-1] == frozenset(found.removable)
    assert not failing or frozenset(names) not in seen  # the caller's run is not made again
    return found.runs


@pytest.mark.parametrize(("failing", "proven"), MODES)
def test_every_needed_set_up_to_10_is_found_within_the_bound(failing: bool, proven: bool) -> None:
    for n in range(1, 11):
        names = list(NAMES[:n])
        worst = [0] * (n + 1)
        for mask in range(failing, 1 << n):  # starting failing, one needed at least
            needed = {names[i] for i in range(n) if mask >> i & 1}
            worst[len(needed)] = max(worst[len(needed)], _check(names, needed, failing, proven))
        # The bound is the search's, not a loose one: one needed one reaches it (one
        # candidate needed is proven by the first run, or by the start's).
        assert worst[1] == bound(n, 1, failing=failing) - (n == 1 and proven)


@pytest.mark.parametrize(("failing", "proven"), MODES)
def test_random_needed_sets_up_to_300_candidates(failing: bool, proven: bool) -> None:
    rng = random.Random(f"bisection-{failing}-{proven}")
    for _ in range(400):
        n = rng.randint(1, 300)
        names = [f"p{i:03d}" for i in range(n)]
        k = min(n, rng.choice([0, 1, 1, 2, 3, rng.randint(0, n)]))
        needed = set(rng.sample(names, max(k, failing)))
        _check(names, needed, failing, proven)


@pytest.mark.parametrize(
    ("n", "k", "most"), [(1, 1, 2), (8, 1, 5), (16, 0, 1), (16, 1, 6), (16, 2, 11), (128, 3, 25)]
)
def test_the_bound(n: int, k: int, most: int) -> None:
    assert bound(n, k) == most == 1 + k * (math.ceil(math.log2(n)) + 1)
    assert bound(n, k, failing=True) == most - 1
    assert bound(0, 0) == 0


def test_one_needed_among_2_to_40_costs_at_most_2_plus_log2_n() -> None:
    for n in range(2, 41):
        assert bound(n, 1) == 2 + math.ceil(math.log2(n))


def test_nothing_needed_costs_one_run() -> None:
    seen: list[frozenset[str]] = []
    found = search(NAMES, _probe(set(), seen))
    assert found.runs == 1 and seen == [frozenset(NAMES)] and found.final_passed


@pytest.mark.parametrize("n", [1, 2, 5, 8, 16, 100, 257])
def test_a_start_that_fails_is_said_by_the_second_needed_one(n: int) -> None:
    seen: list[frozenset[str]] = []
    found = search(
        [f"p{i}" for i in range(n)],
        lambda removed: seen.append(removed) or False,
        failing=True,
        proven=False,
    )
    assert found.start_failed and not found.needed and not found.final_passed
    assert seen[-1] == frozenset()  # the start's own run
    assert found.runs == len(seen) <= bound(n, 2, failing=True)


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
