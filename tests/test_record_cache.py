"""The cache of what each RECORD lists (recordcache.py): it answers as reading the RECORDs
does, or it is not used. A stale, corrupt or hostile cache file never changes a verdict, and a
RECORD rewritten while a removal prepares stops it before uv reads it. The ownership a removal
works out where it asks (libraries.ownership_on_demand) answers every question as the whole
ownership does, whatever became a symlink since the cache was written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from safeuninstall.environment import paths
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.recordcache import RecordCache
from safeuninstall.environment.source import Source
from safeuninstall.libraries.index import Ownership, ownership, ownership_on_demand
from tests.conftest import UV, MakeVenv, once_the_snapshot_exists
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _dist(site: Path, name: str, lines: list[str]) -> InstalledDistribution:
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "RECORD").write_text("".join(f"{line},,\n" for line in lines))
    return InstalledDistribution(
        name=name,
        version="1.0",
        dist_info=dist_info,
        installer="uv",
        requested=True,
        source=Source(kind="index"),
    )


def _site(tmp_path: Path) -> tuple[Path, dict[str, InstalledDistribution]]:
    site = tmp_path / "site"
    installed = {
        "cu12": _dist(
            site, "cu12", ["nv/lib/libx.so.1", "nv/include/x.h", "cu12-1.0.dist-info/RECORD"]
        ),
        "cu13": _dist(
            site, "cu13", ["./nv/lib/libx.so.1", "nv//cu13/../extra.txt", "../../bin/cu13"]
        ),
    }
    return site, installed


def _cached(installed: dict[str, InstalledDistribution], cache_file: Path) -> tuple[object, int]:
    cache = RecordCache(cache_file)
    owned = ownership(installed, cache)
    cache.save()
    return owned, cache.hits


def _on_demand(installed: dict[str, InstalledDistribution], cache_file: Path) -> Ownership:
    """A removal's ownership (analysis.analyse), its answers checked against the whole one's
    path by path before anything makes it work out every path."""
    cache = RecordCache(cache_file)
    owned = ownership_on_demand(installed, cache)
    expected = ownership(installed)
    asked = [*expected.owners, "/nowhere/x.so.1", f"{installed['cu12'].site_dir}/nv/lib/none"]
    for path in asked:
        assert owned.owners.get(path) == expected.owners.get(path), path
        assert owned.owner_of(path) == expected.owner_of(path), path
    for name in installed:
        assert owned.files[name] == expected.files[name], name
        assert owned.libraries(name) == expected.libraries(name), name
        assert owned.shared_paths(of=[name]) == expected.shared_paths(of=[name]), name
    assert owned.unreadable == expected.unreadable
    assert owned == expected  # every path worked out
    return owned


def test_the_cache_answers_as_reading_the_records_does(tmp_path: Path) -> None:
    _, installed = _site(tmp_path)
    cache_file = tmp_path / "record-cache.json"
    expected = ownership(installed)
    _on_demand(installed, cache_file)  # no cache file: every RECORD read
    first, hits = _cached(installed, cache_file)
    assert (first, hits) == (expected, 0)
    second, hits = _cached(installed, cache_file)
    assert (second, hits) == (expected, 2)
    assert expected.shared_paths() == {str(tmp_path / "site" / "nv" / "lib" / "libx.so.1")}
    _on_demand(installed, cache_file)  # both entries from the cache


def test_a_record_rewritten_in_place_with_its_size_and_mtime_is_read_again(
    tmp_path: Path,
) -> None:
    """Same inode, same size, mtime set back: only ctime tells (a key of path, size and mtime,
    as the ELF cache's, would answer with the old paths)."""
    _, installed = _site(tmp_path)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    record = installed["cu13"].dist_info / "RECORD"
    before = record.stat()
    text = record.read_text()
    with open(record, "r+") as handle:  # the same inode
        handle.write(text.replace("./nv/lib/libx.so.1", "./nv/lib/liby.so.1"))
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (record.stat().st_ino, record.stat().st_size) == (before.st_ino, before.st_size)
    assert _on_demand(installed, cache_file).shared_paths() == set()
    owned, hits = _cached(installed, cache_file)
    assert owned == ownership(installed)
    assert hits == 1
    assert owned.shared_paths() == set()


def test_a_folder_made_a_symlink_after_caching_is_resolved(tmp_path: Path) -> None:
    """What is cached is each path's folder as written: symlinks are resolved on every use."""
    site, installed = _site(tmp_path)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (site / "nv").symlink_to(elsewhere)
    paths._real_dir.cache_clear()  # what one command resolved; this is the next command
    assert _on_demand(installed, cache_file).shared_paths(of=["cu13"]) == {
        str(elsewhere / "lib" / "libx.so.1")
    }
    owned, hits = _cached(installed, cache_file)
    assert hits == 2
    assert owned == ownership(installed)
    assert str(elsewhere / "lib" / "libx.so.1") in owned.shared_paths()


def test_a_folder_made_a_symlink_to_another_distributions_folder_shares_its_files(
    tmp_path: Path,
) -> None:
    """cu12 lists nv/lib/libx.so.1, cu13 lists nv13/lib/libx.so.1: nothing shared, until nv13
    is made a symlink to nv (no RECORD changes, the cache answers for both). A removal of cu13
    now deletes cu12's file: who lists it is found by the folder as it is now (its device and
    inode), not by the folder as written."""
    site, installed = _site(tmp_path)
    installed["cu13"] = _dist(site, "cu13", ["nv13/lib/libx.so.1", "nv13/lib/other.txt"])
    (site / "nv" / "lib").mkdir(parents=True)
    (site / "nv" / "lib" / "libx.so.1").write_text("")
    (site / "nv13" / "lib").mkdir(parents=True)
    cache_file = tmp_path / "record-cache.json"
    assert _cached(installed, cache_file)[0].shared_paths() == set()  # type: ignore[attr-defined]
    (site / "nv13" / "lib").rmdir()
    (site / "nv13").rmdir()
    (site / "nv13").symlink_to("nv")
    paths._real_dir.cache_clear()  # the next command
    shared = str(site / "nv" / "lib" / "libx.so.1")
    owned = _on_demand(installed, cache_file)
    assert owned.owners[shared] == ("cu12", "cu13")
    assert owned.shared_paths(of=["cu13"]) == {shared}


def test_a_file_in_a_folder_that_is_gone_is_shared_by_who_lists_it(tmp_path: Path) -> None:
    """Both list gone/x.py, whose folder does not exist (a half-removed install): shared, as
    the whole ownership says; a folder that can't be stat'ed is a candidate for every path."""
    site, installed = _site(tmp_path)
    installed["cu13"] = _dist(site, "cu13", ["gone/x.py", "nv/lib/libx.so.1"])
    installed["cu12"] = _dist(site, "cu12", ["gone/x.py"])
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    owned = _on_demand(installed, cache_file)
    assert owned.shared_paths(of=["cu13"]) == {str(site / "gone" / "x.py")}


def test_a_site_folder_made_a_symlink_after_caching_is_resolved(tmp_path: Path) -> None:
    """The whole site folder moved and a symlink left in its place: the RECORDs keep their
    stat (a rename moves no inode), the cache answers, and the paths are the real ones."""
    site, installed = _site(tmp_path)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    moved = tmp_path / "moved"
    site.rename(moved)
    site.symlink_to(moved)
    paths._real_dir.cache_clear()  # the next command
    owned = _on_demand(installed, cache_file)
    assert owned.shared_paths(of=["cu12"]) == {str(moved / "nv" / "lib" / "libx.so.1")}


def _entry_of(cache_file: Path, name: str) -> tuple[dict[str, object], list[object]]:
    data = json.loads(cache_file.read_text())
    key = next(k for k in data["data"] if f"/{name}-1.0.dist-info/" in k)
    return data, data["data"][key]


def _hostile(kind: str, cache_file: Path) -> None:
    """Spoil the cache file as ``kind`` says; the stat keys stay those of the real RECORDs."""
    if kind == "garbage":
        cache_file.write_bytes(b"\x00{not json")
        return
    if kind == "truncated":
        cache_file.write_bytes(cache_file.read_bytes()[:-40])
        return
    if kind == "fifo":
        cache_file.unlink()
        os.mkfifo(cache_file)
        return
    data, entry = _entry_of(cache_file, "cu13")
    if kind == "index out of range":
        entry[2] = [len(entry[1])] * len(entry[2])  # type: ignore[arg-type]
    elif kind == "a name with a slash":
        entry[3][0] = "../../../etc/passwd"  # type: ignore[index]
    elif kind == "a name of ..":
        entry[3][0] = ".."  # type: ignore[index]
    elif kind == "an empty name":
        entry[3][-1] = ""  # type: ignore[index]
    elif kind == "a name of .":
        entry[3][0] = "."  # type: ignore[index]
    elif kind == "a name with a NUL":
        entry[3][0] = "libx.so.1\u0000"  # type: ignore[index]
    elif kind == "a folder with a dot-dot":
        entry[1][0] = entry[1][0] + "/../../.."  # type: ignore[index]
    elif kind == "a folder with a trailing slash":
        entry[1][0] = entry[1][0] + "/"  # type: ignore[index]
    elif kind == "a folder with a NUL":
        entry[1][0] = entry[1][0] + "\u0000x"  # type: ignore[index]
    elif kind == "a relative folder":
        entry[1] = ["nv/lib" for _ in entry[1]]  # type: ignore[union-attr]
    elif kind == "fewer names than paths":
        entry[3] = entry[3][:-1]  # type: ignore[index]
    elif kind == "another version":
        data["version"] = 99
    elif kind == "wrong types":
        entry[0] = "key"
    cache_file.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "truncated",
        "fifo",
        "index out of range",
        "a name with a slash",
        "a name of ..",
        "an empty name",
        "a name of .",
        "a name with a NUL",
        "a folder with a dot-dot",
        "a folder with a trailing slash",
        "a folder with a NUL",
        "a relative folder",
        "fewer names than paths",
        "another version",
        "wrong types",
    ],
)
def test_a_corrupt_or_hostile_cache_file_changes_nothing(tmp_path: Path, kind: str) -> None:
    _, installed = _site(tmp_path)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    _hostile(kind, cache_file)
    cache = RecordCache(cache_file)
    assert ownership(installed, cache) == ownership(installed)
    assert cache.hits <= 1  # cu12's entry may still serve; cu13's never does
    _on_demand(installed, cache_file)


def test_check_reads_a_record_that_changed_since_the_cache(make_venv: MakeVenv) -> None:
    """End to end: the shared file that makes sharedlib-cu13 hollow is found, cached, then
    gone from its RECORD (rewritten in place, size and mtime kept): `check` says so."""
    venv = make_venv("sharedlib-cu12", "sharedlib-cu13")
    assert venv.tool("check", "--json", "sharedlib-cu12").json()["impact"]["hollow"] == [  # type: ignore[index]
        "sharedlib-cu13"
    ]
    assert (venv.root / ".safe-uninstall" / "record-cache.json").is_file()
    (dist_info,) = venv.site_packages.glob("sharedlib_cu13-*.dist-info")
    record = dist_info / "RECORD"
    before = record.stat()
    text = record.read_text()
    assert "sharedlib/__init__.py," in text
    with open(record, "r+") as handle:
        handle.write(text.replace("sharedlib/__init__.py,", "sharedlib/__init__.pz,"))
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
    impact = venv.tool("check", "--json", "sharedlib-cu12").json()["impact"]
    assert impact["hollow"] == [], impact  # type: ignore[index]


def test_a_record_rewritten_while_the_removal_prepares_stops_it(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Another installer rewrites leftpad's RECORD (the same version reinstalled, a file more)
    after the snapshot read it and before uv does: the census sees no change, uv would delete
    the new file, which no stash holds. The removal stops before uv runs."""
    venv = make_venv("requests", "leftpad")
    (dist_info,) = venv.site_packages.glob("leftpad-1.0.dist-info")
    record = dist_info / "RECORD"
    extra = venv.site_packages / "leftpad_extra.py"
    snapshot = venv.snapshot("0001").snapshot_file
    done = tmp_path / "rewritten"
    rewrite = (
        f"pathlib.Path({str(extra)!r}).write_text('X = 1\\n')\n"
        f"record = pathlib.Path({str(record)!r})\n"
        "record.write_text(record.read_text() + 'leftpad_extra.py,,\\n')\n"
    )
    probe = once_the_snapshot_exists(snapshot, done, rewrite)
    run = venv.tool("--fresh-baseline", "--probe", probe, "leftpad")
    assert done.exists()
    assert run.returncode == 1, run.stdout + run.stderr
    assert "RECORD rewritten: leftpad" in run.stderr
    assert "nothing was removed" in run.stderr
    assert extra.read_text() == "X = 1\n"  # never deleted: no stash holds it
    assert venv.installed()["leftpad"] == "1.0"


def test_a_removal_sees_a_sharer_another_process_installed_between_commands(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Plain uv installs sharedlib-cu13 (it lists sharedlib-cu12's __init__.py), reinstalls the
    same version from a build that lists only its own file, then the first build again, removes
    it and installs it again, all between commands: each `check` of sharedlib-cu12, its caches
    warm, finds the sharer as the environment is; the removal then is undone as hollow. A
    reinstall keeps the RECORD's path (sharedlib_cu13-1.0.dist-info/RECORD) and changes what it
    lists: only the RECORD's stat tells the cache that its entry is stale."""
    venv = make_venv("sharedlib-cu12")
    apart = tmp_path / "shares-nothing"
    build_wheel(apart, "sharedlib-cu13", "1.0", {"sharedlib/cu13.txt": ""})

    def hollow() -> object:
        return venv.tool("check", "--json", "sharedlib-cu12").json()["impact"]["hollow"]  # type: ignore[index]

    def lists_the_shared_file() -> bool:
        (record,) = venv.site_packages.glob("sharedlib_cu13-1.0.dist-info/RECORD")
        return "sharedlib/__init__.py," in record.read_text()

    assert hollow() == []
    venv.install("sharedlib-cu13")
    assert hollow() == ["sharedlib-cu13"]
    venv.install("--reinstall", "sharedlib-cu13", find_links=apart)
    assert not lists_the_shared_file()
    assert hollow() == []
    venv.install("--reinstall", "sharedlib-cu13")
    assert lists_the_shared_file()
    assert hollow() == ["sharedlib-cu13"]
    venv.uv("pip", "uninstall", "--python", str(venv.python), "sharedlib-cu13")
    assert hollow() == []
    venv.install("sharedlib-cu13")
    run = venv.tool("--json", "--no-probe", "sharedlib-cu12")
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.json()["outcome"] == "hollow-restored"


def test_a_record_listing_a_file_twice_is_answered_as_the_whole_ownership_does(
    tmp_path: Path,
) -> None:
    """cu13 lists nv/lib/libx.so.1 twice (once as ./nv/lib/...): the whole ownership counts
    it twice, so the path counts as shared (the stash keeps it); so does the removal's."""
    site, installed = _site(tmp_path)
    installed["cu12"] = _dist(site, "cu12", ["nv/include/x.h"])
    installed["cu13"] = _dist(site, "cu13", ["nv/lib/libx.so.1", "./nv/lib/libx.so.1"])
    (site / "nv" / "lib").mkdir(parents=True)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    owned = _on_demand(installed, cache_file)
    assert owned.owners[str(site / "nv" / "lib" / "libx.so.1")] == ("cu13", "cu13")


def test_a_folder_removed_and_made_again_after_the_first_question_is_still_found(
    tmp_path: Path,
) -> None:
    """The folders' identities are taken at the first question; one removed and made again
    afterwards (a new inode: a restore, a reinstall) is still the folder its entries name."""
    site, installed = _site(tmp_path)
    for folder in ("nv/lib", "nv/include"):
        (site / folder).mkdir(parents=True, exist_ok=True)
    cache_file = tmp_path / "record-cache.json"
    _cached(installed, cache_file)
    owned = ownership_on_demand(installed, RecordCache(cache_file))
    real_site = os.path.realpath(site)
    assert owned.owners.get(f"{real_site}/nv/include/x.h") == ("cu12",)  # the first question
    (site / "nv" / "lib").rename(tmp_path / "old-lib")  # kept: its inode is not reused
    (site / "nv" / "lib").mkdir()

    assert owned.owners.get(f"{real_site}/nv/lib/libx.so.1") == ("cu12", "cu13")
