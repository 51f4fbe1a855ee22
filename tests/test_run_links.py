"""What `run` takes as the command's change to a file it did not replace: a new ctime alone is no
write (another hard link to the inode moves it: uv links every install of a wheel, in any venv,
to its cache's inodes), the bytes decide; a write in place whose mtime was set back is still
one, and a chmod is a change that the undo gives back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, script, uv_install
from tests.test_run import _WRITE_AND_HIDE

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _linked_elsewhere(target: Path, folder: Path) -> str:
    """The command's lines that hard-link ``target`` into ``folder``, outside the venv."""
    return f"import os\nos.link({str(target)!r}, {str(folder / target.name)!r})\n"


def test_a_hard_link_made_from_outside_is_not_a_rewrite_nor_undone(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The command links leftpad.py (a link into uv's cache, as uv installs) into a folder
    elsewhere, installs toolpkg and fails: toolpkg is taken away, and leftpad is neither said
    to be rewritten nor brought back (its file is the very inode it was)."""
    venv = make_venv("requests", "leftpad")
    target = venv.site_packages / "leftpad.py"
    (tmp_path / "elsewhere").mkdir()
    install = f"import subprocess\nsubprocess.run({uv_install(venv, 'toolpkg')!r}, check=True)\n"
    body = _linked_elsewhere(target, tmp_path / "elsewhere") + install + "raise SystemExit(1)\n"
    hashes, installed, inode = venv.file_hashes(), venv.installed(), target.stat().st_ino

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert "rewrote" not in str(data["messages"]), data["messages"]
    assert data["restore"]["from_stash"] == []  # type: ignore[index]
    assert data["restore"]["reinstalled"] == []  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes
    assert target.stat().st_ino == inode
    assert target.stat().st_nlink >= 2  # the link elsewhere stands: it is not the venv's


def test_a_write_in_place_hidden_behind_a_new_link_is_still_undone(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A write in place whose mtime was set back, and a hard link made to the file too: its
    size, mtime and inode are as recorded, its ctime and link count moved as a link alone would
    move them. Its bytes tell: said, and brought back as they were."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = venv.site_packages / "leftpad.py"
    (tmp_path / "elsewhere").mkdir()
    body = _WRITE_AND_HIDE.format(path=str(target))
    body += _linked_elsewhere(target, tmp_path / "elsewhere") + "raise SystemExit(1)\n"
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool_reinstalling("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert "the command replaced or rewrote files of leftpad==1.0" in data["messages"]  # type: ignore[operator]
    assert data["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


@pytest.mark.parametrize("copies", [True, False], ids=["a copy", "linked to uv's cache"])
def test_a_chmod_is_said_and_its_undo_gives_the_mode_back(
    make_venv: MakeVenv, copies: bool
) -> None:
    """The command makes leftpad.py writable by all and fails. The stash shares the file's
    inode, so its copy has that mode too: the undo gives back the mode the stash hasher
    recorded, not only the bytes (to uv's cache too, where the file is its inode)."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=copies)
    target = venv.site_packages / "leftpad.py"
    mode = stat.S_IMODE(target.stat().st_mode)
    assert mode != 0o777
    body = f"import os\nos.chmod({str(target)!r}, 0o777)\nraise SystemExit(1)\n"
    hashes, installed = venv.file_hashes(), venv.installed()

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 3, data
    assert "the command replaced or rewrote files of leftpad==1.0" in data["messages"]  # type: ignore[operator]
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


def test_a_chmod_alone_that_stands_is_said(make_venv: MakeVenv) -> None:
    """A command that only changes a file's mode and passes changed the environment: said,
    not "no change"."""
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)
    target = venv.site_packages / "leftpad.py"
    body = f"import os\nos.chmod({str(target)!r}, 0o777)\n"

    run = venv.tool("--json", "run", "--no-probe", "--", *script(venv, body))

    data = run.json()
    assert run.returncode == 0, data
    assert data["outcome"] == "ran", data
    assert "the command replaced or rewrote files of leftpad==1.0" in data["messages"]  # type: ignore[operator]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o777
