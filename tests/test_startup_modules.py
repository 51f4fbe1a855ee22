"""A command imports what it runs: a read-only command loads none of the restore machinery
(safeuninstall.transaction) nor the ELF reader, which only a change or a library check needs.
That change-making commands load everything a restore needs before they change anything is
tested by the tool removing itself (test_own_environment.py)."""

from __future__ import annotations

import pytest

from tests.conftest import MakeVenv, Run

# Loaded by no read-only command below: the restore machinery, and the ELF reader.
_NOT_FOR_READING = ("safeuninstall.transaction", "safeuninstall.libraries.elf")


def _imported(run: Run) -> list[str]:
    """Every module the command imported, from ``-X importtime`` on its stderr."""
    return [
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]


def _loaded(run: Run) -> list[str]:
    """The tool's modules the command imported."""
    return [name for name in _imported(run) if name.startswith("safeuninstall")]


def _restore_machinery(loaded: list[str]) -> list[str]:
    return [name for name in loaded if name.startswith(_NOT_FOR_READING)]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--version",), id="version"),
        pytest.param(("snapshots",), id="snapshots"),
        pytest.param(("snapshots", "--json"), id="snapshots-json"),
    ],
)
def test_a_read_only_command_loads_no_restore_machinery(
    make_venv: MakeVenv, args: tuple[str, ...]
) -> None:
    venv = make_venv("leftpad")
    taken = venv.tool("snapshot")
    assert taken.returncode == 0, taken.stderr
    done = venv.tool(*args, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stderr
    loaded = _loaded(done)
    assert "safeuninstall.cli.commands" in loaded, "no -X importtime lines were read"
    assert _restore_machinery(loaded) == []


# Loaded by every command: the command line, and the colours any text may be painted in.
_EVERY_COMMAND_LOADS = {
    "safeuninstall.cli.commands",
    "safeuninstall.cli.render",
    "safeuninstall.cli.render.paint",
}


@pytest.mark.parametrize(
    ("args", "renderers"),
    [
        pytest.param(("--version",), [], id="version"),
        pytest.param(("snapshots",), ["safeuninstall.cli.render.snapshots"], id="snapshots"),
        pytest.param(("snapshots", "--json"), [], id="snapshots-json"),
        pytest.param(("diff", "latest"), ["safeuninstall.cli.render.diff"], id="diff"),
    ],
)
def test_a_command_loads_its_own_renderer_alone(
    make_venv: MakeVenv, args: tuple[str, ...], renderers: list[str]
) -> None:
    """A read-only command loads the renderer of its text, after its result, and no other
    command's; with --json, none."""
    venv = make_venv("leftpad")
    taken = venv.tool("snapshot")
    assert taken.returncode == 0, taken.stderr
    done = venv.tool(*args, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stderr
    loaded = _loaded(done)
    assert "safeuninstall.cli.commands" in loaded, "no -X importtime lines were read"
    cli = [name for name in loaded if name.startswith("safeuninstall.cli.")]
    assert sorted(set(cli) - _EVERY_COMMAND_LOADS) == renderers


# What only a change, a plan or the installed set needs: a listing of the snapshots reads the
# state folder alone (docs/performance.md, "What is deferred at start-up").
_NOT_FOR_LISTING = (
    "safeuninstall.environment.backend",
    "safeuninstall.environment.installed",
    "safeuninstall.plans.changes",
)


@pytest.mark.parametrize("args", [("snapshots", "--json"), ("show",)])
def test_listing_snapshots_loads_neither_installer_nor_installed_set(
    make_venv: MakeVenv, args: tuple[str, ...]
) -> None:
    venv = make_venv("leftpad")
    taken = venv.tool("snapshot")
    assert taken.returncode == 0, taken.stderr
    done = venv.tool(*args, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stderr
    imported = _imported(done)
    assert "safeuninstall.operations.snapshots" in imported, "no -X importtime lines were read"
    assert [name for name in imported if name.split(".")[0] == "packaging"] == []
    assert [name for name in imported if name.startswith(_NOT_FOR_LISTING)] == []


@pytest.mark.parametrize(
    ("args", "operation"),
    [
        pytest.param(("audit",), "audit", id="audit"),
        pytest.param(("export", "latest"), "export", id="export"),  # to standard output
        pytest.param(("diff", "latest"), "diff", id="diff"),
        pytest.param(("doctor",), "inspect", id="doctor"),
        pytest.param(("check", "leftpad"), "inspect", id="check"),
        # --json: the payload types are read-only commands' too
        pytest.param(("check", "--json", "leftpad"), "payloads", id="check-json"),
        pytest.param(("diff", "--json", "latest"), "payloads", id="diff-json"),
        pytest.param(("doctor", "--json"), "payloads", id="doctor-json"),
    ],
)
def test_a_read_only_command_that_reads_libraries_loads_no_restore_machinery(
    make_venv: MakeVenv, args: tuple[str, ...], operation: str
) -> None:
    """These look at libraries (the ELF reader is theirs), but change nothing: none of the
    restore machinery is loaded."""
    venv = make_venv("leftpad")
    taken = venv.tool("snapshot")
    assert taken.returncode == 0, taken.stderr
    done = venv.tool(*args, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    loaded = _loaded(done)
    assert f"safeuninstall.operations.{operation}" in loaded, "no -X importtime lines were read"
    assert [name for name in loaded if name.startswith("safeuninstall.transaction")] == []
