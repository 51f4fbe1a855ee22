"""Installed distributions that break the standards but not the environment (issue 12 #4): a
version that is not PEP 440, a name that is not PEP 508. The tool records what is installed;
its own snapshots must stay readable, so a killed removal is still recovered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _rewrite_metadata(venv: Venv, dist_info: str, old: str, new: str) -> None:
    metadata = venv.site_packages / dist_info / "METADATA"
    text = metadata.read_text()
    assert old in text
    metadata.unlink()  # a new file: the old one is a hard link into uv's cache
    metadata.write_text(text.replace(old, new))


def test_a_killed_removal_beside_odd_installs_is_recovered(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    _rewrite_metadata(venv, "toolpkg-1.0.dist-info", "Version: 1.0", "Version: 1.0-custom build")
    _rewrite_metadata(venv, "leftpad-1.0.dist-info", "Name: leftpad", "Name: left pad")
    hashes = venv.file_hashes()

    killed = venv.tool(
        "--allow-unmet", "--probe", "import requests", "urllib3", SAFE_UNINSTALL_FAULT="probe:KILL"
    )
    assert killed.returncode == -9

    listed = json.loads(venv.tool("snapshots", "--json").stdout)["snapshots"]
    assert [s["outcome"] for s in listed] != ["unreadable"], listed
    recovered = venv.tool("recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert venv.file_hashes() == hashes
    shown = venv.tool("show", "--json").stdout
    pins = {f"{p['name']}=={p['version']}" for p in json.loads(shown)["packages"]}
    assert {"toolpkg==1.0-custom build", "left pad==1.0"} <= pins


def test_a_dist_info_whose_name_is_a_path_is_not_a_distribution(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Its name would become a stash folder: ``../../x`` must not. It is left out, as a
    folder that is not a distribution, and the removal of another package goes ahead."""
    venv = make_venv("requests", "leftpad", "toolpkg")
    _rewrite_metadata(venv, "toolpkg-1.0.dist-info", "Name: toolpkg", "Name: ../../../outside")
    outside = venv.root.parent / "outside-1.0"
    run = venv.tool("--json", "--probe", "import requests", "leftpad")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not outside.exists()
    snapshot = venv.snapshot("0001").snapshot_file
    assert "outside" not in snapshot.read_text()
