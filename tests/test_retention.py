"""Disk you can see: what each snapshot's stash keeps, and the retention policy (``keep``,
``max-size``) that drops old stashes after each operation while their snapshots stay."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from safeuninstall import config
from safeuninstall.base.errors import UsageError
from safeuninstall.state.layout import SnapshotFolder
from tests.conftest import UV, MakeVenv, Run, Venv, returns_promptly, tree
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def stash_bytes(venv: Venv, snapshot_id: str) -> int:
    """Bytes of the snapshot's files (its stash, snapshot.toml...) that nothing else links,
    read here independently."""
    total = 0
    for folder, _, names in os.walk(venv.snapshot(snapshot_id).path):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            if info.st_nlink == 1:
                total += info.st_size
    return total


def folder(venv: Venv, snapshot_id: str) -> SnapshotFolder:
    return venv.snapshot(snapshot_id)


def test_a_removal_says_what_it_keeps_for_rollback(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")

    run = venv.tool("--no-probe", "leftpad")

    assert run.returncode == 0, run.stdout + run.stderr
    held = stash_bytes(venv, "0001")
    assert held > 0
    assert f"kept for rollback: {held / 1024:.1f} KiB" in run.stdout
    assert f"`safe-uninstall --python {venv.python} prune --keep N` frees it" in run.stdout

    listed = venv.tool("snapshots", "--json").json()
    assert listed["total_bytes"] == held
    assert [s["stash_bytes"] for s in listed["snapshots"]] == [held]  # type: ignore[index]
    shown = venv.tool("show", "0001")
    assert f"on disk: {held / 1024:.1f} KiB that nothing else links" in shown.stdout


def test_keep_drops_the_older_stash_and_its_rollback_reinstalls_from_the_index(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")
    before = venv.file_hashes()
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    venv.install("leftpad==1.0", copies=True)  # by hand: 0001's stash is no only copy now

    second = venv.tool("--no-probe", "--json", "urllib3", SAFE_UNINSTALL_KEEP="1")

    data = second.json()
    assert second.returncode == 0, data
    assert data["kept"]["pruned"] == [  # type: ignore[index]
        {"snapshot": "0001", "bytes": pytest.approx(1, abs=10**9)}
    ]
    assert data["kept"]["policy"] == "keep 1, max-size 2.0 GiB"  # type: ignore[index]
    assert not folder(venv, "0001").stash_dir.exists()
    assert folder(venv, "0001").snapshot_file.is_file()
    assert stash_bytes(venv, "0002") > 0  # the latest always stays
    table = venv.tool("snapshots")
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("0001 ")]
    assert "pruned" in row
    venv.uv("pip", "uninstall", "--python", str(venv.python), "leftpad")  # by hand again

    back = venv.tool_reinstalling("rollback", "0001", "--json")

    result = back.json()
    assert back.returncode == 0, result
    restore = result["restore"]
    assert isinstance(restore, dict)
    assert restore["reinstalled"] == ["leftpad==1.0"]
    assert restore["from_stash"] == ["urllib3==2.3.0"]
    assert any("stash of snapshot 0001 was dropped" in n for n in restore["notes"])
    assert venv.file_hashes() == before


def test_max_size_drops_the_oldest_stashes_but_never_the_latest(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")

    first = venv.tool("--no-probe", "--json", "leftpad", SAFE_UNINSTALL_MAX_SIZE="1")
    assert first.json()["kept"]["pruned"] == []  # type: ignore[index]
    assert stash_bytes(venv, "0001") > 0
    venv.install("leftpad==1.0", copies=True)  # by hand: 0001's stash is no only copy now

    second = venv.tool("--no-probe", "--json", "urllib3", SAFE_UNINSTALL_MAX_SIZE="1")

    assert [p["snapshot"] for p in second.json()["kept"]["pruned"]] == ["0001"]  # type: ignore[index]
    assert folder(venv, "0001").pruned_mark.is_file()
    assert stash_bytes(venv, "0002") > 0


def test_no_bound_keeps_every_stash(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")
    unbounded = {"SAFE_UNINSTALL_KEEP": "0", "SAFE_UNINSTALL_MAX_SIZE": "0"}
    assert venv.tool("--no-probe", "leftpad", **unbounded).returncode == 0

    second = venv.tool("--no-probe", "--json", "urllib3", **unbounded)

    assert second.json()["kept"]["pruned"] == []  # type: ignore[index]
    assert second.json()["kept"]["policy"] == "none"  # type: ignore[index]
    assert stash_bytes(venv, "0001") > 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("2G", 2 * 1024**3), ("1.5GiB", 3 * 1024**3 // 2), ("500m", 500 * 1024**2)],
)
def test_max_size_reads_sizes(text: str, expected: int) -> None:
    key = next(k for k in config.KEYS if k.name == "max-size")
    assert config._from_text(key, text, "SAFE_UNINSTALL_MAX_SIZE") == expected


@pytest.mark.parametrize(
    ("name", "raw"),
    [("keep", -1), ("keep", 1.5), ("keep", True), ("keep", "3"), ("max-size", "lots")],
)
def test_bad_retention_values_in_a_file_are_refused(name: str, raw: object) -> None:
    key = next(k for k in config.KEYS if k.name == name)
    with pytest.raises(UsageError, match=name):
        config._from_toml(key, raw, "pyproject.toml", Path())


def test_bad_retention_variable_is_a_usage_error(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")

    run = venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_KEEP="-1")

    assert run.returncode == 2
    assert "SAFE_UNINSTALL_KEEP must be a whole number >= 0" in run.stderr
    assert "leftpad" in venv.installed()


def test_a_dry_run_rollback_drops_no_stash(make_venv: MakeVenv) -> None:
    """Found by review: the policy ran after a rollback --dry-run (its result names the target
    snapshot) and dropped stashes, without a lock."""
    venv = make_venv("leftpad", "urllib3==2.3.0", "requests")
    unbounded = {"SAFE_UNINSTALL_KEEP": "0", "SAFE_UNINSTALL_MAX_SIZE": "0"}
    assert venv.tool("--no-probe", "leftpad", **unbounded).returncode == 0
    assert venv.tool("--no-probe", "requests", **unbounded).returncode == 0
    assert venv.tool("--no-probe", "urllib3", **unbounded).returncode == 0
    before = tree(venv.root)

    run = venv.tool("rollback", "--dry-run", "0001", SAFE_UNINSTALL_KEEP="1")

    assert run.returncode == 0, run.stdout + run.stderr
    assert tree(venv.root) == before
    assert not [i for i in venv.state.ids() if venv.snapshot(i).pruned_mark.exists()]


def test_doctor_does_not_offer_a_dropped_stash(make_venv: MakeVenv) -> None:
    """A snapshot whose stash the policy dropped records a version, it keeps no files: the
    repair is an install of that pin, not a rollback that would reinstall anyway."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--allow-unmet", "--no-probe", "urllib3").returncode == 0
    venv.install("urllib3==2.3.0", copies=True)  # by hand: 0001's stash is no only copy now
    assert venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_KEEP="1").returncode == 0
    assert folder(venv, "0001").pruned_mark.is_file()
    venv.uv("pip", "uninstall", "--python", str(venv.python), "urllib3")  # and gone again

    data = venv.tool("doctor", "--json").json()

    text = json.dumps(data)
    assert "urllib3==2.3.0" in text
    assert "kept in snapshot 0001" not in venv.tool("doctor").stdout
    assert "rollback" not in str(data.get("repair", "")), data


def test_a_fifo_in_place_of_the_pruned_mark_does_not_stop_the_listing(
    make_venv: MakeVenv,
) -> None:
    """Everything read from the state folder is untrusted: a FIFO named like the mark must
    not leave `snapshots` waiting for a writer that never comes."""
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    fifo = folder(venv, "0001").pruned_mark
    os.mkfifo(fifo)
    listed: list[Run] = []

    assert returns_promptly(lambda: listed.append(venv.tool("snapshots", "--json")), fifo)

    (summary,) = listed[0].json()["snapshots"]  # type: ignore[misc]
    assert summary["stash_pruned"] is None


# -- the only copy of a removal still in effect ---------------------------------------------


def test_snapshots_never_drop_the_only_stash_of_a_removal_still_in_effect(
    make_venv: MakeVenv,
) -> None:
    """Found by a tester (data loss): after a removal, ten routine `snapshot` runs made the
    policy (keep 10) drop the removal's stash, the only copy of urllib3's files, and `snapshot`
    said nothing; an offline rollback then failed (exit 1). The kept stashes, of `snapshot`
    runs, held files still installed and freed almost nothing."""
    venv = make_venv("requests")
    before = venv.file_hashes()
    assert venv.tool("--allow-unmet", "--no-probe", "urllib3").returncode == 0
    runs = [venv.tool("snapshot") for _ in range(9)]
    last = venv.tool("snapshot", "--json")  # 0011: the eleventh stash, beyond keep 10

    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert last.returncode == 0, last.stdout + last.stderr
    assert not folder(venv, "0001").pruned_mark.exists()
    kept = last.json()["kept"]
    assert isinstance(kept, dict), last.json()
    assert kept["pruned"] == []
    assert kept["protected"] == [
        {"snapshot": "0001", "only_copy_of": ["urllib3==2.3.0"], "beyond_policy": True}
    ]
    text = runs[-1].stdout + venv.tool("snapshot").stdout  # 0012: the same, in words
    assert "stash of snapshot 0001 kept: it holds the only copy of urllib3==2.3.0" in text
    listed = venv.tool("snapshots", "--json").json()["snapshots"]
    assert isinstance(listed, list)
    pruned = [s["id"] for s in listed if s["stash_pruned"]]
    assert pruned == ["0002"], listed  # 0012 made eleven beyond 0001: the oldest of them went

    back = venv.tool("rollback", "--no-probe", "--offline", "0001")  # UV_OFFLINE, empty cache

    assert back.returncode == 0, back.stdout + back.stderr
    assert "restored from the stash: urllib3==2.3.0" in back.stdout
    assert venv.file_hashes() == before


def test_the_stash_of_a_restored_failed_removal_is_still_dropped_and_said(
    make_venv: MakeVenv,
) -> None:
    """A failed removal that was restored leaves nothing removed: its stash is no only copy,
    and the policy drops it as any other; `snapshot` reports what the policy dropped."""
    venv = make_venv("requests")
    failed = venv.tool("--allow-unmet", "--probe", "import requests", "urllib3")
    assert failed.returncode == 3, failed.stdout + failed.stderr
    runs = [venv.tool("snapshot", SAFE_UNINSTALL_KEEP="2") for _ in range(2)]

    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert folder(venv, "0001").pruned_mark.is_file()
    assert "stash of snapshot 0001 dropped by the retention policy (keep 2" in runs[-1].stdout
    third = venv.tool("snapshot", "--json", SAFE_UNINSTALL_KEEP="2")
    kept = third.json()["kept"]
    assert isinstance(kept, dict), third.json()
    assert [p["snapshot"] for p in kept["pruned"]] == ["0002"]  # type: ignore[index]
    assert kept["protected"] == []
    assert "urllib3" in venv.installed()


def test_restored_failed_removals_do_not_push_out_the_only_copy(make_venv: MakeVenv) -> None:
    """The tester's second way: failed removals, restored, after the one still in effect."""
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--allow-unmet", "--no-probe", "urllib3").returncode == 0
    for _ in range(2):
        failed = venv.tool(
            "--json", "--probe", "import leftpad", "leftpad", SAFE_UNINSTALL_KEEP="1"
        )
        assert failed.returncode == 3, failed.stdout + failed.stderr

    kept = failed.json()["kept"]

    assert not folder(venv, "0001").pruned_mark.exists()
    assert isinstance(kept, dict), failed.json()
    assert [p["snapshot"] for p in kept["pruned"]] == ["0002"]  # type: ignore[index]
    assert [p["snapshot"] for p in kept["protected"]] == ["0001"]  # type: ignore[index]


def test_max_size_keeps_the_only_copy_and_says_it_cannot_get_under(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")
    assert venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_MAX_SIZE="1").returncode == 0

    second = venv.tool("--no-probe", "--json", "urllib3", SAFE_UNINSTALL_MAX_SIZE="1")

    kept = second.json()["kept"]
    assert isinstance(kept, dict), second.json()
    assert kept["pruned"] == []
    assert kept["protected"] == [
        {"snapshot": "0001", "only_copy_of": ["leftpad==1.0"], "beyond_policy": True}
    ]
    assert kept["over_max_size_bytes"] >= stash_bytes(venv, "0001") - 1  # type: ignore[operator]
    assert stash_bytes(venv, "0001") > 0


def test_max_size_text_says_why_it_is_exceeded(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")
    assert venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_MAX_SIZE="1").returncode == 0

    second = venv.tool("--no-probe", "urllib3", SAFE_UNINSTALL_MAX_SIZE="1")

    assert second.returncode == 0, second.stdout + second.stderr
    assert "the retention policy cannot get under max-size 1 B" in second.stdout
    assert "0001 (leftpad==1.0)" in second.stdout


def test_prune_keeps_the_only_copy_unless_told_to_drop_it(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "urllib3==2.3.0")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001: the only copy
    for _ in range(2):
        assert venv.tool("snapshot").returncode == 0

    kept = venv.tool("prune", "--keep", "1", "--json")

    data = kept.json()
    assert kept.returncode == 0, data
    assert [r["id"] for r in data["removed"]] == ["0002"]  # type: ignore[index]
    assert data["only_copies"] == [{"id": "0001", "pins": ["leftpad==1.0"]}]
    text = venv.tool("prune", "--keep", "1", "--dry-run").stdout
    assert "kept snapshot 0001: its stash holds the only copy of leftpad==1.0" in text
    assert "--drop-only-copies" in text
    assert folder(venv, "0001").path.is_dir()

    dropped = venv.tool("prune", "--keep", "1", "--drop-only-copies")

    assert dropped.returncode == 0, dropped.stdout + dropped.stderr
    assert "deleted snapshot 0001" in dropped.stdout
    assert "the only copy of leftpad==1.0" in dropped.stdout
    assert not folder(venv, "0001").path.exists()


def test_the_old_version_of_an_upgrade_is_no_only_copy(make_venv: MakeVenv) -> None:
    """Found by a reviewer: any version not installed now counted as a removal still in effect,
    so after `run -- uv pip install -U urllib3` the stash of urllib3==2.2.1 was kept forever
    (every upgrade one more stash the policy never dropped), and each `snapshot` said it held
    the only copy of urllib3==2.2.1, "removed and not reinstalled": false, 2.3.0 is installed.
    A stash is protected only when the name is installed at no version now."""
    assert UV is not None
    venv = make_venv("requests", "urllib3==2.2.1")
    house = str(venv.wheelhouse)
    upgrade = [UV, "pip", "install", "--no-index", "--find-links", house, "-U", "urllib3"]
    ran = venv.tool("run", "--no-probe", "--", *upgrade)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert venv.installed()["urllib3"] == "2.3.0"

    first = venv.tool("snapshot", SAFE_UNINSTALL_KEEP="1")
    second = venv.tool("snapshot", "--json", SAFE_UNINSTALL_KEEP="1")

    assert first.returncode == 0, first.stdout + first.stderr
    assert "only copy" not in first.stdout
    assert "stash of snapshot 0001 dropped by the retention policy (keep 1" in first.stdout
    assert folder(venv, "0001").pruned_mark.is_file()
    kept = second.json()["kept"]
    assert isinstance(kept, dict), second.json()
    assert [p["snapshot"] for p in kept["pruned"]] == ["0002"]  # type: ignore[index]
    assert kept["protected"] == []
    assert kept["over_max_size_bytes"] == 0


def test_prune_right_after_a_removal_names_no_only_copy_for_the_latest(
    make_venv: MakeVenv,
) -> None:
    """Found by a reviewer: the latest snapshot (never deleted anyway) counted as a keeper of
    only copies, so right after a removal `prune --max-size 1` said "those never deleted, and
     for their only copies" (an empty list) and set over_max_size_bytes."""
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001: latest, the only copy

    text = venv.tool("prune", "--max-size", "1", "--dry-run")
    data = venv.tool("prune", "--max-size", "1", "--dry-run", "--json").json()

    assert text.returncode == 0, text.stdout + text.stderr
    assert "only copies" not in text.stdout
    assert "over --max-size" not in text.stdout
    assert "would delete 0 snapshots, 0 B freed; 1 kept (never deleted: 0001)" in text.stdout
    assert data["only_copies"] == []
    assert data["over_max_size_bytes"] == 0
    assert folder(venv, "0001").path.is_dir()


def test_what_a_removal_keeps_counts_every_snapshot_s_own_files(make_venv: MakeVenv) -> None:
    """A rollback's snapshot keeps no stash, only its own files (snapshot.toml...): "all
    snapshots" counts them too, as `snapshots` and `audit` do."""
    venv = make_venv("leftpad", "toolpkg")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001: a stash
    assert venv.tool("rollback", "--no-probe").returncode == 0  # 0002: no stash
    assert not folder(venv, "0002").stash_dir.exists()

    run = venv.tool("--no-probe", "toolpkg")  # 0003

    assert run.returncode == 0, run.stdout + run.stderr
    held = sum(stash_bytes(venv, i) for i in ("0001", "0002", "0003"))
    latest = stash_bytes(venv, "0003")
    kept = f"kept for rollback: {latest / 1024:.1f} KiB (all snapshots: {held / 1024:.1f} KiB)"
    assert kept in run.stdout
    assert venv.tool("snapshots", "--json").json()["total_bytes"] == held
    assert venv.tool("audit", "--json").json()["stash_bytes"] == held


def test_bisects_one_after_another_never_push_out_the_good_snapshot(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Each bisect ends back where it started, with a snapshot of its own: those are not
    counted against ``keep`` of the others (only among themselves), so the good snapshot every
    bisect switches to keeps its stash and the next bisect needs no index (here: none at
    all)."""
    house = tmp_path / "house"
    for version, body in (("1.0", "OK = True\n"), ("2.0", "raise ImportError('broken')\n")):
        build_wheel(house, "part", version, {"part.py": body})
    venv = make_venv()
    venv.install("part==1.0", find_links=house)
    good = venv.tool("snapshot", "-q").stdout.strip()
    venv.install("part==2.0", find_links=house)  # by hand: only the good stash holds 1.0

    runs = [
        venv.tool("--json", "bisect", good, "--probe", "import part", SAFE_UNINSTALL_KEEP="2")
        for _ in range(3)
    ]

    for run in runs:
        data = run.json()
        assert run.returncode == 0, data
        assert [c["names"] for c in data["bisect"]["culprits"]] == [["part"]]  # type: ignore[index]
    assert not folder(venv, good).pruned_mark.exists()
    assert folder(venv, good).stash_dir.is_dir()
    # the bisects' own snapshots are bounded apart: the newest 2 of them keep their stash
    kept = runs[-1].json()["kept"]
    assert [p["snapshot"] for p in kept["pruned"]] == ["0002"]  # type: ignore[index]
    assert venv.installed()["part"] == "2.0"


def test_undone_failures_never_push_out_the_good_snapshot(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Eleven failed removals, each undone, after a good snapshot: their snapshots record the
    state the environment is back in, nothing new, so their stashes go first. The good one
    keeps its stash within ``keep`` (10): a rollback to it needs no index (none here)."""
    house = tmp_path / "house"
    for version in ("1.0", "2.0"):
        build_wheel(house, "part", version, {"part.py": f"V = {version!r}\n"})
    venv = make_venv("leftpad")
    venv.install("part==1.0", find_links=house)
    good = venv.tool("snapshot", "-q").stdout.strip()
    venv.install("part==2.0", find_links=house)  # by hand: only the good stash holds 1.0
    hashes = venv.file_hashes()

    failures = [venv.tool("--json", "--probe", "import leftpad", "leftpad") for _ in range(11)]

    assert all(run.returncode == 3 for run in failures), failures[-1].json()
    assert {run.json()["outcome"] for run in failures} == {"probe-failed-restored"}
    assert venv.file_hashes() == hashes
    assert not folder(venv, good).pruned_mark.exists()
    assert folder(venv, good).stash_dir.is_dir()
    kept = [run.json()["kept"] for run in failures]
    pruned = [p["snapshot"] for k in kept for p in k["pruned"]]  # type: ignore[index]
    assert pruned == ["0002", "0003"]  # the oldest undone ones, as eleven stashes, then twelve
    listed = venv.tool("snapshots", "--json").json()["snapshots"]
    assert len(listed) == 12  # type: ignore[arg-type]
    back = venv.tool("--json", "rollback", "--no-probe", "--offline", good)
    assert back.returncode == 0, back.json()
    assert venv.installed()["part"] == "1.0"
