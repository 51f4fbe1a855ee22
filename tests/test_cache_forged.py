"""A cache in the state folder forged by whoever can write it, well formed and keyed for the
things as they are now, gives the verdict the command gives with the cache deleted (or a
refusal): never another one. The forgeries are written as the tool wrote these files on
0.2.0 (elf-cache.json, presence-cache.json, a snapshot.json keyed by snapshot.toml's stat)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from safeuninstall.base import tomlfile
from safeuninstall.state.layout import SnapshotFolder
from tests.conftest import MakeVenv, Venv
from tests.test_uninstall import GPU_SET, snapshot_dirs


def _state(venv: Venv) -> Path:
    return venv.root / ".safe-uninstall"


def _stat_key(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _forge_elf_cache(venv: Venv, library: Path, info: list[object]) -> None:
    """An elf-cache.json that answers for ``library`` as it is now with ``info``."""
    stat = library.stat()
    entry = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, info]
    forged = {"format": "safeuninstall-elf-cache", "version": 3, "entries": {str(library): entry}}
    (_state(venv) / "elf-cache.json").write_text(json.dumps(forged))


def test_a_forged_elf_cache_entry_that_drops_a_needed_library_changes_no_verdict(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv(*GPU_SET)
    _state(venv).mkdir(mode=0o700)
    assert venv.tool("doctor").returncode == 0
    library = venv.site_packages / "consumer" / "lib" / "libconsumer.so"
    # libconsumer.so as the reader sees it, less its DT_NEEDED libfoo.so.1 (the file's own
    # soname, RUNPATH and class kept: only the need is gone).
    runpath = ["$ORIGIN/../../nvfoo/lib", "$ORIGIN/../../nvbar/lib", "$ORIGIN/../../nvbaz/lib"]
    needed = ["libbar.so.2", "libbaz.so.3", "libc.so.6"]
    _forge_elf_cache(venv, library, [2, 62, None, needed, [], runpath, False, False])
    removal = venv.tool("--json", "nvfoo-cu13")
    assert removal.returncode != 0, removal.stdout + removal.stderr
    assert "nvfoo-cu13" in venv.installed()
    assert venv.run_python("import consumer; assert consumer.CHECK == 123").returncode == 0
    assert venv.tool("doctor").returncode == 0


def test_a_forged_presence_cache_hides_no_missing_file_from_doctor(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    _state(venv).mkdir(mode=0o700)
    assert venv.tool("doctor").returncode == 0
    record = next(venv.site_packages.glob("leftpad-*.dist-info")) / "RECORD"
    (venv.site_packages / "leftpad.py").unlink()
    expected = venv.tool("--json", "doctor")
    assert expected.returncode != 0
    # "leftpad was whole", keyed by its RECORD and its folders as they are now.
    folders = {}
    for folder in (venv.site_packages, record.parent, venv.root / "bin"):
        info = folder.stat()
        folders[str(folder)] = [info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns]
    whole = {"record": _stat_key(record), "folders": folders}
    forged = {"format": "safeuninstall-presence-cache", "version": 2, "entries": {}}
    forged["entries"] = {str(record): whole}
    (_state(venv) / "presence-cache.json").write_text(json.dumps(forged))
    os.utime(_state(venv) / "presence-cache.json", ns=(0, 0))  # settled long ago
    found = venv.tool("--json", "doctor")
    assert found.returncode == expected.returncode, found.stdout
    assert found.json()["findings"] == expected.json()["findings"]


def _forged_twins(folder: SnapshotFolder, table: dict[str, object]) -> list[object]:
    """snapshot.json holding ``table``: as 0.2.0 wrote it (keyed by snapshot.toml's stat), and
    as this version writes it, with the key a forger computes (the sha256 of snapshot.toml)."""
    sha = hashlib.sha256(folder.snapshot_file.read_bytes()).hexdigest()
    current = {"key": sha, "snapshot": table}
    return [
        {"key": _stat_key(folder.snapshot_file), "snapshot": table},
        {"format": "safeuninstall-snapshot-twin", "version": 2, "data": current},
    ]


@pytest.mark.parametrize("form", [0, 1], ids=["stat-keyed", "content-keyed"])
def test_a_forged_snapshot_twin_does_not_override_its_toml(make_venv: MakeVenv, form: int) -> None:
    venv = make_venv("requests", "leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    (folder,) = snapshot_dirs(venv)
    table = tomlfile.loads(folder.snapshot_file.read_text())
    # The twin says the snapshot was taken without leftpad: the environment as it is now.
    table["packages"] = [p for p in table["packages"] if p["name"] != "leftpad"]
    folder.twin_file.write_text(json.dumps(_forged_twins(folder, table)[form]))
    diff = venv.tool("--json", "diff", "1")
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "leftpad" in json.dumps(diff.json()), diff.stdout
    rollback = venv.tool_reinstalling("--json", "rollback", "1")
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    assert "leftpad" in venv.installed()


def test_a_forged_record_cache_hides_no_shared_file(make_venv: MakeVenv) -> None:
    """sharedlib-cu12 and -cu13 install the same sharedlib/__init__.py: removing cu12 deletes
    a file cu13 lists, and is undone. A record cache entry keyed by cu13's RECORD's stat as it
    is now, saying it lists nothing, would hide that from the removal and from doctor."""
    venv = make_venv("sharedlib-cu12", "sharedlib-cu13")
    _state(venv).mkdir(mode=0o700)
    record = next(venv.site_packages.glob("sharedlib_cu13-*.dist-info")) / "RECORD"
    entry = [_stat_key(record), [], [], []]  # [key, folders, index, names]: lists nothing
    forged = {"format": "safeuninstall-record-cache", "version": 1, "entries": {}}
    forged["entries"] = {str(record): entry}
    (_state(venv) / "record-cache.json").write_text(json.dumps(forged))
    removal = venv.tool("--json", "--no-probe", "sharedlib-cu12")
    assert removal.returncode == 3, removal.stdout + removal.stderr  # restored, as uncached
    assert (venv.site_packages / "sharedlib" / "__init__.py").is_file()
    assert "sharedlib-cu12" in venv.installed()
