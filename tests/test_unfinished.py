"""An operation's journal seen by a command that changes nothing: a dead operation (killed) is
repaired by `recover`, which doctor names first; one under way (another process holds the
environment's lock) is not dead, and neither doctor nor a dry run sends anyone to recover it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import filelock
import pytest

from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _killed_after_the_probe(make_venv: MakeVenv) -> Venv:
    """A removal of leftpad killed once its probe passed: the journal stays, leftpad is gone."""
    venv = make_venv("requests", "leftpad")
    killed = venv.tool("--probe", "import requests", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL")
    assert killed.returncode == -9
    assert venv.journal.exists()
    return venv


@contextmanager
def _held(venv: Venv) -> Iterator[None]:
    """The environment's lock, held by this process as a running operation holds it."""
    lock = filelock.FileLock(str(venv.root / ".safe-uninstall.lock"))
    with lock.acquire(timeout=10):
        yield


def test_doctor_names_recover_after_an_operation_died(make_venv: MakeVenv) -> None:
    venv = _killed_after_the_probe(make_venv)
    data = venv.tool("doctor", "--json").json()
    findings = data["findings"]
    assert isinstance(findings, list)
    assert findings[0]["kind"] == "unfinished", findings
    recover = f"safe-uninstall --python {venv.python} recover"
    assert data["repair_command"] == recover
    text = venv.tool("doctor")
    assert text.returncode == 1
    assert f"to repair, run: {recover}" in text.stdout, text.stdout
    # what it named works, and doctor then finds nothing
    assert venv.tool("recover").returncode == 0
    assert venv.tool("doctor").returncode == 0


def test_an_operation_under_way_is_not_sent_to_recover(make_venv: MakeVenv) -> None:
    venv = _killed_after_the_probe(make_venv)
    with _held(venv):
        dry = venv.tool("--dry-run", "requests")
        data = venv.tool("doctor", "--json").json()
        text = venv.tool("doctor").stdout
    assert dry.returncode != 0
    assert "another safe-uninstall operation is running on this environment" in dry.stderr
    assert "recover" not in dry.stderr
    findings = data["findings"]
    assert isinstance(findings, list)
    assert findings[0]["kind"] == "running", findings
    assert data["repair_command"] is None
    assert "run doctor again after it ends" in text
    assert "recover" not in text
    # let go, the same dry run points to recover: the operation is dead
    dead = venv.tool("--dry-run", "requests")
    assert f"Run `safe-uninstall --python {venv.python} recover` first" in dead.stderr
