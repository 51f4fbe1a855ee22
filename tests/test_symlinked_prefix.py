"""A venv reached through a symbolic link: the snapshots taken that way stay the venv's once
the link is gone (listed, chosen by a plain rollback), as those taken by its own path are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, run_tool

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def test_a_snapshot_taken_through_a_link_stays_the_venvs(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("requests", "leftpad")
    link = tmp_path / "link"
    link.symlink_to(venv.root)
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    removed = run_tool("--python", str(link), "--json", "--no-probe", "leftpad", env=env)
    assert removed.json()["outcome"] == "removed", removed.stdout + removed.stderr
    link.unlink()
    listed = venv.tool("snapshots", "--json").json()["snapshots"]
    assert isinstance(listed, list)
    assert [s["id"] for s in listed] == ["0001"], listed
    back = venv.tool("--json", "rollback").json()
    assert back["outcome"] == "rolled-back", back
    assert "leftpad" in venv.installed()
