"""Every command the tool prints for the user to run acts, pasted as printed, on the same
environment (the interpreter, and a --target folder) and the same state folder."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from tests.conftest import MakeVenv, Run, Venv, run_tool


def run_printed(command: str, venv: Venv) -> Run:
    """``command`` as the user pastes it: split as a shell splits it, run without one, with
    the network off (what it restores comes from the tool's own stash)."""
    argv = shlex.split(command)
    assert argv[0] == "safe-uninstall", command
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(venv.root.parent / "empty")}
    return run_tool(*argv[1:], env=env)


def printed(run: Run, lead: str) -> str:
    (line,) = [line for line in run.stdout.splitlines() if line.startswith(lead)]
    return line[len(lead) :]


def test_the_commands_printed_keep_the_state_folder(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("requests")
    state = str(tmp_path / "state")
    default = venv.root / ".safe-uninstall"

    # A removal kept although its probe fails: the rollback it names (JSON next_command).
    kept = venv.tool(
        "--state-dir", state, "--probe", "import urllib3", "--keep-on-failure", "--json",
        "--allow-unmet", "urllib3",
    )  # fmt: skip
    assert kept.returncode == 4, kept.stdout + kept.stderr
    command = str(kept.json()["next_command"])
    assert shlex.split(command)[-1] == "0001"

    back = run_printed(command, venv)

    assert back.returncode == 0, back.stdout + back.stderr
    assert venv.installed() == {"requests": "2.32.3", "urllib3": "2.3.0"}

    # The same removal made behind the tool's back: doctor's repair is a rollback to the
    # snapshot whose stash keeps urllib3, in the state folder given.
    venv.uv("pip", "uninstall", "--python", str(venv.python), "urllib3")
    doctor = venv.tool("--state-dir", state, "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr

    repaired = run_printed(printed(doctor, "to repair, run: "), venv)

    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert venv.tool("--state-dir", state, "doctor").returncode == 0

    # What the listing and each operation's last lines suggest: prune, of this state folder.
    listed = venv.tool("--state-dir", state, "snapshots")
    (line,) = [line for line in listed.stdout.splitlines() if line.endswith("` frees it")]
    command = line.split("`")[1]
    assert command.endswith(" prune --keep N")  # N, as ID in `rollback ID`: the user's choice
    prune = run_printed(command.replace(" N", " 1"), venv)
    assert prune.returncode == 0, prune.stdout + prune.stderr
    assert "(never deleted: 0003)" in prune.stdout, prune.stdout
    assert not default.exists()  # every command used the state folder given, none the default


def test_the_commands_printed_act_on_the_target_folder(make_venv: MakeVenv, tmp_path: Path) -> None:
    """The interpreter's own venv holds requests too: a command naming only the interpreter
    would remove them there."""
    venv = make_venv("requests")
    folder = tmp_path / "tgt"
    house = str(venv.wheelhouse)
    venv.uv("pip", "install", "--target", str(folder), "--no-index", "-f", house, "requests")
    where = ("--target", str(folder), "--no-probe")

    refused = run_tool("--python", str(venv.root), *where, "urllib3")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"environment: {folder}\n" in refused.stdout
    assert f"safe-uninstall: environment: {folder}\n" in refused.stderr
    together = run_printed(printed(refused, "to remove the dependents too: "), venv)

    assert together.returncode == 0, together.stdout + together.stderr
    assert not list(folder.glob("*.dist-info"))
    assert venv.installed() == {"requests": "2.32.3", "urllib3": "2.3.0"}


def test_the_removal_doctor_names_for_a_name_installed_twice_is_this_environments(
    make_venv: MakeVenv,
) -> None:
    """No snapshot keeps either version: doctor names uv's own removal, aimed at this venv
    (a bare `uv pip uninstall urllib3` acts on whatever environment uv finds)."""
    from tests.test_rollback import _install_beside

    venv = make_venv("urllib3==2.2.1")
    _install_beside(venv, venv.wheelhouse / "urllib3-2.3.0-py3-none-any.whl")

    text = venv.tool("doctor").stdout

    (command,) = [part for part in text.split("`") if part.startswith(("uv ", "/"))]
    argv = shlex.split(command)
    assert argv[1:5] == ["pip", "uninstall", "--python", str(venv.python)], command
    assert venv.uv(*argv[1:]).returncode == 0
    assert not list(venv.site_packages.glob("urllib3-*.dist-info"))
