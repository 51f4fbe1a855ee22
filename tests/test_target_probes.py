"""A probe of a --target folder: the interpreter runs the folder's packages first on its path,
and its own site-packages after them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Run, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _in_target(venv: Venv, folder: Path, *names: str) -> None:
    venv.uv(
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--target",
        str(folder),
        "--no-index",
        "--find-links",
        str(venv.wheelhouse),
        *names,
    )


def _remove(venv: Venv, folder: Path, tmp_path: Path, *args: str) -> Run:
    return venv.tool("--target", str(folder), *args, XDG_STATE_HOME=str(tmp_path / "state"))


def test_a_failed_probe_names_the_stash_that_holds_the_module(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv()
    folder = tmp_path / "tgt"
    _in_target(venv, folder, "leftpad")

    run = _remove(venv, folder, tmp_path, "--probe", "import leftpad", "leftpad")

    assert run.returncode == 3, run.stdout + run.stderr
    assert (
        "diagnosis: missing module leftpad: provided by leftpad==1.0, kept in snapshot 0001"
        in run.stdout
    )
    assert (folder / "leftpad.py").exists()


def test_a_probe_that_passes_on_the_interpreter_s_own_copy_says_so(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad")  # the interpreter's own copy
    folder = tmp_path / "tgt"
    _in_target(venv, folder, "leftpad")

    run = _remove(venv, folder, tmp_path, "--probe", "import leftpad", "leftpad")

    assert run.returncode == 0, run.stdout + run.stderr
    own = venv.site_packages / "leftpad.py"
    assert (
        f"the probe passed, but leftpad (of leftpad, removed from {folder}) is also in the "
        f"interpreter's own site-packages, {own}: an import finds that copy" in run.stdout
    )
    assert not (folder / "leftpad.py").exists()


def test_a_derived_probe_that_passes_on_the_interpreter_s_own_copy_says_so(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The derived probe imports what requires the removed distribution (requests); it passes
    because urllib3 is also in the interpreter's own site-packages, and the report says so."""
    venv = make_venv("urllib3==2.3.0")
    folder = tmp_path / "tgt"
    _in_target(venv, folder, "requests", "urllib3==2.3.0")

    run = _remove(venv, folder, tmp_path, "--allow-unmet", "urllib3")

    assert run.returncode == 0, run.stdout + run.stderr
    assert "import requests" in run.stdout  # the derived probe's candidate
    assert (
        f"the probe passed, but urllib3 (of urllib3, removed from {folder}) is also in the "
        f"interpreter's own site-packages, {venv.site_packages / 'urllib3'}" in run.stdout
    )
