"""``bisect GOOD``: the changes since a good snapshot that make the probe fail, found on toy
wheels, with the environment back where it started, byte for byte."""

from __future__ import annotations

import itertools
import math
import shlex
from pathlib import Path

import pytest

from safeuninstall.plans import bisection
from safeuninstall.plans.culprits import find, units
from tests.conftest import UV, MakeVenv, Venv, run_tool
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

NAMES = [f"part{i}" for i in range(8)]
PROBE = "import " + ", ".join(NAMES)


# -- the search, pure ----------------------------------------------------------------------------


def _searched(n: int, culprits: set[int]) -> tuple[set[str], int, bool]:
    order = [f"u{i:03d}" for i in range(n)]
    wanted = {order[i] for i in culprits}
    found = find(order, lambda bad: not (bad & wanted))
    # A culprit is tried on its own unless the search ran exactly that state: not the search's.
    assert found.alone_runs <= len(found.culprits)
    assert not found.not_confirmed
    return set(found.culprits), len(found.runs) - found.alone_runs, found.final_passed


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 32, 128])
def test_one_culprit_among_n_takes_at_most_2_plus_log2_n_rounds(n: int) -> None:
    bound = 2 + math.ceil(math.log2(n))
    for culprit in range(n):
        found, rounds, confirmed = _searched(n, {culprit})
        assert found == {f"u{culprit:03d}"}
        assert confirmed
        assert rounds <= bound


@pytest.mark.parametrize(("n", "k"), [(4, 2), (8, 2), (8, 3), (13, 2), (16, 4), (32, 2)])
def test_k_culprits_take_at_most_1_plus_k_times_log2_n_plus_1_rounds(n: int, k: int) -> None:
    bound = 1 + bisection.bound(n, k, failing=True)
    assert bound == 1 + k * (math.ceil(math.log2(n)) + 1)
    for culprits in itertools.islice(itertools.combinations(range(n), k), 2000):
        found, rounds, confirmed = _searched(n, set(culprits))
        assert found == {f"u{i:03d}" for i in culprits}
        assert confirmed
        assert rounds <= bound


@pytest.mark.parametrize("n", [2, 8, 13, 128])
def test_a_probe_that_passes_now_or_fails_in_good_is_said_at_once(n: int) -> None:
    assert find(["a", "b"], lambda bad: True).now_passes
    failing = find([f"u{i}" for i in range(n)], lambda bad: False)
    assert failing.good_fails
    # The first round, two culprits' rounds, then the good state.
    assert len(failing.runs) <= 2 + 2 * math.ceil(math.log2(n))
    assert failing.runs[-1] == ((), False)


@pytest.mark.parametrize(
    ("ties", "grouped"),
    [
        ({}, {"a": ("a",), "b": ("b",), "c": ("c",)}),
        ({"a": ["c"]}, {"a": ("a", "c"), "b": ("b",)}),
        ({"c": ["b"], "b": ["a"]}, {"a": ("a", "b", "c")}),
        ({"a": ["zz"]}, {"a": ("a",), "b": ("b",), "c": ("c",)}),  # not a change: no tie
    ],
)
def test_tied_changes_form_one_unit(
    ties: dict[str, list[str]], grouped: dict[str, tuple[str, ...]]
) -> None:
    assert units(["c", "a", "b"], ties) == grouped


# -- the command ---------------------------------------------------------------------------------


def _parts(house: Path, broken: set[str], requires: dict[str, list[str]] | None = None) -> None:
    """part0..part7 at 1.0 (all fine) and 2.0 (those in ``broken`` fail to import)."""
    for name in NAMES:
        build_wheel(house, name, "1.0", {f"{name}.py": "VERSION = '1.0'\n"})
        body = "raise ImportError('broken in 2.0')\n" if name in broken else "VERSION = '2.0'\n"
        build_wheel(
            house,
            name,
            "2.0",
            {f"{name}.py": body},
            requires=(requires or {}).get(name, ()),
        )


def _good_then_upgraded(
    make_venv: MakeVenv, house: Path, *, stash: bool = True
) -> tuple[Venv, str]:
    venv = make_venv()
    venv.install(*(f"{n}==1.0" for n in NAMES), find_links=house)
    snap = venv.tool("snapshot", "-q", *(() if stash else ("--no-stash",)))
    assert snap.returncode == 0, snap.stderr
    venv.install(*(f"{n}==2.0" for n in NAMES), find_links=house)
    return venv, snap.stdout.strip()


def _at_start(venv: Venv) -> tuple[dict[str, str], dict[str, str]]:
    return venv.installed(), venv.file_hashes()


def test_one_culprit_among_eight_is_found_in_five_rounds_and_the_end_is_the_start(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    done = venv.tool("--json", "bisect", good, "--probe", PROBE)

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "bisected"
    found = data["bisect"]
    assert found["culprits"] == [
        {"names": ["part5"], "good": ["part5==1.0"], "bad": ["part5==2.0"]}
    ]
    assert len(found["units"]) == 8
    # The search's rounds, then part5 on its own (GOOD's state but part5 as now), which fails.
    *search, alone = found["rounds"]
    assert len(search) <= 5
    assert not any(r["confirms"] for r in search)
    assert (alone["bad"], alone["verdict"], alone["confirms"]) == (["part5"], "failed", "part5")
    assert found["not_confirmed"] == []
    assert found["confirmed"] is True
    assert "broken in 2.0" in found["failure"]
    assert data["verification"]["ok"] is True
    assert data["next_command"].endswith("run -- uv pip install --no-deps part5==1.0")
    assert _at_start(venv) == start
    assert not venv.journal.exists()

    text = venv.tool("bisect", good, "--probe", PROBE)
    assert text.returncode == 0
    assert "culprit: part5: good part5==1.0; now part5==2.0" in text.stdout
    assert "ImportError: broken in 2.0" in text.stdout
    assert (
        "to bring back the good versions of the culprits, keeping the rest: safe-uninstall "
        in text.stdout
    )
    assert _at_start(venv) == start


def test_the_command_printed_brings_back_the_culprit_in_the_same_state_folder(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Pasted as printed, the one command keeps the interpreter and --state-dir: it brings back
    the culprit's good version and nothing else, and the default state folder is never made."""
    house = tmp_path / "house"
    _parts(house, {"part5"})
    state = str(tmp_path / "state")
    venv = make_venv()
    venv.install(*(f"{n}==1.0" for n in NAMES), find_links=house)
    good = venv.tool("--state-dir", state, "snapshot", "-q")
    assert good.returncode == 0, good.stderr
    venv.install(*(f"{n}==2.0" for n in NAMES), find_links=house)

    done = venv.tool(
        "--state-dir", state, "--json", "bisect", good.stdout.strip(), "--probe", PROBE
    )
    assert done.returncode == 0, done.stdout + done.stderr
    argv = shlex.split(str(done.json()["next_command"]))
    assert argv[:3] == ["safe-uninstall", "--python", str(venv.python)]
    assert argv[argv.index("--state-dir") + 1] == state

    back = run_tool(*argv[1:], env={**venv.env(), "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(house)})

    assert back.returncode == 0, back.stdout + back.stderr
    assert venv.installed() == {n: "1.0" if n == "part5" else "2.0" for n in NAMES}
    assert venv.run_python(PROBE).returncode == 0
    assert not venv.state.root.exists()


def test_two_culprits_are_both_found(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    _parts(house, {"part1", "part6"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    data = venv.tool("--json", "bisect", good, "--probe", PROBE).json()

    assert data["exit_code"] == 0, data
    culprits = data["bisect"]["culprits"]  # type: ignore[index]
    assert [c["names"] for c in culprits] == [["part1"], ["part6"]]
    rounds = data["bisect"]["rounds"]  # type: ignore[index]
    assert len([r for r in rounds if not r["confirms"]]) <= 2 + 2 * (3 + 1)
    assert data["next_command"].endswith(  # type: ignore[union-attr]
        "uv pip install --no-deps part1==1.0 part6==1.0"
    )
    assert _at_start(venv) == start


def test_a_culprit_tied_by_a_requirement_is_one_unit(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    _parts(house, {"part3"}, requires={"part6": ["part3>=2"]})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    data = venv.tool("--json", "bisect", good, "--probe", PROBE).json()

    assert data["exit_code"] == 0, data
    found = data["bisect"]
    assert ["part3", "part6"] in found["units"]  # type: ignore[index]
    assert found["culprits"] == [  # type: ignore[index]
        {
            "names": ["part3", "part6"],
            "good": ["part3==1.0", "part6==1.0"],
            "bad": ["part3==2.0", "part6==2.0"],
        }
    ]
    assert _at_start(venv) == start


def test_a_good_version_no_stash_holds_comes_from_the_index_and_not_offline(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part2"})
    venv, good = _good_then_upgraded(make_venv, house, stash=False)
    start = _at_start(venv)
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    refused = venv.tool_reinstalling("--json", "bisect", good, "--probe", PROBE, "--offline")
    assert refused.returncode == 1, refused.stdout
    assert "--offline forbids the index" in refused.json()["error"]  # type: ignore[operator]
    assert _at_start(venv) == start
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots

    done = venv.tool_reinstalling("--json", "bisect", good, "--probe", PROBE, find_links=house)
    data = done.json()
    assert done.returncode == 0, data
    assert [c["names"] for c in data["bisect"]["culprits"]] == [["part2"]]  # type: ignore[index]
    assert _at_start(venv) == start


@pytest.mark.parametrize(
    ("probe", "why"),
    [
        ("import part0", "the probe passes now"),
        ("raise SystemExit(1)", "the probe fails in snapshot"),
    ],
)
def test_refused_when_the_probe_passes_now_or_fails_in_good(
    make_venv: MakeVenv, tmp_path: Path, probe: str, why: str
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    done = venv.tool("--json", "bisect", good, "--probe", probe)

    assert done.returncode == 1, done.stdout
    assert why in done.json()["error"]  # type: ignore[operator]
    assert _at_start(venv) == start
    assert not venv.journal.exists()


def test_without_a_probe_the_one_derived_from_the_changes_finds_the_culprit(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    done = venv.tool("--json", "bisect", good)

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "bisected"
    assert [c["names"] for c in data["bisect"]["culprits"]] == [["part5"]]
    assert any("derived" in note for note in data["probes"]["notes"])
    # Its candidates are judged against their run in GOOD's state, made first.
    assert len(data["probes"]["baseline"]) == 1 and data["probes"]["baseline"][0]["passed"]
    assert len([r for r in data["bisect"]["rounds"] if not r["confirms"]]) <= 5
    assert "broken in 2.0" in data["bisect"]["failure"]
    assert _at_start(venv) == start
    assert not venv.journal.exists()


def test_refused_when_no_probe_is_given_nor_derivable(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    _parts(house, set())
    venv = make_venv()
    venv.install(*(f"{n}==1.0" for n in NAMES), find_links=house)
    good = venv.tool("snapshot", "-q").stdout.strip()
    assert venv.tool("--no-probe", "-y", "part7").returncode == 0  # nothing requires it
    snapshots = sorted(venv.state.snapshots_dir.iterdir())
    start = _at_start(venv)

    done = venv.tool("bisect", good)

    assert done.returncode == 1, done.stdout
    assert "none can be derived from the changes since snapshot" in done.stderr
    assert "nothing was changed" in done.stderr
    assert _at_start(venv) == start
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots
    assert not venv.journal.exists()

    no_probe = venv.tool("bisect", good, "--no-probe")
    assert no_probe.returncode == 1
    assert "--no-probe leaves it none" in no_probe.stderr
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots


@pytest.mark.parametrize(
    "fault",
    ["uninstall:KILL", "restore:KILL", "restore-file:3:KILL", "verify:KILL"],
)
def test_killed_mid_way_recover_brings_back_the_start(
    make_venv: MakeVenv, tmp_path: Path, fault: str
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    killed = venv.tool("bisect", good, "--probe", PROBE, SAFE_UNINSTALL_FAULT=fault)
    assert killed.returncode == -9, killed.stderr
    assert venv.journal.exists()
    assert venv.tool("bisect", good, "--probe", PROBE).returncode == 1  # unfinished: refused

    recovered = venv.tool("--json", "recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout
    assert recovered.json()["verification"]["ok"] is True  # type: ignore[index]
    assert _at_start(venv) == start
    assert not venv.journal.exists()


@pytest.mark.parametrize("fault", ["uninstall:INT", "restore:TERM", "verify:INT"])
def test_interrupted_mid_way_it_returns_to_the_start_itself(
    make_venv: MakeVenv, tmp_path: Path, fault: str
) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)

    done = venv.tool("--json", "bisect", good, "--probe", PROBE, SAFE_UNINSTALL_FAULT=fault)

    data = done.json()
    assert done.returncode == 3, data
    assert data["outcome"] == "bisect-interrupted"
    assert data["verification"]["ok"] is True  # type: ignore[index]
    assert data["bisect"]["culprits"] == []  # type: ignore[index]
    assert _at_start(venv) == start
    assert not venv.journal.exists()


def test_interrupted_before_any_change_changes_nothing(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    done = venv.tool("bisect", good, "--probe", PROBE, SAFE_UNINSTALL_FAULT="probe:INT")

    assert done.returncode == 1, done.stderr
    assert "interrupted before any change" in done.stderr
    assert _at_start(venv) == start
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots
    assert not venv.journal.exists()


def test_a_change_that_slows_the_workload_is_found_with_a_metric(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """part4 2.0 halves the workload's throughput, which it reports itself: no timing noise."""
    house = tmp_path / "house"
    names = "[" + ", ".join(f'"{n}"' for n in NAMES) + "]"
    for name in NAMES:
        build_wheel(house, name, "1.0", {f"{name}.py": "SPEED = 1.0\n"})
        speed = "0.5" if name == "part4" else "1.0"
        build_wheel(house, name, "2.0", {f"{name}.py": f"SPEED = {speed}\n"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    metric = (  # the names as Python literals in double quotes, inside single quotes
        "python -c 'import math, importlib; "
        f"print(20000 * math.prod(importlib.import_module(n).SPEED for n in {names}))'"
    )

    done = venv.tool("--json", "bisect", good, "--probe-metric", metric, "--metric-runs", "1")

    data = done.json()
    assert done.returncode == 0, data
    assert [c["names"] for c in data["bisect"]["culprits"]] == [["part4"]]  # type: ignore[index]
    (baseline,) = data["probes"]["baseline"]  # type: ignore[index]
    assert baseline["metric"]["median"] == 20000.0
    assert "regressed 50.0%" in data["bisect"]["failure"]  # type: ignore[index]
    assert _at_start(venv) == start


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_during_a_later_round_s_probe_ends_at_the_start(
    make_venv: MakeVenv, tmp_path: Path, signal_name: str
) -> None:
    """The second round's probe signals the bisect itself: a state other than the start is
    installed then."""
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    mark = tmp_path / "first-round-done"
    probe = (
        "import os, pathlib, signal\n"
        f"mark = pathlib.Path({str(mark)!r})\n"
        f"if mark.exists(): os.kill(os.getppid(), signal.{signal_name})\n"
        "mark.touch()\n" + PROBE
    )

    done = venv.tool("--json", "bisect", good, "--probe", probe)

    if signal_name == "SIGKILL":
        assert done.returncode == -9
        assert venv.journal.exists()
        recovered = venv.tool("recover", "--no-probe")
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    else:
        data = done.json()
        assert done.returncode == 3, data
        assert data["outcome"] == "bisect-interrupted"
        assert len(data["bisect"]["rounds"]) == 1  # type: ignore[index]
    assert _at_start(venv) == start
    assert not venv.journal.exists()


def test_another_process_changing_the_environment_stops_it_without_undoing_that(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The second round's probe installs leftpad, as another process might: the bisect stops
    where it is (going on or back would remove leftpad), keeps its journal, and `recover`
    returns to the start when asked."""
    house = tmp_path / "house"
    _parts(house, {"part5"})
    venv, good = _good_then_upgraded(make_venv, house)
    start = _at_start(venv)
    mark = tmp_path / "first-round-done"
    install = [
        str(UV),
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--no-index",
        "--find-links",
        str(venv.wheelhouse),
        "leftpad",
    ]
    probe = (
        "import pathlib, subprocess\n"
        f"mark = pathlib.Path({str(mark)!r})\n"
        f"if mark.exists(): subprocess.run({install!r}, check=True, capture_output=True)\n"
        "mark.touch()\n" + PROBE
    )

    done = venv.tool("--json", "bisect", good, "--probe", probe, UV_CACHE_DIR=str(venv.uv_cache))

    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "bisect-concurrent-kept"
    assert "leftpad" in " ".join(data["messages"])  # type: ignore[arg-type]
    assert data["next_command"].endswith("recover")  # type: ignore[union-attr]
    assert "leftpad" in venv.installed()
    assert venv.journal.exists()
    assert venv.tool("recover", "--no-probe").returncode == 0
    assert _at_start(venv) == start
