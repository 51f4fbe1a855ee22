"""head.json (store.SnapshotHead): what `snapshots` and the retention policy read of each
snapshot instead of parsing its TOML. It is used only while it is the head of snapshot.toml's
bytes (their sha256) and says what their header says; a stale, corrupt or hostile one changes
nothing that is listed or pruned."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from safeuninstall.state.layout import SnapshotFolder
from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def _listing(venv: Venv) -> list[object]:
    data = venv.tool("snapshots", "--json").json()
    snapshots = data["snapshots"]
    assert isinstance(snapshots, list)
    return snapshots


def _folder(venv: Venv, snapshot_id: str) -> SnapshotFolder:
    return venv.snapshot(snapshot_id)


@pytest.fixture
def venv(make_venv: MakeVenv) -> Venv:
    venv = make_venv("requests", "leftpad")
    for _ in range(2):
        assert venv.tool("snapshot", "--no-stash").returncode == 0
    return venv


def test_the_listing_from_heads_is_the_listing_from_the_toml(venv: Venv) -> None:
    from_heads = _listing(venv)
    assert _folder(venv, "0001").head_file.is_file()
    for snapshot_id in ("0001", "0002"):
        _folder(venv, snapshot_id).head_file.unlink()
    assert _listing(venv) == from_heads  # read from the TOML, the heads written again
    assert _folder(venv, "0002").head_file.is_file()
    assert [s["id"] for s in from_heads] == ["0002", "0001"]  # type: ignore[index]


def _forge(venv: Venv, snapshot_id: str, **changes: object) -> None:
    path = _folder(venv, snapshot_id).head_file
    stored = json.loads(path.read_text())
    stored["data"].update(changes)
    path.write_text(json.dumps(stored))


@pytest.mark.parametrize(
    "change",
    [
        {"operation": "forged"},
        {"packages": 999},
        {"prefix": "/elsewhere"},
        {"removed": ["leftpad"]},
        {"command": ["safe-uninstall", "forged"]},
    ],
)
def test_a_head_that_says_what_its_toml_does_not_is_not_used(
    venv: Venv, change: dict[str, object]
) -> None:
    """Keyed by the sha256 of the TOML as it is (no secret): what it says is checked against
    the file's own header, so a forged head lists nothing the TOML does not."""
    expected = _listing(venv)
    _forge(venv, "0001", **change)
    assert _listing(venv) == expected


def test_a_head_of_other_bytes_is_not_used(venv: Venv) -> None:
    """snapshot.toml changed (its mtime kept): its old head lists what is no longer there."""
    toml = _folder(venv, "0001").snapshot_file
    info = toml.stat()
    toml.write_text(toml.read_text().replace('operation = "snapshot"', 'operation = "edited"'))
    os.utime(toml, ns=(info.st_atime_ns, info.st_mtime_ns))
    listed = {s["id"]: s for s in _listing(venv)}  # type: ignore[index]
    assert listed["0001"]["operation"] == "edited"  # type: ignore[index]


@pytest.mark.parametrize(
    "spoil",
    ["garbage", "another id", "another environment", "wrong types", "a FIFO"],
)
def test_a_corrupt_or_hostile_head_changes_nothing(venv: Venv, spoil: str) -> None:
    expected = _listing(venv)
    head = _folder(venv, "0002").head_file
    if spoil == "garbage":
        head.write_bytes(b"\x00{")
    elif spoil == "another id":
        _forge(venv, "0002", id="0001")
    elif spoil == "another environment":  # a key that matches no snapshot.toml here
        _forge(venv, "0002", key="0" * 64, prefix="/elsewhere")
    elif spoil == "wrong types":
        _forge(venv, "0002", packages="many")
    else:
        head.unlink()
        os.mkfifo(head)
    assert _listing(venv) == expected


def test_an_outcome_note_that_is_a_fifo_is_passed_over(venv: Venv) -> None:
    """The outcome note is read as head.json is: bounded, a regular file only. A FIFO in its
    place (nothing writes to it) hung `snapshots` and `show` in their open."""
    expected = _listing(venv)
    note = _folder(venv, "0002").outcome_file
    note.unlink(missing_ok=True)
    os.mkfifo(note)
    done = subprocess.run(
        [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), "snapshots", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_OFFLINE": "1"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["snapshots"]
    # 0002's outcome is then the one its snapshot.toml was written with: "pending", not the
    # note's "taken" (and its folder holds no note's bytes)
    assert [s["outcome"] for s in listed] == ["pending", "taken"]
    same = ("id", "created", "command", "operation", "removed", "packages", "error")
    assert [[s[k] for k in same] for s in listed] == [[s[k] for k in same] for s in expected]  # type: ignore[index]


@pytest.mark.parametrize(
    ("note", "said"),
    [(b"restored", "'restored'"), (b"rollback-to-7", "'rollback-to-7'"), (b"\xff", "'\ufffd'")],
)
def test_an_outcome_note_this_tool_never_writes_makes_its_snapshot_unreadable(
    venv: Venv, note: bytes, said: str
) -> None:
    """A plain rollback reads from the note whether a change was undone and where a rollback
    returned: one that says nothing this tool writes is refused, named, not read as another."""
    venv.snapshot("0002").outcome_file.write_bytes(note)
    first, second = _listing(venv)
    assert first["outcome"] == "unreadable"  # type: ignore[index]
    assert f"outcome: unknown outcome {said}" in first["error"]  # type: ignore[index]
    assert second["outcome"] == "taken"  # type: ignore[index]
