"""Never lose a package, even under attack (issue 12): what the tool trusts, and what it checks.

Each test sets up something hostile or shared, runs the real command, then compares every file
inside the environment and outside it (the other environment, a sibling folder, the hostile
folder) with what was there before.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, changed, tree

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _no_traceback(*runs: object) -> None:
    for run in runs:
        assert "Traceback" not in getattr(run, "stderr", ""), run


# -- 7. export -o PATH ---------------------------------------------------------------------------


def _make(kind: str, path: Path, target: Path) -> None:
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a /dev/null of its own


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_export_never_replaces_what_is_not_a_regular_file(
    make_venv: MakeVenv, tmp_path: Path, kind: str
) -> None:
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("creating a device node takes root (CI runs as root)")
    venv = make_venv("leftpad")
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    assert venv.tool("snapshots").returncode == 0  # caches the interpreter's answer
    out, sibling = tmp_path / "out", tmp_path / "sibling"
    out.mkdir()
    sibling.mkdir()
    (sibling / "precious.txt").write_text("keep me\n")
    _make(kind, out / "requirements.txt", sibling / "precious.txt")
    before, out_before, sibling_before = tree(venv.root), tree(out), tree(sibling)

    run = venv.tool("export", "-o", str(out / "requirements.txt"))

    _no_traceback(run)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{out / 'requirements.txt'} exists and is not a regular file" in run.stderr
    assert changed(out_before, tree(out)) == []
    assert changed(sibling_before, tree(sibling)) == []
    assert changed(before, tree(venv.root)) == []


def test_export_replaces_a_regular_file(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    target = tmp_path / "requirements.txt"
    target.write_text("old\n")
    run = venv.tool("export", "-o", str(target))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "leftpad==1.0" in target.read_text()
