"""Interrupts and concurrent changes at the worst moment (issue 12): the environment ends
proven as it was, or the tool says exactly what it is; never "restored and verified" while
something it started is still changing the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Run, Venv, once_the_snapshot_exists, stand_in_uv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _uv_that_is_interrupted(tmp_path: Path, finished: Path) -> Path:
    """A uv that sends the tool SIGTERM the moment its uninstall starts, then does the real
    uninstall and notes that it finished."""
    return stand_in_uv(
        tmp_path / "uv-interrupted",
        "os.kill(os.getppid(), signal.SIGTERM)\n"
        "code = subprocess.run([real, *sys.argv[1:]]).returncode\n"
        f"pathlib.Path({str(finished)!r}).write_text(str(code))\n"
        "sys.exit(code)",
        imports="pathlib, signal, subprocess",
    )


def test_an_interrupt_while_uv_runs_waits_for_it_then_restores(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Issue 12 #9: the interrupt used to kill uv (or, landing inside Popen, leave it running
    unseen) and restore beside it. Now uv finishes first, then everything comes back."""
    venv = make_venv("requests", "leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()
    finished = tmp_path / "uv-finished"
    uv = _uv_that_is_interrupted(tmp_path, finished)
    run = venv.tool("--json", "--probe", "import requests", "leftpad", SAFE_UNINSTALL_UV=str(uv))
    data = run.json()
    assert finished.read_text() == "0", "uv was stopped half way"
    assert data["outcome"] == "interrupted-restored", data
    assert run.returncode == 3
    assert "an interrupt arrived during the restore" not in str(data["messages"])
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_rollback_that_cannot_bring_everything_back_changes_nothing(
    make_venv: MakeVenv,
) -> None:
    """Issue 12 #12 / issue 11 #6: the rollback used to uninstall what was added first, then
    fail to reinstall what has no stash, and end with neither."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("snapshot", "--no-stash").returncode == 0  # the set, without files
    venv.uv("pip", "uninstall", "--python", str(venv.python), "leftpad")  # a bare removal
    venv.install("toolpkg")  # and an install since
    hashes, installed = venv.file_hashes(), venv.installed()
    run = venv.tool("rollback", "--no-probe")  # offline, an empty uv cache: leftpad is nowhere
    assert run.returncode == 1, run.stdout + run.stderr
    assert "leftpad==1.0" in run.stderr
    assert "the environment was not changed" in run.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()


def test_a_rollback_whose_reinstall_is_possible_goes_ahead(make_venv: MakeVenv) -> None:
    """The check asks the installer (a dry run): with the wheel at hand it passes."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    venv.uv("pip", "uninstall", "--python", str(venv.python), "leftpad")
    run = venv.tool_reinstalling("rollback", "--no-probe")
    assert run.returncode == 0, run.stdout + run.stderr
    assert venv.installed()["leftpad"] == "1.0"


def _leftpad_2(tmp_path: Path) -> Path:
    house = tmp_path / "house-2"
    build_wheel(house, "leftpad", "2.0", {"leftpad.py": "def pad(s): return '  ' + s\n"})
    return house


def _install_leftpad_2(venv: Venv, house: Path) -> str:
    """Probe code: what another process's plain `uv pip install leftpad==2.0` does."""
    argv = [UV, "pip", "install", "--python", str(venv.python), "--no-index"]
    argv += ["--find-links", str(house), "leftpad==2.0"]
    return f"import subprocess\nsubprocess.run({argv!r}, check=True, capture_output=True)\n"


def test_an_install_beside_the_restore_is_not_called_identical(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Issue 12 #10, during the probe: another process installs leftpad 2.0 after leftpad 1.0
    was removed; the restore brings 1.0 back beside it. Two dist-info folders for one name:
    not "proven identical", but exit 4 with the difference named."""
    venv = make_venv("requests", "leftpad")
    probe = (
        "import importlib.util\n"
        "if importlib.util.find_spec('leftpad') is None:\n"
        + "".join(
            "    " + line + "\n"
            for line in _install_leftpad_2(venv, _leftpad_2(tmp_path)).splitlines()
        )
        + "    raise SystemExit(1)\n"
    )
    run = venv.tool("--json", "--probe", probe, "leftpad")
    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "concurrent-incomplete"
    assert "another process changed the environment" in str(data["messages"])
    verification = data["verification"]
    assert isinstance(verification, dict)
    assert verification["extra_dist_info"] == ["leftpad-2.0.dist-info"]
    assert "proven identical" not in run.stdout


def test_an_install_during_the_baseline_stops_the_removal_before_it_removes(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Issue 12 #10, during the baseline: another process replaces leftpad 1.0 by 2.0 after the
    snapshot. The removal used to uninstall 2.0, which no stash held. Now it removes nothing."""
    venv = make_venv("requests", "leftpad")
    snapshot = venv.snapshot("0001").snapshot_file
    done = tmp_path / "installed-2.0"
    install = _install_leftpad_2(venv, _leftpad_2(tmp_path))
    probe = once_the_snapshot_exists(snapshot, done, install)
    run = venv.tool("--fresh-baseline", "--probe", probe, "leftpad")
    assert done.exists()
    assert run.returncode == 1, run.stdout + run.stderr
    assert "another process changed the environment" in run.stderr
    assert "appeared: leftpad-2.0.dist-info" in run.stderr
    assert "nothing was removed" in run.stderr
    assert venv.installed()["leftpad"] == "2.0"  # the other process's work stands
    assert not snapshot.exists()  # the snapshot of a state that is gone was given up
    assert not venv.journal.exists()


def _uninstalled_once_back(venv: Venv, back: str, other: str) -> str:
    """Probe code: once ``back`` is importable (after the restore, not in a baseline), what
    another process's plain `uv pip uninstall OTHER` does, while the probe runs."""
    argv = [UV, "pip", "uninstall", "--python", str(venv.python), other]
    return (
        "import importlib.util, subprocess\n"
        f"if importlib.util.find_spec({back!r}) is not None:\n"
        f"    subprocess.run({argv!r}, check=True, capture_output=True)\n"
    )


def _assert_concurrent_kept(run: Run, venv: Venv, command: str) -> None:
    """The change by another process during the probe is named, exit 4, and nothing claims the
    environment matches the snapshot; that process's work stands, nothing was undone."""
    data = run.json()
    assert data["outcome"] == f"{command}-concurrent-kept", data
    assert run.returncode == 4
    assert (
        f"another process changed the environment during the {command}'s probe "
        "(went: toolpkg-1.0.dist-info)"
    ) in str(data["messages"])
    verification = data["verification"]
    assert isinstance(verification, dict)
    assert verification["ok"] is False
    assert verification["changed_after"] == ["went: toolpkg-1.0.dist-info"]
    assert "matches the snapshot" not in json.dumps(data)
    assert f"safe-uninstall --python {venv.python} rollback 0001" in str(data["next_command"])
    installed = venv.installed()
    assert installed["leftpad"] == "1.0"  # what the restore brought back
    assert "toolpkg" not in installed  # the other process's work stands
    assert not venv.journal.exists()


@pytest.mark.parametrize("judged", [False, True], ids=["restores", "removes-and-restores"])
def test_a_change_during_the_rollbacks_probe_is_not_called_a_match(
    make_venv: MakeVenv, judged: bool
) -> None:
    """A tester's HIGH: another process uninstalled networkx while the rollback's probe ran;
    the rollback said "the environment matches the snapshot", exit 0, verification ok. The
    probe is that process here (the race made deterministic): a rollback that only brings back
    (probed after, and reported), and one that also removes (judged like a removal)."""
    venv = make_venv("requests", "leftpad", "toolpkg")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # snapshot 0001 has leftpad
    if judged:
        venv.install("multipkg")  # the rollback removes it: its probe runs before and after
    probe = _uninstalled_once_back(venv, "leftpad", "toolpkg")
    run = venv.tool("--json", "rollback", "0001", "--probe", probe)
    _assert_concurrent_kept(run, venv, "rollback")
    assert "multipkg" not in venv.installed()


def test_a_change_during_the_recovers_probe_is_not_called_a_match(make_venv: MakeVenv) -> None:
    """The same for recover: killed after its removal of leftpad, the removal is recovered;
    another process uninstalls toolpkg while the recover's probe runs."""
    venv = make_venv("requests", "leftpad", "toolpkg")
    killed = venv.tool("--probe", "import requests", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL")
    assert killed.returncode == -9
    assert "leftpad" not in venv.installed()
    probe = _uninstalled_once_back(venv, "leftpad", "toolpkg")
    run = venv.tool("--json", "recover", "--probe", probe)
    _assert_concurrent_kept(run, venv, "recover")
