"""A removal judged by a metric: runs of the state before and the state after, interleaved
(runner.compare_states), the environment switched between the two from the removal's own stash.
No timing anywhere: the workload prints a number drawn from a seed, the installed set, and a run
counter it keeps in a file, which also makes the machine "slow down" as the runs go on."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from safeuninstall.base.errors import EXIT_RESTORED, EXIT_SLOWER
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.probe.metric import Metric, MetricRuns, decide, with_decision
from safeuninstall.probe.runner import Probe, RunSettings, compare_states
from tests.conftest import (
    UV,
    MakeVenv,
    Venv,
    tagged_processes,
    tool_in_background,
    uv_install,
    wait_for,
)
from tests.test_derived_probe import this_interpreter
from tests.test_json_contract import problems
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

# turbo installed makes the workload twice as fast; spare is never imported. The machine slows
# by ``argv[3]`` a run over its first 12 runs, then stays (a load that builds up), and each
# run has 2 % of seeded noise. ``argv[4]``, when given: the run that says it started (a file)
# and then runs on until it is killed.
WORKLOAD = """
import pathlib, random, sys, time
counter = pathlib.Path(sys.argv[1])
count = int(counter.read_text() or 0) if counter.exists() else 0
counter.write_text(str(count + 1))
if len(sys.argv) > 4 and count == int(sys.argv[4]):
    pathlib.Path(sys.argv[5]).touch()
    time.sleep(600)
try:
    import turbo
    speed = turbo.SPEED
except ImportError:
    speed = 1.0
load = 1 - float(sys.argv[3]) * min(count, 12)
noise = 0.02 * random.Random(f"{sys.argv[2]}:{count}").uniform(-1, 1)
print(20000 * speed * load * (1 + noise))
"""


def test_the_text_of_a_judged_metric_shows_both_states_runs_and_the_warm_up() -> None:
    before, after = [20000.0, 20500.0, 19800.0], [20100.0, 19900.0, 20300.0]
    runs = MetricRuns(tuple(after), 20100.0, warmup=18000.0)
    judged = with_decision(runs, before, decide(Metric(), before, after))
    assert judged.summary() == (
        "median 20100 (runs: 20100, 19900, 20300; spread 2.0%); baseline 20000 (runs: 20000, "
        "20500, 19800): 0.5% better, p = 1; within-limit; warm-up 18000 not counted"
    )


def _venv(make_venv: MakeVenv, tmp_path: Path) -> Venv:
    house = tmp_path / "house"
    build_wheel(house, "turbo", "1.0", {"turbo.py": "SPEED = 2.0\n"})
    build_wheel(house, "turbo", "1.1", {"turbo.py": "SPEED = 2.0\n"})  # harmless
    build_wheel(house, "turbo", "0.9", {"turbo.py": "SPEED = 1.0\n"})  # twice as slow
    build_wheel(house, "spare", "1.0", {"spare.py": "X = 1\n"})
    venv = make_venv()
    venv.install("turbo==1.0", "spare==1.0", find_links=house)
    return venv


def _metric(tmp_path: Path, seed: int, drift: float, *interrupt: str) -> str:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    return f"python {script} {tmp_path / f'counter-{seed}'} {seed} {drift} {' '.join(interrupt)}"


def _start(venv: Venv) -> tuple[dict[str, str], dict[str, str]]:
    return venv.installed(), venv.file_hashes()


def _runs(data: dict[str, object]) -> dict[str, object]:
    (after,) = data["probes"]["after"]  # type: ignore[index]
    metric = after["metric"]
    assert isinstance(metric, dict)
    return metric


@pytest.mark.parametrize("seed", [1, 2])
def test_a_harmless_removal_on_a_machine_slowing_down_is_not_a_regression(
    make_venv: MakeVenv, tmp_path: Path, seed: int
) -> None:
    """The machine slows 3 % a run for 12 runs: measured one state after the other (the
    baseline's 8 runs, then 8 after the removal) the removal of a package the workload never
    imports looked about 20 % slower, significantly. Interleaved, the drift falls on both
    sides: within the limit, and the removal stands."""
    venv = _venv(make_venv, tmp_path)

    done = venv.tool(
        "--json", "uninstall", "--probe-metric", _metric(tmp_path, seed, 0.03), "--metric-runs",
        "8", "spare",
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "removed"
    assert problems("uninstall", data) == []
    metric = _runs(data)
    assert metric["verdict"] == "within-limit", metric
    assert len(metric["values"]) == len(metric["baseline_values"]) >= 8  # type: ignore[arg-type]
    assert metric["warmup"] is not None
    assert "spare" not in venv.installed() and "turbo" in venv.installed()
    assert not venv.journal.exists()


def test_a_harmful_removal_twice_as_slow_is_found_and_restored(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Interleaved, the drift does not hide a real slowdown: removing turbo halves the
    number; the removal is undone, every file as it was, and the text shows each run."""
    venv = _venv(make_venv, tmp_path)
    start = _start(venv)

    done = venv.tool("--json", "uninstall", "--probe-metric", _metric(tmp_path, 3, 0.03), "turbo")

    data = done.json()
    assert done.returncode == EXIT_RESTORED, data
    assert data["outcome"] == "probe-failed-restored"
    assert problems("uninstall", data) == []
    metric = _runs(data)
    assert metric["verdict"] == "regressed"
    assert metric["ratio"] == pytest.approx(0.5, rel=0.1)
    assert 0 <= metric["p_value"] < 0.01  # type: ignore[operator]
    assert _start(venv) == start
    assert not venv.journal.exists()

    text = venv.tool("uninstall", "--probe-metric", _metric(tmp_path, 4, 0.03), "turbo")
    assert text.returncode == EXIT_RESTORED, text.stdout + text.stderr
    assert "regressed" in text.stdout and "baseline" in text.stdout and "runs: " in text.stdout
    assert _start(venv) == start


def test_try_of_a_harmful_removal_says_slower_and_leaves_every_file_as_it_was(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = _venv(make_venv, tmp_path)
    start = _start(venv)

    done = venv.tool("--json", "try", "--probe-metric", _metric(tmp_path, 5, 0.03), "turbo")

    data = done.json()
    assert done.returncode == EXIT_SLOWER == 8, data
    assert data["outcome"] == "try-slower"
    assert problems("try", data) == []
    metric = _runs(data)
    assert metric["verdict"] == "regressed"
    assert len(metric["values"]) == len(metric["baseline_values"]) >= 3  # type: ignore[arg-type]
    (said,) = [m for m in data["messages"] if "what the change would do" in m]  # type: ignore[union-attr]
    assert "(x0.5" in said and "runs a side: regressed" in said
    assert _start(venv) == start
    assert not venv.journal.exists()


@pytest.mark.parametrize(
    ("run", "state"), [(5, "the state before the removal"), (7, "the state after it")]
)
def test_ctrl_c_during_the_interleaved_runs_restores(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str], run: int, state: str
) -> None:
    """The baseline's 3 runs (0-2), the warm-up after the removal (3), then after (4), before
    (5, 6), after (7)...: an interrupt in either state ends with the removal undone, proven,
    and no run left behind."""
    venv = _venv(make_venv, tmp_path)
    start = _start(venv)
    started = tmp_path / "started"
    metric = _metric(tmp_path, 6, 0.0, str(run), str(started))
    proc = tool_in_background(
        venv, "--json", "--probe-metric", metric, "turbo", **process_tag
    )  # fmt: skip
    wait_for(started)
    assert ("turbo" in venv.installed()) == (state == "the state before the removal")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)

    data = json.loads(out)
    assert proc.returncode == EXIT_RESTORED, err
    assert data["outcome"] == "interrupted-restored"
    assert tagged_processes(process_tag) == [], "a run outlived the command"
    assert _start(venv) == start
    assert not venv.journal.exists()


def test_a_harmless_upgrade_on_a_machine_slowing_down_stands_and_leaves_one_snapshot(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """``run``: the state after the command is switched back to from a stash of what it
    changed, which no history lists: the upgrade stands, within the limit, and a plain
    rollback afterwards returns to the state before it."""
    venv = _venv(make_venv, tmp_path)
    start = _start(venv)
    upgrade = uv_install(venv, "turbo==1.1", find_links=tmp_path / "house")

    done = venv.tool(
        "--json", "run", "--probe-metric", _metric(tmp_path, 1, 0.03), "--metric-runs", "8",
        "--", *upgrade,
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "ran"
    assert problems("run", data) == []
    metric = _runs(data)
    assert metric["verdict"] == "within-limit", metric
    assert len(metric["values"]) == len(metric["baseline_values"]) >= 8  # type: ignore[arg-type]
    assert venv.installed()["turbo"] == "1.1"
    snapshots = venv.tool("--json", "snapshots").json()["snapshots"]
    assert [s["id"] for s in snapshots] == [data["snapshot"]]  # type: ignore[union-attr]
    assert [p.name for p in venv.state.snapshots_dir.iterdir()] == [data["snapshot"]]

    back = venv.tool("--json", "rollback", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert _start(venv) == start


def test_try_of_a_harmful_downgrade_says_slower_and_leaves_every_file_as_it_was(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = _venv(make_venv, tmp_path)
    start = _start(venv)
    downgrade = uv_install(venv, "turbo==0.9", find_links=tmp_path / "house")

    done = venv.tool(
        "--json", "try", "--probe-metric", _metric(tmp_path, 2, 0.03), "--", *downgrade
    )  # fmt: skip

    data = done.json()
    assert done.returncode == EXIT_SLOWER, data
    assert data["outcome"] == "try-slower"
    assert _runs(data)["ratio"] == pytest.approx(0.5, rel=0.1)
    assert _start(venv) == start
    assert not venv.journal.exists()


@pytest.mark.parametrize(
    ("back_to", "outcome", "code"),
    [("1.1", "rolled-back", 0), ("0.9", "rollback-probe-failed-restored", EXIT_RESTORED)],
)
def test_a_rollback_is_judged_by_interleaved_runs_and_ends_as_judged(
    make_venv: MakeVenv, tmp_path: Path, back_to: str, outcome: str, code: int
) -> None:
    """Back to a harmless turbo on a machine slowing down: it stands (measured one state
    after the other it looked slower); back to a slow one: undone, every file as it was."""
    venv = _venv(make_venv, tmp_path)
    venv.install(f"turbo=={back_to}", find_links=tmp_path / "house")
    assert venv.tool("snapshot").returncode == 0
    venv.install("turbo==1.0", find_links=tmp_path / "house")
    start = _start(venv)

    done = venv.tool(
        "--json", "rollback", "--probe-metric", _metric(tmp_path, 3, 0.03), "--metric-runs", "8"
    )  # fmt: skip

    data = done.json()
    assert done.returncode == code, data
    assert data["outcome"] == outcome
    assert problems("rollback", data) == []
    metric = _runs(data)
    assert metric["verdict"] == ("within-limit" if code == 0 else "regressed"), metric
    assert len(metric["values"]) == len(metric["baseline_values"]) >= 8  # type: ignore[arg-type]
    if code == 0:
        assert venv.installed()["turbo"] == back_to
    else:
        assert _start(venv) == start
    ids = [p.name for p in venv.state.snapshots_dir.iterdir()]
    assert len(ids) == 2, ids  # the snapshot, and the rollback's own: no other folder
    assert not venv.journal.exists()


# At the run numbered ``argv[2]``, another process installs ``other`` into the environment.
INSTALLS_MEANWHILE = """
import pathlib, subprocess, sys
counter = pathlib.Path(sys.argv[1])
count = int(counter.read_text() or 0) if counter.exists() else 0
counter.write_text(str(count + 1))
if count == int(sys.argv[2]):
    subprocess.run(sys.argv[3:], check=True, capture_output=True)
try:
    import turbo
    print(20000 * turbo.SPEED)
except ImportError:
    print(20000)
"""


@pytest.mark.parametrize("run", [4, 5])
def test_another_process_s_change_between_two_runs_stops_them_and_is_left_alone(
    make_venv: MakeVenv, tmp_path: Path, run: int
) -> None:
    """The baseline's runs 0-2, the warm-up after the removal (3), then after (4), before
    (5)...: another process installs ``other`` during a run; the next switch notices it before
    it begins, names it, and stops there. What the removal took comes back; ``other`` stays,
    and the proof says the environment is the snapshot's but for it (as when another process
    changes it during a removal's probe)."""
    venv = _venv(make_venv, tmp_path)
    house = tmp_path / "house"
    build_wheel(house, "other", "1.0", {"other.py": ""})
    installs = uv_install(venv, "--python", str(venv.python), "other==1.0", find_links=house)
    script = tmp_path / "meanwhile.py"
    script.write_text(INSTALLS_MEANWHILE)
    metric = f"python {script} {tmp_path / 'counter'} {run} {' '.join(installs)}"

    done = venv.tool("--json", "uninstall", "--probe-metric", metric, "turbo")

    data = done.json()
    assert done.returncode == 3, data
    assert data["outcome"] == "concurrent-restored"
    said = " ".join(data["messages"])  # type: ignore[arg-type]
    assert "another process changed the environment while the metric's runs switched" in said
    assert "(appeared: other-1.0.dist-info)" in said, said
    assert "but for what another process changed (other: left as it is)" in said, said
    assert data["verification"]["unexpected"] == []  # type: ignore[index]
    installed = venv.installed()
    assert installed["turbo"] == "1.0" and installed["other"] == "1.0"


@pytest.mark.parametrize(
    ("command", "outcome", "code", "ends_with"),
    [
        ("run", "run-interrupted-restored", 3, "1.0"),
        ("rollback", "rolled-back-probe-interrupted", 5, "1.1"),
    ],
)
def test_ctrl_c_while_run_or_rollback_measures_the_state_before_ends_as_their_interrupt_does(
    make_venv: MakeVenv,
    tmp_path: Path,
    process_tag: dict[str, str],
    command: str,
    outcome: str,
    code: int,
    ends_with: str,
) -> None:
    """Run 5 is one of the state before the change (baseline 0-2, warm-up 3, after 4): an
    interrupt there undoes a ``run``, verified; a rollback stands in the state it made, as when
    its probe is interrupted. The stash of the state after it is gone either way."""
    venv = _venv(make_venv, tmp_path)
    house = tmp_path / "house"
    if command == "rollback":
        venv.install("turbo==1.1", find_links=house)
        assert venv.tool("snapshot").returncode == 0
        venv.install("turbo==1.0", find_links=house)
        change: list[str] = ["rollback"]
    else:
        change = ["run", "--", *uv_install(venv, "turbo==1.1", find_links=house)]
    started = tmp_path / "started"
    metric = _metric(tmp_path, 6, 0.0, "5", str(started))
    args = ["--json", *change[:1], "--probe-metric", metric, *change[1:]]
    proc = tool_in_background(venv, *args, **process_tag)
    wait_for(started)
    assert venv.installed()["turbo"] == "1.0"  # the state before the change
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)

    data = json.loads(out)
    assert proc.returncode == code, err
    assert data["outcome"] == outcome
    assert tagged_processes(process_tag) == [], "a run outlived the command"
    assert venv.installed()["turbo"] == ends_with
    assert not venv.journal.exists()
    listed = venv.tool("--json", "snapshots").json()["snapshots"]
    ids = sorted(s["id"] for s in listed)  # type: ignore[union-attr]
    assert sorted(p.name for p in venv.state.snapshots_dir.iterdir()) == ids


def _installs_meanwhile(venv: Venv, tmp_path: Path, run: int) -> str:
    """A metric whose run numbered ``run`` installs ``other`` from another process."""
    house = tmp_path / "house"
    build_wheel(house, "other", "1.0", {"other.py": ""})
    installs = uv_install(venv, "--python", str(venv.python), "other==1.0", find_links=house)
    script = tmp_path / "meanwhile.py"
    script.write_text(INSTALLS_MEANWHILE)
    return f"python {script} {tmp_path / 'counter'} {run} {' '.join(installs)}"


@pytest.mark.parametrize(
    ("command", "run", "outcome", "code", "turbo"),
    [
        # Runs 5 and 6 are taken in the state before the change: it is not in place when
        # another process installs ``other``, so nothing of it is left to keep.
        ("run", 5, "run-concurrent-restored", 3, "1.0"),
        ("run", 6, "run-concurrent-restored", 3, "1.0"),
        ("rollback", 5, "rollback-concurrent-restored", 3, "1.0"),
        ("rollback", 6, "rollback-concurrent-restored", 3, "1.0"),
        # Run 9, the last, in the state before: the switch back to the change finds it first.
        ("run", 9, "run-concurrent-restored", 3, "1.0"),
        ("rollback", 9, "rollback-concurrent-restored", 3, "1.0"),
        # Run 4 is taken in the state after it: the change is in place, and kept.
        ("run", 4, "run-concurrent-kept", 4, "1.1"),
        ("rollback", 4, "rollback-concurrent-kept", 4, "1.1"),
    ],
)
def test_another_process_s_change_while_run_or_rollback_measures_says_where_the_change_is(
    make_venv: MakeVenv,
    tmp_path: Path,
    command: str,
    run: int,
    outcome: str,
    code: int,
    turbo: str,
) -> None:
    """Another process installs ``other`` during one of the metric's runs. In the state
    before the change, the change is gone (switched back from, its stash deleted): the
    command ends as undone, proven to be the snapshot's state but for ``other``, left as it
    is. In the state after, the change is in place and kept beside ``other``."""
    venv = _venv(make_venv, tmp_path)
    house = tmp_path / "house"
    metric = _installs_meanwhile(venv, tmp_path, run)
    if command == "rollback":
        venv.install("turbo==1.1", find_links=house)
        assert venv.tool("snapshot").returncode == 0
        venv.install("turbo==1.0", find_links=house)
        change: list[str] = ["rollback"]
    else:
        change = ["run", "--", *uv_install(venv, "turbo==1.1", find_links=house)]

    done = venv.tool("--json", change[0], "--probe-metric", metric, *change[1:])

    data = done.json()
    said = " ".join(data["messages"])  # type: ignore[arg-type]
    assert data["outcome"] == outcome, said
    assert done.returncode == code, said
    assert problems(command, data) == []
    installed = venv.installed()
    assert installed["turbo"] == turbo, said
    assert installed["other"] == "1.0", said
    assert "(appeared: other-1.0.dist-info)" in said, said
    assert not venv.journal.exists()
    if code == 3:
        assert "but for what another process changed (other: left as it is)" in said, said
        assert "nothing was undone" not in said, said
        assert "its change is not in place" in said, said
        undo = data["verification"] if command == "run" else data["undo"]["verification"]
        assert undo["ok"] and undo["unexpected"] == [], undo  # type: ignore[index]
        assert data["next_command"] is None
    else:
        assert "nothing was undone" in said, said
        assert "rollback" in str(data["next_command"])


# The metric of the two states compare_states switches between (a file names the state): the
# state before prints 100 and 150 in turn, or fails; the changed one prints 100.
_STATES = """
import pathlib, sys
here = pathlib.Path(sys.argv[1])
state = (here / "state").read_text()
if state == "before-fails":
    sys.exit(1)
if state == "after":
    print(100)
else:
    count = here / "count"
    seen = int(count.read_text()) if count.exists() else 0
    count.write_text(str(seen + 1))
    print(150 if seen % 2 else 100)
"""


@pytest.mark.parametrize("before", ["before", "before-fails"])
def test_two_states_compared_say_a_failure_before_and_a_noisy_baseline(
    tmp_path: Path, before: str
) -> None:
    """The one comparison every metric judge uses (a removal, a run, a rollback, bisect, try):
    why the state before failed, and the note on its runs spreading wider than the limit."""
    script = tmp_path / "states.py"
    script.write_text(_STATES)
    probe = Probe(
        kind=ProbeKind.METRIC,
        code=f"{sys.executable} {script} {tmp_path}",
        origin="--probe-metric",
        metric=Metric(runs=3, max_runs=3, max_regression=10),
    )

    def switch(after: bool) -> None:
        (tmp_path / "state").write_text("after" if after else before)

    switch(True)
    compared = compare_states(
        probe, this_interpreter(), RunSettings(60.0, dict(os.environ)), switch, after_first=True
    )
    assert compared.result.metric is not None
    if before == "before-fails":
        assert compared.baseline_failed == "the metric command failed with exit code 1"
        assert compared.result.metric.why == compared.baseline_failed
        assert compared.noise == ""
    else:
        assert compared.baseline_failed == ""
        assert compared.result.metric.baseline_values == (100.0, 150.0, 100.0)
        assert compared.noise.startswith("the baseline's own runs spread 50.0% (100 to 150)")
