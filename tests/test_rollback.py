"""Rollback undoes the right thing.

A plain ``rollback`` returns to the state before the latest change still in effect (snapshots
taken by rollbacks and removals already restored are passed over); a rollback that uninstalls
anything is judged like a removal and put back when it fails; nothing is removed before every
package it must bring back is known to be restorable.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import MakeVenv, Venv, installer_calls, logging_uv, stand_in_uv
from tests.realstack import RealVenv, Stacks
from tests.wheels import build_wheel


def _files_of(venv: Venv, name: str) -> set[str]:
    """Every file the installed distribution ``name`` lists in its RECORD, as file_hashes
    names them (relative to the venv)."""
    (record,) = venv.site_packages.glob(f"{name}-*.dist-info/RECORD")
    paths = (line.rsplit(",", 2)[0] for line in record.read_text().splitlines() if line)
    return {
        os.path.relpath(os.path.normpath(venv.site_packages / path), venv.root) for path in paths
    }


def _without(hashes: dict[str, str], files: set[str]) -> dict[str, str]:
    return {path: sha for path, sha in hashes.items() if path not in files}


def _snapshot_ids(venv: Venv) -> list[str]:
    return sorted(p.name for p in venv.state.snapshots_dir.iterdir())


# -- the case as reported, on the real requests stack --------------------------------------


def test_a_rollback_after_an_outside_removal_returns_to_the_state_before_it(
    real_venv: RealVenv, stacks: Stacks
) -> None:
    """`safe-uninstall --no-probe urllib3; safe-uninstall rollback; uv pip uninstall idna;
    safe-uninstall rollback`: the last rollback used to return to the snapshot the first one
    took, removing urllib3 again (exit 0, requests broken). It brings idna back instead.
    (The first command is now refused, requests requiring urllib3: --allow-unmet makes it.)"""
    venv = real_venv("requests")
    # The user's uv cache is warm (uv installed idna from it): idna, never stashed by the tool,
    # can come back from there, offline.
    warm = {"UV_CACHE_DIR": str(stacks.uv_cache)}
    if stacks.indexes:  # the stack was installed from the machine's local index mirror
        warm |= {
            "UV_EXTRA_INDEX_URL": " ".join(stacks.indexes),
            "UV_INDEX_STRATEGY": "unsafe-best-match",
        }
    whole = venv.file_hashes()
    urllib3, idna = _files_of(venv, "urllib3"), _files_of(venv, "idna")

    refused = venv.tool("--no-probe", "urllib3", **warm)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "unmet requirement: requests requires urllib3" in refused.stdout
    assert venv.file_hashes() == whole

    removed = venv.tool("--no-probe", "--allow-unmet", "urllib3", **warm)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert venv.file_hashes() == _without(whole, urllib3)

    first = venv.tool("rollback", **warm)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "chosen: 0001: the state before the removal of urllib3 (removed)" in first.stdout
    assert venv.file_hashes() == whole

    venv.uv("pip", "uninstall", "--python", str(venv.python), "idna")
    assert venv.file_hashes() == _without(whole, idna)

    second = venv.tool("rollback", **warm)

    assert second.returncode == 0, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    assert "snapshot: 0001" in lines
    assert "passed over: 0002: taken by a rollback (to 0001)" in lines
    assert (
        "chosen: 0001: the state rollback 0002 returned to; the environment changed since" in lines
    )
    assert "missing, to restore: idna" in lines
    assert not any(line.startswith("added since the snapshot") for line in lines)
    assert venv.file_hashes() == whole
    assert venv.run_python("import requests").returncode == 0


def test_returning_to_a_rollbacks_own_snapshot_is_judged_on_the_real_stack(
    real_venv: RealVenv,
) -> None:
    """`rollback 2` after `--no-probe urllib3; rollback`: the state without urllib3, which
    requests requires. Refused like the removal it is; with --allow-unmet the probe derived from
    the impact report fails after it and passed before: put back, every file as it was."""
    venv = real_venv("requests")
    assert venv.tool("--no-probe", "--allow-unmet", "urllib3").returncode == 0  # 0001
    assert venv.tool("rollback").returncode == 0  # 0002: the state without urllib3
    whole = venv.file_hashes()

    refused = venv.tool("rollback", "2")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "unmet requirement: requests requires urllib3" in refused.stdout
    assert venv.file_hashes() == whole

    run = venv.tool("rollback", "2", "--allow-unmet", "--json")

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "rollback-probe-failed-restored"
    assert "requests" in data["impact"]["dependents"]
    assert all(p["passed"] for p in data["probes"]["baseline"])
    assert not all(p["passed"] for p in data["probes"]["after"])
    assert data["undo"]["verification"]["ok"]
    assert venv.file_hashes() == whole
    assert venv.run_python("import requests").returncode == 0


# -- what a plain rollback passes over ------------------------------------------------------


def test_a_restored_attempt_is_passed_over(make_venv: MakeVenv) -> None:
    """A removal, then an attempt whose probe failed and was restored: a plain rollback used to
    say "already matches" (the attempt's snapshot); it undoes the removal."""
    venv = make_venv("requests", "leftpad", "toolpkg")
    whole = venv.file_hashes()
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001
    attempt = venv.tool("--probe", "import toolpkg", "toolpkg")  # 0002, restored
    assert attempt.returncode == 3, attempt.stdout + attempt.stderr

    run = venv.tool("rollback", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["snapshot"] == "0001"
    assert data["rollback_choice"] == {
        "snapshot": "0001",
        "reason": "the state before the removal of leftpad (removed), still in effect",
        "skipped": [
            {"snapshot": "0002", "reason": "its uninstall was undone (probe-failed-restored)"}
        ],
    }
    assert venv.file_hashes() == whole


def test_a_rollback_is_not_redone_by_the_next_plain_one(make_venv: MakeVenv) -> None:
    """Rolling back twice used to return to the first rollback's own snapshot: the removal came
    back. With nothing changed since, there is nothing to roll back."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    assert venv.tool("rollback").returncode == 0
    whole = venv.file_hashes()

    run = venv.tool("rollback", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["outcome"] == "nothing-to-roll-back"
    assert [s["snapshot"] for s in data["rollback_choice"]["skipped"]] == ["0002", "0001"]
    assert venv.file_hashes() == whole
    assert _snapshot_ids(venv) == ["0001", "0002"]


# -- a rollback that uninstalls is judged, and undone when it fails -------------------------


def test_a_rollback_whose_probe_fails_is_undone(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    assert venv.tool("snapshot").returncode == 0  # 0001
    venv.install("toolpkg")  # since: the rollback removes it
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("rollback", "--probe", "import toolpkg", "--json")

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "rollback-probe-failed-restored"
    probes = data["probes"]
    assert [p["passed"] for p in probes["baseline"]] == [True]
    assert [p["passed"] for p in probes["after"]] == [False]
    assert data["verification"]["ok"]  # it did reach snapshot 0001 ...
    assert data["undo"]["verification"]["ok"]  # ... and was put back, verified
    assert data["undo"]["restored"] == ["toolpkg==1.0"]
    assert (  # what its verification proved, not that the whole environment is back
        "the installed set is back as snapshot 0002 has it, and the 9 files brought back match "
        "their hashes"
    ) in data["messages"]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()
    # The undone rollback changed nothing: the next plain rollback passes over it.
    again = venv.tool("rollback", "--dry-run", "--json").json()
    assert again["snapshot"] == "0001"
    assert again["rollback_choice"]["skipped"] == [
        {"snapshot": "0002", "reason": "its rollback was undone (rollback-probe-failed-restored)"}
    ]


def test_a_rollback_that_removes_is_judged_like_a_removal(make_venv: MakeVenv) -> None:
    """``rollback ID`` of the first rollback's own snapshot removes urllib3, which requests
    needs: refused like such a removal; with --allow-unmet the derived probe imports requests,
    and the rollback is undone when it fails."""
    venv = make_venv("requests")
    assert venv.tool("--no-probe", "--allow-unmet", "urllib3").returncode == 0  # 0001
    assert venv.tool("rollback").returncode == 0  # 0002: the state without urllib3
    hashes, installed = venv.file_hashes(), venv.installed()

    refused = venv.tool("rollback", "2")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    lines = refused.stdout.splitlines()
    assert "added since the snapshot, to remove: urllib3" in lines
    assert "unmet requirement: requests requires urllib3>=2" in lines
    assert refused.stdout.count("refused:") == 1, refused.stdout  # said once
    assert lines[-1] == (
        "rollback: refused: it would leave 1 requirement of requests unmet; nothing was changed"
    )
    assert venv.file_hashes() == hashes
    assert _snapshot_ids(venv) == ["0001", "0002"]

    run = venv.tool("rollback", "--allow-unmet", "2")

    assert run.returncode == 3, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "--allow-unmet: 1 requirement left unmet; the probe judges the rollback" in lines
    assert "depend on it (Requires-Dist): requests" in lines
    assert any(line.strip().startswith("FAILED: import requests") for line in lines)
    assert "putting the environment back as it was before:" in lines
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


@pytest.mark.parametrize(
    ("requirement", "refused"), [("urllib3>=2", False), ("urllib3>=2.3", True)]
)
def test_a_replaced_version_leaves_a_requirement_unmet_only_when_it_does_not_meet_it(
    make_venv: MakeVenv, tmp_path: Path, requirement: str, refused: bool
) -> None:
    """Replacing urllib3 2.3.0 by the snapshot's 2.2.1 keeps urllib3 installed: a dependent's
    requirement counts as unmet only when 2.2.1 does not meet it."""
    build_wheel(tmp_path, "needsurl", "1.0", {"needsurl.py": ""}, requires=[requirement])
    venv = make_venv("urllib3==2.2.1")
    venv.uv(
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--no-deps",
        "--find-links",
        str(tmp_path),
        "--no-index",
        "needsurl",
    )
    assert venv.tool("snapshot").returncode == 0  # 0001: urllib3 2.2.1
    venv.install("urllib3==2.3.0")
    hashes = venv.file_hashes()

    run = venv.tool("rollback", "--no-probe", "--json")

    data = run.json()
    if refused:
        assert run.returncode == 1, data
        assert data["outcome"] == "refused-unmet"
        assert [u["dependent"] for u in data["impact"]["unmet"]] == ["needsurl"]
        assert venv.file_hashes() == hashes
    else:
        assert run.returncode == 0, data
        assert data["impact"]["unmet"] == []
        assert venv.installed()["urllib3"] == "2.2.1"


# -- nothing is removed before everything can come back -------------------------------------


def _replace(path: Path, content: bytes) -> None:
    """A new file in place of ``path`` (never an edit in place: the inode may be shared)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(content)
    os.replace(fresh, path)


def test_a_snapshot_whose_stash_is_gone_is_refused_unchanged(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001 stashes leftpad
    venv.install("toolpkg")
    shutil.rmtree(venv.snapshot("0001").stash_dir)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("rollback")  # offline, an empty uv cache: leftpad is nowhere

    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot roll back to snapshot 0001: leftpad==1.0: its stash is not whole (" in (
        run.stderr
    )
    assert "stashed copy unreadable: No such file or directory), and uv cannot install" in (
        run.stderr
    )
    assert "the environment was not changed" in run.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()
    assert _snapshot_ids(venv) == ["0001"]


def test_a_replaced_version_whose_stash_lost_a_file_is_refused_unchanged(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("urllib3==2.2.1")
    assert venv.tool("snapshot").returncode == 0  # 0001 stashes every file
    venv.install("urllib3==2.3.0")
    (kept,) = venv.snapshot("0001").path.rglob("urllib3/__init__.py")
    kept.unlink()
    hashes = venv.file_hashes()

    run = venv.tool("rollback", "--no-probe")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot roll back to snapshot 0001: urllib3==2.2.1: its stash is not whole" in run.stderr
    assert venv.installed() == {"urllib3": "2.3.0"}
    assert venv.file_hashes() == hashes


def test_a_stash_of_the_same_size_but_other_bytes_is_refused_unchanged(
    make_venv: MakeVenv,
) -> None:
    """The stash is all there but its bytes changed (same size): the check before anything is
    removed hashes it, as the restore would. It used to pass a size check, remove toolpkg, find
    the stash bad during the restore and put toolpkg back (exit 3); nothing changes now."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001
    venv.install("toolpkg")
    (kept,) = venv.snapshot("0001").path.rglob("leftpad.py")
    _replace(kept, b"X" * kept.stat().st_size)  # same size: only hashing tells
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("rollback", "--no-probe")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot roll back to snapshot 0001: leftpad==1.0: its stash is not whole (lib/" in (
        run.stderr
    )
    assert "/leftpad.py: stashed copy does not match its sha256" in run.stderr
    assert "the environment was not changed" in run.stderr
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()
    assert _snapshot_ids(venv) == ["0001"]


_SPOIL_OWN_STASH = """
import os, pathlib, sys
own = pathlib.Path({stash!r})
kept = sorted(own.glob("*/**/urllib3/__init__.py"))
if kept:  # after the rollback: spoil its own stash, then fail
    if {how!r} == "altered":
        fresh = kept[0].with_name("new")
        fresh.write_bytes(b"#" * kept[0].stat().st_size)
        os.replace(fresh, kept[0])
    else:
        kept[0].unlink()
    sys.exit(1)
"""


@pytest.mark.parametrize("how", ["altered", "deleted"])
def test_an_undo_that_cannot_come_back_changes_nothing(make_venv: MakeVenv, how: str) -> None:
    """The probe passed before the rollback and fails after it, and the rollback's own stash
    of what it removed is spoiled meanwhile: the undo checks first, as run's does. It used to
    uninstall what the rollback brought, fail to bring back what it removed, and end with
    neither (exit 4, urllib3 gone); now it changes nothing and says why."""
    venv = make_venv("urllib3==2.2.1")
    assert venv.tool("snapshot").returncode == 0  # 0001
    returned = venv.file_hashes()
    venv.install("urllib3==2.3.0")
    probe = _SPOIL_OWN_STASH.format(stash=str(venv.snapshot("0002").stash_dir), how=how)

    run = venv.tool("rollback", "1", "--probe", probe, "--json")

    data = run.json()
    assert run.returncode == 5, data
    assert data["outcome"] == "rolled-back-probe-fails"
    said = "\n".join(data["messages"])
    assert (
        "cannot put the environment back as it was before the rollback: urllib3==2.3.0: its "
        "stash is not whole (lib/"
    ) in said
    assert "/urllib3/__init__.py: stashed copy " in said
    assert "nothing was undone: the environment is as the rollback left it" in said
    assert "rollback 0002 returns to the state before it" in said
    assert data["undo"] is None
    assert venv.installed() == {"urllib3": "2.2.1"}
    assert venv.file_hashes() == returned
    assert not venv.journal.exists()


# -- two dist-info folders of one distribution ----------------------------------------------


def _install_beside(venv: Venv, wheel: Path) -> None:
    """Extract ``wheel`` into site-packages without removing the installed version: the layout
    uv leaves when it is killed half way through an uninstall or an upgrade. A file both
    versions list is replaced by a new one (never edited in place: its inode may be uv's
    cache's)."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            dest = venv.site_packages / member
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.unlink(missing_ok=True)
            dest.write_bytes(archive.read(member))


def _doubled_urllib3(
    make_venv: MakeVenv, installed: str = "2.2.1", beside: str = "2.3.0"
) -> tuple[Venv, dict[str, str]]:
    """urllib3 ``installed`` and snapshotted (0001), then ``beside`` extracted beside it."""
    venv = make_venv(f"urllib3=={installed}")
    assert venv.tool("snapshot").returncode == 0  # 0001: stashes urllib3
    hashes = venv.file_hashes()
    _install_beside(venv, venv.wheelhouse / f"urllib3-{beside}-py3-none-any.whl")
    folders = sorted(p.name for p in venv.site_packages.glob("urllib3-*.dist-info"))
    assert folders == ["urllib3-2.2.1.dist-info", "urllib3-2.3.0.dist-info"]
    assert venv.file_hashes() != hashes
    return venv, hashes


def _kept_aside(venv: Venv, snapshot: str) -> dict[str, bytes]:
    aside = venv.snapshot(snapshot).aside_dir
    return {
        str(p.relative_to(aside)).split("/site-packages/")[-1]: p.read_bytes()
        for p in aside.rglob("*")
        if p.is_file()
    }


def test_a_removal_restored_beside_a_second_dist_info_folder_ends_restored(
    make_venv: MakeVenv,
) -> None:
    """leftpad removed from an environment where urllib3 is installed twice: the probe fails,
    leftpad comes back, and urllib3-2.3.0.dist-info, there before and left alone, is no
    difference from the snapshot. It used to end probe-failed-incomplete (exit 4, the journal
    kept), the verification flagging that folder as "a second dist-info folder"."""
    venv, _ = _doubled_urllib3(make_venv)
    venv.install("leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("--json", "--probe", "import leftpad", "leftpad")

    data = run.json()
    assert data["outcome"] == "probe-failed-restored", data
    assert run.returncode == 3
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_recover_after_a_killed_removal_keeps_a_second_dist_info_folder_from_before_it(
    make_venv: MakeVenv,
) -> None:
    """leftpad's removal is killed before its probe, where urllib3 is installed twice: the
    removal's snapshot keeps urllib3-2.3.0.dist-info aside (hard links), so `recover` knows
    the folder was there before and brings back leftpad alone. It used to remove both urllib3
    folders and bring back 2.2.1 alone (here from snapshot 0001's stash; where no stash holds
    it, offline, the recover was refused)."""
    venv, _ = _doubled_urllib3(make_venv)
    venv.install("leftpad")
    hashes, installed = venv.file_hashes(), venv.installed()
    killed = venv.tool("--probe", "import leftpad", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert "leftpad" not in venv.installed()

    recovered = venv.tool("--json", "recover", "--no-probe")

    data = recovered.json()
    assert data["outcome"] == "recovered", data
    assert recovered.returncode == 0
    messages = "\n".join(data["messages"])  # type: ignore[arg-type]
    assert "not put back" not in messages and "installed twice" not in messages
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_rollback_removes_a_second_dist_info_folder(make_venv: MakeVenv) -> None:
    """It used to say "the environment already matches snapshot 0001" (it read 2.2.1 only)
    and change nothing: both folders stayed, urllib3/__init__.py held 2.3.0's bytes."""
    venv, hashes = _doubled_urllib3(make_venv)

    run = venv.tool("rollback", "1", "--no-probe", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["outcome"] == "rolled-back"
    said = "\n".join(data["messages"])
    assert (
        "urllib3 is installed twice (urllib3-2.2.1.dist-info, urllib3-2.3.0.dist-info): both "
        "are removed"
    ) in said
    assert data["verification"]["ok"]
    assert venv.file_hashes() == hashes  # verified by hashes: 2.2.1 alone, as it was
    assert venv.installed() == {"urllib3": "2.2.1"}
    # Nothing lost: 2.3.0's files are kept aside in the rollback's own snapshot.
    aside = _kept_aside(venv, "0002")
    assert aside["urllib3/__init__.py"] == b"VERSION = '2.3.0'\n"
    assert "urllib3-2.3.0.dist-info/RECORD" in aside


def test_a_legacy_copy_beside_a_second_dist_info_folder_is_not_removed_unstashed(
    make_venv: MakeVenv,
) -> None:
    """Only the dist-info folders are kept aside: an .egg-info copy of the same name stays the
    stash's to refuse (uv removes every copy of a name). It used to be dropped from what the
    stash looked at, with the dist-info folders beside it."""
    venv, _ = _doubled_urllib3(make_venv)
    # A `setup.py install` of urllib3 9.0 beside them: an .egg-info folder uv uninstalls.
    egg = venv.site_packages / "urllib3-9.0-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: urllib3\nVersion: 1.0\n")
    (egg / "top_level.txt").write_text("urllib3_legacy\n")
    (egg / "installed-files.txt").write_text(
        "../urllib3_legacy.py\nPKG-INFO\ntop_level.txt\ninstalled-files.txt\n"
    )
    (venv.site_packages / "urllib3_legacy.py").write_text("LEGACY = 1\n")
    before = venv.file_hashes()

    run = venv.tool("rollback", "1", "--no-probe", "--json")

    data = run.json()
    assert run.returncode != 0, data
    assert (venv.site_packages / "urllib3_legacy.py").read_text() == "LEGACY = 1\n"
    assert venv.file_hashes() == before, data


def test_recover_removes_a_second_dist_info_folder(make_venv: MakeVenv) -> None:
    """The case as reported: an operation cut short, a second dist-info folder beside the one
    the snapshot holds. Every recover used to end INCOMPLETE (exit 4, "a second dist-info
    folder: urllib3-2.3.0.dist-info") until the folder was deleted by hand."""
    venv = make_venv("urllib3==2.2.1")
    hashes = venv.file_hashes()
    killed = venv.tool("--no-probe", "urllib3", SAFE_UNINSTALL_FAULT="uninstall:KILL")
    assert killed.returncode == -9  # 0001 stashed urllib3 2.2.1; uv never ran
    _install_beside(venv, venv.wheelhouse / "urllib3-2.3.0-py3-none-any.whl")

    run = venv.tool("recover", "--no-probe", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["outcome"] == "recovered"
    assert data["verification"]["ok"]
    assert venv.file_hashes() == hashes
    assert venv.installed() == {"urllib3": "2.2.1"}
    assert not venv.journal.exists()
    assert _kept_aside(venv, "0002")["urllib3/__init__.py"] == b"VERSION = '2.3.0'\n"


def test_doctor_reports_a_second_dist_info_folder(make_venv: MakeVenv) -> None:
    venv, _ = _doubled_urllib3(make_venv)

    run = venv.tool("doctor", "--json")

    data = run.json()
    assert run.returncode == 1, data
    (finding,) = data["findings"]
    assert finding["kind"] == "doubled"
    assert finding["what"] == "urllib3"
    assert finding["detail"] == "urllib3-2.2.1.dist-info, urllib3-2.3.0.dist-info"
    assert (finding["provider"], finding["snapshot"]) == ("urllib3==2.2.1", "0001")
    assert data["repair_command"].endswith("rollback 0001")
    text = venv.tool("doctor").stdout
    assert (
        "urllib3 is installed more than once: urllib3-2.2.1.dist-info, urllib3-2.3.0.dist-info "
        "(an uninstall or an upgrade cut short left a second version)"
    ) in text
    assert "snapshot 0001 keeps urllib3==2.2.1: a rollback to it removes every folder" in text


def test_rollback_removes_a_second_dist_info_folder_that_sorts_first(make_venv: MakeVenv) -> None:
    """The snapshot's version is the folder importlib does not see (2.3.0 sorts after 2.2.1):
    the rollback used to refuse ("installed more than once ... nothing was removed")."""
    venv, hashes = _doubled_urllib3(make_venv, installed="2.3.0", beside="2.2.1")

    run = venv.tool("rollback", "1", "--no-probe", "--json")

    data = run.json()
    assert run.returncode == 0, data
    assert data["verification"]["ok"]
    assert venv.file_hashes() == hashes
    assert venv.installed() == {"urllib3": "2.3.0"}


def test_run_does_not_take_a_second_dist_info_folder_found_there_for_its_change(
    make_venv: MakeVenv,
) -> None:
    """A rollback removes every folder of such a name; ``run`` must not: the folder was there
    before its command, and its undo keeps no stash of it."""
    venv, _ = _doubled_urllib3(make_venv)
    hashes = venv.file_hashes()

    run = venv.tool("run", "--no-probe", "--json", "--", str(venv.python), "-c", "pass")

    data = run.json()
    assert run.returncode == 0, data
    assert data["outcome"] == "ran-no-change"
    assert venv.file_hashes() == hashes


_SPOIL_BOTH_STASHES = """
import pathlib
for stash in {stashes!r}:
    for kept in sorted(pathlib.Path(stash).glob("urllib3-*/**/urllib3/__init__.py")):
        kept.unlink()  # 0001's (what the rollback brings back) and 0002's (what it removes)
"""


def test_a_failed_rollback_that_cannot_be_undone_names_the_way_out(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The rollback's restore fails (0001's stash lost a file while uv ran, and no index is
    reachable), and its undo is refused for the same reason (its own stash lost one too). It
    used to end "the rollback could not complete, and putting it back is INCOMPLETE" with no
    journal and no next command, urllib3 missing from both states. It now says what state the
    environment is in, and names the rollback to the state before it, which works once an
    index is reachable."""
    venv = make_venv("urllib3==2.2.1")
    assert venv.tool("snapshot").returncode == 0  # 0001
    venv.install("urllib3==2.3.0")
    before = venv.file_hashes()
    stashes = [str(venv.snapshot(i).stash_dir) for i in ("0001", "0002")]
    uv = stand_in_uv(tmp_path / "uv", _SPOIL_BOTH_STASHES.format(stashes=stashes))

    run = venv.tool("rollback", "1", "--no-probe", "--json", SAFE_UNINSTALL_UV=str(uv))

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "rollback-failed-not-undone"
    said = "\n".join(data["messages"])
    assert "the environment could not be made to match snapshot 0001" in said
    assert "cannot put the environment back as it was before the rollback: urllib3==2.3.0" in said
    assert (
        "nothing was undone: the environment matches neither snapshot 0001 (missing "
        "urllib3==2.2.1) nor the state before the rollback, snapshot 0002 (missing "
        "urllib3==2.3.0)"
    ) in said
    assert data["undo"] is None
    assert data["next_command"].endswith("rollback 0002")
    assert "urllib3" not in venv.installed()
    assert not venv.journal.exists()  # nothing blocks the command it names

    # Once an index is reachable, the command it names returns to the state before the rollback.
    again = venv.tool_reinstalling("rollback", "0002", "--no-probe", "--json")

    assert again.returncode == 0, again.json()
    assert again.json()["outcome"] == "rolled-back"
    assert venv.installed() == {"urllib3": "2.3.0"}
    assert venv.file_hashes() == before


def test_undoing_a_rollback_says_the_second_dist_info_folder_is_not_put_back(
    make_venv: MakeVenv,
) -> None:
    """The probe passed on the doubled install (2.3.0's files over 2.2.1's) and fails after
    the rollback to 2.2.1: the undo returns to the rollback's own snapshot, which records one
    version per name. It used to claim "put back as it was before it, verified" (exit 3)
    without urllib3-2.3.0.dist-info or its files; it now says that folder is not put back, and
    where its files are, and does not claim everything came back (exit 4)."""
    venv, _ = _doubled_urllib3(make_venv)
    probe = "import sys, urllib3; sys.exit(urllib3.VERSION != '2.3.0')"

    run = venv.tool("rollback", "1", "--probe", probe, "--json")

    data = run.json()
    assert run.returncode == 4, data
    assert data["outcome"] == "rollback-probe-failed-restored-except-aside"
    kept = venv.snapshot("0002").aside_dir
    said = "\n".join(data["messages"])
    # Nothing was brought back from a stash (so no file's hash checked): the claim is the set's.
    assert "the installed set is back as snapshot 0002 has it, except:" in said
    assert "0 files" not in said
    assert (
        "urllib3-2.3.0.dist-info, a second dist-info folder when snapshot 0002 was taken, is not "
        f"put back (a snapshot brings back one version per name); its files are kept in "
        f"{kept / 'urllib3-2.3.0.dist-info'}"
    ) in said
    assert _kept_aside(venv, "0002")["urllib3/__init__.py"] == b"VERSION = '2.3.0'\n"
    assert not venv.journal.exists()

    # A rollback to that snapshot later says the same, whatever else it does.
    again = venv.tool("rollback", "0002", "--no-probe", "--json").json()
    assert "urllib3-2.3.0.dist-info, a second dist-info folder when snapshot 0002 was taken" in (
        "\n".join(again["messages"])
    )


def test_an_uninstall_refused_on_a_second_dist_info_folder_points_to_doctor_and_rollback(
    make_venv: MakeVenv,
) -> None:
    """It used to say only "Keep one version first (uv pip install --reinstall ...)", which
    needs an index or a wheel, not the repair a snapshot of one of its versions allows."""
    venv, _ = _doubled_urllib3(make_venv)
    hashes = venv.file_hashes()

    run = venv.tool("--no-probe", "urllib3")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "urllib3 is installed more than once" in run.stderr
    assert (
        "if a snapshot keeps one of its versions (`safe-uninstall doctor` names it), "
        "`safe-uninstall rollback ID` to it removes every folder"
    ) in " ".join(run.stderr.split())
    assert venv.file_hashes() == hashes
    # What it points to holds: doctor names snapshot 0001, which keeps urllib3 2.2.1.
    assert venv.tool("doctor", "--json").json()["repair_command"].endswith("rollback 0001")


def test_a_rollback_that_would_delete_the_interpreter_is_refused_unchanged(
    make_venv: MakeVenv,
) -> None:
    """A distribution installed since the snapshot whose RECORD lists the venv's own
    bin/python: the rollback's uninstall would delete it (uv does), leaving nothing to run
    the next command with. Refused before any change, naming the line."""
    venv = make_venv("leftpad")
    assert venv.tool("snapshot").returncode == 0  # 0001
    venv.install("toolpkg")
    (record,) = venv.site_packages.glob("toolpkg-*.dist-info/RECORD")
    text = record.read_text() + "../../../bin/python,,\n"
    record.unlink()  # a hard link into the uv cache: replaced, never written in place
    record.write_text(text)
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("rollback", "--no-probe")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "its RECORD line '../../../bin/python' names" in run.stderr
    assert "nothing was removed" in run.stderr
    assert venv.python.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_what_no_stash_holds_comes_back_in_one_installer_call(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The promise: one uninstall for what is removed, and one reinstall for everything no
    stash can give back, never one call per distribution (counted at the installer)."""
    venv = make_venv("leftpad", "toolpkg", "urllib3==2.3.0")
    log = tmp_path / "uv-calls.jsonl"
    uv = str(logging_uv(tmp_path / "uv", log))
    removed = venv.tool("--no-probe", "leftpad", "toolpkg", "urllib3", SAFE_UNINSTALL_UV=uv)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    (uninstall,) = installer_calls(log, "pip", "uninstall")
    assert {"leftpad", "toolpkg", "urllib3"} <= set(uninstall)
    shutil.rmtree(venv.snapshot("0001").stash_dir)

    back = venv.tool(
        "rollback",
        "--no-probe",
        SAFE_UNINSTALL_UV=uv,
        UV_NO_INDEX="1",
        UV_FIND_LINKS=str(venv.wheelhouse),
    )

    assert back.returncode == 0, back.stdout + back.stderr
    (install,) = installer_calls(log, "pip", "install")
    assert {"leftpad==1.0", "toolpkg==1.0", "urllib3==2.3.0"} <= set(install)
    assert venv.installed().keys() >= {"leftpad", "toolpkg", "urllib3"}


def test_a_copied_venv_says_whose_snapshots_its_state_folder_holds(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """``cp -a venv copy``: the copy holds the original's state folder, whose snapshots would
    restore the original. They are not listed there, and the copy says why, not just "no
    snapshots"."""
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001, of the original
    copy = Venv(tmp_path / "copy", venv.uv_cache, venv.wheelhouse)
    shutil.copytree(venv.root, copy.root, symlinks=True)

    listed = copy.tool("snapshots")
    data = copy.tool("snapshots", "--json").json()
    back = copy.tool("rollback", "--dry-run")

    why = f"the snapshots there were taken of another environment (1 of {venv.root})"
    assert listed.returncode == 0 and why in listed.stdout, listed.stdout + listed.stderr
    assert data["snapshots"] == [] and why in str(data["none_because"])
    assert back.returncode == 1 and why in back.stderr, back.stdout + back.stderr
    assert venv.tool("snapshots", "--json").json()["none_because"] is None


def test_a_rollback_claims_what_it_checked_not_the_bytes_of_what_it_never_touched(
    make_venv: MakeVenv,
) -> None:
    """After the snapshot, leftpad is removed and a file of requests (which neither the removal
    nor the rollback touches) is written in place: the rollback brings leftpad back and says
    what its verification proved, the installed set and each file it restored, never that the
    environment matches the snapshot."""
    venv = make_venv("leftpad")
    venv.install("requests", copies=True)  # copies: the test writes into one in place
    assert venv.tool("snapshot", "-q").returncode == 0
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    edited = venv.site_packages / "requests" / "api.py"
    with open(edited, "a", encoding="utf-8") as out:
        out.write("# edited in place\n")

    run = venv.tool("rollback", "0001", "--no-probe")

    assert run.returncode == 0, run.stdout + run.stderr
    assert "environment matches the snapshot" not in run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == (
        "rollback: rolled back; the installed set matches the snapshot, and each restored file "
        "its hash"
    )
    assert venv.installed()["leftpad"] == "1.0"
    assert edited.read_text().endswith("# edited in place\n")  # not checked, not claimed
