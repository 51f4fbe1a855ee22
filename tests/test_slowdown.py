"""Finding a slowdown with a noisy metric: bisect's search (culprits.find) judged by
metric.interleaved, on synthetic runs in process (many seeds), then end to end on toy wheels
whose workload prints a number drawn from a seeded distribution per installed version. No
timing anywhere: the noise is drawn, never measured.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from safeuninstall.plans.culprits import Verdict, find
from safeuninstall.probe.metric import Metric, interleaved
from safeuninstall.probe.metric import Verdict as MetricVerdict
from tests.conftest import UV, MakeVenv
from tests.test_bisect import _at_start, _good_then_upgraded
from tests.test_json_contract import problems
from tests.wheels import build_wheel

UNITS = [f"part{i}" for i in range(8)]


def _metric_probe(
    rng: random.Random, slow: dict[str, float], noise: float, metric: Metric, drift: float = 0.0
) -> Callable[[frozenset[str]], Verdict]:
    """A round as bisect judges it: the state with ``bad`` as now against the good one, runs
    interleaved. A unit in ``slow`` divides the throughput by its factor; every run is noisy
    by a factor uniform in [1 - noise, 1 + noise], and the machine slows by ``drift`` a run."""
    clock = [0]

    def passes(bad: frozenset[str]) -> Verdict:
        def sample(after: bool) -> float:
            clock[0] += 1
            level = 20000.0 * (1 - drift * clock[0])
            for unit in bad if after else ():
                level /= slow.get(unit, 1.0)
            return level * (1 + noise * rng.uniform(-1, 1))

        verdict = interleaved(metric, sample, after_first=True).runs.verdict
        return None if verdict is MetricVerdict.INCONCLUSIVE else verdict is MetricVerdict.WITHIN

    return passes


def _outcomes(
    seeds: range, noise: float, metric: Metric, drift: float = 0.0
) -> collections.Counter[str]:
    outcomes: collections.Counter[str] = collections.Counter()
    for seed in seeds:
        probe = _metric_probe(random.Random(seed), {"part4": 1.5}, noise, metric, drift)
        found = find(UNITS, probe, good_proven=True, steady=False)
        if found.inconclusive:
            outcomes["inconclusive"] += 1
        else:
            assert set(found.culprits) <= {"part4"}, (seed, found)  # never a harmless one
            outcomes["named" if found.culprits else "not confirmed"] += 1
    return outcomes


def test_one_culprit_at_1_5x_among_8_with_20_percent_noise_over_200_seeds() -> None:
    """Runs spread 20 % (uniform in 90-110 %), the defaults: named exactly every time."""
    outcomes = _outcomes(range(200), 0.10, Metric())
    assert outcomes == {"named": 200}


def test_with_noise_twice_as_wide_it_says_inconclusive_rather_than_guess() -> None:
    """Runs spread 50 % (80-120 %): a harmless change is often not shown within 10 % in 15
    runs a side, and the answer is inconclusive; never a harmless change named. More runs
    (the advice bisect prints) decide most of them."""
    outcomes = _outcomes(range(200), 0.20, Metric())
    assert outcomes["named"] >= 80 and outcomes["named"] + outcomes["inconclusive"] == 200
    more = _outcomes(range(200), 0.20, Metric(max_runs=30))
    assert more["named"] >= 160, more


def test_the_same_on_a_machine_slowing_down_through_the_bisect() -> None:
    """The machine gets 0.2 % slower every run (about a third by the end of a bisect): the
    good state is run beside every round's, so no harmless change is blamed for it."""
    outcomes = _outcomes(range(100), 0.10, Metric(), drift=0.002)
    assert outcomes["named"] >= 75, outcomes


def test_a_culprit_that_does_not_reproduce_on_its_own_is_not_named() -> None:
    """The probe fails only with part1 and part2 both as now: the search ends on one of
    them, which passes on its own: reported as not confirmed, not as a culprit."""
    found = find(UNITS, lambda bad: not {"part1", "part2"} <= bad)
    assert found.culprits == ()
    assert [verdict for _, verdict in found.not_confirmed] == [True] * len(found.not_confirmed)
    assert found.not_confirmed
    assert found.alone_runs == len(found.not_confirmed)


def test_a_round_that_cannot_tell_stops_the_search() -> None:
    runs: list[frozenset[str]] = []

    def passes(bad: frozenset[str]) -> Verdict:
        runs.append(bad)
        return None if len(runs) == 2 else "part4" not in bad

    found = find(UNITS, passes)
    assert found.inconclusive
    assert found.culprits == ()
    assert len(found.runs) == 2 and found.runs[-1][1] is None


@pytest.mark.parametrize("confirming", [True, None])
def test_a_confirmation_that_passes_or_cannot_tell_names_nothing(confirming: Verdict) -> None:
    found = find(UNITS, lambda bad: "part4" not in bad, alone=lambda unit: confirming)
    assert found.culprits == ()
    assert found.not_confirmed == (("part4", confirming),)


# -- end to end ----------------------------------------------------------------------------------

# Each run draws its noise from the seed and a counter it keeps in a file: the same seed gives
# the same numbers run after run of the test, whatever the machine's load.
WORKLOAD = """
import importlib, math, pathlib, random, sys
counter = pathlib.Path(sys.argv[1])
count = int(counter.read_text() or 0) if counter.exists() else 0
counter.write_text(str(count + 1))
speed = math.prod(importlib.import_module(f"part{i}").SPEED for i in range(8))
noise = float(sys.argv[3]) * random.Random(f"{sys.argv[2]}:{count}").uniform(-1, 1)
print(20000 * speed * (1 + noise))
"""


def _slow_parts(house: Path) -> None:
    """part0..part7 at 1.0 and 2.0; part4 2.0 makes the workload 1.5x slower."""
    for name in UNITS:
        build_wheel(house, name, "1.0", {f"{name}.py": "SPEED = 1.0\n"})
        speed = repr(1 / 1.5) if name == "part4" else "1.0"
        build_wheel(house, name, "2.0", {f"{name}.py": f"SPEED = {speed}\n"})


def _metric(tmp_path: Path, seed: int, noise: float) -> str:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    return f"python {script} {tmp_path / f'counter-{seed}'} {seed} {noise}"


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_end_to_end_the_culprit_is_named_and_shown_with_its_numbers(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Three seeds end to end (the 200 above run in process): part4 named, confirmed on its
    own, each round's runs of both states in the JSON, the environment back at the start."""
    house = tmp_path / "house"
    _slow_parts(house)
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    for seed in (1, 2, 3):
        done = venv.tool("--json", "bisect", good, "--probe-metric", _metric(tmp_path, seed, 0.1))
        data = done.json()
        assert done.returncode == 0, data
        assert problems("bisect", data) == []
        found = data["bisect"]
        assert [c["names"] for c in found["culprits"]] == [["part4"]], found  # type: ignore[index]
        assert found["not_confirmed"] == []  # type: ignore[index]
        # The failure shows what the workload printed as the environment was (part4 slow),
        # never a run of the good state that the round interleaved with it.
        printed = float(found["failure"].splitlines()[-1])  # type: ignore[index]
        assert printed < 20000 / 1.5 * 1.1 + 1
        rounds = found["rounds"]  # type: ignore[index]
        assert rounds[-1]["bad"] == ["part4"] and rounds[-1]["confirms"] == "part4"
        for round_ in rounds:
            metric = round_["metric"]
            assert len(metric["values"]) == len(metric["baseline_values"]) >= 3
            assert metric["warmup"] is not None
            assert round_["verdict"] == ("failed" if "part4" in round_["bad"] else "passed")
            assert metric["verdict"] == (
                "regressed" if "part4" in round_["bad"] else "within-limit"
            )
            assert 0 <= metric["p_value"] <= 1
            assert metric["ratio"] == pytest.approx(metric["median"] / metric["baseline_median"])
        assert _at_start(venv) == start

    text = venv.tool("bisect", good, "--probe-metric", _metric(tmp_path, 4, 0.1))
    assert text.returncode == 0, text.stdout + text.stderr
    assert "culprit: part4: good part4==1.0; now part4==2.0" in text.stdout
    assert "(confirming part4 on its own) -- FAILED" in text.stdout
    assert "runs as now: " in text.stdout and "in the good state: " in text.stdout
    assert _at_start(venv) == start


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_end_to_end_a_round_that_cannot_tell_is_inconclusive(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Noise of +-40 % and at most 4 runs a side: the first round cannot be told apart, and
    bisect says so, names nothing, exits 6, and is back at the start."""
    house = tmp_path / "house"
    _slow_parts(house)
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    metric = _metric(tmp_path, 7, 0.4)
    args = ("bisect", good, "--probe-metric", metric, "--metric-max-runs", "4")

    done = venv.tool("--json", *args)

    data = done.json()
    assert done.returncode == 6, data
    assert problems("bisect", data) == []
    assert data["outcome"] == "bisect-inconclusive"
    found = data["bisect"]
    assert found["culprits"] == []  # type: ignore[index]
    last = found["rounds"][-1]  # type: ignore[index]
    assert last["verdict"] == "inconclusive"
    assert len(last["metric"]["values"]) == 4
    assert any("--metric-max-runs" in m for m in data["messages"])  # type: ignore[union-attr]
    assert _at_start(venv) == start
    assert not venv.journal.exists()

    text = venv.tool(*args)
    assert text.returncode == 6
    assert "INCONCLUSIVE" in text.stdout
    assert "wider than the 10% allowed" in text.stdout  # the baseline's noise, and what to do
    assert _at_start(venv) == start


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_end_to_end_culprits_that_fail_only_together_are_not_named(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The probe fails only with part1 and part2 both at 2.0: whatever the search ends on
    passes on its own, so nothing is named: not confirmed, inconclusive (exit 6)."""
    house = tmp_path / "house"
    for name in UNITS:
        for version in ("1.0", "2.0"):
            build_wheel(house, name, version, {f"{name}.py": f"VERSION = {version!r}\n"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    probe = "import part1, part2; assert (part1.VERSION, part2.VERSION) != ('2.0', '2.0')"

    done = venv.tool("--json", "bisect", good, "--probe", probe)

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "bisect-inconclusive"
    found = data["bisect"]
    assert found["culprits"] == []  # type: ignore[index]
    assert found["not_confirmed"]  # type: ignore[index]
    assert {n for c in found["not_confirmed"] for n in c["names"]} <= {"part1", "part2"}  # type: ignore[index]
    assert any("not confirmed, not named" in m for m in data["messages"])  # type: ignore[union-attr]
    assert _at_start(venv) == start
