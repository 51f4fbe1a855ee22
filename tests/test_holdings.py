"""What each snapshot folder holds (state/holdings.py), for `snapshots`, `show`, `audit` and the
retention policy: every stashed file by inode, walked afresh, so that what changes without
touching a folder (a file's link count, when the environment's copy is removed) is seen."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from safeuninstall.state.holdings import Holdings, walk
from safeuninstall.state.store import Store
from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


@pytest.fixture
def venv(make_venv: MakeVenv) -> Venv:
    venv = make_venv("leftpad", "toolpkg")
    # leftpad.py linked from the venv alone (uv links it from its cache too), then stashed
    installed = venv.site_packages / "leftpad.py"
    shutil.copyfile(installed, installed.with_name("copy"))
    installed.with_name("copy").replace(installed)
    assert venv.tool("snapshot").returncode == 0  # every installed file stashed (hard links)
    return venv


def _counted(holdings: Holdings) -> tuple[dict[str, int], int]:
    return dict(holdings.alone), holdings.held(holdings.files)


def _stashed(venv: Venv, relative: str) -> Path:
    [found] = venv.snapshot("0001").stash_dir.glob(f"*/{relative}")
    return found


def test_removing_the_environments_copy_of_a_stashed_file_is_seen(venv: Venv) -> None:
    """The file is then linked from the stash alone: its bytes count, though no folder of the
    stash changed."""
    store = venv.state
    alone, _ = _counted(store.holdings(store.ids()))
    site = venv.site_packages.relative_to(venv.root)
    stashed = _stashed(venv, f"{site}/leftpad.py")
    (venv.site_packages / "leftpad.py").unlink()

    after, _ = _counted(store.holdings(store.ids()))

    assert after["0001"] == alone["0001"] + stashed.stat().st_size


def _walked(top: Path) -> list[tuple[tuple[int, int], int, int]]:
    """os.walk, an lstat per file."""
    listed = []
    for folder, _, names in os.walk(top):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            listed.append(((info.st_dev, info.st_ino), info.st_size, info.st_nlink))
    return sorted(listed)


def test_links_are_listed_as_os_walk_lists_them(tmp_path: Path) -> None:
    """A link to a folder is neither listed nor followed; a link to a file, or to nothing, is
    listed (itself), whatever their targets become."""
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
        assert sorted(walk(str(store.folder("0001").path))) == expected
        listings.append(expected)
    assert listings[0] != listings[1]


def test_a_folder_that_is_a_link_when_it_is_opened_is_not_followed(tmp_path: Path) -> None:
    """A stash folder swapped for a link once it was listed (here: the folder walked is a
    link) is not walked into: what a link leads to is never counted as a stash's bytes."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big").write_bytes(b"x" * 1000)
    (tmp_path / "stash").symlink_to(elsewhere)

    assert list(walk(str(tmp_path / "stash"))) == []
    assert len(list(walk(str(elsewhere)))) == 1
