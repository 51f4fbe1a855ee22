"""``try``: a removal or a guarded command made, judged, and ALWAYS undone; the verdict is the
outcome and the exit code. Every test checks that the environment ends byte for byte where it
started (every file hashed before and after), whatever the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from safeuninstall.base.errors import EXIT_BREAKS, EXIT_SLOWER
from tests.conftest import (
    UV,
    MakeVenv,
    Venv,
    assert_recovered,
    interrupted_at,
    probe_that_outlives,
    script,
    tagged_processes,
    tool_in_background,
    uv_install,
)
from tests.test_json_contract import problems
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _start(venv: Venv) -> tuple[dict[str, str], dict[str, str]]:
    return venv.installed(), venv.file_hashes()


def _back_at(venv: Venv, start: tuple[dict[str, str], dict[str, str]]) -> None:
    assert _start(venv) == start
    assert not venv.journal.exists()


def test_a_harmful_removal_breaks_exits_7_and_leaves_every_file_as_it_was(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    start = _start(venv)

    done = venv.tool("--json", "try", "--allow-unmet", "--probe", "import requests", "urllib3")

    data = done.json()
    assert done.returncode == EXIT_BREAKS == 7, data
    assert data["command"] == "try"
    assert data["outcome"] == "try-breaks"
    assert problems("try", data) == []
    _back_at(venv, start)


def test_a_removal_that_leaves_requirements_unmet_is_said_to_break_them_and_changes_nothing(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    start = _start(venv)

    done = venv.tool("try", "urllib3")

    assert done.returncode == EXIT_BREAKS, done.stdout + done.stderr
    assert "would break the environment: it would leave 1 requirement of requests unmet" in (
        done.stdout
    )
    assert " try --allow-unmet urllib3\n" in done.stdout  # a try again, not a removal
    _back_at(venv, start)


def test_a_harmless_removal_passes_exits_0_and_the_package_is_still_installed(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests", "leftpad")
    start = _start(venv)

    done = venv.tool("--json", "try", "--probe", "import requests", "leftpad")

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "try-passes"
    assert data["removed"] == ["leftpad==1.0"]  # what the change removed, and put back
    assert venv.installed()["leftpad"] == "1.0"
    _back_at(venv, start)
    # Undone: the try's snapshot is not a change that stands, so nothing to roll back.
    undo = venv.tool("--json", "rollback", "--dry-run", "--no-probe")
    assert undo.json()["outcome"] == "nothing-to-roll-back", undo.stdout


@pytest.mark.parametrize("fails_from", [2, 3])  # the run after the change; after the return
def test_a_probe_that_fails_back_at_the_start_is_a_try_s_own_outcome_exit_5(
    make_venv: MakeVenv, tmp_path: Path, fails_from: int
) -> None:
    """The probe passes at the start and fails from its ``fails_from``-th run: run again after
    the verified return, it fails where it passed, so it says nothing of the change. That is
    an outcome of try's (listed with its others), with the exit code of a removal's."""
    venv = make_venv("requests", "leftpad")
    start = _start(venv)
    count = tmp_path / "count"
    probe = (
        f"sh -c 'n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}; "
        f"test $n -lt {fails_from}'"
    )

    done = venv.tool("--json", "try", "--probe-after-restore", "--probe-cmd", probe, "leftpad")

    data = done.json()
    assert done.returncode == 5, data
    assert data["command"] == "try"
    assert data["outcome"] == "try-restored-probe-fails"
    assert int(count.read_text()) == 3  # the baseline, after the change, after the return
    assert data["verification"]["ok"] is True  # type: ignore[index]
    assert problems("try", data) == []
    _back_at(venv, start)


def test_a_command_that_breaks_the_probe_exits_7_and_is_undone(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "urllib3==2.2.1")
    start = _start(venv)

    done = venv.tool(
        "--json",
        "try",
        "--probe",
        "import urllib3; assert urllib3.VERSION == '2.2.1'",
        "--",
        *uv_install(venv, "-U", "urllib3"),
    )

    data = done.json()
    assert done.returncode == EXIT_BREAKS, data
    assert data["outcome"] == "try-breaks"
    assert data["run"]["changed"] == ["urllib3"]  # type: ignore[index]
    assert problems("try", data) == []
    _back_at(venv, start)


def test_a_command_that_passes_exits_0_and_is_undone_all_the_same(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "urllib3==2.2.1")
    start = _start(venv)

    done = venv.tool("try", "--probe", "import requests", "--", *uv_install(venv, "-U", "urllib3"))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "the command changed urllib3: 2.2.1 -> 2.3.0" in done.stdout
    assert "the change would pass" in done.stdout
    assert venv.installed()["urllib3"] == "2.2.1"
    _back_at(venv, start)


def test_a_package_and_a_command_together_are_a_usage_error(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    start = _start(venv)

    mixed = venv.tool("try", "leftpad", "--", "true")
    strict = venv.tool("try", "--strict", "--", "true")

    assert mixed.returncode == 2, mixed.stderr
    assert "not both" in mixed.stderr
    assert strict.returncode == 2, strict.stderr
    assert "--strict: only for try PACKAGE..." in strict.stderr
    _back_at(venv, start)


# A workload whose number is drawn from a seeded distribution keyed by the installed version of
# ``speed`` (its SPEED) and a run counter it keeps in a file: no wall-clock timing.
WORKLOAD = """
import pathlib, random, sys
import speed
counter = pathlib.Path(sys.argv[1])
count = int(counter.read_text() or 0) if counter.exists() else 0
counter.write_text(str(count + 1))
spread = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
noise = spread * random.Random(f"{sys.argv[2]}:{count}").uniform(-1, 1)
print(20000 * speed.SPEED * (1 + noise))
"""


def _speed_house(house: Path) -> None:
    build_wheel(house, "speed", "1.0", {"speed.py": "SPEED = 1.0\n"})
    build_wheel(house, "speed", "2.0", {"speed.py": f"SPEED = {1 / 1.5!r}\n"})  # 1.5x slower
    build_wheel(house, "speed", "3.0", {"speed.py": "SPEED = 1.5\n"})  # 1.5x faster
    build_wheel(house, "speed", "1.1", {"speed.py": "SPEED = 1.0\n"})  # harmless


def _metric(tmp_path: Path, seed: int) -> str:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    return f"python {script} {tmp_path / f'counter-{seed}'} {seed}"


@pytest.mark.parametrize(
    ("version", "outcome", "code"), [("2.0", "try-slower", EXIT_SLOWER), ("3.0", "try-faster", 0)]
)
def test_a_metric_verdict_is_the_outcome_with_its_numbers(
    make_venv: MakeVenv, tmp_path: Path, version: str, outcome: str, code: int
) -> None:
    house = tmp_path / "house"
    _speed_house(house)
    venv = make_venv()
    venv.install("speed==1.0", find_links=house)
    start = _start(venv)

    done = venv.tool(
        "--json",
        "try",
        "--probe-metric",
        _metric(tmp_path, 7),
        "--metric-runs",
        "8",
        "--",
        *uv_install(venv, f"speed=={version}", find_links=house),
    )

    data = done.json()
    assert done.returncode == code, data
    assert data["outcome"] == outcome
    assert problems("try", data) == []
    (after,) = data["probes"]["after"]  # type: ignore[index]
    metric = after["metric"]
    assert len(metric["values"]) == len(metric["baseline_values"]) == 8
    assert metric["verdict"] == ("regressed" if code else "within-limit")
    assert metric["p_value"] is not None and metric["p_value"] < 0.01
    assert metric["ratio"] == pytest.approx(1 / 1.5 if code else 1.5, rel=0.15)
    (said,) = [m for m in data["messages"] if "what the change would do" in m]  # type: ignore[union-attr]
    assert ", p = " in said and f", 8 runs a side: {metric['verdict']}" in said
    _back_at(venv, start)


def test_ctrl_c_during_the_probe_after_the_change_goes_back_to_the_start(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    venv = make_venv("requests", "leftpad")
    start = _start(venv)
    started = tmp_path / "started"
    probe = probe_that_outlives(started, when_leftpad=False)  # runs on once leftpad is gone
    proc = tool_in_background(venv, "try", "--json", "--probe", probe, "leftpad", **process_tag)
    out, err = interrupted_at(proc, started)

    data = json.loads(out)
    assert proc.returncode == 3, err
    assert data["outcome"] == "try-interrupted"
    assert tagged_processes(process_tag) == [], "the probe outlived the command"
    _back_at(venv, start)


def test_a_try_killed_mid_way_is_taken_back_to_the_start_by_recover(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool(
        "try", "--probe", "import requests", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL"
    )

    assert done.returncode < 0 or done.returncode == 137, done.stderr
    assert venv.journal.exists()
    assert_recovered(venv, hashes, installed)


def test_a_return_that_falls_short_says_so_and_names_recover(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()

    done = venv.tool(
        "--json",
        "try",
        "--probe",
        "import requests",
        "leftpad",
        SAFE_UNINSTALL_FAULT="verify:RAISE",
    )

    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "try-incomplete"
    assert "recover" in str(data["next_command"])
    assert problems("try", data) == []
    assert_recovered(venv, hashes, installed)


def test_ctrl_c_while_the_command_runs_undoes_what_it_changed(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("requests", "urllib3==2.2.1")
    start = _start(venv)
    ready = tmp_path / "ready"
    body = (  # upgrades, then waits for the interrupt passed on to it (signals blocked first)
        "import signal, subprocess, sys\n"
        f"subprocess.run({uv_install(venv, '-U', 'urllib3')!r}, check=True)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "signal.sigwait({signal.SIGINT})\n"
        "sys.exit(130)\n"
    )
    proc = tool_in_background(venv, "--json", "try", "--no-probe", "--", *script(venv, body))
    out, err = interrupted_at(proc, ready, timeout=120)

    assert proc.returncode == 3, out + err
    data = json.loads(out)
    assert data["outcome"] == "try-interrupted"
    assert problems("try", data) == []
    _back_at(venv, start)


def test_runs_too_noisy_to_tell_are_inconclusive_exit_6(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A harmless upgrade measured with 50 % noise, three runs a side: neither a regression nor
    a change within the limit can be shown, and a try does not guess."""
    house = tmp_path / "house"
    _speed_house(house)
    venv = make_venv()
    venv.install("speed==1.0", find_links=house)
    start = _start(venv)

    done = venv.tool(
        "--json",
        "try",
        "--probe-metric",
        _metric(tmp_path, 11) + " 0.5",
        "--",
        *uv_install(venv, "speed==1.1", find_links=house),
    )

    data = done.json()
    assert done.returncode == 6, data
    assert data["outcome"] == "try-inconclusive"
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert after["metric"]["verdict"] == "inconclusive"
    _back_at(venv, start)
