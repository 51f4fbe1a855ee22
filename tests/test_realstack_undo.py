"""The undo's edges on a real stack (requests): a file of a real distribution written in place
through uv's hard links, and a real distribution's RECORD that lists the environment's own
interpreter or pyvenv.cfg.

The venvs of this tier share inodes with the stacks' uv cache. The test that writes in place
first installs that one distribution again, from a wheel of its own bytes, through a uv cache
of its own: the write reaches that cache, never the stacks'.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import Venv
from tests.realstack import UV, RealVenv

# Written by the installer, not part of the wheel.
_INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "uv_cache.json"}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _record(venv: Venv, name: str) -> Path:
    (record,) = venv.site_packages.glob(f"{name}-*.dist-info/RECORD")
    return record


def _wheel_of(venv: Venv, name: str, house: Path) -> Path:
    """A wheel of the distribution ``name`` as installed in ``venv``: its files' very bytes,
    a RECORD of their own, the installer's files left out."""
    record = _record(venv, name)
    dist_info = record.parent.name
    files: dict[str, bytes] = {}
    for line in record.read_text().splitlines():
        path = line.rsplit(",", 2)[0]
        parts = Path(path).parts
        if not path or "__pycache__" in parts or path.startswith(".."):
            continue
        if parts[0] == dist_info and parts[-1] in _INSTALLER_FILES:
            continue
        files[path] = (venv.site_packages / path).read_bytes()
    lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*lines, f"{dist_info}/RECORD,,"]) + "\n").encode()
    house.mkdir(parents=True, exist_ok=True)
    wheel = house / f"{dist_info.removesuffix('.dist-info')}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def _as_recorded(venv: Venv, name: str, path: str) -> bool:
    line = next(x for x in _record(venv, name).read_text().splitlines() if x.startswith(path + ","))
    return line.split(",")[1] == _record_hash((venv.site_packages / path).read_bytes())


def test_a_run_that_writes_a_real_file_in_place_is_undone_past_uvs_cache(
    real_venv: RealVenv, tmp_path: Path
) -> None:
    """idna installed again through the test's own uv cache, hard-linked: the guarded command
    appends to idna/core.py, which writes uv's cache (and the stash) too, and fails. The undo
    finds the reinstalled file failing its RECORD hash, installs idna once more past the
    cache, and ends restored; the next command is not refused."""
    assert UV is not None
    venv = real_venv("requests")
    house, cache = tmp_path / "house", tmp_path / "own-uv-cache"
    wheel = _wheel_of(venv, "idna", house)
    shared = (venv.site_packages / "idna" / "core.py").stat().st_ino  # the stacks' cache's
    links = {"UV_CACHE_DIR": str(cache), "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(house)}
    install = ["pip", "install", "--python", str(venv.python), "--reinstall", "--no-deps"]
    installed = subprocess.run(
        [UV, *install, "--link-mode", "hardlink", str(wheel)],
        env={**os.environ, **links},
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    target = venv.site_packages / "idna" / "core.py"
    assert target.stat().st_ino != shared  # the write below never reaches the stacks' cache
    assert target.stat().st_nlink > 1  # a hard link into the test's own uv cache
    assert _as_recorded(venv, "idna", "idna/core.py")
    before = venv.installed()
    writes = f"open({str(target)!r}, 'a').write('# edited in place\\n'); raise SystemExit(1)"

    run = venv.tool("run", "--no-probe", "--", sys.executable, "-c", writes, **links)

    assert run.returncode == 3, run.stdout + run.stderr
    assert "uv reinstalled idna==3.20 with files that fail their RECORD hash" in run.stdout
    assert "each reinstall brings it back. Installed again past the cache" in run.stdout
    assert "verified: the installed set equals the snapshot" in run.stdout
    assert _as_recorded(venv, "idna", "idna/core.py")
    assert venv.installed() == before
    assert not venv.journal.exists()
    later = venv.tool("snapshot", "-q", **links)
    assert later.returncode == 0, later.stdout + later.stderr


@pytest.mark.parametrize("line", ["../../../bin/python", "../../../pyvenv.cfg"])
def test_a_real_record_that_lists_the_interpreter_is_refused(
    real_venv: RealVenv, line: str
) -> None:
    """idna's RECORD with a line naming the venv's own interpreter or pyvenv.cfg: uv would
    delete it and nothing could open the environment again. The removal is refused, naming
    the line, and nothing is changed."""
    venv = real_venv("requests")
    record = _record(venv, "idna")
    replacement = record.with_name("RECORD.new")  # a new file: never write the cache's in place
    replacement.write_text(record.read_text().rstrip("\n") + f"\n{line},,\n")
    os.replace(replacement, record)
    before = venv.installed(), venv.file_hashes()
    config = (venv.root / "pyvenv.cfg").read_bytes()

    run = venv.tool("--no-probe", "idna")

    assert run.returncode == 1, run.stdout + run.stderr
    assert f"RECORD line {line!r}" in run.stderr
    assert "nothing was removed" in run.stderr
    assert (venv.installed(), venv.file_hashes()) == before
    assert (venv.root / "pyvenv.cfg").read_bytes() == config
    assert venv.run_python("import requests").returncode == 0
