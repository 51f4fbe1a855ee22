"""``safe-uninstall run -- COMMAND``: an install or upgrade guarded like a removal, on toy wheels.

"As before" is what the fault suite means by it: the installed set and the sha256 of every file
in site-packages and bin equal what they were before the command ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from safeuninstall.base.outcome import Outcome
from tests.conftest import UV, MakeVenv, Venv, script, uv_install, wait_for
from tests.realstack import RealVenv, Stacks
from tests.test_own_environment import _own_tool as own_tool
from tests.test_own_environment import own  # noqa: F401 - the fixture, used by name
from tests.test_rollback import _doubled_urllib3, _kept_aside
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def upgraded_venv(make_venv: MakeVenv) -> Venv:
    return make_venv("requests", "urllib3==2.2.1")


def test_an_upgrade_the_probe_rejects_is_restored_byte_for_byte(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool(
        "--json",
        "run",
        "--probe",
        "import urllib3; assert urllib3.VERSION == '2.2.1'",
        "--",
        *uv_install(venv, "-U", "urllib3"),
    )

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-probe-failed-restored"
    assert data["run"]["changed"] == ["urllib3"]  # type: ignore[index]
    assert data["run"]["exit_status"] == 0  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()


def test_an_upgrade_the_probe_accepts_is_kept_and_rollback_undoes_it(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("run", "--probe", "import requests", "--", *uv_install(venv, "-U", "urllib3"))

    assert run.returncode == 0, run.stdout + run.stderr
    assert "the command changed urllib3: 2.2.1 -> 2.3.0" in run.stdout
    assert venv.installed()["urllib3"] == "2.3.0"
    undo = venv.tool("rollback", "--no-probe")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_without_a_probe_an_installed_wheel_that_fails_to_import_is_restored(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("requests")
    hashes, installed = venv.file_hashes(), venv.installed()
    house = tmp_path / "broken"
    build_wheel(house, "boom", "1.0", {"boom/__init__.py": "raise RuntimeError('boom')\n"})

    run = venv.tool("--json", "run", "--", *uv_install(venv, "boom", find_links=house))

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-probe-failed-restored"
    assert data["run"]["added"] == ["boom"]  # type: ignore[index]
    (derived,) = data["probes"]["after"]  # type: ignore[index]
    failed = [c["target"] for c in derived["candidates"] if c["status"] == "failed" and c["judged"]]
    assert failed == ["boom"]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_the_probe_after_a_change_stops_at_the_first_candidate_that_fails(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("requests")
    hashes = venv.file_hashes()
    house, marker = tmp_path / "house", tmp_path / "imported"
    build_wheel(house, "aboom", "1.0", {"aboom/__init__.py": "raise RuntimeError('boom')\n"})
    build_wheel(house, "bmark", "1.0", {"bmark/__init__.py": f"open({str(marker)!r}, 'w')\n"})

    run = venv.tool("--json", "run", "--", *uv_install(venv, "aboom", "bmark", find_links=house))

    data = run.json()
    assert run.returncode == 3, data
    (derived,) = data["probes"]["after"]  # type: ignore[index]
    assert [(c["target"], c["status"]) for c in derived["candidates"]] == [
        ("aboom", "failed"),
        ("bmark", "skipped"),
    ]
    assert not marker.exists()  # the verdict was known: bmark was never imported
    assert venv.file_hashes() == hashes


def test_a_change_that_leaves_a_requirement_unmet_is_restored(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)  # requests requires urllib3>=2
    hashes, installed = venv.file_hashes(), venv.installed()
    assert UV is not None

    run = venv.tool("--json", "run", "--no-probe", "--", UV, "pip", "uninstall", "urllib3")

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-unmet-restored"
    assert data["run"]["unmet"] == [  # type: ignore[index]
        {"dependent": "requests", "requirement": "urllib3>=2", "required": "urllib3"}
    ]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_downgrade_below_a_requirement_is_restored_and_allow_unmet_lets_the_probe_judge(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = upgraded_venv(make_venv)  # requests requires urllib3>=2
    hashes, installed = venv.file_hashes(), venv.installed()
    old = tmp_path / "old"
    build_wheel(old, "urllib3", "1.26.0", {"urllib3/__init__.py": "VERSION = '1.26.0'\n"})
    downgrade = uv_install(venv, "urllib3==1.26.0", find_links=old)

    run = venv.tool("--json", "run", "--", *downgrade)

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-unmet-restored"
    assert data["run"]["unmet"] == [  # type: ignore[index]
        {"dependent": "requests", "requirement": "urllib3>=2", "required": "urllib3"}
    ]
    assert venv.file_hashes() == hashes
    allowed = venv.tool("--json", "run", "--allow-unmet", "--", *downgrade)
    assert allowed.returncode == 0, allowed.stdout  # the derived probe imports requests: fine
    assert venv.installed() == {**installed, "urllib3": "1.26.0"}


def test_a_command_that_installs_then_exits_non_zero_is_restored(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()
    body = (
        "import subprocess, sys\n"
        f"subprocess.run({uv_install(venv, '-U', 'urllib3', 'leftpad')!r}, check=True)\n"
        "sys.exit(7)\n"
    )

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-command-failed-restored"
    assert data["run"]["exit_status"] == 7  # type: ignore[index]
    assert data["run"]["added"] == ["leftpad"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_killed_install_is_restored(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()
    body = (
        "import os, signal, subprocess\n"
        f"subprocess.run({uv_install(venv, '-U', 'urllib3')!r}, check=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert data["run"]["exit_status"] == -signal.SIGKILL  # type: ignore[index]
    assert "was killed by SIGKILL" in " ".join(data["messages"])  # type: ignore[arg-type]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_files_replaced_under_the_same_version_are_restored(make_venv: MakeVenv) -> None:
    """A reinstall of the same version keeps the installed set as it was; its files are other
    inodes, and a failure brings the stashed ones back."""
    venv = upgraded_venv(make_venv)
    hashes = venv.file_hashes()
    body = (
        "import subprocess, sys\n"
        f"subprocess.run({uv_install(venv, '--reinstall', 'urllib3==2.2.1')!r}, check=True)\n"
        "sys.exit(1)\n"
    )

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert "the command replaced or rewrote files of urllib3==2.2.1" in data["messages"]  # type: ignore[operator]
    assert data["restored"] == ["urllib3==2.2.1"]
    assert venv.file_hashes() == hashes


def test_a_failed_command_that_changed_nothing_exits_1(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, "raise SystemExit(2)"))
    data = run.json()
    assert run.returncode == 1, data
    assert data["outcome"] == "run-command-failed-unchanged"
    assert data["run"]["exit_status"] == 2  # type: ignore[index]


def test_keep_on_failure_keeps_the_change_and_names_the_rollback(make_venv: MakeVenv) -> None:
    venv = upgraded_venv(make_venv)
    body = f"import subprocess, sys\nsubprocess.run({uv_install(venv, 'leftpad')!r})\nsys.exit(1)\n"

    run = venv.tool("--json", "run", "--keep-on-failure", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "run-command-failed-kept"
    assert "leftpad" in venv.installed()
    assert data["next_command"] is not None and "rollback" in str(data["next_command"])


def test_the_command_runs_in_the_environment_and_its_output_is_passed_through(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("leftpad")
    body = (
        "import os, shutil\n"
        "print('VENV=' + os.environ['VIRTUAL_ENV'])\n"
        "print('EXE=' + shutil.which('python'))\n"
    )

    run = venv.tool("run", "--no-probe", "--", *script(venv, body))

    assert run.returncode == 0, run.stdout + run.stderr
    assert f"VENV={venv.root}" in run.stdout
    assert f"EXE={venv.root}/bin/python" in run.stdout
    as_json = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))
    assert as_json.json()["outcome"] == "ran-no-change"  # stdout is the JSON alone
    assert f"VENV={venv.root}" in as_json.stderr


def test_dry_run_runs_nothing(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    marker = tmp_path / "ran"

    run = venv.tool("run", "--dry-run", "--", *script(venv, f"open({str(marker)!r}, 'w')"))

    assert run.returncode == 0, run.stdout + run.stderr
    assert "would run the baseline probe" in run.stdout
    assert not marker.exists()
    assert not (venv.root / ".safe-uninstall").exists()


def test_an_unknown_command_is_refused_before_any_snapshot(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("run", "--", "no-such-command-anywhere")
    assert run.returncode == 1
    assert "command not found" in run.stderr
    assert venv.tool("snapshots", "--json").json()["snapshots"] == []


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("folder", "not an executable file"),
        ("script", "the command could not be started"),  # its interpreter does not exist
    ],
)
def test_a_command_that_cannot_start_changes_nothing_and_exits_1(
    make_venv: MakeVenv, tmp_path: Path, kind: str, said: str
) -> None:
    venv = make_venv("leftpad")
    command = tmp_path / "command"
    if kind == "folder":
        command.mkdir()
    else:
        command.write_text("#!/no/such/interpreter\n")
        command.chmod(0o755)

    run = venv.tool("--json", "run", "--no-probe", "--", str(command))

    assert run.returncode == 1, run.stdout + run.stderr
    assert said in run.stdout + run.stderr
    assert "nothing was changed" in run.stdout + run.stderr
    assert venv.tool("snapshots", "--json").json()["snapshots"] == []
    assert not venv.journal.exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_is_passed_on_to_the_command_then_its_change_is_undone(
    make_venv: MakeVenv, tmp_path: Path, signum: int
) -> None:
    venv = upgraded_venv(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()
    ready, got = tmp_path / "ready", tmp_path / "got"
    # The signals are blocked before it says it is ready, then waited for: one that came
    # between a handler's check and signal.pause() would be lost, and the command wait for ever.
    body = (
        "import signal, subprocess, sys\n"
        f"subprocess.run({uv_install(venv, '-U', 'urllib3')!r}, check=True)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "signum = signal.sigwait({signal.SIGINT, signal.SIGTERM})\n"
        f"open({str(got)!r}, 'w').write(str(int(signum)))\n"
        "sys.exit(130)\n"
    )
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "cache")}
    tool = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "safeuninstall",
            "-p",
            str(venv.root),
            "--json",
            "run",
            "--no-probe",
            "--",
            *script(venv, body),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    wait_for(ready)
    tool.send_signal(signum)
    stdout, stderr = tool.communicate(timeout=120)

    assert tool.returncode == 3, stdout + stderr
    assert got.read_text() == str(int(signum))  # the command got it, once
    assert '"outcome": "run-interrupted-restored"' in stdout
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


# -- undo: an editable and a direct-URL install replaced by an upgrade come back ---------------


def local_installs(make_venv: MakeVenv, tmp_path: Path) -> tuple[Venv, Path]:
    """A venv with a wheel installed from its path (direct URL) and an editable project; and a
    find-links folder with newer versions of both, as an index would have them."""
    from tests.test_export import source_tree

    venv = make_venv("requests")
    wheel = build_wheel(tmp_path / "local", "localbuilt", "1.0", {"localbuilt.py": "V = 1\n"})
    editable = source_tree(tmp_path / "ed", "edpkg", "0.1")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(wheel))
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", "-e", str(editable))
    newer = tmp_path / "newer"
    build_wheel(newer, "localbuilt", "2.0", {"localbuilt.py": "V = 2\n"})
    build_wheel(newer, "edpkg", "0.2", {"edpkg/__init__.py": "VALUE = '0.2'\n"})
    return venv, newer


def test_rollback_undoes_an_upgrade_made_outside_the_tool(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv, newer = local_installs(make_venv, tmp_path)
    hashes, installed = venv.file_hashes(), venv.installed()
    assert venv.tool("snapshot").returncode == 0
    venv.install("localbuilt==2.0", "edpkg==0.2", "leftpad", find_links=(newer, venv.wheelhouse))
    assert venv.installed()["edpkg"] == "0.2"

    undo = venv.tool("--json", "rollback", "--no-probe")

    data = undo.json()
    assert undo.returncode == 0, data
    assert data["rollback_plan"] == {
        "added": ["leftpad"],
        "changed": ["edpkg", "localbuilt"],
        "missing": [],
    }
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes  # direct_url.json and the editable's .pth included
    assert venv.run_python("import edpkg, localbuilt; assert localbuilt.V == 1").returncode == 0


def test_a_guarded_upgrade_over_local_installs_is_restored(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv, newer = local_installs(make_venv, tmp_path)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool(
        "--json",
        "run",
        "--probe",
        "import localbuilt; assert localbuilt.V == 1",
        "--",
        *uv_install(venv, "localbuilt==2.0", "edpkg==0.2", find_links=newer),
    )

    data = run.json()
    assert run.returncode == 3, data
    assert data["run"]["changed"] == ["edpkg", "localbuilt"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


# -- the real stack: requests with urllib3 2.2.3, upgraded offline to the requests stack's ------

OLD_URLLIB3 = "import urllib3; assert urllib3.__version__.startswith('2.2')"


def real_upgrade(stacks: Stacks, real_venv: RealVenv) -> Venv:
    stacks.ensure("requests")  # its urllib3 wheel in the cache: the upgrade runs offline
    venv = real_venv("requests-old")
    assert venv.installed()["urllib3"] == "2.2.3"
    return venv


def test_real_urllib3_upgrade_the_probe_rejects_is_restored_byte_for_byte(
    stacks: Stacks, real_venv: RealVenv
) -> None:
    venv = real_upgrade(stacks, real_venv)
    hashes, installed = venv.file_hashes(), venv.installed()
    assert UV is not None

    run = venv.tool(
        "--json",
        "run",
        "--probe",
        OLD_URLLIB3,
        "--",
        UV,
        "pip",
        "install",
        "-U",
        "urllib3",
        **stacks.offline_env(),
    )

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-probe-failed-restored"
    assert data["run"]["changed"] == ["urllib3"]  # type: ignore[index]
    assert data["restore"]["from_stash"] == ["urllib3==2.2.3"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_real_urllib3_upgrade_the_probe_accepts_is_kept_and_undone_by_rollback(
    stacks: Stacks, real_venv: RealVenv
) -> None:
    venv = real_upgrade(stacks, real_venv)
    hashes, installed = venv.file_hashes(), venv.installed()
    assert UV is not None
    offline = stacks.offline_env()

    run = venv.tool("run", "--", UV, "pip", "install", "-U", "urllib3", **offline)

    assert run.returncode == 0, run.stdout + run.stderr
    assert venv.installed()["urllib3"] != "2.2.3"
    assert "the derived probe passed" in run.stdout  # from what changed: urllib3, requests
    undo = venv.tool("rollback", **offline)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_the_snapshot_is_taken_under_uvs_lock_on_the_venv(make_venv: MakeVenv) -> None:
    """uv locks ``<venv>/.lock`` while it changes a venv; the snapshot waits for it (here: at
    most 0 s, then goes on and says so), so no uv changes the files while they are kept."""
    venv = make_venv("leftpad")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            f"fd = os.open({str(venv.root / '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        run = venv.tool(
            "--json", "run", "--lock-timeout", "0", "--no-probe", "--", sys.executable, "-c", ""
        )
    finally:
        holder.communicate("")
    data = run.json()
    assert run.returncode == 0, data
    assert any("was still held after 0 s" in m for m in data["messages"])  # type: ignore[union-attr]


def written_in_place(make_venv: MakeVenv) -> tuple[Venv, list[str]]:
    """A venv whose leftpad is a copy of its own (not a link into the session's uv cache: the
    command writes into it in place), and that command."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = venv.site_packages / "leftpad.py"
    return venv, script(venv, f"open({str(target)!r}, 'r+b').write(b'#')\nraise SystemExit(1)\n")


def test_a_write_in_place_reaches_the_stash_and_is_reinstalled_not_linked_back(
    make_venv: MakeVenv,
) -> None:
    """The stash is a hard link, so a write in place changes its copy too: the hash taken
    before the command finds it, and the distribution comes back by its pin instead."""
    venv, command = written_in_place(make_venv)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool_reinstalling("--json", "run", "--no-probe", "--", *command)

    data = run.json()
    assert run.returncode == 3, data
    assert "the command replaced or rewrote files of leftpad==1.0" in data["messages"]  # type: ignore[operator]
    notes = " ".join(data["restore"]["notes"])  # type: ignore[index]
    assert "leftpad.py: stashed copy does not match its sha256" in notes
    assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_write_in_place_with_nothing_to_reinstall_from_is_left_as_the_command_left_it(
    make_venv: MakeVenv,
) -> None:
    """Its stash was written too and nothing can reinstall it: uninstalling it first would
    leave leftpad gone. It stays as the command left it, and the run says why."""
    venv, command = written_in_place(make_venv)
    installed = venv.installed()

    run = venv.tool("--json", "run", "--no-probe", "--", *command)

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "run-not-undone"
    assert venv.installed() == installed  # leftpad is still there, written as the command did
    assert (venv.site_packages / "leftpad.py").read_bytes().startswith(b"#")
    said = " ".join(data["messages"])  # type: ignore[arg-type]
    assert "cannot undo the command's change: leftpad==1.0: its stash is not whole" in said
    assert "uv cannot install it" in said
    assert "nothing was undone: the environment is as the command left it" in said
    assert data["restore"] is None
    assert "rollback" in str(data["next_command"])
    assert not venv.journal.exists()  # a known state: nothing for recover to finish


# Writes one byte in place (the same inode, the same size), then sets the file's times back
# as they were: only its ctime, which nobody can set, still tells.
_WRITE_AND_HIDE = (
    "import os\n"
    "before = os.stat({path!r})\n"
    "open({path!r}, 'r+b').write(b'#')\n"
    "os.utime({path!r}, ns=(before.st_atime_ns, before.st_mtime_ns))\n"
)


def test_a_write_in_place_with_its_mtime_set_back_is_still_undone(make_venv: MakeVenv) -> None:
    """The command's undo takes a file as unchanged only if its ctime is too."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = str(venv.site_packages / "leftpad.py")
    command = script(venv, _WRITE_AND_HIDE.format(path=target) + "raise SystemExit(1)\n")
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool_reinstalling("--json", "run", "--no-probe", "--", *command)

    data = run.json()
    assert run.returncode == 3, data
    assert "the command replaced or rewrote files of leftpad==1.0" in data["messages"]  # type: ignore[operator]
    assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_recover_after_a_write_in_place_with_its_mtime_set_back_brings_it_back(
    make_venv: MakeVenv,
) -> None:
    """recover's "unchanged since the snapshot" takes the ctime into account too: a file
    written in place whose mtime was set back is brought back, not called a match. (The
    command installs toolpkg as well, so that the run goes on to its probe, where it is
    killed, whatever it makes of leftpad.)"""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = str(venv.site_packages / "leftpad.py")
    install = f"import subprocess\nsubprocess.run({uv_install(venv, 'toolpkg')!r}, check=True)\n"
    command = script(venv, _WRITE_AND_HIDE.format(path=target) + install)
    hashes, installed = venv.file_hashes(), venv.installed()
    killed = venv.tool(
        "run", "--probe", "import leftpad", "--", *command, SAFE_UNINSTALL_FAULT="probe:KILL"
    )
    assert killed.returncode == -9

    recovered = venv.tool_reinstalling("--json", "recover", "--no-probe")

    data = recovered.json()
    assert recovered.returncode == 0, data
    assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


@pytest.mark.parametrize("reinstall", [False, True])
def test_recover_after_a_write_in_place_claims_no_match_it_did_not_hash(
    make_venv: MakeVenv, reinstall: bool
) -> None:
    """The run is killed as its probe begins, after its command wrote leftpad.py in place (and
    into its stash, the same inode): the installed set is the snapshot's, its bytes are not.
    recover brings leftpad back by its pin where it can, and says which file cannot come back
    where not; never "the environment matches the snapshot" over bytes nobody hashed."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = venv.site_packages / "leftpad.py"
    command = script(venv, f"open({str(target)!r}, 'r+b').write(b'#')\n")
    hashes, installed = venv.file_hashes(), venv.installed()
    killed = venv.tool(
        "run", "--probe", "import leftpad", "--", *command, SAFE_UNINSTALL_FAULT="probe:KILL"
    )
    assert killed.returncode == -9
    assert (venv.site_packages / "leftpad.py").read_bytes().startswith(b"#")

    recover = venv.tool_reinstalling if reinstall else venv.tool
    recovered = recover("--json", "recover", "--no-probe")

    data = recovered.json()
    if reinstall:
        assert recovered.returncode == 0, data
        assert data["outcome"] == "recovered"
        assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]
        assert venv.file_hashes() == hashes
        assert not venv.journal.exists()
    else:
        assert recovered.returncode != 0, data
        assert data.get("outcome") != "recovered"
        said = str(data["error"])
        assert "cannot recover to snapshot 0001: leftpad==1.0" in said
        assert "leftpad.py: stashed copy does not match its sha256" in said
        assert "run recover again" in said and venv.journal.exists()
        assert (venv.site_packages / "leftpad.py").read_bytes().startswith(b"#")
    assert venv.installed() == installed


def test_an_upgrade_after_the_state_folder_vanished_is_kept_not_half_undone(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The command deletes the tool's state folder (the stash with it), then upgrades and
    fails: 2.2.1 cannot come back, so 2.3.0 is not uninstalled."""
    venv = upgraded_venv(make_venv)
    state = tmp_path / "state"
    body = (
        "import shutil, subprocess, sys\n"
        f"shutil.rmtree({str(state)!r})\n"
        f"subprocess.run({uv_install(venv, '-U', 'urllib3')!r}, check=True)\n"
        "sys.exit(1)\n"
    )

    run = venv.tool(
        "--json", "--state-dir", str(state), "run", "--no-probe", "--", *script(venv, body)
    )

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "run-not-undone"
    assert venv.installed()["urllib3"] == "2.3.0"
    said = " ".join(data["messages"])  # type: ignore[arg-type]
    assert "lost snapshot 0001 while the command ran" in said
    assert "cannot undo the command's change: urllib3==2.2.1" in said
    assert data["next_command"] is None
    assert not venv.journal.exists()


def test_an_install_by_another_process_during_the_probe_is_not_undone_as_the_commands(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The probe after the command installs leftpad (another process, as far as the tool can
    tell) and fails: its verdict is on another environment, and leftpad is not the command's."""
    venv = upgraded_venv(make_venv)
    flag = tmp_path / "command-ran"
    other = uv_install(venv, "--python", str(venv.python), "leftpad")
    probe = (
        "import os, subprocess\n"
        f"if os.path.exists({str(flag)!r}):\n"
        f"    subprocess.run({other!r}, check=True)\n"
        "    raise SystemExit(1)\n"
    )
    body = (
        "import subprocess\n"
        f"subprocess.run({uv_install(venv, 'toolpkg')!r}, check=True)\n"
        f"open({str(flag)!r}, 'w').close()\n"
    )

    run = venv.tool(
        "--json",
        "run",
        "--probe",
        probe,
        "--",
        *script(venv, body),
        UV_CACHE_DIR=str(venv.uv_cache),
    )

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "run-concurrent-kept"
    assert data["run"]["added"] == ["toolpkg"]  # type: ignore[index]
    said = " ".join(data["messages"])  # type: ignore[arg-type]
    assert "another process changed the environment while the probe ran (appeared: leftpad" in said
    assert {"leftpad", "toolpkg"} <= venv.installed().keys()
    assert "rollback" in str(data["next_command"])
    assert not venv.journal.exists()


def test_a_ctrl_c_while_the_commands_leftovers_are_killed_does_not_cut_it_short(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A second Ctrl-C as the command ends: what it started is still all killed before the
    restore, and the interrupt is noted (passed on), not raised half way."""
    from safeuninstall.base import process

    killed: list[str] = []
    kill_marked = process.kill_marked

    def interrupted_kill(marker: str) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # delivered at the next bytecode: here
        kill_marked(marker)
        killed.append(marker)

    monkeypatch.setattr(process, "kill_marked", interrupted_kill)

    status, passed_on = process.run_command(["true"], env=dict(os.environ), cwd=tmp_path)

    assert status == 0
    assert len(killed) == 1
    assert passed_on == [signal.SIGINT]


def test_run_in_the_tools_own_environment_restores_the_tool(
    own: Venv,  # noqa: F811 - pytest's fixture, imported above
) -> None:
    """The command uninstalls the tool itself; the probe then fails: the restore runs in a
    process whose package is gone from disk, and must have loaded what it needs before."""
    before = own.file_hashes()
    uv = own.root / "bin" / "uv"
    command = [str(uv), "pip", "uninstall", "--python", str(own.python), "safe-uninstall"]

    done = own_tool(own, "--json", "run", "--probe", "import safeuninstall", "--", *command)

    assert "Traceback" not in done.stderr, done.stderr
    data = done.json()
    assert data["outcome"] == "run-probe-failed-restored", data["messages"]
    assert done.returncode == 3
    assert own.file_hashes() == before
    assert not own.journal.exists()


def test_a_safe_uninstall_inside_the_guarded_command_fails_at_once(make_venv: MakeVenv) -> None:
    """The guarded command runs safe-uninstall on the same environment: the run holds its lock
    until the command ends, so the inner one says why at once instead of timing out."""
    venv = make_venv("leftpad")
    inner = [sys.executable, "-m", "safeuninstall", "--python", str(venv.root)]
    inner += ["--lock-timeout", "2", "uninstall", "--no-probe", "leftpad"]

    run = venv.tool("--json", "run", "--no-probe", "--", *inner)

    data = run.json()
    assert data["outcome"] == "run-command-failed-unchanged", data
    assert "started by the command that `safe-uninstall run` is guarding" in run.stderr
    assert "another safe-uninstall operation is running" not in run.stderr
    assert "leftpad" in venv.installed()


def test_a_rollback_says_every_folder_its_snapshot_kept_aside_also_one_there_as_it_begins(
    make_venv: MakeVenv,
) -> None:
    """A rollback makes the environment its snapshot's record, one dist-info folder per name:
    every second folder that snapshot kept aside is gone after it, and is said not to be put
    back, also one that is there when the rollback begins (here urllib3-2.3.0.dist-info, the
    only folder of its name since the guarded upgrade). A run's undo says instead which of
    the folders there before the command are gone (rollback._kept_aside_by against
    run._second_folders_gone): said of the environment as the rollback begins, this one
    would go unsaid."""
    venv, _ = _doubled_urllib3(make_venv)  # 0001
    upgrade = uv_install(venv, "--reinstall", "urllib3==2.3.0")
    assert venv.tool("run", "--no-probe", "--", *upgrade).returncode == 0  # 0002, kept
    assert [p.name for p in venv.site_packages.glob("urllib3-*.dist-info")] == [
        "urllib3-2.3.0.dist-info"
    ]

    back = venv.tool("--json", "rollback", "0002", "--no-probe")

    data = back.json()
    assert back.returncode == 0, data
    kept = venv.snapshot("0002").aside_dir
    assert (
        "urllib3-2.3.0.dist-info, a second dist-info folder when snapshot 0002 was taken, is not "
        f"put back (a snapshot brings back one version per name); its files are kept in "
        f"{kept / 'urllib3-2.3.0.dist-info'}"
    ) in data["messages"]  # type: ignore[operator]
    assert venv.installed() == {"urllib3": "2.2.1"}
    assert [p.name for p in venv.site_packages.glob("urllib3-*.dist-info")] == [
        "urllib3-2.2.1.dist-info"
    ]


@pytest.mark.parametrize(
    ("reason", "exits", "said"),
    [
        ("command-failed", "sys.exit(1)\n", "the command exited with status 1"),
        ("probe-failed", "", "probe after the change: LEFTPAD -- failed with exit code 1"),
    ],
    ids=["command-failed", "probe-failed"],
)
def test_an_undo_says_a_second_dist_info_folder_the_command_removed_is_not_put_back(
    make_venv: MakeVenv, reason: str, exits: str, said: str
) -> None:
    """urllib3 is installed twice (2.2.1, and 2.3.0's files over it); the command upgrades
    it, which removes both folders (and installs leftpad), then fails, or the probe after it
    does. The undo brings back one version per name. It used to end
    "run-command-failed-restored" (exit 3), 2.3.0's folder and the files only it listed lost;
    they are now kept aside in the run's snapshot, and the undo says which folder it did not
    put back, and where its files are (exit 4), and still why it undid the change (it ended
    "run-restored-except-aside", whatever failed)."""
    venv, _ = _doubled_urllib3(make_venv)  # 0001
    body = (
        "import subprocess, sys\n"
        f"subprocess.run({uv_install(venv, '--reinstall', 'urllib3==2.3.0', 'leftpad')!r}, "
        "check=True)\n" + exits
    )
    leftpad = (
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('leftpad') is not None)"
    )

    run = venv.tool("--json", "run", "--probe", leftpad, "--", *script(venv, body))
    again, _ = _doubled_urllib3(make_venv)  # the same, for the text a person reads
    text = again.tool("run", "--probe", leftpad, "--", *script(again, body))

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == f"run-{reason}-restored-except-aside"
    (why,) = [o.text for o in Outcome if o.id == f"run-{reason}-restored"]
    why = why.partition(":")[0]  # "the probe failed..."
    assert text.returncode == 4, text.stdout + text.stderr
    assert text.stdout.splitlines()[-1].startswith(f"run: {why}: "), text.stdout
    assert said.replace("LEFTPAD", leftpad) in text.stdout
    kept = venv.snapshot("0002").aside_dir
    messages = "\n".join(data["messages"])  # type: ignore[arg-type]
    assert (
        "urllib3-2.3.0.dist-info, a second dist-info folder when snapshot 0002 was taken, is not "
        f"put back (a snapshot brings back one version per name); its files are kept in "
        f"{kept / 'urllib3-2.3.0.dist-info'}"
    ) in messages
    aside = _kept_aside(venv, "0002")
    assert aside["urllib3/__init__.py"] == b"VERSION = '2.3.0'\n"
    assert "urllib3-2.3.0.dist-info/RECORD" in aside
    assert venv.installed() == {"urllib3": "2.2.1"}
    assert not venv.journal.exists()


@pytest.mark.parametrize(
    ("reason", "exits"),
    [("command-failed", "sys.exit(1)\n"), ("probe-failed", "")],
    ids=["command-failed", "probe-failed"],
)
def test_an_undo_keeps_a_second_dist_info_folder_the_command_left_alone(
    make_venv: MakeVenv, reason: str, exits: str
) -> None:
    """urllib3 is installed twice (2.2.1, and 2.3.0's files over it) before the command, which
    installs leftpad only, then fails, or the probe after it does. The undo removes leftpad and
    nothing else: the environment is as before the command, 2.3.0's folder and all, and the
    run ends run-*-restored (exit 3), journal finished. It used to end run-*-incomplete (exit
    4, the journal kept, `recover` named): the verification flagged the folder the command had
    left alone as "a second dist-info folder"."""
    venv, _ = _doubled_urllib3(make_venv)  # 0001
    hashes, installed = venv.file_hashes(), venv.installed()
    body = (
        "import subprocess, sys\n"
        f"subprocess.run({uv_install(venv, 'leftpad')!r}, check=True)\n" + exits
    )
    leftpad = (
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('leftpad') is not None)"
    )

    run = venv.tool("--json", "run", "--probe", leftpad, "--", *script(venv, body))

    data = run.json()
    assert data["outcome"] == f"run-{reason}-restored", data
    assert run.returncode == 3
    assert data["run"]["added"] == ["leftpad"]  # type: ignore[index]
    assert data["verification"]["ok"]  # type: ignore[index]
    assert data["next_command"] is None
    assert not any("not put back" in m for m in data["messages"])  # type: ignore[union-attr]
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes  # 2.3.0's folder and its files over 2.2.1's
    assert sorted(p.name for p in venv.site_packages.glob("urllib3-*.dist-info")) == [
        "urllib3-2.2.1.dist-info",
        "urllib3-2.3.0.dist-info",
    ]


@pytest.mark.parametrize("step", ["probe", "verify"])
def test_recover_after_a_killed_run_keeps_a_second_dist_info_folder_from_before_it(
    make_venv: MakeVenv, step: str
) -> None:
    """The run is killed after its command installed leftpad (at the probe), or after its undo
    removed it (at the verification). `recover` returns to the state before the run, which
    had urllib3 installed twice: it removes leftpad and keeps urllib3-2.3.0.dist-info, which
    the run's snapshot kept aside as there before the command. It used to remove both
    urllib3 folders (as for a folder a killed uv leaves) and bring back 2.2.1 alone, saying
    2.3.0's folder was "not put back"."""
    venv, _ = _doubled_urllib3(make_venv)  # 0001
    hashes, installed = venv.file_hashes(), venv.installed()
    leftpad = (
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('leftpad') is not None)"
    )
    killed = venv.tool(
        "run",
        "--probe",
        leftpad,
        "--",
        *uv_install(venv, "leftpad"),
        SAFE_UNINSTALL_FAULT=f"{step}:KILL",
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert venv.journal.exists()

    recovered = venv.tool("--json", "recover", "--no-probe")

    data = recovered.json()
    assert data["outcome"] == "recovered", data
    assert recovered.returncode == 0
    assert data["verification"]["ok"]  # type: ignore[index]
    messages = "\n".join(data["messages"])  # type: ignore[arg-type]
    assert "not put back" not in messages and "installed twice" not in messages
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert sorted(p.name for p in venv.site_packages.glob("urllib3-*.dist-info")) == [
        "urllib3-2.2.1.dist-info",
        "urllib3-2.3.0.dist-info",
    ]
