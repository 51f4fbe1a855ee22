"""head.json (store.SnapshotHead): what `snapshots` and the retention policy read of each
snapshot instead of parsing its TOML. It is used only while it is the head of snapshot.toml as
that file is; a stale, corrupt or hostile one changes nothing that is listed or pruned."""

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
    head = json.loads(path.read_text())
    head.update(changes)
    path.write_text(json.dumps(head))


def test_a_head_of_another_snapshot_toml_is_not_used(venv: Venv) -> None:
    """snapshot.toml replaced (another inode, as a copy or a restore from a backup makes):
    its old head lists what is no longer there. A head used by id alone would show it."""
    expected = _listing(venv)
    toml = _folder(venv, "0001").snapshot_file
    _forge(venv, "0001", operation="forged", packages=999)
    copy = toml.with_name("copy")
    copy.write_bytes(toml.read_bytes())
    info = toml.stat()
    os.utime(copy, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(copy, toml)
    assert _listing(venv) == expected


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
        _forge(venv, "0002", key=[1, 2, 3, 4, 5], prefix="/elsewhere")
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
    (_folder(venv, "0002") / "outcome").write_bytes(note)
    first, second = _listing(venv)
    assert first["outcome"] == "unreadable"  # type: ignore[index]
    assert f"outcome: unknown outcome {said}" in first["error"]  # type: ignore[index]
    assert second["outcome"] == "taken"  # type: ignore[index]
