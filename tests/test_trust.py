"""Never lose a package, even under attack: what the tool trusts, and what it checks.

Each test sets up something hostile or shared, runs the real command, then compares every file
inside the environment and outside it (the other environment, a sibling folder, the hostile
folder) with what was there before.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from safeuninstall.base.cachefile import FileStamp
from safeuninstall.state import locks, stash
from safeuninstall.state.layout import SNAPSHOTS, SnapshotFolder, stash_of
from safeuninstall.state.store import Store
from safeuninstall.transaction import restore
from tests.conftest import UV, MakeVenv, Venv, changed, stand_in_uv, tree

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

NOBODY = 65534
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a folder another user's takes root (CI runs as root)"
)


def _no_traceback(*runs: object) -> None:
    for run in runs:
        assert "Traceback" not in getattr(run, "stderr", ""), run


def _stashed(state: Path, snapshot: str, pin: tuple[str, str], venv: Venv, file: str) -> Path:
    """A file as a stash keeps it."""
    site = venv.site_packages.relative_to(venv.root)
    return Store(state).folder(snapshot).package_stash(*pin) / site / file


def _in_snapshot(snapshot_id: str) -> str:
    """The start of the ``tree`` keys of a snapshot's files, in its state folder's tree."""
    return f"{SNAPSHOTS}/{snapshot_id}"


# -- 3. two environments, one state folder -----------------------------------------------------


@pytest.fixture
def two_venvs(make_venv: MakeVenv, tmp_path: Path) -> tuple[Venv, Venv, Path]:
    """A and B with one --state-dir; A's leftpad removed, so A's snapshot 0001 holds the only
    copy of its files."""
    a = make_venv("leftpad", "requests")
    b = make_venv("leftpad", "toolpkg")
    shared = tmp_path / "one-state-for-both"
    removed = a.tool("--state-dir", str(shared), "--no-probe", "leftpad")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    return a, b, shared


def test_prune_in_one_environment_keeps_the_other_environments_snapshots(
    two_venvs: tuple[Venv, Venv, Path],
) -> None:
    a, b, shared = two_venvs
    for _ in range(2):  # 0002 and 0003, B's
        assert b.tool("--state-dir", str(shared), "snapshot").returncode == 0
    a_before, b_before, state_before = tree(a.root), b.file_hashes(), tree(shared)

    run = b.tool("--state-dir", str(shared), "prune", "--keep", "1", "--json")

    _no_traceback(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [r["id"] for r in run.json()["removed"]] == ["0002"]  # type: ignore[index]
    gone = changed(state_before, tree(shared))
    assert gone and all(path.startswith(_in_snapshot("0002")) for path in gone), gone
    assert changed(a_before, tree(a.root)) == []
    assert b.file_hashes() == b_before
    # A's only copy is there and still works.
    back = a.tool("--state-dir", str(shared), "rollback", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert a.installed()["leftpad"] == "1.0"


def test_one_environments_unfinished_operation_does_not_block_another(
    two_venvs: tuple[Venv, Venv, Path],
) -> None:
    a, b, shared = two_venvs
    killed = a.tool(
        "--state-dir", str(shared), "--no-probe", "requests", SAFE_UNINSTALL_FAULT="probe:KILL"
    )
    assert killed.returncode == -9
    a_before, b_before = tree(a.root), b.file_hashes()
    # A's snapshots; the caches (of RECORDs, of Requires-Dist...) are the state folder's,
    # shared (B adds its own)
    a_snapshots = {
        k: v
        for k, v in tree(shared).items()
        if k.startswith(f"{SNAPSHOTS}/") and not k.startswith(_in_snapshot("0003"))
    }
    assert a_snapshots

    run = b.tool("--state-dir", str(shared), "--no-probe", "toolpkg")

    _no_traceback(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "did not finish" not in run.stderr
    assert "toolpkg" not in b.installed()
    assert {k: v for k, v in b_before.items() if "toolpkg" not in k} == b.file_hashes()
    after = tree(shared)
    assert {k: after.get(k) for k in a_snapshots} == a_snapshots  # A's snapshots untouched
    assert changed(a_before, tree(a.root)) == []
    # A's own operation is still there to recover.
    recovered = a.tool("--state-dir", str(shared), "recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "requests" in a.installed()


def test_a_plain_rollback_returns_to_this_environments_latest_snapshot(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    a = make_venv("leftpad", "requests")
    b = make_venv("leftpad", "toolpkg")
    shared = tmp_path / "one-state-for-both"
    b_whole = b.file_hashes()
    assert b.tool("--state-dir", str(shared), "--no-probe", "toolpkg").returncode == 0  # 0001
    assert a.tool("--state-dir", str(shared), "--no-probe", "leftpad").returncode == 0  # 0002
    a_before, state_before = tree(a.root), tree(shared)

    run = b.tool("--state-dir", str(shared), "rollback", "--no-probe", "--json")

    _no_traceback(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.json()["snapshot"] == "0001"
    assert b.file_hashes() == b_whole
    assert changed(a_before, tree(a.root)) == []
    after = tree(shared)
    assert {k: after.get(k) for k in state_before if k.startswith(_in_snapshot("0002"))} == {
        k: v for k, v in state_before.items() if k.startswith(_in_snapshot("0002"))
    }


# -- 6. a state folder another user can change --------------------------------------------------


def _hostile(folder: Path, how: str) -> None:
    """``folder`` as another user could have left it: theirs, or writable by anyone."""
    if how == "owned by another user":
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    else:
        folder.chmod(0o777)


@as_root
def test_recover_in_a_state_folder_of_another_user_deletes_nothing(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The other user pre-creates the state folder: a journal at step "stash" whose snapshots
    folder is a link to a folder of root's. recover deleted root's folder."""
    venv = make_venv("leftpad")
    hostile = tmp_path / "hostile"
    precious = tmp_path / "roots-folder"
    (precious / "0001").mkdir(parents=True)
    (precious / "0001" / "keep.txt").write_text("root's\n")
    hostile.mkdir()
    Store(hostile).snapshots_dir.symlink_to(precious)
    journal = {
        "operation": "uninstall",
        "snapshot": "0001",
        "step": "stash",
        "pid": 4242,
        "started": "2026-11-30T10:00:00+00:00",
    }
    (hostile / "journal.toml").write_text(tomli_w.dumps(journal))
    _hostile(hostile, "owned by another user")
    venv_before, hostile_before, precious_before = tree(venv.root), tree(hostile), tree(precious)

    run = venv.tool("--state-dir", str(hostile), "recover", "--no-probe")

    _no_traceback(run)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"the state folder {hostile} belongs to uid {NOBODY}" in run.stderr
    assert changed(precious_before, tree(precious)) == []
    assert changed(hostile_before, tree(hostile)) == []
    assert changed(venv_before, tree(venv.root)) == []


@pytest.mark.parametrize("folder", ["state folder", "snapshots folder"])
@pytest.mark.parametrize("how", ["owned by another user", "writable by anyone"])
def test_a_state_folder_another_user_can_change_is_refused(
    make_venv: MakeVenv, tmp_path: Path, folder: str, how: str
) -> None:
    """A stash file replaced by a link to the other user's code: a rollback linked it into the
    venv, to run as root."""
    if how == "owned by another user" and os.geteuid() != 0:
        pytest.skip("making a folder another user's takes root (CI runs as root)")
    venv = make_venv("leftpad", "requests")
    whole = venv.file_hashes()
    state = tmp_path / "state"
    assert venv.tool("--state-dir", str(state), "--no-probe", "leftpad").returncode == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "leftpad.py").write_text("raise SystemExit('their code, run as root')\n")
    kept = _stashed(state, "0001", ("leftpad", "1.0"), venv, "leftpad.py")
    kept.unlink()
    kept.symlink_to(theirs / "leftpad.py")
    _hostile(state if folder == "state folder" else Store(state).snapshots_dir, how)
    before, state_before, theirs_before = tree(venv.root), tree(state), tree(theirs)
    assert whole != venv.file_hashes()  # leftpad is removed

    runs = [
        venv.tool("--state-dir", str(state), "rollback", "--no-probe"),
        venv.tool("--state-dir", str(state), "snapshots"),
        venv.tool("--state-dir", str(state), "--no-probe", "requests"),
    ]

    _no_traceback(*runs)
    for run in runs:
        assert run.returncode == 1, run.stdout + run.stderr
        where = state if folder == "state folder" else Store(state).snapshots_dir
        assert str(where) in run.stderr
        assert ("chown" if how == "owned by another user" else "chmod go-w") in run.stderr
    assert changed(before, tree(venv.root)) == []
    assert changed(state_before, tree(state)) == []
    assert changed(theirs_before, tree(theirs)) == []


def test_the_tools_own_state_folders_pass_the_check(make_venv: MakeVenv, tmp_path: Path) -> None:
    """What the tool creates is private: the default folder and one named by --state-dir."""
    venv = make_venv("leftpad")
    for args in ((), ("--state-dir", str(tmp_path / "a" / "b"))):
        run = venv.tool(*args, "snapshot")
        assert run.returncode == 0, run.stdout + run.stderr
        again = venv.tool(*args, "snapshots")
        assert again.returncode == 0 and "0001" in again.stdout, again.stdout + again.stderr
    for state in (venv.state.root, tmp_path / "a" / "b"):
        for path in (state, Store(state).snapshots_dir):
            info = path.stat()
            assert info.st_uid == os.geteuid() and not info.st_mode & 0o022, path


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
    kept = _stashed(venv.state.root, "0001", ("leftpad", "1.0"), venv, "leftpad.py")
    kept.unlink()
    kept.symlink_to(sibling / "leftpad.py")
    sibling_before = tree(sibling)

    run = venv.tool_reinstalling("rollback", "--no-probe", "--json")

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
    from safeuninstall.state.snapshot import PackageStash, StashedFile

    snapshot, env = SnapshotFolder(tmp_path / "0001"), tmp_path / "env"
    folder = snapshot.package_stash("pkg", "1.0")
    folder.mkdir(parents=True)
    env.mkdir()
    (folder / "mod.py").write_text("good = True\n")
    files = (StashedFile("mod.py", stash.sha256_file(folder / "mod.py"), 12),)
    kept = PackageStash(folder=stash_of("pkg", "1.0"), files=files, complete=True)
    checked = stash.check_stash(kept, snapshot)
    assert checked.problems == []
    (folder / "mod.py").unlink()
    (folder / "mod.py").write_text("good = False\n")  # swapped

    with pytest.raises(OSError, match="changed since its check"):
        stash.restore_files(
            kept,
            snapshot=snapshot,
            env_root=env,
            displaced_dir=snapshot.displaced_dir,
            checked=checked,
        )
    assert not (env / "mod.py").exists()
    assert [p.name for p in env.iterdir()] == []


def test_stash_verified_record_does_not_vouch_for_a_symlink(tmp_path: Path) -> None:
    """stash-verified.json names a file's identity; a link there is refused before it is read."""
    from safeuninstall.state.snapshot import PackageStash, StashedFile

    snapshot = SnapshotFolder(tmp_path / "0001")
    folder = snapshot.package_stash("pkg", "1.0")
    folder.mkdir(parents=True)
    (tmp_path / "theirs.py").write_text("good = True\n")
    digest = stash.sha256_file(tmp_path / "theirs.py")
    (folder / "mod.py").symlink_to(tmp_path / "theirs.py")
    stamp = FileStamp.of((folder / "mod.py").lstat())
    verified = {f"{stash_of('pkg', '1.0')}/mod.py": (stamp, digest)}
    kept = PackageStash(stash_of("pkg", "1.0"), (StashedFile("mod.py", digest, 12),), complete=True)
    checked = stash.check_stash(kept, snapshot, verified)
    assert [p.problem for p in checked.problems] == ["stashed copy is a symbolic link"]
    assert checked.accepted == {}


# -- 13. one lock and one journal per environment, whatever the state folder --------------------


def _uv_that_waits(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A uv that, on ``pip uninstall``, says so through the FIFO ``ready`` and waits until the
    FIFO ``release`` is opened and closed by the test, then does the real uninstall."""
    ready, release = tmp_path / "ready", tmp_path / "release"
    os.mkfifo(ready)
    os.mkfifo(release)
    wrapper = stand_in_uv(
        tmp_path / "uv-that-waits",
        f"release = os.open({str(release)!r}, os.O_RDONLY | os.O_NONBLOCK)\n"
        f"with open({str(ready)!r}, 'w') as note:\n"
        "    note.write('x')\n"
        "select.select([release], [], [], 120)",
        imports="select",
    )
    return wrapper, ready, release


def test_a_run_with_another_state_folder_waits_for_the_environments_lock(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad", "toolpkg")
    elsewhere = tmp_path / "elsewhere"
    uv, ready, release = _uv_that_waits(tmp_path)
    before = venv.file_hashes()
    listening = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    env = {
        **os.environ,
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "SAFE_UNINSTALL_UV": str(uv),
        "SAFE_UNINSTALL_STATE_DIR": str(elsewhere),
    }
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "safeuninstall",
            "--python",
            str(venv.root),
            "--no-probe",
            "leftpad",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert select.select([listening], [], [], 120)[0], "the first run never reached uv"
        assert os.read(listening, 1) == b"x"
        # The first run holds the environment, its uninstall under way; this one has no
        # SAFE_UNINSTALL_STATE_DIR, so another state folder.
        second = venv.tool("--no-probe", "--lock-timeout", "0", "toolpkg")
    finally:
        os.close(os.open(release, os.O_WRONLY | os.O_NONBLOCK))
        out, err = first.communicate(timeout=120)
        os.close(listening)

    _no_traceback(second)
    assert "Traceback" not in err
    assert second.returncode == 1, second.stdout + second.stderr
    assert "another safe-uninstall operation is running on this environment" in second.stderr
    assert first.returncode == 0, out + err
    assert venv.file_hashes() == {k: v for k, v in before.items() if "leftpad" not in k}
    assert "toolpkg" in venv.installed()
    assert not (venv.root / ".safe-uninstall").exists()  # the second run made no snapshot


def test_an_unfinished_operation_is_seen_whatever_the_state_folder(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad", "toolpkg", "requests")
    whole = venv.file_hashes()
    elsewhere = str(tmp_path / "elsewhere")
    killed = venv.tool(
        "--no-probe",
        "leftpad",
        SAFE_UNINSTALL_STATE_DIR=elsewhere,
        SAFE_UNINSTALL_FAULT="probe:KILL",
    )
    assert killed.returncode == -9
    before, state_before = venv.file_hashes(), tree(Path(elsewhere))

    runs = [venv.tool("--no-probe", "toolpkg"), venv.tool("recover", "--no-probe")]

    _no_traceback(*runs)
    for run in runs:
        assert run.returncode == 1, run.stdout + run.stderr
        assert "did not finish" in run.stderr
        assert f"--state-dir {elsewhere} recover" in run.stderr
    assert venv.file_hashes() == before
    assert changed(state_before, tree(Path(elsewhere))) == []
    assert not venv.state.snapshots_dir.exists()
    # The way out that the message gives works.
    recovered = venv.tool("--state-dir", elsewhere, "recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert venv.file_hashes() == whole


def test_the_tool_holds_uvs_lock_while_it_writes_into_the_venv(make_venv: MakeVenv) -> None:
    """uv's own lock, <venv>/.lock (a flock): held by the tool for the block, taken by no one
    else meanwhile; not to be had while another holds it."""
    venv = make_venv("leftpad")
    other = os.open(venv.root / ".lock", os.O_RDONLY)  # as a uv of someone else's would
    try:
        with locks.installer_lock(str(venv.root), 0) as missing:
            assert missing is None
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again after the block
        with locks.installer_lock(str(venv.root), 0) as missing:
            assert missing is not None and "was still held after 0 s" in missing
    finally:
        os.close(other)


def test_a_restore_while_another_uv_holds_the_venv_goes_on_and_says_so(
    make_venv: MakeVenv,
) -> None:
    """Another uv holds <venv>/.lock throughout: the tool's own uv goes on after its
    UV_LOCK_TIMEOUT (as uv does), the restore after --lock-timeout, with a note."""
    venv = make_venv("requests", "leftpad")
    before = venv.file_hashes()
    held = os.open(venv.root / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run = venv.tool(
            "--json",
            "--lock-timeout",
            "0.5",
            "--probe",
            "import leftpad",
            "leftpad",
            UV_LOCK_TIMEOUT="1",
        )
    finally:
        os.close(held)

    _no_traceback(run)
    data = run.json()
    assert run.returncode == 3, data
    notes = data["restore"]["notes"]  # type: ignore[index]
    assert f"uv's lock {venv.root / '.lock'} was still held after 0.5 s" in str(notes)
    assert venv.file_hashes() == before


# -- verification that proves what it says -------------------------------------------------------


def test_the_final_comparison_of_a_restored_file_reads_its_bytes(tmp_path: Path) -> None:
    """A file that is not the inode a restore checked (replaced after it, or a copy made on
    another filesystem) is taken only with the bytes that were accepted."""
    placed = tmp_path / "mod.py"
    placed.write_text("good = True\n")
    accepted = stash.sha256_file(placed)
    other = tmp_path / "other.py"
    other.write_text("good = False\n")
    assert restore._holds(placed, accepted, set())
    assert not restore._holds(other, accepted, set())
    checked = stash.file_id(placed.stat())
    assert stash._is_checked(placed, checked, "0" * 64)  # the very inode checked
    assert stash._is_checked(Path(shutil.copy(placed, tmp_path / "copy.py")), checked, accepted)
    assert not stash._is_checked(other, checked, accepted)


def test_a_locally_modified_file_is_not_restored_as_the_packaged_one(make_venv: MakeVenv) -> None:
    """leftpad.py was edited on this machine before the removal: the stash hasher recorded
    those bytes. Its stash copy replaced since by the packaged bytes (its RECORD hash) is not
    what was installed: the stash is not used, and the restore does not claim it."""
    venv = make_venv("requests", "leftpad")
    patched = venv.site_packages / "leftpad.py"
    packaged = patched.read_bytes()
    patched.unlink()  # a new file, as an editor saves one: uv's cache is not written through
    patched.write_bytes(packaged + b"# patched on this machine\n")
    removed = venv.tool("--probe", "import requests", "leftpad")  # the hasher runs to its end
    assert removed.returncode == 0, removed.stdout + removed.stderr
    kept = _stashed(venv.state.root, "0001", ("leftpad", "1.0"), venv, "leftpad.py")
    assert kept.read_bytes().endswith(b"# patched on this machine\n")
    kept.unlink()
    kept.write_bytes(packaged)

    run = venv.tool_reinstalling("rollback", "--no-probe", "--json")

    data = run.json()
    assert run.returncode == 0, data
    restored = data["restore"]
    assert isinstance(restored, dict)
    assert restored["from_stash"] == [] and restored["reinstalled"] == ["leftpad==1.0"]
    assert "leftpad.py: stashed copy does not match its sha256" in str(restored["notes"])
    assert patched.read_bytes() == packaged


def _drop_from_stash(venv: Venv, snapshot_id: str, name: str, file: str) -> None:
    """``file`` of ``name`` left out of the stash of ``snapshot_id``, as if it was never kept:
    not in the folder, not in the snapshot's record."""
    import msgspec

    from safeuninstall.state.store import Store

    store = Store(venv.root / ".safe-uninstall")
    snap = store.load(snapshot_id)
    entries = []
    for entry in snap.packages:
        if entry.name == name and entry.stash is not None:
            files = tuple(f for f in entry.stash.files if not f.path.endswith(file))
            assert len(files) == len(entry.stash.files) - 1
            entry = msgspec.structs.replace(
                entry, stash=msgspec.structs.replace(entry.stash, files=files)
            )
        entries.append(entry)
    folder = store.folder(snapshot_id)
    folder.snapshot_file.unlink()
    folder.twin_file.unlink(missing_ok=True)
    folder.head_file.unlink(missing_ok=True)
    store.save(msgspec.structs.replace(snap, packages=tuple(entries)))
    (_stashed(store.root, snapshot_id, (name, "1.0"), venv, file)).unlink()


def test_a_restored_distribution_is_verified_whole_not_only_what_its_stash_held(
    make_venv: MakeVenv,
) -> None:
    """One RECORD file of multipkg is not in its stash: the rollback links back all the rest,
    and its proof, which checks each restored distribution against its RECORD, finds the
    file missing; the rollback is undone, not called restored and verified."""
    venv = make_venv("requests", "multipkg")
    assert venv.tool("--no-probe", "multipkg").returncode == 0
    before = venv.file_hashes()
    _drop_from_stash(venv, "0001", "multipkg", "multipkg/a/mod1.py")

    run = venv.tool("rollback", "1", "--no-probe", "--json")

    data = run.json()
    assert run.returncode != 0, data
    assert data["outcome"] == "rollback-failed-restored"
    verification = data["verification"]
    assert isinstance(verification, dict)
    assert verification["ok"] is False
    assert verification["hash_mismatches"] == ["multipkg==1.0: multipkg/a/mod1.py (missing)"]
    assert venv.file_hashes() == before  # undone: back as the rollback found it


def test_a_record_file_gone_before_the_removal_is_not_asked_back(make_venv: MakeVenv) -> None:
    """A file its RECORD lists was deleted by hand before the removal: the stash says so, and
    the proof of the restore does not ask for it."""
    venv = make_venv("requests", "multipkg")
    (venv.site_packages / "multipkg" / "a" / "mod1.py").unlink()
    before = venv.file_hashes()

    run = venv.tool("--json", "--probe", "import multipkg.a.mod2", "multipkg")

    data = run.json()
    assert run.returncode == 3, data
    assert data["verification"]["ok"] is True  # type: ignore[index]
    assert venv.file_hashes() == before


def test_a_wrong_byte_in_a_reinstalled_distribution_is_reported(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The wheel the reinstall takes holds a leftpad.py that its RECORD does not vouch for:
    the restore's proof hashes every file of a reinstalled distribution against its RECORD."""
    import zipfile

    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    (venv.root / ".safe-uninstall" / "snapshots" / "0001" / "stash").rename(tmp_path / "gone")
    house = tmp_path / "house"
    house.mkdir()
    (good,) = venv.wheelhouse.glob("leftpad-1.0-*.whl")
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(house / good.name, "w") as bad:
        for info in source.infolist():
            data = source.read(info)
            bad.writestr(
                info, data.replace(b"' '", b"'_'") if info.filename == "leftpad.py" else data
            )

    run = venv.tool(
        "rollback", "1", "--no-probe", "--json", UV_NO_INDEX="1", UV_FIND_LINKS=str(house)
    )

    data = run.json()
    assert run.returncode != 0, data
    verification = data["verification"]
    assert isinstance(verification, dict)
    assert verification["hash_mismatches"] == ["leftpad==1.0: leftpad.py"]


def test_prune_keeps_the_latest_snapshot_and_its_stash(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001
    assert venv.tool("--no-probe", "toolpkg").returncode == 0  # 0002, the latest
    snapshots = venv.root / ".safe-uninstall" / "snapshots"
    latest = tree(snapshots / "0002")

    run = venv.tool("prune", "--max-size", "0", "--drop-only-copies", "--json")

    assert run.returncode == 0, run.stdout + run.stderr
    assert [r["id"] for r in run.json()["removed"]] == ["0001"]  # type: ignore[index]
    assert tree(snapshots / "0002") == latest
    back = venv.tool("rollback", "2", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert "toolpkg" in venv.installed()
