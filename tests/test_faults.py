"""The fault-injection suite: the real command killed or signalled at every step boundary of
uninstall, restore, rollback and recover; then the environment must be exactly as before.

``SAFE_UNINSTALL_FAULT=<step>:<KILL|INT|TERM>`` makes the process send itself that signal when it
reaches the step (safeuninstall/journal.py); ``stash-file:N:KILL`` and ``restore-file:N:KILL``
kill it inside a step, between the N-th file of a distribution and the next. "As before" means:
the installed set and the sha256 of every file in site-packages and bin are equal to what they
were before the operation started.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from safeuninstall.base import process
from safeuninstall.state import stash
from safeuninstall.state.layout import SnapshotFolder, stash_of
from safeuninstall.state.snapshot import PackageStash, StashedFile
from tests.conftest import (
    UV,
    MakeVenv,
    Run,
    Venv,
    assert_recovered,
    interrupted_at,
    probe_that_outlives,
    running,
    tagged_processes,
    tool_in_background,
    wait_for,
)

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

UNINSTALL_STEPS = ("stash", "uninstall", "probe", "restore", "restore-reinstall", "verify")
ROLLBACK_STEPS = ("stash", "uninstall", "restore", "restore-reinstall", "verify")
RECOVER_STEPS = (
    "recover",
    "recover:stash",
    "recover:restore",
    "recover:restore-reinstall",
    "recover:verify",
)


def journal(venv: Venv) -> Path:
    return venv.journal


@pytest.mark.parametrize("step", UNINSTALL_STEPS)
def test_kill_during_uninstall_then_recover(make_venv: MakeVenv, step: str) -> None:
    venv = make_venv("requests", "leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = venv.tool(
        "--allow-unmet",
        "--probe",
        "import requests",
        "urllib3",
        SAFE_UNINSTALL_FAULT=f"{step}:KILL",
    )

    assert killed.returncode == -9
    assert journal(venv).exists()
    if step in ("probe", "restore"):
        assert "urllib3" not in venv.installed()  # killed with the package removed
    refused = venv.tool("--no-probe", "leftpad")
    assert refused.returncode == 1
    assert "did not finish" in refused.stderr
    assert f"safe-uninstall --python {venv.python} recover" in refused.stderr
    assert "leftpad" in venv.installed()
    assert_recovered(venv, hashes, installed)
    # The environment is usable again: the next operation is not refused.
    assert venv.tool("--dry-run", "leftpad").returncode == 0


def test_kill_after_a_passing_probe_is_recovered_to_the_snapshot(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()
    killed = venv.tool("--probe", "import requests", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL")
    assert killed.returncode == -9
    assert "leftpad" not in venv.installed()
    assert_recovered(venv, hashes, installed)


def multipkg_files(venv: Venv) -> list[Path]:
    """multipkg's files in site-packages (its modules and dist-info), as they are now."""
    return sorted(
        path
        for pattern in ("multipkg/**/*.py", "multipkg-1.0.dist-info/*")
        for path in venv.site_packages.glob(pattern)
    )


def test_kill_between_two_files_of_the_stash_then_recover(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "multipkg")
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = venv.tool(
        "--probe", "import requests", "multipkg", SAFE_UNINSTALL_FAULT="stash-file:3:KILL"
    )

    assert killed.returncode == -9
    assert journal(venv).exists()
    stash = venv.snapshot("0001").package_stash("multipkg", "1.0")
    assert len([p for p in stash.rglob("*") if p.is_file()]) == 3  # killed half way
    assert venv.installed() == installed
    assert_recovered(venv, hashes, installed)
    assert not stash.exists()  # the partial stash is gone with its snapshot folder


def test_kill_between_two_files_of_a_restore_then_recover(make_venv: MakeVenv) -> None:
    """The probe fails after the removal; the restore is killed half way through the files."""
    venv = make_venv("requests", "multipkg")
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = venv.tool(
        "--probe", "import multipkg", "multipkg", SAFE_UNINSTALL_FAULT="restore-file:5:KILL"
    )

    assert killed.returncode == -9
    assert journal(venv).exists()
    assert len(multipkg_files(venv)) == 5  # five files back, the rest not yet
    assert "multipkg" not in venv.installed()  # METADATA comes back last
    assert_recovered(venv, hashes, installed)


def test_recover_deletes_the_temp_files_a_killed_restore_left_and_only_those(
    make_venv: MakeVenv,
) -> None:
    """A restore makes each file under a temp name beside its place, then renames it; the
    journal is written the same way. Killed between the two (planted here: a rollback's
    restore killed after its fifth file, the next file's temp made, and a journal write cut
    short), both stay; recover, which returns to the state without that distribution, deletes
    them and the folder made for them, and nothing of the user's that merely looks like one."""
    venv = make_venv("requests", "multipkg")
    assert venv.tool("--no-probe", "multipkg").returncode == 0
    venv.install("toolpkg")
    hashes, installed = venv.file_hashes(), venv.installed()
    killed = venv.tool("rollback", "1", "--no-probe", SAFE_UNINSTALL_FAULT="restore-file:5:KILL")
    assert killed.returncode == -9
    stash = venv.root / ".safe-uninstall" / "snapshots" / "0001" / "stash" / "multipkg-1.0"
    site = venv.site_packages.relative_to(venv.root)
    missing = [
        kept
        for kept in sorted((stash / site / "multipkg").rglob("*.py"))
        if not (venv.root / kept.relative_to(stash)).parent.exists()
    ]
    place = venv.root / missing[0].relative_to(stash)  # in a folder the restore had not made
    place.parent.mkdir()
    restore_tmp = place.with_name(f".{place.name}.safe-uninstall-tmp")
    os.link(missing[0], restore_tmp)
    journal_tmp = venv.root / f".{journal(venv).name}.k2_x9q0a.tmp"  # tempfile.mkstemp's
    journal_tmp.write_bytes(journal(venv).read_bytes())
    users = [
        venv.root / f".{journal(venv).name}.mine.tmp",  # not mkstemp's eight letters
        venv.root / f".{journal(venv).name}.K2X9Q0AB.tmp",  # nor its alphabet
        venv.site_packages / f"{place.name}.safe-uninstall-tmp",  # no leading dot
        venv.site_packages / ".unrelated.py.safe-uninstall-tmp",  # no file of a restore
    ]
    for path in users:
        path.write_text("the user's\n")

    recovered = venv.tool("recover", "--no-probe")

    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert not journal_tmp.exists()
    assert not restore_tmp.exists() and not (venv.site_packages / "multipkg").exists()
    assert all(path.read_text() == "the user's\n" for path in users)
    for path in users:
        path.unlink()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    said = f"left: {journal_tmp.name}, {restore_tmp.relative_to(venv.root)}"
    assert said in recovered.stdout


def test_kill_between_two_files_of_a_rollback_then_recover(make_venv: MakeVenv) -> None:
    """Recover returns to the state before the rollback: the files it had linked back of a
    distribution that state does not have must go again."""
    venv = make_venv("requests", "multipkg")
    whole = multipkg_files(venv)
    assert len(whole) > 10
    assert venv.tool("--no-probe", "multipkg").returncode == 0
    venv.install("toolpkg")
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = venv.tool("rollback", "1", "--no-probe", SAFE_UNINSTALL_FAULT="restore-file:5:KILL")

    assert killed.returncode == -9
    assert journal(venv).exists()
    assert len(multipkg_files(venv)) == 5
    assert_recovered(venv, hashes, installed)
    assert multipkg_files(venv) == []
    again = venv.tool("rollback", "1", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "multipkg" in venv.installed() and "toolpkg" not in venv.installed()
    assert multipkg_files(venv) == whole


def environment_folders(venv: Venv) -> list[str]:
    """Every folder of the environment, but the tool's state folder."""
    return sorted(
        str(p.relative_to(venv.root))
        for p in venv.root.rglob("*")
        if p.is_dir() and p.relative_to(venv.root).parts[0] != ".safe-uninstall"
    )


def test_recover_keeps_the_site_folder_a_half_rollback_leaves_empty(make_venv: MakeVenv) -> None:
    """The files a rollback killed half way linked back are taken back, and the folders it
    made for them: up to the site folder, which stays though empty, as do the folders above it
    and the scheme's other roots."""
    venv = make_venv("multipkg")
    for own in venv.site_packages.glob("_virtualenv*"):  # uv's own: removing multipkg
        own.unlink()  # then empties site-packages
    site = venv.site_packages
    assert venv.tool("--no-probe", "multipkg").returncode == 0
    assert sorted(p.name for p in site.iterdir()) == []
    folders = environment_folders(venv)

    killed = venv.tool("rollback", "1", "--no-probe", SAFE_UNINSTALL_FAULT="restore-file:5:KILL")

    assert killed.returncode == -9
    assert len(multipkg_files(venv)) == 5
    recovered = venv.tool("recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert site.is_dir() and list(site.iterdir()) == []
    assert environment_folders(venv) == folders
    assert venv.run_python("import sys").returncode == 0


def test_only_unowned_links_of_a_stash_copy_are_taken_back(make_venv: MakeVenv) -> None:
    """What recover deletes after an interrupted rollback: a file that is the inode of a stash
    copy of a distribution that is not installed, and that no installed distribution lists.
    A file another distribution lists (a shared path) stays, as does one that is another inode."""
    from safeuninstall.environment.interpreter import query_interpreter
    from safeuninstall.transaction.restore import remove_half_restored

    venv = make_venv("sharedlib-cu13", "leftpad")
    site = venv.site_packages.relative_to(venv.root)
    store = venv.state
    stash = store.folder("0001").package_stash("sharedlib-cu12", "1.0") / site
    (stash / "sharedlib").mkdir(parents=True)
    # sharedlib-cu12's files as a restore cut short leaves them: linked back from its stash
    shared = venv.site_packages / "sharedlib" / "__init__.py"  # sharedlib-cu13 lists it too
    os.link(shared, stash / "sharedlib" / "__init__.py")
    half = venv.site_packages / "sharedlib" / "cu12.txt"
    half.write_text("")
    os.link(half, stash / "sharedlib" / "cu12.txt")
    (venv.site_packages / "cu12-only").mkdir()
    alone = venv.site_packages / "cu12-only" / "data.txt"
    alone.write_text("cu12")
    (stash / "cu12-only").mkdir()
    os.link(alone, stash / "cu12-only" / "data.txt")
    # a file of the user's at a path the stash has too: not its inode, not the restore's doing
    (venv.site_packages / "notes.txt").write_text("mine\n")
    (stash / "notes.txt").write_text("the stash's\n")
    before = venv.file_hashes()

    removed = remove_half_restored(store, query_interpreter(venv.python, os.environ))

    expected = [f"{site}/cu12-only/data.txt", f"{site}/sharedlib/cu12.txt"]
    assert sorted(removed) == expected
    assert not (venv.site_packages / "cu12-only").exists()  # the folder it had made, too
    assert venv.file_hashes() == {k: v for k, v in before.items() if k not in expected}
    assert (stash / "cu12-only" / "data.txt").read_text() == "cu12"  # the bytes are kept


def prepared_for_rollback(make_venv: MakeVenv) -> Venv:
    """leftpad removed (snapshot 0001 has it), toolpkg added since: a rollback has both kinds."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    venv.install("toolpkg")
    return venv


@pytest.mark.parametrize("step", ROLLBACK_STEPS)
def test_kill_during_rollback_then_recover(make_venv: MakeVenv, step: str) -> None:
    venv = prepared_for_rollback(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = venv.tool("rollback", "1", "--no-probe", SAFE_UNINSTALL_FAULT=f"{step}:KILL")

    assert killed.returncode == -9
    assert journal(venv).exists()
    # Recover returns to the state before the rollback (its own snapshot); from there the
    # rollback can simply be run again.
    assert_recovered(venv, hashes, installed)
    again = venv.tool("rollback", "1", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "leftpad" in venv.installed() and "toolpkg" not in venv.installed()


@pytest.mark.parametrize("step", RECOVER_STEPS)
def test_kill_during_recover_then_recover_again(make_venv: MakeVenv, step: str) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    hashes, installed = venv.file_hashes(), venv.installed()
    assert (
        venv.tool("--no-probe", "leftpad", "toolpkg", SAFE_UNINSTALL_FAULT="probe:KILL").returncode
        == -9
    )

    second = venv.tool("recover", "--no-probe", SAFE_UNINSTALL_FAULT=f"{step}:KILL")

    assert second.returncode == -9
    assert journal(venv).exists()
    assert_recovered(venv, hashes, installed)


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
@pytest.mark.parametrize("step", UNINSTALL_STEPS)
def test_signal_during_uninstall_restores_before_exit(
    make_venv: MakeVenv, step: str, signal_name: str
) -> None:
    venv = make_venv("requests")
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool(
        "--json",
        "--allow-unmet",
        "--probe",
        "import requests",
        "urllib3",
        SAFE_UNINSTALL_FAULT=f"{step}:{signal_name}",
    )

    data = run.json()
    if step == "stash":
        assert run.returncode == 1, data  # nothing had been removed yet
        assert "before anything was removed" in str(data["error"])
    else:
        assert run.returncode == 3, data
        assert str(data["outcome"]).endswith("-restored")
    assert not journal(venv).exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
@pytest.mark.parametrize("step", ROLLBACK_STEPS)
def test_signal_during_rollback_finishes_it_first(
    make_venv: MakeVenv, step: str, signal_name: str
) -> None:
    venv = prepared_for_rollback(make_venv)
    run = venv.tool("rollback", "1", "--no-probe", SAFE_UNINSTALL_FAULT=f"{step}:{signal_name}")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "an interrupt arrived during the rollback; it finished first" in run.stdout
    assert not journal(venv).exists()
    assert set(venv.installed()) == {"requests", "urllib3", "leftpad"}


def test_eight_concurrent_operations_are_serialised(make_venv: MakeVenv, tmp_path: Path) -> None:
    from tests.wheels import build_wheel

    names = [f"tiny{i}" for i in range(8)]
    for name in names:
        build_wheel(tmp_path / "w", name, "1.0", {f"{name}.py": f"NAME = {name!r}\n"})
    venv = make_venv("leftpad")
    venv.install(*names, find_links=tmp_path / "w")
    env = {"UV_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "safeuninstall", "-p", str(venv.root), "--no-probe", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for name in names
    ]
    results = [(*p.communicate(timeout=120), p.returncode) for p in procs]
    assert [code for _, _, code in results] == [0] * 8, results
    assert set(venv.installed()) == {"leftpad"}
    # Serialised: snapshot k saw exactly the packages the k-1 earlier operations left.

    store = venv.state
    snapshots = [store.load(snapshot_id) for snapshot_id in store.ids()]
    assert [s.id for s in snapshots] == [f"{i:04d}" for i in range(1, 9)]
    for k, snap in enumerate(snapshots):
        tiny_left = {p.name for p in snap.packages} - {"leftpad"}
        assert len(tiny_left) == 8 - k
        assert len(snap.removed) == 1 and snap.removed[0] in tiny_left
        assert snap.outcome == "removed"
    # Everything removed can still come back, from the stashes alone.
    back = venv.tool("rollback", "1", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert set(venv.installed()) == {"leftpad", *names}


@pytest.mark.parametrize("step", ["uninstall", "probe"])
def test_an_error_after_the_uninstall_started_is_restored_not_raised(
    make_venv: MakeVenv, step: str
) -> None:
    venv = make_venv("requests")
    hashes, installed = venv.file_hashes(), venv.installed()
    run = venv.tool(
        "--json",
        "--allow-unmet",
        "--probe",
        "import requests",
        "urllib3",
        SAFE_UNINSTALL_FAULT=f"{step}:ENOSPC",
    )
    data = run.json()
    assert run.returncode == 1, data  # proven unchanged
    assert data["outcome"] == "error-restored"
    assert "No space left on device" in str(data["messages"])
    assert "Traceback" not in run.stderr
    assert not journal(venv).exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_probe_after_the_removal_kills_it_and_restores(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str], signal_number: int
) -> None:
    """The probe runs in a thread while the command waits: on Python 3.11/3.12 a wait cut short
    by Ctrl-C used to leave that thread, and its probe, running (a join that CPython marks done).
    A hang-up (the SSH session drops) takes the same path as Ctrl-C and SIGTERM."""
    venv = make_venv("requests", "leftpad")
    hashes = venv.file_hashes()
    started = tmp_path / "started"
    probe = probe_that_outlives(started, when_leftpad=False)
    proc = tool_in_background(venv, "--json", "--probe", probe, "leftpad", **process_tag)
    wait_for(started)
    assert tagged_processes(process_tag), "the probe should be running now"
    proc.send_signal(signal_number)
    out, err = proc.communicate(timeout=60)
    assert json.loads(out)["outcome"] == "interrupted-restored", err
    assert venv.file_hashes() == hashes
    assert tagged_processes(process_tag) == [], "the probe outlived the command"


def test_ctrl_c_during_the_baseline_kills_its_probe(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    venv = make_venv("requests", "leftpad")
    hashes = venv.file_hashes()
    started = tmp_path / "started"
    probe = probe_that_outlives(started, when_leftpad=True)
    proc = tool_in_background(venv, "--json", "--probe", probe, "leftpad", **process_tag)
    wait_for(started)
    # The snapshot is saved right before the command waits for the baseline; the probe runs.
    saved = venv.snapshot("0001").snapshot_file
    out, err = interrupted_at(proc, saved)
    assert proc.returncode == 1, out + err
    assert "nothing was changed" in out + err
    assert venv.file_hashes() == hashes
    assert not saved.parent.exists()  # the snapshot of a removal that never began is undone
    assert tagged_processes(process_tag) == [], "the baseline probe outlived the command"


def test_ctrl_c_while_the_stash_hasher_starts_writes_nothing_into_the_given_up_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C can cut short ``Thread.start``'s wait for the hasher's thread, which then runs
    anyway. The snapshot is given up (its folder deleted): the thread must write no record,
    which would bring the folder back ("could not delete the snapshot folder")."""
    snapshot = SnapshotFolder(tmp_path / "0001")
    folder = snapshot.package_stash("pkg", "1.0")
    folder.mkdir(parents=True)
    (folder / "mod.py").write_text("x = 1\n")
    digest = stash.sha256_file(folder / "mod.py")
    kept = PackageStash(stash_of("pkg", "1.0"), (StashedFile("mod.py", digest, 6),), complete=True)
    released = threading.Event()
    sha256_file = stash.sha256_file

    def still_hashing(path: Path, expected: object, *, stop: Callable[[], bool]) -> str:
        while not (released.is_set() or stop()):
            released.wait(0.01)
        return sha256_file(path, expected, stop=stop)  # type: ignore[arg-type]

    monkeypatch.setattr(stash, "sha256_file", still_hashing)
    hasher = stash.StashHasher(snapshot, [kept])
    thread_start = hasher._thread.start

    def start_cut_short() -> None:
        thread_start()
        raise KeyboardInterrupt  # as a Ctrl-C during its wait for the thread

    monkeypatch.setattr(hasher._thread, "start", start_cut_short)
    with pytest.raises(KeyboardInterrupt):
        hasher.start()
    shutil.rmtree(snapshot.path)  # the give-up
    released.set()
    hasher._thread.join(timeout=60)
    assert not hasher._thread.is_alive(), "the hasher never ended"
    assert not snapshot.path.exists(), "the hasher wrote into the deleted snapshot folder"


def test_ctrl_c_right_after_a_child_starts_leaves_it_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, process_tag: dict[str, str]
) -> None:
    """A probe (or uv) has started and the thread that reads its output is starting when
    Ctrl-C comes: the child is killed as on a Ctrl-C during its wait, not left running."""
    pump_start = process._Pump.start

    def start_cut_short(pump: process._Pump) -> None:
        pump_start(pump)
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C during its wait for the thread

    monkeypatch.setattr(process._Pump, "start", start_cut_short)
    children: list[subprocess.Popen[bytes]] = []
    with pytest.raises(KeyboardInterrupt):
        process.run(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            env={**os.environ, **process_tag},
            cwd=tmp_path,
            watch=process.Watch(on_start=children.append),
        )
    assert tagged_processes(process_tag) == [], "the child outlived the interrupt"
    assert children[0].wait(timeout=60) == -signal.SIGKILL


def test_an_interrupted_no_probe_removal_restores_a_locally_changed_file(
    make_venv: MakeVenv,
) -> None:
    """Its RECORD hash no longer matches: only the stash hasher, run before the restore, can
    vouch for the bytes that were installed. It runs without a probe too."""
    venv = make_venv("requests", "leftpad")
    patched = venv.site_packages / "leftpad.py"
    # A new file, as an editor saves one: writing through the link would change uv's cache,
    # which the session's other venvs install from.
    text = patched.read_text()
    patched.unlink()
    patched.write_text(text + "# patched on this machine\n")
    hashes = venv.file_hashes()
    run = venv.tool("--json", "--no-probe", "leftpad", SAFE_UNINSTALL_FAULT="probe:INT")
    assert run.json()["outcome"] == "interrupted-restored", run.stdout
    assert venv.file_hashes() == hashes


def test_an_error_of_ours_inside_the_restore_leaves_exit_4_and_recover(
    make_venv: MakeVenv,
) -> None:
    """Not a traceback and exit 1 ("nothing changed"): the environment is between two states,
    the result says so, and ``recover`` finishes the job."""
    venv = make_venv("requests")
    hashes, installed = venv.file_hashes(), venv.installed()
    run = venv.tool(
        "--json",
        "--allow-unmet",
        "--probe",
        "import requests",
        "urllib3",
        SAFE_UNINSTALL_FAULT="verify:RAISE",
    )
    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "probe-failed-incomplete"
    assert "recover" in str(data["next_command"])
    assert "unexpected error" in str(data["messages"])
    assert journal(venv).exists()
    assert_recovered(venv, hashes, installed)


def test_an_error_of_ours_inside_a_rollback_leaves_exit_4_and_recover(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    assert venv.tool("--no-probe", "--allow-unmet", "urllib3").returncode == 0
    hashes, installed = venv.file_hashes(), venv.installed()  # without urllib3
    run = venv.tool("rollback", "--json", "--no-probe", SAFE_UNINSTALL_FAULT="verify:RAISE")
    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "rollback-incomplete"
    assert "recover" in str(data["next_command"])
    assert journal(venv).exists()
    assert_recovered(venv, hashes, installed)  # back to where the rollback started


# -- run -- COMMAND: the same, for a guarded upgrade whose probe fails -------------------------

RUN_STEPS = ("stash", "command", "probe", "uninstall", "restore", "restore-reinstall", "verify")


def guarded_upgrade(venv: Venv, *extra: str, **env: str) -> Run:
    """``run`` around an upgrade of urllib3 2.2.1 to 2.3.0 that the probe rejects: every step
    of a run is met, its restore's too."""
    assert UV is not None
    return venv.tool(
        *extra,
        "run",
        "--probe",
        "import urllib3; assert urllib3.VERSION == '2.2.1'",
        "--",
        UV,
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(venv.wheelhouse),
        "-U",
        "urllib3",
        **env,
    )


@pytest.mark.parametrize("step", [*RUN_STEPS, "stash-file:2", "restore-file:1"])
def test_kill_during_a_guarded_upgrade_then_recover(make_venv: MakeVenv, step: str) -> None:
    venv = make_venv("requests", "urllib3==2.2.1")
    hashes, installed = venv.file_hashes(), venv.installed()

    killed = guarded_upgrade(venv, SAFE_UNINSTALL_FAULT=f"{step}:KILL")

    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert journal(venv).exists()
    if step in ("probe", "uninstall"):
        assert venv.installed()["urllib3"] == "2.3.0"  # killed with the upgrade in place
    refused = venv.tool("--no-probe", "requests")
    assert refused.returncode == 1
    assert "did not finish" in refused.stderr
    assert f"safe-uninstall --python {venv.python} recover" in refused.stderr
    assert_recovered(venv, hashes, installed)


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
@pytest.mark.parametrize("step", RUN_STEPS)
def test_signal_during_a_guarded_upgrade_restores_before_exit(
    make_venv: MakeVenv, step: str, signal_name: str
) -> None:
    venv = make_venv("requests", "urllib3==2.2.1")
    hashes, installed = venv.file_hashes(), venv.installed()

    run = guarded_upgrade(venv, "--json", SAFE_UNINSTALL_FAULT=f"{step}:{signal_name}")

    data = run.json()
    if step == "stash":
        assert run.returncode == 1, data  # the command had not run
        assert "before the command ran" in str(data["error"])
    else:
        assert run.returncode == 3, data
        assert str(data["outcome"]).endswith("-restored")
    assert not journal(venv).exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_guard_killed_while_its_command_runs_is_recovered_and_the_command_stopped(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The command runs in a session of its own, so killing the tool leaves it running, here
    stuck after its upgrade (the upgrade done, a grandchild waiting): recover stops all of it
    first, then returns to the snapshot."""
    venv = make_venv("requests", "urllib3==2.2.1")
    hashes, installed = venv.file_hashes(), venv.installed()
    ready = tmp_path / "ready"
    assert UV is not None
    upgrade = [UV, "pip", "install", "--no-index", "--find-links", str(venv.wheelhouse)]
    body = (
        "import os, subprocess, sys\n"
        f"subprocess.run({[*upgrade, '-U', 'urllib3']!r}, check=True)\n"
        "waiter = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
        # renamed into place once written: the test never reads it half written
        f"open({str(ready)!r} + '.tmp', 'w').write(f'{{os.getpid()}} {{waiter.pid}}')\n"
        f"os.replace({str(ready)!r} + '.tmp', {str(ready)!r})\n"
        "waiter.wait()\n"
    )
    env = {**venv.env(), "UV_OFFLINE": "1"}
    tool = [sys.executable, "-m", "safeuninstall", "-p", str(venv.root)]
    guard = subprocess.Popen(
        [*tool, "run", "--no-probe", "--", sys.executable, "-c", body],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    wait_for(ready)
    command, grandchild = map(int, ready.read_text().split())
    guard.kill()
    guard.wait()
    assert running(command) and running(grandchild)
    assert venv.installed()["urllib3"] == "2.3.0"

    try:
        recovered = venv.tool("--json", "recover", "--no-probe")
        stopped = not running(command) and not running(grandchild)
    finally:  # a failure here must not leave them behind
        for pid in (grandchild, command):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    data = recovered.json()
    assert recovered.returncode == 0, data
    assert stopped
    assert "stopped what the guarded command left running: 2 processes" in data["messages"]  # type: ignore[operator]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def _held_uv(tmp_path: Path, verb: str = "uninstall") -> tuple[Path, Path, Path]:
    """A uv that, asked to ``pip VERB``, says its pid (in the file returned second) and waits
    for a byte on the FIFO returned third before it runs the real uv: a uv slow to start, the
    tool killed while it runs. Every other call (a dry run too) is the real uv at once."""
    assert UV is not None
    started, release = tmp_path / "uv-started", tmp_path / "uv-release"
    os.mkfifo(release)
    uv = tmp_path / "uv"
    uv.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"if sys.argv[1:3] == ['pip', {verb!r}] and '--dry-run' not in sys.argv:\n"
        # read and write: the open does not wait for a writer, the read waits for the byte
        f"    held = os.open({str(release)!r}, os.O_RDWR)\n"
        f"    open({str(started)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
        f"    os.replace({str(started)!r} + '.tmp', {str(started)!r})\n"
        "    os.read(held, 1)\n"
        f"os.execv({UV!r}, [{UV!r}, *sys.argv[1:]])\n"
    )
    uv.chmod(0o755)
    return uv, started, release


def _release(fifo: Path) -> bool:
    """Let a held uv go on; False when nobody waits on ``fifo`` any more (it was stopped)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ENXIO:  # no reader
            return False
        raise
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
    return True


def _ended(pid: int) -> None:
    """Until ``pid`` (not a child of this process) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], 120)  # a guard against a hang, not a wait
        assert ready, f"process {pid} never ended"
    finally:
        os.close(fd)


def test_recover_stops_the_uv_a_killed_removal_left_running_before_it_compares(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    """uv runs in a session of its own, so a SIGKILL of the tool leaves it running. recover
    must stop it (it is in the journal) before it compares anything: else it finds the
    environment as the snapshot has it, removes the journal, and uv, going on afterwards,
    removes the package with nobody left to restore it."""
    venv = make_venv("requests", "multipkg")
    hashes, installed = venv.file_hashes(), venv.installed()
    uv, started, release = _held_uv(tmp_path)
    env = {**venv.env(), "UV_OFFLINE": "1", "SAFE_UNINSTALL_UV": str(uv), **process_tag}
    tool = [sys.executable, "-m", "safeuninstall", "-p", str(venv.root)]
    removal = subprocess.Popen(
        [*tool, "--no-probe", "multipkg"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    wait_for(started)
    held = int(started.read_text())
    removal.kill()
    removal.wait()
    assert running(held)

    recovered = venv.tool("--json", "recover", "--no-probe")  # with the real uv
    released = _release(release)
    _ended(held)  # had recover left it, it has now run the real uv

    data = recovered.json()
    assert recovered.returncode == 0, data
    assert not released, "recover left the killed removal's uv running"
    messages = data["messages"]
    assert isinstance(messages, list)
    assert any(f"(pid {held})" in m and m.startswith("stopped") for m in messages), messages
    assert not journal(venv).exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert tagged_processes(process_tag) == []


def test_a_recorded_child_is_known_by_its_start_time_or_its_marker_never_by_its_pid_alone(
    process_tag: dict[str, str],
) -> None:
    """recover stops what the journal records: the child whose pid started at the recorded
    time, and whatever carries its marker. A process that has only the pid (given to it since
    the child ended) is left alone."""
    # Each says it runs (its environment is readable from then on), then waits.
    pause = [sys.executable, "-c", "import signal; print(flush=True); signal.pause()"]
    other = subprocess.Popen(pause, env={**os.environ, **process_tag}, stdout=subprocess.PIPE)
    marker = process.new_marker()
    marked = subprocess.Popen(
        pause, env={**os.environ, **process_tag, marker: "1"}, stdout=subprocess.PIPE
    )
    try:
        for child in (other, marked):
            assert child.stdout is not None and child.stdout.readline() == b"\n"
        ticks = process.start_ticks(other.pid)
        assert ticks is not None

        assert process.stop_left(process.new_marker(), other.pid, ticks + 1) == ([], [])
        assert other.poll() is None, "a process that only had the recorded pid was killed"

        stopped, running = process.stop_left(process.new_marker(), other.pid, ticks)
        assert [s.endswith(f"(pid {other.pid})") for s in stopped] == [True], stopped
        assert running == [] and other.wait() == -signal.SIGKILL

        stopped, running = process.stop_left(marker)
        assert [s.endswith(f"(pid {marked.pid})") for s in stopped] == [True], stopped
        assert running == [] and marked.wait() == -signal.SIGKILL
    finally:
        for child in (other, marked):
            child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()


@pytest.mark.parametrize("killed_at", [None, "stash"])
def test_recover_deletes_the_temp_file_of_a_journal_write_cut_short(
    make_venv: MakeVenv, killed_at: str | None
) -> None:
    """A journal write killed between naming its temp file and renaming it leaves that file;
    the first write of a removal leaves it and no journal at all (None), a removal killed as it
    stashes leaves it beside a journal with no snapshot. recover deletes it either way, and
    nothing else that only looks like one."""
    venv = make_venv("leftpad")
    hashes = venv.file_hashes()
    if killed_at is not None:
        killed = venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_FAULT=f"{killed_at}:KILL")
        assert killed.returncode == -signal.SIGKILL
    stray = venv.root / "..safe-uninstall.journal.toml.k3x_9abc.tmp"
    others = [
        venv.root / "..safe-uninstall.journal.toml.NOTOURS1.tmp",  # not mkstemp's characters
        venv.root / "..safe-uninstall.journal.toml.k3x_9ab.tmp",  # seven of them
        venv.root / ".safe-uninstall.journal.toml.k3x_9abc.tmp",  # not the journal's prefix
    ]
    for path in [stray, *others]:
        path.write_text('operation = "uninstall"\n')

    run = venv.tool("--json", "recover", "--no-probe")

    data = run.json()
    assert run.returncode == 0, data
    assert not stray.exists()
    assert all(path.exists() for path in others)
    assert any(stray.name in m for m in data["messages"]), data["messages"]  # type: ignore[union-attr]
    assert not journal(venv).exists()
    assert venv.file_hashes() == hashes


def test_recover_claims_what_it_checked_not_the_bytes_of_what_the_removal_never_touched(
    make_venv: MakeVenv,
) -> None:
    """A removal of leftpad killed after its probe, then a file of requests (which the removal
    never touched) replaced by other bytes: recover brings leftpad back and says what it
    verified, the installed set and the files it restored, never that the environment
    matches the snapshot."""
    venv = make_venv("requests", "leftpad")
    killed = venv.tool("--probe", "import requests", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL")
    assert killed.returncode == -signal.SIGKILL
    edited = venv.site_packages / "requests" / "api.py"
    replacement = edited.with_suffix(".new")  # a new file: its inode may be uv's cache's
    replacement.write_text("def get(): return 'edited'\n")
    os.replace(replacement, edited)

    run = venv.tool("recover", "--no-probe")

    assert run.returncode == 0, run.stdout + run.stderr
    assert "the environment matches the snapshot" not in run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert re.search(
        r"^verified: the installed set equals the snapshot; \d+ restored files? match",
        run.stdout,
        re.M,
    ), run.stdout
    assert lines[-1] == (
        "recover: recovered; the installed set matches the snapshot, and each restored file its "
        "hash"
    )
    assert venv.installed()["leftpad"] == "1.0"


def test_recover_stops_the_reinstall_a_killed_undo_left_running(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str]
) -> None:
    """The same for the installer a restore runs: a guarded command writes into leftpad.py in
    place (and so into its stash) and fails; the undo reinstalls leftpad by its pin, and the
    tool is killed while that uv waits. recover stops it first, then brings leftpad back."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    hashes, installed = venv.file_hashes(), venv.installed()
    target = venv.site_packages / "leftpad.py"
    body = f"open({str(target)!r}, 'r+b').write(b'#')\nraise SystemExit(1)\n"
    uv, started, release = _held_uv(tmp_path, "install")
    env = {
        **venv.env(),
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(venv.wheelhouse),
        "SAFE_UNINSTALL_UV": str(uv),
        **process_tag,
    }
    tool = [sys.executable, "-m", "safeuninstall", "-p", str(venv.root)]
    guarded = subprocess.Popen(
        [*tool, "run", "--no-probe", "--", sys.executable, "-c", body],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    wait_for(started)
    held = int(started.read_text())
    guarded.kill()
    guarded.wait()
    assert running(held)

    recovered = venv.tool_reinstalling("--json", "recover", "--no-probe")  # the real uv
    released = _release(release)
    _ended(held)

    data = recovered.json()
    assert recovered.returncode == 0, data
    assert not released, "recover left the killed undo's uv running"
    messages = data["messages"]
    assert isinstance(messages, list)
    assert any(f"(pid {held})" in m and m.startswith("stopped") for m in messages), messages
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert tagged_processes(process_tag) == []
