"""The guarded change, written once (transaction/guard.py), read as an adversary would: what each
operation does at the edges the move touched (the journal write that begins a step, an
interrupt between two lines, another process's change, what a run says it found)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import UV, MakeVenv, Run, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def test_a_full_disk_at_the_journal_write_before_a_rollbacks_uninstall_gives_it_up(
    make_venv: MakeVenv,
) -> None:
    """The uninstall step is counted as begun before its journal write, so that a removal or a
    run that fails there restores. A rollback does not restore on an error: it left the
    journal and a "pending" snapshot behind, every later command refused until `recover`,
    while it said the environment was not changed. Nothing ran: it is given up, as before any
    change."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("snapshot").returncode == 0
    venv.install("toolpkg")  # the rollback uninstalls it
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("rollback", "--no-probe", SAFE_UNINSTALL_FAULT="uninstall:ENOSPC")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "No space left on device" in run.stderr
    assert "the environment was not changed" in run.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()
    assert venv.state.ids() == ["0001"]  # no "pending" snapshot of a rollback that never ran
    after = venv.tool("--dry-run", "leftpad")
    assert after.returncode == 0, after.stderr  # not refused: nothing is left to recover


def test_an_install_by_another_process_during_a_removal_is_not_undone_by_what_it_advises(
    make_venv: MakeVenv,
) -> None:
    """While the removal's probe runs, another process installs toolpkg. The removal brings
    back what it removed (its own) and names the change; following what it prints next must
    not take toolpkg away: that process's work is not this removal's to undo."""
    venv = make_venv("requests", "leftpad")
    assert UV is not None
    install = [UV, "pip", "install", "--python", str(venv.python), "--no-index"]
    install += ["--find-links", str(venv.wheelhouse), "toolpkg"]
    probe = (  # the other process, at the probe after the removal (leftpad gone)
        "import importlib.util, subprocess\n"
        "if importlib.util.find_spec('leftpad') is None:\n"
        f"    subprocess.run({install!r}, check=True, capture_output=True)\n"
    )

    data = venv.tool("--json", "--probe", probe, "leftpad").json()

    assert "appeared: toolpkg-1.0.dist-info" in str(data["messages"])
    assert venv.installed()["leftpad"] == "1.0"  # its own removal is undone
    advised = str(data["next_command"] or "")
    if "recover" in advised:
        assert venv.tool("recover", "--no-probe").returncode == 0
    assert "toolpkg" in venv.installed()  # the other process's work stands
    assert data["outcome"] == "concurrent-restored", data
    assert data["next_command"] is None
    assert "but for what another process changed (toolpkg: left as it is)" in str(data["messages"])


def test_a_command_that_touches_nothing_here_is_not_said_to_rewrite_files(
    make_venv: MakeVenv,
) -> None:
    """The venvs a uv with one cache makes hold hard links to the same unpacked wheels. The
    guarded command installs requests into ANOTHER venv from that cache (as any uv on the
    machine may, at any time): nothing here changed. On a real torch stack the same made every
    `run` say "the command replaced or rewrote files of" all 28 distributions, and a refused
    run uninstall and reinstall all of them (16,058 files) to undo one removal."""
    venv = make_venv("requests")
    other = make_venv()
    assert UV is not None
    elsewhere = [UV, "--cache-dir", str(venv.uv_cache), "pip", "install"]
    elsewhere += ["--python", str(other.python), "--no-index", "--find-links", str(venv.wheelhouse)]
    hashes = venv.file_hashes()

    run = venv.tool("--json", "run", "--no-probe", "--", *elsewhere, "requests")

    data = run.json()
    assert venv.file_hashes() == hashes
    assert "rewrote" not in str(data["messages"]), data["messages"]
    assert data["outcome"] == "ran-no-change", data


# Runs the command with a Ctrl-C landing on one line: as one of the outcomes named in CTRL_C_AT
# (their ids) is written. A signal can land between any two lines; this one stands for
# those between the moment an operation decided how it ends and the write of that outcome.
_CTRL_C_AS_WRITTEN = """
import os, runpy, signal, sys
from safeuninstall.transaction import transaction

finish = transaction.Transaction.finish

def finishing(self, outcome, **kw):
    if outcome.id in os.environ["CTRL_C_AT"].split(","):
        os.kill(os.getpid(), signal.SIGINT)
    return finish(self, outcome, **kw)

transaction.Transaction.finish = finishing
sys.argv = ["safe-uninstall", *sys.argv[1:]]
runpy.run_module("safeuninstall", run_name="__main__")
"""


def _with_ctrl_c_as_written(venv: Venv, outcome: str, *args: str, **extra: str) -> Run:
    """``safe-uninstall --python VENV --json ARGS`` as Venv.tool runs it, with a Ctrl-C as
    ``outcome`` (an outcome's id) is written."""
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(venv.root.parent / "no-cache")}
    driver = [sys.executable, "-c", _CTRL_C_AS_WRITTEN]
    done = subprocess.run(
        [*driver, "--python", str(venv.root), "--json", *args],
        capture_output=True,
        text=True,
        env={**env, "CTRL_C_AT": outcome, **extra},
    )
    return Run(done.returncode, done.stdout, done.stderr)


def test_a_ctrl_c_as_a_run_is_left_not_undone_waits_for_its_outcome(make_venv: MakeVenv) -> None:
    """The command wrote leftpad.py in place (its hard-linked stash too) and failed: nothing
    can bring leftpad back, so the change is left as it is (run-not-undone, no journal: a
    known state). A Ctrl-C from the moment the undo found that to the outcome's write is
    held, as during the undo: it cut that ending short, and left a journal that `recover`
    refuses (leftpad cannot come back for it either)."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = venv.site_packages / "leftpad.py"
    write = f"open({str(target)!r}, 'r+b').write(b'#')\nraise SystemExit(1)"

    done = _with_ctrl_c_as_written(
        venv, "run-not-undone", "run", "--no-probe", "--", sys.executable, "-c", write
    )

    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "run-not-undone", data
    assert not venv.journal.exists()


def test_a_ctrl_c_as_a_rollback_is_left_not_undone_waits_for_its_outcome(
    make_venv: MakeVenv,
) -> None:
    """The same for a rollback whose probe fails after it and whose undo cannot bring back
    what it removed: the probe (passing before, on urllib3 2.3.0) deletes a file of the stash
    of the rollback's own snapshot, 0002, then fails on 2.2.1. Nothing is undone, said with
    rolled-back-probe-fails (exit 5), not an interrupt with the journal left."""
    venv = make_venv("urllib3==2.2.1")
    assert venv.tool("snapshot").returncode == 0  # 0001
    venv.install("urllib3==2.3.0")
    own = venv.snapshot("0002").stash_dir
    probe = (
        "import pathlib, urllib3\n"
        "if urllib3.VERSION == '2.2.1':\n"
        f"    for kept in pathlib.Path({str(own)!r}).glob('urllib3-*/**/urllib3/__init__.py'):\n"
        "        kept.unlink()\n"
        "    raise SystemExit(1)\n"
    )

    done = _with_ctrl_c_as_written(
        venv, "rolled-back-probe-fails", "rollback", "1", "--probe", probe
    )

    data = done.json()
    assert done.returncode == 5, data
    assert data["outcome"] == "rolled-back-probe-fails", data
    assert "nothing was undone" in str(data["messages"])
    assert not venv.journal.exists()


@pytest.mark.parametrize("operation", ["uninstall", "run"])
def test_a_ctrl_c_as_a_change_that_stands_is_written_changes_nothing_of_it(
    make_venv: MakeVenv, operation: str
) -> None:
    """The probe passed: the change stands (removed, ran), decided. A Ctrl-C as that outcome
    is written must change neither the outcome nor the exit code (the outcome is decided), nor
    leave a journal. It undid the removal (interrupted-restored, exit 3) before the guard;
    with it, it ended in an error (exit 4) with the journal left for a recover that undoes a
    change the probe passed."""
    venv = make_venv("requests")
    if operation == "uninstall":
        venv.install("leftpad")
        args = ["--probe", "import requests", "leftpad"]
        outcome = "removed"
    else:
        assert UV is not None
        install = [UV, "pip", "install", "--no-index", "--find-links", str(venv.wheelhouse)]
        args = ["run", "--probe", "import requests", "--", *install, "leftpad"]
        outcome = "ran"

    done = _with_ctrl_c_as_written(venv, outcome, *args)

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == outcome, data
    assert ("leftpad" in venv.installed()) is (operation == "run")
    assert not venv.journal.exists()


# Runs the command with a second Ctrl-C landing as run's undo reads what the command rewrote
# (when the first one stopped it before its comparison): Ctrl-C pressed twice.
_SECOND_CTRL_C_AS_THE_UNDO_BEGINS = """
import os, runpy, signal, sys
from safeuninstall.operations import run

rewritten_now = run._Attempt._rewritten_now

def reading(self):
    os.kill(os.getpid(), signal.SIGINT)
    return rewritten_now(self)

run._Attempt._rewritten_now = reading
sys.argv = ["safe-uninstall", *sys.argv[1:]]
runpy.run_module("safeuninstall", run_name="__main__")
"""


def test_a_second_ctrl_c_as_a_runs_undo_begins_waits_for_the_undo(make_venv: MakeVenv) -> None:
    """The first Ctrl-C lands as the command's step begins (before the comparison), the second
    as the undo reads which distributions the command rewrote: that read was held with the
    undo, as the undo is. Escaping, it ended in an error (exit 4) with the change not undone
    and the journal left."""
    venv = make_venv("requests", "urllib3==2.2.1")
    hashes, installed = venv.file_hashes(), venv.installed()
    assert UV is not None
    install = [UV, "pip", "install", "--no-index", "--find-links", str(venv.wheelhouse)]
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(venv.root.parent / "no-cache")}
    argv = ["--python", str(venv.root), "--json", "run", "--no-probe", "--"]

    done = subprocess.run(
        [sys.executable, "-c", _SECOND_CTRL_C_AS_THE_UNDO_BEGINS, *argv, *install, "-U", "urllib3"],
        capture_output=True,
        text=True,
        env={**env, "SAFE_UNINSTALL_FAULT": "command:INT"},
    )

    data = Run(done.returncode, done.stdout, done.stderr).json()
    assert done.returncode == 3, data
    assert data["outcome"] == "run-interrupted-restored", data
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
