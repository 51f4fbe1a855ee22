"""The files of the state folder that only save time are hints: none of them decides which
environment is acted on, whether a requirement is met, or whether a restored file is verified;
and none of them can make a command hang or read without end."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from safeuninstall.state.layout import SnapshotFolder
from tests.conftest import MakeVenv, Venv
from tests.test_uninstall import snapshot_dirs

# The files a command may read from a state folder, and from a snapshot's folder in it.
STATE_FILES = (
    "interpreter.json",
    "record-cache.json",
    "requires-cache.json",  # written by earlier versions
    "presence-cache.json",  # written by earlier versions
    "elf-cache.json",  # written by earlier versions
    "baseline-cache.json",
    "derived-plans.json",  # written by earlier versions
    "stash-index.json",  # written by earlier versions
)
# A snapshot folder's caches, named by the one owner of its layout.
_ANY = SnapshotFolder(Path("."))
SNAPSHOT_FILES = tuple(p.name for p in (_ANY.head_file, _ANY.twin_file, _ANY.verified_file))


def test_a_forged_requires_cache_does_not_skip_the_unmet_requirement_refusal(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    refused = venv.tool("--no-probe", "urllib3")
    assert refused.returncode == 1 and "unmet" in refused.stdout and "refused" in refused.stdout
    # A requirement cache entry for requests' METADATA, as the file is now, forged to say
    # "requires nothing".
    metadata = next(venv.site_packages.glob("requests-*.dist-info")) / "METADATA"
    info = metadata.stat()
    key = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    forged = {
        "format": "safeuninstall-requires-cache",
        "version": 1,
        "entries": {str(metadata): [key, []]},
    }
    (venv.root / ".safe-uninstall" / "requires-cache.json").write_text(json.dumps(forged))
    again = venv.tool("--no-probe", "urllib3")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "unmet" in again.stdout and "refused" in again.stdout
    assert "urllib3" in venv.installed()


def test_a_forged_interpreter_answer_does_not_move_the_target(make_venv: MakeVenv) -> None:
    mine = make_venv("leftpad")
    other = make_venv("leftpad")
    for venv in (mine, other):
        (venv.root / ".safe-uninstall").mkdir(mode=0o700)
        assert venv.tool("check", "leftpad").returncode == 0
    state = mine.root / ".safe-uninstall" / "interpreter.json"
    theirs = other.root / ".safe-uninstall" / "interpreter.json"
    if state.exists():  # my interpreter's key, the other venv's answer
        forged = json.loads(state.read_text())
        forged["data"]["interpreter"] = json.loads(theirs.read_text())["data"]["interpreter"]
        state.write_text(json.dumps(forged))
    run = mine.tool("--json", "--no-probe", "leftpad")
    assert run.returncode == 0, run.stderr
    assert "leftpad" not in mine.installed()
    assert "leftpad" in other.installed()
    assert not (other.root / ".safe-uninstall" / "snapshots").exists()


def test_a_stash_rewritten_in_place_with_its_mtime_set_back_is_not_restored_as_verified(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("requests")
    venv.install("leftpad", copies=True)  # its stash is written into in place below
    assert venv.tool("--probe", "import time, requests; time.sleep(0.3)", "leftpad").returncode == 0
    (folder,) = snapshot_dirs(venv)
    assert folder.verified_file.is_file()
    victim = next(p for p in folder.stash_dir.rglob("leftpad.py"))
    before = victim.stat()
    good = victim.read_bytes()
    bad = good.replace(b"' '", b"'!'")
    assert len(bad) == len(good) and bad != good
    with open(victim, "r+b") as stream:  # in place: the same inode, the same size
        stream.write(bad)
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime set back
    run = venv.tool_reinstalling("rollback", "--json", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    restored = venv.site_packages / "leftpad.py"
    assert restored.read_bytes() == good
    assert run.json()["restore"]["reinstalled"] == ["leftpad==1.0"]  # type: ignore[index]


def _state_filled(venv: Venv) -> Path:
    """A state folder holding every file a command may read from it, and one snapshot."""
    probe = ("--probe", "import requests")
    assert venv.tool(*probe, "leftpad").returncode == 0
    for args in (("doctor",), ("snapshots",), ("check", "urllib3"), ("--dry-run", "toolpkg")):
        venv.tool(*args)
    state = venv.root / ".safe-uninstall"
    (folder,) = snapshot_dirs(venv)
    assert {p.name for p in state.iterdir()} >= {"interpreter.json", "record-cache.json"}
    assert {p.name for p in folder.path.iterdir()} >= set(SNAPSHOT_FILES)
    return folder.path


def _limited() -> None:
    limit = 1 << 30  # a command that reads /dev/zero to its end stops here
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _commands(venv: Venv, prepare: Callable[[], None] = lambda: None) -> list[tuple[int, str]]:
    """Each command's exit code and JSON answer (without what differs from run to run), each
    within a minute, ``prepare`` run before each (a command writes its caches back)."""
    results = []
    for args in (
        ("check", "--json", "urllib3"),
        ("doctor", "--json"),
        ("snapshots", "--json"),
        ("audit", "--json"),
        ("--dry-run", "--json", "toolpkg"),
        ("--json", "--probe", "import requests", "toolpkg"),
        ("rollback", "--json", "1"),
    ):
        prepare()
        done = subprocess.run(
            [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), *args],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limited,
            env={**os.environ, "UV_OFFLINE": "1"},
        )
        assert "Traceback" not in done.stderr, done.stderr
        results.append((done.returncode, _stable(done.stdout)))
    return results


def _stable(stdout: str) -> str:
    """The answer without what differs from run to run (times, sizes of the state)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return stdout
    return json.dumps(_strip(data), sort_keys=True)


_VOLATILE = {"seconds", "elapsed", "took", "bytes", "size", "kept", "created", "timings"}


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_state_file_that_is_a_fifo_or_a_device_is_not_read(
    make_venv: MakeVenv, kind: str
) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    folder = _state_filled(venv)
    state = venv.root / ".safe-uninstall"
    paths = [state / name for name in STATE_FILES] + [folder / n for n in SNAPSHOT_FILES]

    def hostile() -> None:
        for path in paths:
            path.unlink(missing_ok=True)
            if kind == "fifo":
                os.mkfifo(path)
            else:
                path.symlink_to("/dev/zero")

    codes = [code for code, _ in _commands(venv, hostile)]
    assert codes == [0, 0, 0, 0, 0, 0, 0]
