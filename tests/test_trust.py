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

from safeuninstall import restore, stash
from tests.conftest import UV, MakeVenv, Venv, changed, tree

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _no_traceback(*runs: object) -> None:
    for run in runs:
        assert "Traceback" not in getattr(run, "stderr", ""), run


def _stashed(state: Path, snapshot: str, name: str, venv: Venv, file: str) -> Path:
    """A file as a stash keeps it."""
    site = venv.site_packages.relative_to(venv.root)
    return state / "snapshots" / snapshot / "stash" / name / site / file


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


# -- 8. a stash file that is a symlink -----------------------------------------------------------


def test_a_symlink_in_the_stash_is_reinstalled_not_linked_back(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad", "requests")
    whole = venv.file_hashes()
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (sibling / "leftpad.py").write_text("def pad(s): return 'not the real one'\n")
    kept = _stashed(venv.root / ".safe-uninstall", "0001", "leftpad-1.0", venv, "leftpad.py")
    kept.unlink()
    kept.symlink_to(sibling / "leftpad.py")
    sibling_before = tree(sibling)

    run = venv.tool(
        "rollback",
        "--no-probe",
        "--json",
        UV_OFFLINE="0",
        UV_NO_INDEX="1",
        UV_FIND_LINKS=str(venv.wheelhouse),
    )

    _no_traceback(run)
    data = run.json()
    assert run.returncode == 0, data
    restored = data["restore"]
    assert isinstance(restored, dict)
    assert restored["from_stash"] == [] and restored["reinstalled"] == ["leftpad==1.0"]
    assert "leftpad.py: stashed copy is a symbolic link" in str(restored["notes"])
    assert not (venv.site_packages / "leftpad.py").is_symlink()
    assert venv.file_hashes() == whole
    assert changed(sibling_before, tree(sibling)) == []


def test_verification_does_not_take_a_symlink_for_a_verified_file(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    digest = stash.sha256_file(real)
    assert restore._holds(real, digest, set())
    assert not restore._holds(link, digest, set())
    verified = {stash.file_id(real.stat()), stash.file_id(link.lstat())}
    assert not restore._holds(link, digest, verified)


def test_a_stash_file_swapped_after_its_check_is_not_linked_back(tmp_path: Path) -> None:
    """Between the hash check and the link, the file is another: the restore refuses it."""
    from safeuninstall.snapshot import PackageStash, StashedFile

    snapshot_dir, env = tmp_path / "0001", tmp_path / "env"
    folder = snapshot_dir / "stash" / "pkg-1.0"
    folder.mkdir(parents=True)
    env.mkdir()
    (folder / "mod.py").write_text("good = True\n")
    files = (StashedFile("mod.py", stash.sha256_file(folder / "mod.py"), 12),)
    kept = PackageStash(folder="stash/pkg-1.0", files=files, complete=True)
    checked = stash.check_stash(kept, snapshot_dir)
    assert checked.problems == []
    (folder / "mod.py").unlink()
    (folder / "mod.py").write_text("good = False\n")  # swapped

    with pytest.raises(OSError, match="changed since its check"):
        stash.restore_files(
            kept,
            snapshot_dir=snapshot_dir,
            env_root=env,
            displaced_dir=tmp_path / "displaced",
            checked=checked,
        )
    assert not (env / "mod.py").exists()
    assert [p.name for p in env.iterdir()] == []


def test_stash_verified_record_does_not_vouch_for_a_symlink(tmp_path: Path) -> None:
    """stash-verified.json names a file's identity; a link there is refused before it is read."""
    from safeuninstall.snapshot import PackageStash, StashedFile

    snapshot_dir = tmp_path / "0001"
    folder = snapshot_dir / "stash" / "pkg-1.0"
    folder.mkdir(parents=True)
    (tmp_path / "theirs.py").write_text("good = True\n")
    digest = stash.sha256_file(tmp_path / "theirs.py")
    (folder / "mod.py").symlink_to(tmp_path / "theirs.py")
    info = (folder / "mod.py").lstat()
    verified = {"stash/pkg-1.0/mod.py": ((info.st_ino, info.st_size, info.st_mtime_ns), digest)}
    kept = PackageStash("stash/pkg-1.0", (StashedFile("mod.py", digest, 12),), complete=True)
    checked = stash.check_stash(kept, snapshot_dir, verified)
    assert [p.problem for p in checked.problems] == ["stashed copy is a symbolic link"]
    assert checked.accepted == {}
