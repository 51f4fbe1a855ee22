"""``try --state FILE``: the state another environment's file describes, tried and left.

Node A is the reference; node B is A changed in six ways (tests/test_bisect_files.py). On B,
``try --state A-FILE --find-links HOUSE`` switches B to A's state, every difference at once,
judges it against B as it started, and ALWAYS comes back: the verdict is the outcome and the
exit code, and B ends byte for byte as it started, whatever form A's file has.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from safeuninstall.base.errors import EXIT_BREAKS, EXIT_SLOWER
from tests.conftest import (
    UV,
    MakeVenv,
    Venv,
    assert_recovered,
    error_line,
    stand_in_uv,
    tagged_processes,
    tool_in_background,
    wait_for,
)
from tests.test_bisect_files import A_SET, FROM_HOUSE, SIX, house, nodes
from tests.test_bisect_others import _other_process_at
from tests.test_editables_in_files import b_and_a_freeze
from tests.test_json_contract import problems
from tests.test_try import _metric, _speed_house

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

__all__ = ["b_and_a_freeze", "house", "nodes"]  # fixtures, shared with the bisect of a file

# Passes on B (part1 2.0); fails in A's state, which has the older part1 1.0.
NEEDS_B = "import part1; assert part1.V == '2.0', part1.V"
# Passes in both: part2, broken on B, is not imported.
EITHER = "import part0, part1, part3"


def _start(venv: Venv) -> tuple[dict[str, str], dict[str, str], list[Path]]:
    folder = venv.state.snapshots_dir
    return venv.installed(), venv.file_hashes(), sorted(folder.iterdir()) if folder.exists() else []


def _back_at(venv: Venv, start: tuple[dict[str, str], dict[str, str], list[Path]]) -> None:
    assert (venv.installed(), venv.file_hashes()) == start[:2]
    assert not venv.journal.exists()


def _seen_by(record: Path) -> str:
    """A probe that passes and writes down each distribution it sees, as name==version."""
    return (
        "import importlib.metadata as m, pathlib\n"
        "seen = sorted(f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions())\n"
        f"pathlib.Path({str(record)!r}).write_text('\\n'.join(seen))\n"
    )


@pytest.mark.parametrize("form", ["snapshot", "export", "freeze", "pylock"])
def test_a_state_that_breaks_the_probe_exits_7_and_b_ends_byte_exact(
    nodes: tuple[Venv, dict[str, Path]], house: Path, form: str
) -> None:
    b, files = nodes
    start = _start(b)

    done = b.tool(
        "--json", "try", "--state", str(files[form]), "--find-links", str(house), "--probe", NEEDS_B
    )

    assert done.stdout, done.stderr
    data = done.json()
    assert done.returncode == EXIT_BREAKS == 7, data
    assert data["command"] == "try"
    assert data["outcome"] == "try-breaks"
    assert problems("try", data) == []
    state = data["state"]
    assert state["file"] == str(files[form])  # type: ignore[index]
    assert {c["name"] for c in state["changes"]} == SIX  # type: ignore[index]
    assert {"name": "part6", "here": "1.0", "there": None} in state["changes"]  # type: ignore[index,operator]
    (before,), (after,) = data["probes"]["baseline"], data["probes"]["after"]  # type: ignore[index]
    assert (before["passed"], after["passed"]) == (True, False)
    assert data["verification"]["ok"] is True  # type: ignore[index]
    _back_at(b, start)


@pytest.mark.parametrize("form", ["export", "pylock"])
def test_a_state_that_passes_exits_0_and_was_the_file_s_whole_state_while_judged(
    nodes: tuple[Venv, dict[str, Path]], house: Path, tmp_path: Path, form: str
) -> None:
    b, files = nodes
    start = _start(b)
    record = tmp_path / "seen"

    done = b.tool(
        "try",
        "--state",
        str(files[form]),
        "--find-links",
        str(house),
        "--probe",
        EITHER,
        "--probe",
        _seen_by(record),
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "the change would pass" in done.stdout
    # The last probe run, in A's state: every difference at once, part6 gone.
    assert record.read_text().splitlines() == sorted(A_SET)
    _back_at(b, start)


@pytest.mark.parametrize(
    ("version", "outcome", "code"), [("2.0", "try-slower", EXIT_SLOWER), ("3.0", "try-faster", 0)]
)
def test_a_metric_verdict_on_the_file_s_state_is_the_outcome_with_its_numbers(
    make_venv: MakeVenv, tmp_path: Path, version: str, outcome: str, code: int
) -> None:
    speeds = tmp_path / "speeds"
    _speed_house(speeds)
    a = make_venv()
    a.install(f"speed=={version}", find_links=speeds)
    exported = tmp_path / "a.txt"
    assert a.tool("export", "-o", str(exported)).returncode == 0
    b = make_venv()
    b.install("speed==1.0", find_links=speeds)
    start = _start(b)

    done = b.tool(
        "--json",
        "try",
        "--state",
        str(exported),
        "--find-links",
        str(speeds),
        "--probe-metric",
        _metric(tmp_path, 7),
        "--metric-runs",
        "8",
    )

    data = done.json()
    assert done.returncode == code, data
    assert data["outcome"] == outcome
    assert problems("try", data) == []
    (after,) = data["probes"]["after"]  # type: ignore[index]
    metric = after["metric"]
    assert len(metric["values"]) == len(metric["baseline_values"]) == 8
    assert metric["verdict"] == ("regressed" if code else "within-limit")
    assert metric["ratio"] == pytest.approx(1 / 1.5 if code else 1.5, rel=0.15)
    (said,) = [m for m in data["messages"] if "what the change would do" in m]  # type: ignore[union-attr]
    assert f", 8 runs a side: {metric['verdict']}" in said
    _back_at(b, start)


def test_offline_what_no_stash_nor_find_links_holds_is_refused_with_the_list(
    nodes: tuple[Venv, dict[str, Path]],
) -> None:
    b, files = nodes
    start = _start(b)

    done = b.tool("try", "--state", str(files["pylock"]), "--offline", "--probe", EITHER)

    assert done.returncode == 1, done.stdout
    assert error_line(done.stderr) == (
        f"safe-uninstall: error: no stash holds {', '.join(FROM_HOUSE)} of the file "
        f"{files['pylock']}, and --offline forbids the index; nothing was changed"
    )
    assert _start(b) == start
    assert not b.journal.exists()


def test_a_probe_that_fails_here_already_is_refused_before_any_change(
    nodes: tuple[Venv, dict[str, Path]], house: Path
) -> None:
    b, files = nodes
    start = _start(b)

    done = b.tool(
        "try",
        "--state",
        str(files["export"]),
        "--find-links",
        str(house),
        "--probe",
        "import part2",
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "the probe already fails here, before any change" in error_line(done.stderr)
    assert _start(b) == start
    assert not b.journal.exists()


def test_its_snapshot_is_listed_and_shown_as_a_try(
    nodes: tuple[Venv, dict[str, Path]], house: Path
) -> None:
    b, files = nodes
    snapshots = b.state.snapshots_dir
    before = {p.name for p in snapshots.iterdir()} if snapshots.exists() else set()

    done = b.tool(
        "try", "--state", str(files["export"]), "--find-links", str(house), "--probe", EITHER
    )

    assert done.returncode == 0, done.stdout + done.stderr
    listed = b.tool("snapshots", "--json").json()["snapshots"]
    assert isinstance(listed, list)
    (taken,) = [s for s in listed if s["id"] not in before]
    assert (taken["operation"], taken["outcome"]) == ("try", "try-passes")
    shown = b.tool("show", taken["id"])
    assert f"snapshot {taken['id']} (try, try-passes)" in shown.stdout, shown.stdout


# Killed in A's state (its probe), half way through a switch's links (what a distribution
# left unfinished linked back, recover deletes), and proving the start.
@pytest.mark.parametrize("fault", ["probe:KILL", "restore-file:3:KILL", "verify:KILL"])
def test_killed_recover_finds_a_try_and_brings_back_the_start(
    nodes: tuple[Venv, dict[str, Path]], house: Path, fault: str
) -> None:
    b, files = nodes
    hashes, installed = b.file_hashes(), b.installed()
    links = ("--find-links", str(house))

    done = b.tool(
        "try", "--state", str(files["freeze"]), *links, "--probe", EITHER,
        SAFE_UNINSTALL_FAULT=fault,
    )  # fmt: skip

    assert done.returncode < 0 or done.returncode == 137, done.stderr
    assert b.journal.exists()
    assert 'operation = "try"' in b.journal.read_text()
    if fault == "probe:KILL":
        assert b.installed()["part1"] == "1.0"  # A's: it was killed in A's state
    said = b.tool("doctor").stdout  # the operation recover finds, as it names it
    assert "a try (pid " in said, said
    assert_recovered(b, hashes, installed)


def test_ctrl_c_in_the_file_s_state_goes_back_to_the_start(
    nodes: tuple[Venv, dict[str, Path]], house: Path, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    b, files = nodes
    start = _start(b)
    started = tmp_path / "started"
    probe = (  # in A's state (part6 gone), says so, then waits to be interrupted
        "import importlib.util, pathlib, time\n"
        "if importlib.util.find_spec('part6') is None:\n"
        f"    pathlib.Path({str(started)!r}).touch()\n"
        "    time.sleep(600)\n"
    )
    proc = tool_in_background(
        b, "--json", "try", "--state", str(files["export"]), "--find-links", str(house),
        "--probe", probe, **process_tag,
    )  # fmt: skip
    wait_for(started)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)

    data = json.loads(out)
    assert proc.returncode == 3, err
    assert data["outcome"] == "try-interrupted"
    assert problems("try", data) == []
    assert tagged_processes(process_tag) == [], "the probe outlived the command"
    _back_at(b, start)


def test_a_package_or_a_removal_s_option_beside_a_state_is_a_usage_error(
    nodes: tuple[Venv, dict[str, Path]],
) -> None:
    b, files = nodes
    start = _start(b)

    both = b.tool("try", "--state", str(files["export"]), "part6")
    strict = b.tool("try", "--state", str(files["export"]), "--strict")
    links = b.tool("try", "--find-links", str(files["export"].parent), "part6")

    assert both.returncode == 2 and "one of them" in both.stderr, both.stderr
    assert strict.returncode == 2 and "--strict: not for try --state FILE" in strict.stderr
    assert links.returncode == 2 and "--find-links: only for try --state FILE" in links.stderr
    assert _start(b) == start


@pytest.mark.parametrize("switch", [1, 2])  # the switch to A's state, the return to the start
def test_another_process_s_change_is_left_as_it_is_and_recover_named(
    nodes: tuple[Venv, dict[str, Path]], house: Path, tmp_path: Path, switch: int
) -> None:
    """Another process installs leftpad during a switch (a stand-in uv does it on the
    ``switch``-th uninstall): going back would undo its work too, so the try stops there,
    undoes nothing of it, keeps its journal and names ``recover``."""
    b, files = nodes
    hashes, installed = b.file_hashes(), b.installed()
    count = tmp_path / "count"
    python = ["--python", str(b.python)]
    argv = ["pip", "install", *python, "--no-index", "--find-links", str(b.wheelhouse)]
    uv = stand_in_uv(
        tmp_path / "uv",
        _other_process_at(count, switch, [*argv, "leftpad==1.0"]),
        "pathlib, subprocess",
    )

    done = b.tool(
        "--json", "try", "--state", str(files["export"]), "--find-links", str(house),
        "--probe", EITHER, SAFE_UNINSTALL_UV=str(uv), UV_CACHE_DIR=str(b.uv_cache),
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "try-not-returned"
    assert problems("try", data) == []
    assert "appeared: leftpad-1.0.dist-info" in " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
    assert b.installed().get("leftpad") == "1.0"  # the other process's install stands
    assert int(count.read_text()) == switch  # nothing was switched after it was noticed
    assert b.journal.exists()
    assert str(data["next_command"]).endswith("recover")
    assert_recovered(b, hashes, installed)  # the start, that process's install undone too


def test_an_editable_install_the_file_names_is_left_as_it_is(
    b_and_a_freeze: tuple[Venv, Path, Path], house: Path, tmp_path: Path
) -> None:
    b, freeze, _ = b_and_a_freeze
    start = _start(b)
    record = tmp_path / "seen"

    done = b.tool(
        "--json", "try", "--state", str(freeze), "--find-links", str(house),
        "--probe", "import part0, part1, edpkg", "--probe", _seen_by(record),
    )  # fmt: skip

    data = done.json()
    assert done.returncode == 0, data
    assert [c["name"] for c in data["state"]["changes"]] == ["part1", "part2"]  # type: ignore[index]
    said = f"edpkg: an editable install in {freeze} (line 1): kept as it is, not switched"
    assert said in data["messages"]  # type: ignore[operator]
    seen = record.read_text().splitlines()  # in A's state: A's versions, edpkg as it was
    assert seen == ["edpkg==0.1", "part0==1.0", "part1==1.0", "part2==1.0"]
    _back_at(b, start)


def test_a_metric_that_fails_at_the_start_is_refused_before_any_change(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    speeds = tmp_path / "speeds"
    _speed_house(speeds)
    a = make_venv()
    a.install("speed==3.0", find_links=speeds)
    exported = tmp_path / "a.txt"
    assert a.tool("export", "-o", str(exported)).returncode == 0
    b = make_venv()
    b.install("speed==1.0", find_links=speeds)
    start = _start(b)
    workload = tmp_path / "fails-on-1.py"  # fails as B is, measures in A's state
    workload.write_text("import speed, sys\nsys.exit(1) if speed.SPEED == 1.0 else print(1.0)\n")

    done = b.tool(
        "try", "--state", str(exported), "--find-links", str(speeds),
        "--probe-metric", f"python {workload}",
    )  # fmt: skip

    assert done.returncode == 1, done.stdout + done.stderr
    said = error_line(done.stderr)
    assert "the metric failed at the start" in said and said.endswith("nothing was changed")
    assert _start(b) == start
    assert not b.journal.exists()


def test_without_a_probe_the_derived_one_does_not_count_what_the_file_lacks_as_broken(
    nodes: tuple[Venv, dict[str, Path]], house: Path
) -> None:
    """part6 is B's alone: A's state uninstalls it, so its import is no candidate. part2 fails
    here already (B's 2.0): dropped before the switch, not judged."""
    b, files = nodes
    start = _start(b)

    done = b.tool("--json", "try", "--state", str(files["export"]), "--find-links", str(house))

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "try-passes"
    (after,) = data["probes"]["after"]  # type: ignore[index]
    candidates = {c["target"]: c for c in after["candidates"]}
    assert "part6" not in candidates
    assert candidates["part2"]["judged"] is False
    assert all(c["status"] == "passed" for c in candidates.values() if c["judged"])
    _back_at(b, start)
