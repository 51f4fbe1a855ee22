"""Hostile layouts (issue 12): what uv would really delete, what a stash shares with the
environment, and what a probe leaves running. Each test builds the layout, runs the command,
then compares every file inside the venv and outside it with what was there before."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv, running, tagged_processes
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def tree(root: Path, skip: Collection[Path] = ()) -> dict[str, str]:
    """sha256 of every file under ``root`` (a symlink: its target; none is followed), except
    bytecode caches and the folders in ``skip``."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and Path(folder, d) not in skip]
        for name in [*files, *(d for d in dirs if Path(folder, d).is_symlink())]:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def inside(venv: Venv) -> dict[str, str]:
    """The whole venv but the tool's own state: its folder (snapshots, caches), and the
    environment's lock and journal beside it."""
    own = (".safe-uninstall", ".safe-uninstall.lock", ".safe-uninstall.journal.toml")
    found = tree(venv.root, skip=[venv.root / ".safe-uninstall"])
    return {path: digest for path, digest in found.items() if path not in own}


def outside(venv: Venv, *also: Path) -> dict[str, str]:
    """Everything beside the venv in the test's folder, but the uv cache the tool is given
    (it may create it) and ``also``."""
    base = venv.root.parent
    return tree(base, skip=[venv.root, base / f"empty-uv-cache-{venv.root.name}", *also])


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text


# -- 2: one name, two dist-info folders ---------------------------------------------------------


def test_a_distribution_installed_twice_is_refused_before_any_change(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """uv removes every dist-info folder of a name (`uv pip uninstall` of a name installed twice
    says "Uninstalled 2 packages"); a snapshot holds one version per name, so the removal
    could never be undone: it is refused, naming both folders."""
    house = tmp_path / "house"
    build_wheel(house, "twice", "1.0", {"twice/__init__.py": "V = 1\n", "twice/old.py": ""})
    build_wheel(house, "twice", "2.0", {"twice/__init__.py": "V = 2\n", "twice/new.py": ""})
    venv = make_venv()
    venv.install("twice==1.0", find_links=house)
    other = tmp_path / "other-install"  # 2.0 installed elsewhere, then copied over 1.0
    venv.uv("pip", "install", "--target", str(other), "--no-index", "-f", str(house), "twice==2.0")
    shutil.copytree(other / "twice-2.0.dist-info", venv.site_packages / "twice-2.0.dist-info")
    for name in ("__init__.py", "new.py"):
        target = venv.site_packages / "twice" / name
        target.unlink(missing_ok=True)  # a new file: never write through uv's cache
        shutil.copy(other / "twice" / name, target)
    assert sorted(venv.installed()) == ["twice"]  # uv lists it once per folder, by name
    in_before, out_before = inside(venv), outside(venv)

    run = venv.tool("--probe", "import twice", "twice")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "twice-1.0.dist-info" in run.stderr and "twice-2.0.dist-info" in run.stderr
    assert "the environment was not changed" in run.stderr
    no_traceback(run.stdout, run.stderr)
    assert inside(venv) == in_before
    assert outside(venv) == out_before
    assert not list(venv.state.snapshots_dir.glob("0*"))


# -- 5: a RECORD path that a symlinked folder leads out of the environment ---------------------


def test_a_record_path_through_a_symlink_out_of_the_venv_is_refused(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    build_wheel(house, "sneaky", "1.0", {"sneaky/__init__.py": "X = 1\n", "sneaky/data.py": ""})
    venv = make_venv()
    venv.install("sneaky", find_links=house)
    elsewhere = tmp_path / "elsewhere"  # someone's files, outside the venv
    elsewhere.mkdir()
    package = venv.site_packages / "sneaky"
    shutil.copytree(package, elsewhere / "sneaky")  # new files: uv's cache is not theirs
    shutil.rmtree(package)
    package.symlink_to(elsewhere / "sneaky")
    in_before, out_before = inside(venv), outside(venv)
    assert any(key.startswith("elsewhere/sneaky/") for key in out_before)

    run = venv.tool("--probe", "import sneaky", "sneaky")

    assert run.returncode == 1, run.stdout + run.stderr
    rel = package.relative_to(venv.root)
    assert f"{rel}/__init__.py resolves outside the environment" in run.stderr
    assert "the environment was not changed" in run.stderr
    no_traceback(run.stdout, run.stderr)
    assert inside(venv) == in_before
    assert outside(venv) == out_before


# -- 14: a stash that shares an inode with an installed file -----------------------------------


def _private_copy(path: Path) -> None:
    """Give an installed file an inode of its own: uv hard-links from its cache, which the
    session's other venvs install from, and the edits below are made in place."""
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)


def _edit_in_place(path: Path) -> None:
    """As an editor that keeps hard links does (vim's backupcopy): the same inode, new bytes."""
    inode = path.stat().st_ino
    with open(path, "ab") as handle:
        handle.write(b"# edited in place after the snapshot\n")
    assert path.stat().st_ino == inode


def test_a_large_file_edited_through_its_stash_link_is_never_restored_as_the_original(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A stash shares each file's inode (a hard link: a copy would cost its size in time and
    disk, measured in docs/performance.md), so an edit in place changes the stash too. The check
    catches it: neither the changed stash of the snapshot nor a later snapshot's stash of the
    edited bytes is restored as the snapshot's; the rollback reinstalls the distribution."""
    house = tmp_path / "house"
    blob = bytes(range(256)) * 512  # 128 KiB: over the size that is copied
    build_wheel(house, "bulky", "1.0", {"bulky/__init__.py": "", "bulky/blob.bin": blob})
    venv = make_venv()
    venv.install("bulky", find_links=house)
    stored = venv.site_packages / "bulky" / "blob.bin"
    _private_copy(stored)
    assert venv.tool("snapshot").returncode == 0  # 0001
    in_before, out_before = inside(venv), outside(venv)
    kept = next(venv.snapshot("0001").path.rglob("blob.bin"))
    assert kept.stat().st_ino == stored.stat().st_ino  # the edit reaches the stash
    _edit_in_place(stored)
    assert venv.tool("--no-probe", "bulky").returncode == 0  # 0002 stashes the edited bytes

    run = venv.tool_reinstalling("rollback", "1", "--no-probe", "--json", find_links=house)

    data = run.json()
    assert run.returncode == 0, data
    restore = data["restore"]
    assert isinstance(restore, dict)
    assert restore["from_stash"] == [] and restore["reinstalled"] == ["bulky==1.0"]
    notes = "\n".join(restore["notes"])
    assert "stash of snapshot 0001 not used" in notes and "changed since the snapshot" in notes
    assert "stash of snapshot 0002 not used" in notes
    assert "restored as it was installed" not in notes
    no_traceback(run.stdout, run.stderr)
    assert inside(venv) == in_before
    assert outside(venv) == out_before


# -- 16: a probe that leaves a daemon behind ---------------------------------------------------


def test_a_probe_daemon_in_its_own_session_ends_with_the_probe(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    """Once leftpad is gone the probe starts two daemons in sessions of their own (setsid),
    one holding the probe's output pipes, one not, then hangs: the probe ends at its timeout
    plus a bounded grace, and neither daemon outlives the command."""
    venv = make_venv("leftpad")
    pids = tmp_path / "pids"
    pids.mkdir()
    probe = (
        "import importlib.util, pathlib, subprocess, time\n"
        "if importlib.util.find_spec('leftpad') is None:\n"
        "    held = subprocess.Popen(['setsid', 'sleep', '600'])\n"
        "    quiet = subprocess.Popen(['setsid', 'sleep', '600'], stdout=subprocess.DEVNULL,\n"
        "                             stderr=subprocess.DEVNULL)\n"
        f"    pathlib.Path({str(pids / 'daemons')!r}).write_text(f'{{held.pid}} {{quiet.pid}}')\n"
        "    time.sleep(600)\n"
    )
    in_before, out_before = inside(venv), outside(venv, pids)

    run = venv.tool("--json", "--probe-timeout", "4", "--probe", probe, "leftpad", **process_tag)

    data = run.json()
    assert run.returncode == 3, data
    (after,) = data["probes"]["after"]  # type: ignore[index]
    assert after["timed_out"] is True
    assert after["seconds"] < 4 + 3, after  # the timeout, the grace, and a loaded machine
    daemons = [int(pid) for pid in (pids / "daemons").read_text().split()]
    assert len(daemons) == 2
    assert not any(running(pid) for pid in daemons), "a daemon of the probe outlived it"
    assert tagged_processes(process_tag) == [], "a process of the command outlived it"
    no_traceback(run.stdout, run.stderr, json.dumps(data))
    assert inside(venv) == in_before
    assert outside(venv, pids) == out_before
