"""The stash index (stashindex.py): `snapshots` and `show` read which files each stash holds
from it instead of walking every stash. What it says is believed only while each folder is as
it was recorded, and what changes without touching a folder (a file's link count, when the
environment's copy is removed) is read afresh every time: with it or without it, the bytes are
the same."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from safeuninstall.state import stashindex
from safeuninstall.state.stashindex import Holdings
from safeuninstall.state.store import Store
from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


@pytest.fixture(autouse=True)
def _settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder is recorded only once its last change is two seconds old; here, at once (the
    changes each test makes replace a file's link count or a folder's inode: no timestamp is
    needed to see them)."""
    monkeypatch.setattr(stashindex, "_SETTLED_NS", -(10**10))


@pytest.fixture
def venv(make_venv: MakeVenv) -> Venv:
    venv = make_venv("leftpad", "toolpkg")
    # leftpad.py linked from the venv alone (uv links it from its cache too), then stashed
    installed = venv.site_packages / "leftpad.py"
    shutil.copyfile(installed, installed.with_name("copy"))
    installed.with_name("copy").replace(installed)
    assert venv.tool("snapshot").returncode == 0  # every installed file stashed (hard links)
    return venv


def _store(venv: Venv) -> Store:
    return venv.state


def _counted(holdings: Holdings) -> tuple[dict[str, int], int]:
    return dict(holdings.alone), holdings.held(holdings.files)


def _indexed(venv: Venv) -> tuple[dict[str, int], int]:
    """The bytes through the index, checked against a walk of every stash."""
    store = _store(venv)
    through_index = _counted(store.holdings(store.ids(), indexed=True))
    assert through_index == _counted(store.holdings(store.ids()))
    return through_index


def _stashed(venv: Venv, relative: str) -> Path:
    [found] = venv.snapshot("0001").stash_dir.glob(f"*/{relative}")
    return found


def test_a_stash_is_indexed_and_its_bytes_are_those_of_a_walk(venv: Venv) -> None:
    before = _indexed(venv)
    assert "0001" in stashindex.read_index(_store(venv).root)
    assert _indexed(venv) == before  # through the index this time


def test_removing_the_environments_copy_of_a_stashed_file_is_seen(venv: Venv) -> None:
    """The file is then linked from the stash alone: its bytes count, though no folder of the
    stash changed. An index that kept link counts (or sizes) would not see it."""
    _indexed(venv)  # the index made
    alone, _ = _indexed(venv)  # and used
    site = venv.site_packages.relative_to(venv.root)
    stashed = _stashed(venv, f"{site}/leftpad.py")
    (venv.site_packages / "leftpad.py").unlink()

    after, _ = _indexed(venv)

    assert after["0001"] == alone["0001"] + stashed.stat().st_size


def test_a_stash_folder_changed_since_it_was_indexed_is_walked_again(venv: Venv) -> None:
    """Its folder is not the one recorded (another inode, the same files in it and one more):
    the index is not believed, and the file added there is counted."""
    _indexed(venv)
    site = venv.site_packages.relative_to(venv.root)
    package = _stashed(venv, f"{site}/toolpkg")
    copy = package.with_name("copy")
    shutil.copytree(package, copy, copy_function=os.link)
    (copy / "extra.bin").write_bytes(b"x" * 5000)  # linked from the stash alone
    shutil.rmtree(package)
    copy.rename(package)

    alone, _ = _indexed(venv)

    assert alone["0001"] >= 5000


@pytest.mark.parametrize(
    "forged",
    [
        b"{not json",
        b'{"snapshots": {"0001": [["stash/../../../../..", [0, 0, 0, 0], [["etc", 1]], []]]}}',
        b'{"snapshots": {"0001": [["/etc", [0, 0, 0, 0], [], []]]}}',
        b'{"snapshots": {"0001": [["stash", "key", [], []]]}}',
        b'{"snapshots": {"0001": []}}',
        b"[" * 100000,
    ],
)
def test_a_hostile_index_changes_nothing(venv: Venv, forged: bytes) -> None:
    expected = _indexed(venv)
    (_store(venv).root / stashindex.INDEX_FILE).write_bytes(forged)

    assert _indexed(venv) == expected


def test_a_forged_name_is_never_looked_up(venv: Venv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that matches its folder but names a file outside it: refused, not followed."""
    _indexed(venv)
    path = _store(venv).root / stashindex.INDEX_FILE
    index = json.loads(path.read_text())
    folder = index["data"]["0001"][0]
    folder[2] = [["../../../../../../../../etc/passwd", 1]]
    path.write_text(json.dumps(index))
    expected = _counted(_store(venv).holdings(["0001"]))
    looked_up: list[str] = []
    lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p: looked_up.append(str(p)) or lstat(p))

    assert _counted(_store(venv).holdings(["0001"], indexed=True)) == expected
    assert [p for p in looked_up if ".." in p] == []


def test_a_folder_changed_too_recently_is_not_recorded(
    venv: Venv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second change in the tick of the first would leave its timestamps as they were."""
    monkeypatch.setattr(stashindex, "_SETTLED_NS", 10**18)  # every change is "recent"
    _indexed(venv)
    assert stashindex.read_index(_store(venv).root) == {}


def _walked(top: Path) -> list[tuple[tuple[int, int], int, int]]:
    """What store.holdings listed before the index: os.walk, an lstat per file."""
    listed = []
    for folder, _, names in os.walk(top):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            listed.append(((info.st_dev, info.st_ino), info.st_size, info.st_nlink))
    return sorted(listed)


def test_links_are_listed_as_os_walk_lists_them(tmp_path: Path) -> None:
    """A link to a folder is neither listed nor followed; a link to a file, or to nothing, is
    listed (itself); with the index as without it, whatever their targets become."""
    store = Store(tmp_path / "state")
    stash = store.folder("0001").package_stash("pkg", "1.0")
    stash.mkdir(parents=True)
    store.folder("0001").snapshot_file.write_text("x")
    (stash / "file").write_bytes(b"12345")
    (stash / "sub").mkdir()
    (stash / "sub" / "deep").write_bytes(b"1")
    (stash / "to-folder").symlink_to(stash / "sub")
    (stash / "to-file").symlink_to(stash / "file")
    (stash / "to-nothing").symlink_to(tmp_path / "later")
    listings = []
    for later_a_folder in (False, True):
        if later_a_folder:
            (tmp_path / "later").mkdir()  # the dangling link now leads to a folder
        expected = _walked(store.folder("0001").path)
        assert sorted(stashindex.walk(str(store.folder("0001").path))) == expected
        for _ in range(2):  # the index made, then used
            lister = stashindex.Lister(stashindex.read_index(store.root))
            assert sorted(lister.entries("0001", str(store.folder("0001").path))) == expected
            stashindex.write_index(store.root, lister.recorded)
        listings.append(expected)
    assert listings[0] != listings[1]


def test_a_record_that_did_not_hold_is_dropped(venv: Venv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed again while it can't be recorded anew: its old record goes, not kept to fail."""
    _indexed(venv)
    package = _stashed(venv, f"{venv.site_packages.relative_to(venv.root)}/toolpkg")
    package.rename(package.with_name("moved"))
    monkeypatch.setattr(stashindex, "_SETTLED_NS", 10**18)

    _indexed(venv)

    assert stashindex.read_index(_store(venv).root) == {}


def test_a_link_to_a_folder_is_looked_at_afresh_once_indexed(tmp_path: Path) -> None:
    """A link to a folder outside the stash is not listed; once that folder is gone the link
    is (os.walk lists a dangling link). The index used to record nothing of it, and listed it
    as it was walked: not at all, though no folder of the stash changed."""
    store = Store(tmp_path / "state")
    stash = store.folder("0001").package_stash("pkg", "1.0")
    stash.mkdir(parents=True)
    store.folder("0001").snapshot_file.write_text("x")
    (stash / "file").write_bytes(b"12345")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (stash / "to-elsewhere").symlink_to(elsewhere)
    lister = stashindex.Lister({})
    assert sorted(lister.entries("0001", str(store.folder("0001").path))) == _walked(
        store.folder("0001").path
    )
    stashindex.write_index(store.root, lister.recorded)
    elsewhere.rmdir()  # the link now leads nowhere: listed by a walk

    index = stashindex.read_index(store.root)
    lister = stashindex.Lister(index)
    listed = sorted(lister.entries("0001", str(store.folder("0001").path)))

    assert listed == _walked(store.folder("0001").path)
    assert lister.recorded["0001"] is index["0001"]  # through the index, not walked again
