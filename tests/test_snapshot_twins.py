"""snapshot.json (store.py): snapshot.toml's table as JSON, which the commands that read every
snapshot (doctor, rollback, audit) decode instead of parsing TOML. It is believed only where it
is the twin of snapshot.toml's very bytes (keyed by their sha256, and written back as TOML it
gives them), and only as a valid snapshot of that folder; a stale, corrupt or hostile one
changes nothing that is read."""

from __future__ import annotations

import json
import os

import pytest

from safeuninstall.base.cachefile import digest
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state import store as store_module
from safeuninstall.state.store import Store
from tests.conftest import UV, MakeVenv, Venv

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


@pytest.fixture
def venv(make_venv: MakeVenv) -> Venv:
    venv = make_venv("requests", "leftpad")
    for _ in range(2):
        assert venv.tool("snapshot", "--no-stash").returncode == 0
    return venv


def _store(venv: Venv) -> Store:
    return venv.state


def _from_toml(store: Store, snapshot_id: str) -> snapshot_file.Snapshot:
    """What ``store.load`` gives from snapshot.toml alone (its twin set aside meanwhile)."""
    twin = store.folder(snapshot_id).twin_file
    aside = twin.with_name("aside")
    if os.path.lexists(twin):
        os.replace(twin, aside)
    try:
        return store.load(snapshot_id)
    finally:
        if os.path.lexists(aside):
            os.replace(aside, twin)


def _from_twin(store: Store, snapshot_id: str) -> snapshot_file.Snapshot | None:
    """The snapshot as its twin alone gives it, None where the twin is not believed."""
    folder = store.folder(snapshot_id)
    raw = folder.snapshot_file.read_bytes()
    twin = store_module._twin_file(folder).read()
    return store_module._from_twin(twin, digest(raw), raw, folder)


def _forge(store: Store, snapshot_id: str, **changes: object) -> None:
    """The twin with a changed snapshot table (or key), its key left as it was."""
    path = store.folder(snapshot_id).twin_file
    twin = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "key":
            twin["data"]["key"] = value
        else:
            twin["data"]["snapshot"][key] = value
    path.write_text(json.dumps(twin))


def test_a_snapshot_has_a_twin_that_reads_as_its_toml(venv: Venv) -> None:
    store = _store(venv)
    for snapshot_id in ("0001", "0002"):
        assert store.folder(snapshot_id).twin_file.is_file()
        from_twin = _from_twin(store, snapshot_id)
        assert from_twin == snapshot_file.load(store.snapshot_path(snapshot_id))
        assert store.load(snapshot_id) == _from_toml(store, snapshot_id)


def test_a_twin_that_says_what_its_toml_does_not_is_not_believed(venv: Venv) -> None:
    """Keyed by the TOML's sha256 as it is, its table edited: the key is no secret, so the
    twin is believed only where it gives the TOML's very bytes back."""
    store = _store(venv)
    expected = _from_toml(store, "0001")
    _forge(store, "0001", created="2000-01-01T00:00:00+00:00", operation="forged")
    assert _from_twin(store, "0001") is None
    assert store.load("0001") == expected


def test_a_twin_of_other_bytes_is_not_believed(venv: Venv) -> None:
    """snapshot.toml changed (an edit, another file put in its place, its mtime kept): the
    old twin says what is no longer there."""
    store = _store(venv)
    toml = store.snapshot_path("0001")
    info = toml.stat()
    toml.write_text(toml.read_text().replace('operation = "snapshot"', 'operation = "edited"'))
    os.utime(toml, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert _from_twin(store, "0001") is None
    assert store.load("0001").operation == "edited"


@pytest.mark.parametrize(
    "spoil",
    ["garbage", "another id", "not a snapshot", "wrong key type", "unknown field", "a FIFO"],
)
def test_a_corrupt_or_hostile_twin_changes_nothing(venv: Venv, spoil: str) -> None:
    store = _store(venv)
    expected = _from_toml(store, "0002")
    twin = store.folder("0002").twin_file
    if spoil == "garbage":
        twin.write_bytes(b"\x00{")
    elif spoil == "another id":  # valid, of the folder 0001: never "0002 is invalid"
        _forge(store, "0002", id="0001")
    elif spoil == "not a snapshot":
        _forge(store, "0002", packages="many")
    elif spoil == "wrong key type":
        _forge(store, "0002", key="any")
    elif spoil == "unknown field":
        twin.write_text(json.dumps({**json.loads(twin.read_text()), "extra": 1}))
    else:
        twin.unlink()
        os.mkfifo(twin)
    assert store.load("0002") == expected
    listed = dict(store.iter_loadable())
    assert listed["0002"] == expected


def test_only_a_command_that_writes_writes_a_missing_twin(venv: Venv) -> None:
    store = _store(venv)
    twins = [store.folder(i).twin_file for i in ("0001", "0002")]
    for twin in twins:
        twin.unlink()
    assert venv.tool("audit", "--json").returncode == 0  # reads only
    assert not any(twin.exists() for twin in twins)
    assert venv.tool("doctor", "--json").returncode == 0
    assert all(twin.is_file() for twin in twins)
    assert _from_twin(store, "0001") == snapshot_file.load(store.snapshot_path("0001"))


def test_a_twin_written_while_its_toml_was_replaced_is_of_the_bytes_parsed(
    venv: Venv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin pairs what was parsed with the sha256 of those very bytes: a file replaced
    during the parse is not vouched for by it."""
    store = _store(venv)
    store.folder("0002").twin_file.unlink()
    path = store.snapshot_path("0002")
    original = snapshot_file.parse

    def parse_then_replace(raw: bytes, target: os.PathLike[str]) -> snapshot_file.Snapshot:
        parsed = original(raw, target)  # type: ignore[arg-type]
        edited = path.with_name("edited")
        edited.write_bytes(raw.replace(b'operation = "snapshot"', b'operation = "edited"'))
        os.replace(edited, path)
        return parsed

    monkeypatch.setattr(snapshot_file, "parse", parse_then_replace)
    assert store.load("0002", keep_twin=True).operation == "snapshot"
    monkeypatch.setattr(snapshot_file, "parse", original)
    assert store.folder("0002").twin_file.exists()
    assert _from_twin(store, "0002") is None
    assert store.load("0002").operation == "edited"
