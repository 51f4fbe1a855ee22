"""End to end: real venvs, real wheels, real gcc-built libraries, the real command and real uv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from safeuninstall.state.layout import SnapshotFolder
from tests.conftest import UV, MakeVenv, Venv, run_tool
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

PROVIDERS = ("nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13")
GPU_SET = ("consumer", *PROVIDERS)


def snapshot_dirs(venv: Venv) -> list[SnapshotFolder]:
    return [venv.snapshot(i) for i in venv.state.ids()]


# -- the quickstart -------------------------------------------------------------------------


def test_quickstart_requests_urllib3_restored_exit_3(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    before = venv.file_hashes()

    run = venv.tool("--allow-unmet", "--probe", "import requests", "urllib3")

    assert run.returncode == 3, run.stdout + run.stderr
    assert "No module named 'urllib3'" in run.stdout
    assert "restored from the stash: urllib3==2.3.0" in run.stdout
    assert "all was restored and verified" in run.stdout
    assert venv.file_hashes() == before
    assert venv.run_python("import requests").returncode == 0


def test_json_output_has_the_contract_fields(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    data = venv.tool("--json", "--allow-unmet", "--probe", "import requests", "urllib3").json()
    assert data["outcome"] == "probe-failed-restored"
    assert data["exit_code"] == 3
    assert data["snapshot"] == "0001"
    assert data["removed"] == ["urllib3==2.3.0"]
    assert data["restored"] == ["urllib3==2.3.0"]
    probes = data["probes"]
    assert isinstance(probes, dict)
    assert [p["passed"] for p in probes["baseline"]] == [True]
    assert [p["passed"] for p in probes["after"]] == [False]
    # Restored from hash-checked stashes into the exact snapshot set: the environment is the one
    # the baseline passed in, so the probe is not paid for a third time.
    assert probes["after_restore"] == []
    assert "proven identical" in str(probes["after_restore_skipped"])
    verification = data["verification"]
    assert isinstance(verification, dict) and verification["ok"] is True


# -- the canonical case: libraries found only through RUNPATH ---------------------------------


def test_bare_uninstall_reveals_one_missing_library_at_a_time(make_venv: MakeVenv) -> None:
    """What the tool exists for, shown with bare uv: each round of repair finds the next one."""
    venv = make_venv(*GPU_SET)
    venv.uv("pip", "uninstall", "--python", str(venv.python), *PROVIDERS)
    seen = []
    for provider, lib in zip(
        PROVIDERS, ("libfoo.so.1", "libbar.so.2", "libbaz.so.3"), strict=False
    ):
        failure = venv.run_python("import consumer")
        assert failure.returncode != 0
        assert f"{lib}: cannot open shared object file" in failure.stderr
        seen.append(lib)
        venv.install(provider)
    assert seen == ["libfoo.so.1", "libbar.so.2", "libbaz.so.3"]
    assert venv.run_python("import consumer; assert consumer.CHECK == 123").returncode == 0


def test_all_providers_come_back_in_one_batch(make_venv: MakeVenv) -> None:
    venv = make_venv(*GPU_SET)
    before = venv.file_hashes()
    installed_before = venv.installed()

    run = venv.tool("--json", "--probe", "import consumer", *PROVIDERS)

    data = run.json()
    assert run.returncode == 3
    assert "libfoo.so.1: cannot open shared object file" in str(data["probes"])
    restore = data["restore"]
    assert isinstance(restore, dict)
    assert sorted(restore["from_stash"]) == sorted(f"{p}==1.0" for p in PROVIDERS)
    assert restore["reinstalled"] == []
    assert venv.installed() == installed_before
    assert venv.file_hashes() == before
    assert venv.run_python("import consumer; assert consumer.CHECK == 123").returncode == 0


def test_stash_is_hard_links_owner_only(make_venv: MakeVenv) -> None:
    venv = make_venv(*GPU_SET)
    lib = venv.site_packages / "nvfoo" / "lib" / "libfoo.so.1"
    inode = lib.stat().st_ino

    run = venv.tool("--no-probe", "nvfoo-cu13")

    assert run.returncode == 0, run.stderr
    assert not lib.exists()
    (folder,) = snapshot_dirs(venv)
    assert folder.path.stat().st_mode & 0o777 == 0o700
    kept = list(folder.path.rglob("libfoo.so.1"))
    assert len(kept) == 1
    assert kept[0].stat().st_ino == inode  # linked, not copied
    assert folder.snapshot_file.stat().st_mode & 0o777 == 0o600


# -- passing removals, rollback, rollback of a rollback -------------------------------------


def test_rollback_after_a_passing_removal_and_rollback_of_rollback(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    before = venv.file_hashes()
    assert (venv.root / "bin" / "toolpkg").exists()

    removed = venv.tool("--probe", "import requests", "leftpad", "toolpkg")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "removed; every probe passed" in removed.stdout
    assert "leftpad" not in venv.installed()
    assert not (venv.root / "bin" / "toolpkg").exists()
    after_removal = venv.file_hashes()

    dry = venv.tool("rollback", "--dry-run")
    assert dry.returncode == 0
    assert "missing, to restore: leftpad" in dry.stdout
    assert venv.file_hashes() == after_removal

    back = venv.tool("rollback")
    assert back.returncode == 0, back.stdout + back.stderr
    assert venv.file_hashes() == before
    assert subprocess.run([venv.root / "bin" / "toolpkg"], capture_output=True).returncode == 0

    # The rollback itself took snapshot 0002 of the state it left: roll back to it.
    again = venv.tool("rollback", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert venv.file_hashes() == after_removal
    assert "leftpad" not in venv.installed()


def test_rollback_replaces_a_changed_version_and_removes_added(make_venv: MakeVenv) -> None:
    venv = make_venv("urllib3==2.2.1")
    assert venv.tool("snapshot").returncode == 0
    before = venv.file_hashes()
    venv.install("urllib3==2.3.0", "leftpad")

    run = venv.tool("rollback", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["rollback_plan"] == {"added": ["leftpad"], "changed": ["urllib3"], "missing": []}
    assert venv.installed() == {"urllib3": "2.2.1"}
    assert venv.file_hashes() == before


def test_snapshots_and_show(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    venv.tool("--no-probe", "leftpad")
    listing = venv.tool("snapshots")
    assert listing.returncode == 0
    assert "0001" in listing.stdout and "leftpad" in listing.stdout and "removed" in listing.stdout
    shown = venv.tool("show", "1")
    assert "leftpad==1.0  [stashed" in shown.stdout
    assert "requests==2.32.3" in shown.stdout
    missing = venv.tool("show", "9")
    assert missing.returncode == 1
    assert "no snapshot '9'" in missing.stderr


# -- offline exactness: packages no index could give back ------------------------------------


def test_local_wheel_and_editable_restored_offline(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv()
    local = build_wheel(tmp_path / "local", "localbuilt", "0.0.1+local", {"localbuilt.py": "X=1\n"})
    src = tmp_path / "editable-src"
    (src / "edpkg").mkdir(parents=True)
    (src / "edpkg" / "__init__.py").write_text("VALUE = 42\n")
    (src / "pyproject.toml").write_text(
        '[project]\nname = "edpkg"\nversion = "0.1"\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    # A minimal in-tree PEP 660 backend: no setuptools download needed, offline.
    shutil.copy(Path(__file__).parent / "fixtures" / "editable_backend.py", src / "backend.py")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(local))
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", "-e", str(src))
    assert venv.run_python("import edpkg, localbuilt").returncode == 0
    before = venv.file_hashes()

    run = venv.tool(
        "--probe", "import edpkg, localbuilt; raise SystemExit(0)", "edpkg", "localbuilt"
    )

    assert run.returncode == 3, run.stdout + run.stderr
    assert venv.file_hashes() == before
    assert venv.run_python("import edpkg; assert edpkg.VALUE == 42").returncode == 0
    shown = venv.tool("show")
    assert "edpkg==0.1  [editable file://" in shown.stdout
    assert "localbuilt==0.0.1+local  [file file://" in shown.stdout


# -- when the stash can't be used ------------------------------------------------------------


def corrupt_stash(venv: Venv, name: str) -> None:
    (folder,) = snapshot_dirs(venv)
    victim = next(p for p in folder.stash_dir.rglob("*.py") if name in str(p))
    # Break the link first: writing through it would also change the installed file.
    data = victim.read_bytes()
    victim.unlink()
    victim.write_bytes(data + b"# tampered\n")


def test_tampered_stash_falls_back_to_one_pinned_reinstall(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    corrupt_stash(venv, "leftpad")

    run = venv.tool_reinstalling("rollback", "--json")

    data = run.json()
    assert run.returncode == 0, data
    restore = data["restore"]
    assert isinstance(restore, dict)
    assert restore["reinstalled"] == ["leftpad==1.0"]
    assert "does not match its sha256" in str(restore["notes"])
    assert venv.file_hashes() == before


def test_a_rollback_that_cannot_bring_a_tampered_stash_back_changes_nothing(
    make_venv: MakeVenv,
) -> None:
    """The stash's file changed: seen before anything changes, by its hash (a change of the
    same size too: test_rollback.py). It used to end exit 4, INCOMPLETE."""
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    corrupt_stash(venv, "leftpad")
    hashes = venv.file_hashes()

    run = venv.tool("rollback")  # offline, empty cache: nothing can reinstall it

    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot roll back to snapshot 0001: leftpad==1.0: its stash is not whole" in run.stderr
    assert "the environment was not changed" in run.stderr
    assert venv.file_hashes() == hashes


def test_keep_on_failure_reports_and_leaves_it_removed(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    run = venv.tool("--keep-on-failure", "--allow-unmet", "--probe", "import requests", "urllib3")
    assert run.returncode == 4
    assert "urllib3" not in venv.installed()
    assert "rollback 0001" in run.stdout
    assert venv.tool("rollback", "1").returncode == 0
    assert "urllib3" in venv.installed()


# -- before any change -----------------------------------------------------------------------


def test_baseline_failure_changes_nothing(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    run = venv.tool("--probe", "import not_installed_anywhere", "leftpad")
    assert run.returncode == 1
    assert "already fails before any change" in run.stderr
    assert "No module named 'not_installed_anywhere'" in run.stderr
    assert venv.file_hashes() == before
    assert not venv.state.snapshots_dir.exists() or not snapshot_dirs(venv)


def test_dry_run_changes_nothing(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    before = venv.file_hashes()
    run = venv.tool("--dry-run", "--allow-unmet", "urllib3")
    assert run.returncode == 0
    assert "would remove: urllib3==2.3.0" in run.stdout
    assert "depend on it (Requires-Dist): requests" in run.stdout
    assert venv.file_hashes() == before


def test_names_not_installed_are_skipped(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("--no-probe", "absent-one", "leftpad")
    assert run.returncode == 0
    assert "not installed, skipped: absent-one" in run.stdout
    nothing = venv.tool("absent-one", "absent-two")
    assert nothing.returncode == 0
    assert "nothing to do" in nothing.stdout


def test_invalid_name_is_refused_before_anything(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("not a name")
    assert run.returncode == 1
    assert "not a requirement: 'not a name'" in run.stderr


def test_requirements_file(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad", "toolpkg", "requests")
    reqs = tmp_path / "remove.txt"
    reqs.write_text("# cleanup\nleftpad==1.0\ntoolpkg ; python_version > '3'\n")
    run = venv.tool("--no-probe", "-r", str(reqs))
    assert run.returncode == 0, run.stderr
    assert set(venv.installed()) == {"requests", "urllib3"}
    missing = venv.tool("-r", str(tmp_path / "nope.txt"))
    assert missing.returncode == 1
    assert "nope.txt: file not found" in missing.stderr


def test_package_named_like_a_subcommand(make_venv: MakeVenv) -> None:
    venv = make_venv()
    wheel = build_wheel(venv.root.parent / "w", "rollback", "1.0", {"rollback_pkg.py": ""})
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(wheel))
    run = venv.tool("uninstall", "--no-probe", "rollback")
    assert run.returncode == 0, run.stderr
    assert "rollback" not in venv.installed()


# -- probes ----------------------------------------------------------------------------------


def test_default_probe_is_torch_when_torch_is_installed(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad")
    fake_torch = build_wheel(
        tmp_path / "t",
        "torch",
        "2.11.0",
        {
            "torch/__init__.py": "from torch import cuda, version\n",
            "torch/version.py": "cuda = None  # a CPU build\n",
            "torch/cuda.py": "import leftpad\ndef device_count():\n    return 0\n",
        },
    )
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(fake_torch))
    run = venv.tool("leftpad")
    assert run.returncode == 3, run.stdout
    assert "torch's CUDA initialisation" in run.stdout
    assert "torch.cuda.device_count()" in run.stdout


def test_default_probe_imports_dependents(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    run = venv.tool("--allow-unmet", "urllib3")
    assert run.returncode == 3
    assert "from what the removal affects (requests): 1 module;" in run.stdout


def test_probe_config_precedence(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("requests")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[tool.safe-uninstall]\nprobe = "raise SystemExit(7)"\n'
    )
    from_project = venv.tool("probe", "--json", cwd=project / "sub").json()
    assert from_project["outcome"] == "failed"
    assert "pyproject.toml" in str(from_project["probes"])
    from_env = venv.tool(
        "probe", "--json", cwd=project / "sub", SAFE_UNINSTALL_PROBE="import requests"
    ).json()
    assert from_env["outcome"] == "passed"
    from_cli = venv.tool(
        "probe",
        "--json",
        "--probe",
        "raise SystemExit(3)",
        cwd=project,
        SAFE_UNINSTALL_PROBE="import requests",
    ).json()
    assert from_cli["outcome"] == "failed"
    (project / "pyproject.toml").write_text('[tool.safe-uninstall]\nprobes = "x"\n')
    unknown = venv.tool("probe", cwd=project)
    assert unknown.returncode == 2
    assert "unknown key 'probes'" in unknown.stderr


def test_probe_cmd_runs_with_env_bin_on_path(make_venv: MakeVenv) -> None:
    venv = make_venv("toolpkg")
    ok = venv.tool("probe", "--probe-cmd", "toolpkg")
    assert ok.returncode == 0, ok.stdout
    run = venv.tool("--probe-cmd", "toolpkg", "toolpkg")
    assert run.returncode == 3
    assert (venv.root / "bin" / "toolpkg").exists()


def test_probe_timeout_kills_the_whole_group(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    run = venv.tool("probe", "--probe", code, "--probe-timeout", "1")
    assert run.returncode == 1
    assert "timed out" in run.stdout
    child = int(pidfile.read_text())
    assert not is_running(child)


def is_running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie lingers where PID 1 does not reap)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def test_syntax_error_probe_is_refused_before_anything(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("--probe", "import (", "leftpad")
    assert run.returncode == 1
    assert "is not valid Python" in run.stderr
    assert "leftpad" in venv.installed()


# -- finding the target ----------------------------------------------------------------------


def test_target_from_virtual_env_and_dot_venv(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    env = {**os.environ, "VIRTUAL_ENV": str(venv.root)}
    listed = run_tool("snapshots", env=env)
    assert listed.returncode == 0, listed.stderr
    project = tmp_path / "proj"
    (project / "deep").mkdir(parents=True)
    os.symlink(venv.root, project / ".venv")
    dry = run_tool("--dry-run", "leftpad", cwd=project / "deep")
    assert dry.returncode == 0, dry.stderr
    assert str(project / ".venv") in dry.stdout
    # no Python of a virtual environment first on PATH either (uv's last resort)
    outside = {**os.environ, "PATH": "/usr/bin:/bin"}
    nowhere = run_tool("--dry-run", "leftpad", cwd=tmp_path, env=outside)
    assert nowhere.returncode == 1
    assert "no target environment" in nowhere.stderr


def test_target_that_is_not_an_environment(tmp_path: Path) -> None:
    run = run_tool("--python", str(tmp_path), "leftpad")
    assert run.returncode == 1
    assert "is not a Python environment" in run.stderr


def test_second_operation_waits_then_gives_up(make_venv: MakeVenv) -> None:
    import filelock

    venv = make_venv("leftpad")
    state = venv.root / ".safe-uninstall"
    state.mkdir()
    with filelock.FileLock(str(state / "lock")):
        run = venv.tool("--lock-timeout", "0.2", "--no-probe", "leftpad")
    assert run.returncode == 1
    assert "another safe-uninstall operation is running" in run.stderr
    assert "leftpad" in venv.installed()


def test_baseline_is_cached_for_an_unchanged_environment(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    first = venv.tool("--json", "--probe", "import requests", "leftpad").json()
    assert [p["cached"] for p in first["probes"]["baseline"]] == [False]  # type: ignore[index]
    # The passing probe after the first removal is the baseline of the environment it left.
    second = venv.tool("--json", "--probe", "import requests", "toolpkg").json()
    assert second["exit_code"] == 0
    assert [p["cached"] for p in second["probes"]["baseline"]] == [True]  # type: ignore[index]
    # Another probe, or --fresh-baseline, runs it again.
    venv.install("leftpad")
    other = venv.tool("--json", "--fresh-baseline", "--probe", "import requests", "leftpad").json()
    assert [p["cached"] for p in other["probes"]["baseline"]] == [False]  # type: ignore[index]


def test_changed_environment_invalidates_the_cached_baseline(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    assert venv.tool("--probe", "import requests", "leftpad").returncode == 0
    venv.uv("pip", "uninstall", "--python", str(venv.python), "urllib3")  # behind our back
    run = venv.tool("--probe", "import requests", "toolpkg")
    assert run.returncode == 1  # the baseline really ran, and failed
    assert "already fails before any change" in run.stderr


def test_pip_fallback_when_no_uv(tmp_path: Path, wheelhouse: object) -> None:
    """SAFE_UNINSTALL_UV=none: the target's own pip removes, and the stash restores."""
    import sys

    from tests.conftest import Wheelhouse

    assert isinstance(wheelhouse, Wheelhouse)
    root = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)  # ensurepip: offline
    python = root / "bin" / "python"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            wheelhouse.path,
            "requests",
        ],
        check=True,
    )
    env = {**os.environ, "SAFE_UNINSTALL_UV": "none"}
    run = run_tool(
        "-p", str(root), "--json", "--allow-unmet", "--probe", "import requests", "urllib3", env=env
    )
    data = run.json()
    assert run.returncode == 3, data
    assert data["restored"] == ["urllib3==2.3.0"]
    assert subprocess.run([python, "-c", "import requests"]).returncode == 0
    passed = run_tool("-p", str(root), "--no-probe", "--allow-unmet", "urllib3", env=env)
    assert passed.returncode == 0, passed.stderr
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "freeze"], capture_output=True, text=True
    )
    assert "urllib3" not in listed.stdout


def test_different_environments_do_not_wait_for_each_other(make_venv: MakeVenv) -> None:
    import filelock

    busy, free = make_venv("leftpad"), make_venv("leftpad")
    (busy.root / ".safe-uninstall").mkdir()
    with filelock.FileLock(str(busy.root / ".safe-uninstall" / "lock")):
        run = free.tool("--lock-timeout", "0", "--no-probe", "leftpad")
        blocked = busy.tool("--lock-timeout", "0", "--no-probe", "leftpad")
    assert run.returncode == 0, run.stderr
    assert blocked.returncode == 1 and "another safe-uninstall operation" in blocked.stderr


def test_probe_after_restore_when_asked_or_when_anything_was_reinstalled(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    forced = venv.tool(
        "--json", "--allow-unmet", "--probe-after-restore", "--probe", "import requests", "urllib3"
    ).json()
    assert forced["exit_code"] == 3
    assert [p["passed"] for p in forced["probes"]["after_restore"]] == [True]  # type: ignore[index]
    assert forced["probes"]["after_restore_skipped"] is None  # type: ignore[index]


def test_stash_hashed_during_the_probe_is_trusted_only_while_unchanged(
    make_venv: MakeVenv,
) -> None:
    # leftpad a copy of its own: its stash is written into in place below, and a hard link
    # would carry that write into the session's uv cache (and every later install of leftpad).
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    # The probe sleeps a little, so the stash is hashed while it runs.
    probe = "import time, requests; time.sleep(0.3)"
    assert venv.tool("--probe", probe, "leftpad").returncode == 0
    (folder,) = snapshot_dirs(venv)
    verified = json.loads(folder.verified_file.read_text())["data"]
    assert any(key.endswith("leftpad.py") for key in verified)
    # Rewrite the stashed copy in place (same inode, new mtime): it must be read again and
    # refused, and the reinstall must come from the wheelhouse instead.
    victim = next(p for p in folder.stash_dir.rglob("leftpad.py"))
    victim.write_bytes(victim.read_bytes() + b"# tampered in place\n")
    run = venv.tool_reinstalling("rollback", "--json", "1")
    data = run.json()
    assert run.returncode == 0, data
    assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]


def test_a_file_already_missing_before_the_removal_does_not_block_the_restore(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    (venv.site_packages / "requests" / "api.py").unlink()  # gone before we came
    before = venv.file_hashes()
    run = venv.tool("--json", "--probe", "import requests", "requests")
    data = run.json()
    assert run.returncode == 3, data
    assert data["verification"]["ok"] is True  # type: ignore[index]
    assert venv.file_hashes() == before  # as it was: still without that file
    assert not venv.journal.exists()
    assert venv.tool("--dry-run", "requests").returncode == 0  # nothing left to recover


def test_a_locally_modified_file_comes_back_as_it_was(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    patched = venv.site_packages / "leftpad.py"
    # A new file, as an editor saves one: writing through the link would change uv's cache,
    # which the session's other venvs install from.
    text = patched.read_text()
    patched.unlink()
    patched.write_text(text + "# patched on this machine\n")
    before = venv.file_hashes()
    # The probe sleeps, so the stash is hashed (as installed) while it runs.
    probe = "import time; time.sleep(0.5); import leftpad"
    run = venv.tool("--json", "--probe", probe, "leftpad")
    data = run.json()
    assert run.returncode == 3, data
    assert "modified locally before the removal" in str(data["restore"])
    assert venv.file_hashes() == before


def test_rollback_keeps_a_distribution_that_shares_files_whole(make_venv: MakeVenv) -> None:
    venv = make_venv("sharedlib-cu12")
    assert venv.tool("snapshot").returncode == 0
    before = venv.file_hashes()
    venv.install("sharedlib-cu13")  # overwrites sharedlib/__init__.py
    run = venv.tool("rollback", "--json", "1", "--no-probe")
    data = run.json()
    assert run.returncode == 0, data
    assert venv.installed() == {"sharedlib-cu12": "1.0"}
    assert venv.file_hashes() == before
    assert venv.run_python("import sharedlib; assert sharedlib.FLAVOUR == 'cu12'").returncode == 0


def test_probe_cmd_with_a_relative_path(make_venv: MakeVenv, tmp_path: Path) -> None:
    """Probes run in an empty folder; ./check.sh is found where the user typed it."""
    venv = make_venv("toolpkg")
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\nexec toolpkg\n")
    script.chmod(0o755)
    ok = venv.tool("probe", "--probe-cmd", "./check.sh", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    run = venv.tool("--probe-cmd", "./check.sh", "toolpkg", cwd=tmp_path)
    assert run.returncode == 3, run.stdout


def test_verified_restore_whose_probe_still_fails_exits_5_not_4(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A probe that passes once and then always fails: the restore is proven by hashes, so the
    environment equals the snapshot; exit 5 says the probe fails there, not 4 (incomplete)."""
    venv = make_venv("requests")
    before = venv.file_hashes()
    runs = tmp_path / "runs"
    probe = f"sh -c 'test -e {runs} && exit 1; touch {runs}'"

    run = venv.tool("--json", "--probe-after-restore", "--probe-cmd", probe, "requests")

    assert run.returncode == 5, run.stdout + run.stderr
    data = run.json()
    assert data["outcome"] == "restored-probe-fails"
    assert data["verification"]["ok"] is True
    assert not venv.journal.exists()
    assert venv.file_hashes() == before
