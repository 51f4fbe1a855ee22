"""Metric probes: ``--probe-metric COMMAND`` judges a removal, a ``run`` or a rollback by a
number the command prints, against the baseline measured in the same operation.

The toy workload reports its own throughput, a number each version declares: the verdicts
cannot depend on the machine's load.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from safeuninstall.probe.metric import (
    Metric,
    Verdict,
    judged,
    measured,
    read_number,
    regression,
)
from tests.conftest import UV, MakeVenv, Venv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

# The story: about 20 thousand tokens per second, then 12.8 after the environment changed.
# With fastpath importable the workload runs at its version's speed; without it, at 60 %.
WORKLOAD = """
try:
    import fastpath
    SPEED = 1.0
except ImportError:
    SPEED = 0.6
def throughput():
    return {tokens} * SPEED
"""
METRIC = "python -c 'import workload; print(\"warming up\"); print(workload.throughput())'"


@pytest.fixture
def workloads(tmp_path: Path) -> Path:
    house = tmp_path / "workloads"
    for version, tokens in (("1.0", 20000), ("1.1", 19000), ("2.0", 12800)):
        build_wheel(
            house, "workload", version, {"workload/__init__.py": WORKLOAD.format(tokens=tokens)}
        )
    build_wheel(
        house, "workload", "3.0", {"workload/__init__.py": "def throughput(): return 'fast'\n"}
    )
    build_wheel(house, "fastpath", "1.0", {"fastpath.py": ""})
    return house


def _venv(make_venv: MakeVenv, workloads: Path, *pins: str) -> Venv:
    venv = make_venv()
    venv.install(*pins, find_links=workloads)
    return venv


def _install(venv: Venv, house: Path, *args: str) -> list[str]:
    assert UV is not None
    return [UV, "pip", "install", "--no-index", "--find-links", str(house), *args]


# -- the pure part -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "number"),
    [
        ("12800.0\n", 12800.0),
        ("warming up\n  20000 \n\n", 20000.0),
        ("1e3", 1000.0),
        ("-2.5\n", -2.5),
        ("12800 tok/s\n", None),
        ("", None),
        ("nan\n", None),
        ("inf\n", None),
        ("20000\ndone\n", None),  # the last line counts
    ],
)
def test_the_number_is_the_last_line(stdout: str, number: float | None) -> None:
    assert read_number(stdout) == number


@pytest.mark.parametrize(
    ("lower", "before", "after", "worse"),
    [
        (False, 20000, 12800, 36.0),
        (False, 100, 110, -10.0),
        (True, 2.0, 2.5, 25.0),
        (True, 2.0, 1.0, -50.0),
        (False, -4.0, -5.0, 25.0),  # against the baseline's size, whatever its sign
        (False, 0.0, 0.0, 0.0),
    ],
)
def test_regression_is_percent_of_the_baseline_in_the_metric_s_direction(
    lower: bool, before: float, after: float, worse: float
) -> None:
    assert regression(Metric(lower_is_better=lower), before, after) == pytest.approx(worse)


@pytest.mark.parametrize(
    ("limit", "after", "fails"),
    [(10.0, 90.0, False), (10.0, 89.9, True), (0.0, 99.99, True), (50.0, 51.0, False)],
)
def test_beyond_the_limit_fails(limit: float, after: float, fails: bool) -> None:
    # Steady runs (three a side, each the same number): their medians decide, no test needed.
    before = measured([100.0] * 3, 3)
    runs = judged(Metric(max_regression=limit), before, measured([after] * 3, 3))
    assert bool(runs.why) is fails
    assert runs.baseline == 100.0
    assert runs.verdict is (Verdict.REGRESSED if fails else Verdict.WITHIN)


def test_one_run_a_side_cannot_tell() -> None:
    """A single run a side shows no spread, and no test can be made of it: inconclusive,
    which is never a pass."""
    runs = judged(Metric(), measured([100.0], 1), measured([99.0], 1))
    assert runs.verdict is Verdict.INCONCLUSIVE
    assert runs.why.startswith("INCONCLUSIVE")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ([1e308, 1e308], [1.0, 1.0]),  # the median of two 1e308 must not be inf
        ([1.5e308, 1.6e308], [-1.5e308, -1.5e308]),  # the difference overflows
    ],
)
def test_the_float_extremes_fail(before: list[float], after: list[float]) -> None:
    runs = judged(Metric(), measured(before, 2), measured(after, 2))
    assert runs.why, runs
    assert runs.median is not None and runs.baseline is not None
    assert all(math.isfinite(v) for v in (runs.median, runs.baseline))


# -- removal, run, rollback ----------------------------------------------------------------------


def test_a_removal_that_slows_the_workload_is_restored(
    make_venv: MakeVenv, workloads: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool("--json", "fastpath", "--probe-metric", METRIC)

    data = done.json()
    assert done.returncode == 3, data
    assert data["outcome"] == "probe-failed-restored"
    (baseline,) = data["probes"]["baseline"]  # type: ignore[index]
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert baseline["metric"]["values"] == [20000.0, 20000.0, 20000.0]
    assert baseline["metric"]["median"] == 20000.0
    assert after["metric"]["values"] == [12000.0, 12000.0, 12000.0]
    assert after["metric"]["median"] == 12000.0
    assert after["metric"]["baseline_median"] == 20000.0
    assert after["metric"]["regression_percent"] == 40.0
    assert after["passed"] is False
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes

    text = venv.tool("fastpath", "--probe-metric", METRIC, "--metric-runs", "2")
    assert text.returncode == 3
    assert "(20000 -> 12000, higher is better; at most 10% allowed); runs: 12000, 12000" in (
        text.stdout
    )
    assert "the metric regressed 40.0% against its baseline" in text.stdout


def test_a_removal_within_the_limit_stands(make_venv: MakeVenv, workloads: Path) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    done = venv.tool("--json", "fastpath", "--probe-metric", METRIC, "--max-regression", "45")
    assert done.returncode == 0, done.stdout
    assert done.json()["outcome"] == "removed"
    assert "fastpath" not in venv.installed()


def test_lower_is_better_turns_the_verdict_round(make_venv: MakeVenv, workloads: Path) -> None:
    """The same numbers as a cost: a removal that lowers it is no regression."""
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    done = venv.tool("--json", "fastpath", "--probe-metric", METRIC, "--lower-is-better")
    assert done.returncode == 0, done.stdout
    (after,) = done.json()["probes"]["after"]  # type: ignore[index]
    assert after["metric"]["regression_percent"] == -40.0


def test_run_undoes_an_upgrade_that_slows_the_workload(
    make_venv: MakeVenv, workloads: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool(
        "--json",
        "run",
        "--probe-metric",
        METRIC,
        "--",
        *_install(venv, workloads, "workload==2.0"),
    )

    data = done.json()
    assert done.returncode == 3, data
    assert data["outcome"] == "run-probe-failed-restored"
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert (after["metric"]["baseline_median"], after["metric"]["median"]) == (20000.0, 12800.0)
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes

    kept = venv.tool(
        "run", "--probe-metric", METRIC, "--", *_install(venv, workloads, "workload==1.1")
    )
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert venv.installed()["workload"] == "1.1"


def test_rollback_to_a_slower_state_is_undone(make_venv: MakeVenv, workloads: Path) -> None:
    venv = _venv(make_venv, workloads, "workload==2.0", "fastpath==1.0")
    assert venv.tool("snapshot").returncode == 0
    venv.install("workload==1.0", find_links=workloads)
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool("--json", "rollback", "--probe-metric", METRIC)

    data = done.json()
    assert done.returncode == 3, data
    assert data["outcome"] == "rollback-probe-failed-restored"
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert (after["metric"]["baseline_median"], after["metric"]["median"]) == (20000.0, 12800.0)
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_metric_that_prints_no_number_is_a_failing_probe(
    make_venv: MakeVenv, workloads: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes = venv.file_hashes()

    after = venv.tool(
        "--json", "run", "--probe-metric", METRIC, "--", *_install(venv, workloads, "workload==3.0")
    )
    data = after.json()
    assert after.returncode == 3, data
    (run,) = data["probes"]["after"]  # type: ignore[index]
    assert run["metric"]["why"] == "the metric's last line is not a number: 'fast'"
    assert venv.file_hashes() == hashes

    venv.install("workload==3.0", find_links=workloads)
    before = venv.tool("fastpath", "--probe-metric", METRIC)
    assert before.returncode == 1
    assert "the probe already fails before any change" in before.stderr
    assert "the metric's last line is not a number: 'fast'" in before.stderr
    assert "fastpath" in venv.installed()


def test_the_metric_baseline_is_never_cached(make_venv: MakeVenv, workloads: Path) -> None:
    """A baseline taken in another operation would judge against another moment's machine."""
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    venv.install("leftpad", find_links=venv.wheelhouse)
    first = venv.tool("--json", "leftpad", "--probe-metric", METRIC).json()
    assert first["outcome"] == "removed"
    venv.install("leftpad", find_links=venv.wheelhouse)
    second = venv.tool("--json", "leftpad", "--probe-metric", METRIC).json()
    (baseline,) = second["probes"]["baseline"]  # type: ignore[index]
    assert baseline["cached"] is False
    assert baseline["metric"]["values"] == [20000.0, 20000.0, 20000.0]


def test_no_probe_and_a_metric_are_refused_together(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    done = venv.tool("leftpad", "--no-probe", "--probe-metric", "true")
    assert done.returncode == 2
    assert "--probe-metric and --no-probe" in done.stderr
    assert "leftpad" in venv.installed()


# A workload whose runs print, in turn, the numbers of a list (a counter file says which):
# noisy, but the same noise every time the test runs.
TURNS = "import pathlib, sys; c = pathlib.Path(sys.argv[1]); n = int(c.read_text() or 0) if c.exists() else 0; c.write_text(str(n + 1)); print(sys.argv[2].split(',')[n % len(sys.argv[2].split(','))])"  # noqa: E501


def test_a_removal_the_noisy_runs_cannot_judge_is_undone_as_inconclusive(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    """The baseline takes the first three numbers; then the warm-up (19000, not counted) and,
    interleaved, after (22000), before (16500, 20000), after (23000, 17000), before (19000).
    Three runs a side this far apart, and no more allowed, cannot show a change within 10%
    nor a regression: inconclusive, never a pass, so the removal is put back, with an outcome
    and an exit code of its own."""
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes = venv.file_hashes()
    script = tmp_path / "turns.py"
    script.write_text(TURNS)
    numbers = "20000,23000,17000,19000,22000,16500"
    metric = f"python {script} {tmp_path / 'counter'} {numbers}"

    done = venv.tool("--json", "fastpath", "--probe-metric", metric, "--metric-max-runs", "3")

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "inconclusive-restored"
    assert "fastpath" in venv.installed()
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert after["metric"]["warmup"] == 19000.0
    assert after["metric"]["values"] == [22000.0, 23000.0, 17000.0]
    assert after["metric"]["baseline_values"] == [16500.0, 20000.0, 19000.0]
    assert after["metric"]["verdict"] == "inconclusive"
    assert after["metric"]["why"].startswith("INCONCLUSIVE: the metric's runs show neither")
    assert after["metric"]["p_value"] == pytest.approx(0.4, abs=0.01)
    assert venv.file_hashes() == hashes


def _turns(tmp_path: Path) -> str:
    script = tmp_path / "turns.py"
    script.write_text(TURNS)
    return f"python {script} {tmp_path / 'counter'} 20000,23000,17000,19000,22000,16500"


def test_a_run_the_noisy_runs_cannot_judge_is_undone_as_inconclusive(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes, installed = venv.file_hashes(), venv.installed()
    upgrade = _install(venv, workloads, "workload==1.1")

    done = venv.tool(
        "--json", "run", "--probe-metric", _turns(tmp_path), "--metric-max-runs", "3", "--",
        *upgrade,
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "run-inconclusive-restored"
    assert "inconclusive is never a pass" in " ".join(data["messages"])  # type: ignore[arg-type]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_rollback_the_noisy_runs_cannot_judge_is_undone_as_inconclusive(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.1", "fastpath==1.0")
    assert venv.tool("snapshot").returncode == 0
    venv.install("workload==1.0", find_links=workloads)
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool(
        "--json", "rollback", "--probe-metric", _turns(tmp_path), "--metric-max-runs", "3"
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "rollback-inconclusive-restored"
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_keep_on_failure_keeps_an_inconclusive_removal_and_says_so(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")

    done = venv.tool(
        "--json", "fastpath", "--probe-metric", _turns(tmp_path), "--metric-max-runs", "3",
        "--keep-on-failure",
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "inconclusive-kept"
    assert "fastpath" not in venv.installed()
    assert str(data["next_command"]).split()[-2] == "rollback"


# Throughput 20000 every run with fastpath; without it, in turn 19000, 22000, 16500: 5% worse by
# the medians, but against a steady 20000 three such runs cannot show it within 10%.
UNSURE_WITHOUT_FASTPATH = """
import pathlib, sys
try:
    import fastpath
except ImportError:
    counter = pathlib.Path(sys.argv[1])
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    print((19000, 22000, 16500)[n % 3])
else:
    print(20000)
"""


def _unsure(tmp_path: Path) -> str:
    script = tmp_path / "unsure.py"
    script.write_text(UNSURE_WITHOUT_FASTPATH)
    return f"python {script} {tmp_path / 'counter'}"


def test_keep_needed_keeps_a_candidate_the_metric_cannot_judge_as_inconclusive_not_needed(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    """A run without fastpath is inconclusive: neither a pass nor a failure. fastpath stays,
    said as such, never as "the probe fails without it"; leftpad, harmless, goes."""
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    venv.install("leftpad==1.0")
    metric = _unsure(tmp_path)

    done = venv.tool("--json", "--keep-needed", "--probe-metric", metric, "fastpath", "leftpad")

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "removed-kept-needed"
    cleanup = data["keep_needed"]
    assert cleanup["removed"] == ["leftpad"]  # type: ignore[index]
    (kept,) = cleanup["kept"]  # type: ignore[index]
    assert (kept["name"], kept["why"]) == ("fastpath", "inconclusive")
    assert kept["reasons"][0].startswith("inconclusive: the metric's runs could not tell")
    assert "probe fails" not in " ".join(kept["reasons"])
    unsure = [t for t in cleanup["trials"] if "fastpath" in t["removed"]]  # type: ignore[index]
    assert unsure and all(t["inconclusive"] and not t["passed"] for t in unsure)
    assert any("inconclusive" in str(m) for m in data["messages"])  # type: ignore[attr-defined]
    assert "fastpath" in venv.installed() and "leftpad" not in venv.installed()


def test_keep_needed_that_can_tell_of_no_candidate_is_inconclusive_exit_6(
    make_venv: MakeVenv, workloads: Path, tmp_path: Path
) -> None:
    venv = _venv(make_venv, workloads, "workload==1.0", "fastpath==1.0")
    hashes = venv.file_hashes()

    done = venv.tool("--json", "--keep-needed", "--probe-metric", _unsure(tmp_path), "fastpath")

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "inconclusive-restored"
    (kept,) = data["keep_needed"]["kept"]  # type: ignore[index]
    assert kept["why"] == "inconclusive"
    assert venv.file_hashes() == hashes
    text = venv.tool("--keep-needed", "--probe-metric", _unsure(tmp_path), "fastpath")
    assert text.returncode == 6
    lines = text.stdout.splitlines()
    assert any(line.startswith("kept: fastpath: inconclusive: ") for line in lines), lines
    assert not any(line.startswith("kept, needed") for line in lines), lines
    assert venv.file_hashes() == hashes
