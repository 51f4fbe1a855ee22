"""Hostile and bad input: each is one clear line, exit 1, and the environment unchanged (the
sha256 of every file in site-packages and bin compared before and after)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safeuninstall.base import tomlfile
from safeuninstall.base.errors import SnapshotInvalid
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state.layout import SnapshotFolder
from safeuninstall.state.store import Store
from tests.conftest import UV, MakeVenv, Run, Venv, error_line
from tests.test_units import full_snapshot

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def assert_refused(
    venv: Venv, before: dict[str, str], run_args: tuple[str, ...], message: str, **env: str
) -> str:
    run = venv.tool(*run_args, **env)
    assert run.returncode == 1, run.stdout + run.stderr
    error_line(run.stderr)  # the first line but for the steps said before it
    assert message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert venv.file_hashes() == before
    return run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("not a name",), "not a requirement: 'not a name'"),
        (("-r", "/nonexistent/reqs.txt"), "reqs.txt: file not found"),
        (("--probe", "import (", "leftpad"), "is not valid Python"),
        (("--probe-cmd", "'unclosed", "leftpad"), "cannot be split"),
        (("--probe", "raise SystemExit(1)", "leftpad"), "already fails before any change"),
    ],
)
def test_bad_arguments(make_venv: MakeVenv, args: tuple[str, ...], message: str) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    assert_refused(venv, before, args, message)


def test_unknown_option_is_a_usage_error(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    run = venv.tool("leftpad", "--bad-option")
    assert run.returncode == 2  # click's own command-line errors keep exit 2
    assert "No such option" in run.stderr
    assert venv.file_hashes() == before


def test_not_an_environment(tmp_path: Path) -> None:
    from tests.conftest import run_tool

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("not an interpreter")
    (tmp_path / "bin" / "python").chmod(0o755)
    run = run_tool("--python", str(tmp_path), "leftpad")
    assert run.returncode == 1
    assert "cannot run it" in run.stderr or "not a working Python" in run.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("chattr") is None, reason="needs root+chattr")
def test_read_only_environment(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    # Immutable: even root can't create or delete entries (os.access would still say yes).
    if subprocess.run(["chattr", "+i", str(venv.site_packages)]).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    try:
        assert_refused(venv, before, ("--no-probe", "leftpad"), "is not writable")
    finally:
        subprocess.run(["chattr", "-i", str(venv.site_packages)], check=True)


def test_state_dir_permission_denied(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("")
    assert_refused(
        venv,
        before,
        ("--state-dir", str(blocker / "state"), "--no-probe", "leftpad"),
        "cannot create the state folder",
    )


def test_probe_that_prints_megabytes_is_bounded(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("probe", "--json", "--probe", "import sys; sys.stdout.write('x' * 50_000_000)")
    assert run.returncode == 0
    assert len(run.stdout) < 200_000
    assert "bytes of output not kept" in run.stdout


def test_no_uv_and_no_pip(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")  # uv venv: no pip inside
    before = venv.file_hashes()
    assert_refused(
        venv,
        before,
        ("--no-probe", "leftpad"),
        "no uv found and the target environment has no pip",
        SAFE_UNINSTALL_UV="none",
    )


def test_uv_that_fails(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    fake = tmp_path / "fake-uv"
    fake.write_text("#!/bin/sh\necho 'error: the disk said no' >&2\nexit 2\n")
    fake.chmod(0o755)
    stderr_or_out = venv.tool("--json", "--no-probe", "leftpad", SAFE_UNINSTALL_UV=str(fake))
    data = stderr_or_out.json()
    assert stderr_or_out.returncode == 1, data
    assert data["outcome"] == "uninstall-failed-restored"
    assert "the disk said no" in str(data["messages"])
    assert venv.file_hashes() == before


def test_disk_full_while_stashing(make_venv: MakeVenv, tmp_path: Path) -> None:
    """A 64 KiB tmpfs as the state folder: another filesystem, so stashing copies, and the copy
    of a 1 MiB file runs out of space. Nothing may be removed."""
    venv = make_venv()
    from tests.wheels import build_wheel

    wheel = build_wheel(tmp_path / "w", "bigpkg", "1.0", {"bigpkg/data.bin": os.urandom(1 << 20)})
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(wheel))
    before = venv.file_hashes()
    mount = tmp_path / "small"
    mount.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
            capture_output=True,
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        stderr = assert_refused(
            venv, before, ("--state-dir", str(mount), "--no-probe", "bigpkg"), "no space left"
        )
        assert "nothing was removed" in stderr
        assert list(Store(mount).snapshots_dir.iterdir()) == []
        assert not (mount / "journal.toml").exists() and not venv.journal.exists()
    finally:
        subprocess.run(["umount", str(mount)], check=True)


# -- snapshot files edited by someone else --------------------------------------------------


@pytest.fixture
def removed_leftpad(make_venv: MakeVenv) -> Venv:
    venv = make_venv("leftpad", "requests")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    return venv


def snapshot_path(venv: Venv) -> Path:
    return venv.snapshot("0001").snapshot_file


def edit_snapshot(venv: Venv, edit) -> None:  # type: ignore[no-untyped-def]
    path = snapshot_path(venv)
    data = tomlfile.loads(path.read_text())
    edit(data)
    path.write_text(tomli_w.dumps(data))


def leftpad_index(data: dict) -> int:  # type: ignore[type-arg]
    return next(i for i, p in enumerate(data["packages"]) if p["name"] == "leftpad")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format=99), "unknown format version 99"),
        (lambda d: d["packages"][0].update(name="../../etc"), "packages[0].name"),
        (lambda d: d["packages"][0].update(version="1.0; rm -rf /"), "packages[0].version"),
        (
            lambda d: d["packages"][leftpad_index(d)]["stash"]["files"][0].update(
                path="../../../../etc/passwd"
            ),
            ".stash.files[0].path",
        ),
        (
            lambda d: d["packages"][leftpad_index(d)]["stash"]["files"][0].update(
                path="/etc/passwd"
            ),
            "is absolute",
        ),
        (lambda d: d["packages"][leftpad_index(d)]["stash"].update(folder="../x"), "stash.folder"),
    ],
)
def test_edited_snapshot_is_refused(removed_leftpad: Venv, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    venv = removed_leftpad
    before = venv.file_hashes()
    edit_snapshot(venv, edit)
    stderr = assert_refused(venv, before, ("rollback", "1"), message)
    assert str(snapshot_path(venv)) in stderr


@pytest.mark.parametrize("content", [b"", b"format = 1\n[target", b"\x00\xff" * 50])
def test_corrupt_or_truncated_snapshot_is_refused(removed_leftpad: Venv, content: bytes) -> None:
    venv = removed_leftpad
    before = venv.file_hashes()
    original = snapshot_path(venv).read_bytes()
    snapshot_path(venv).write_bytes(content or original[: len(original) // 2])
    assert_refused(venv, before, ("rollback", "1"), str(snapshot_path(venv)))


def test_symlink_leading_out_of_the_environment_is_refused(
    removed_leftpad: Venv, tmp_path: Path
) -> None:
    venv = removed_leftpad
    outside = tmp_path / "outside"
    outside.mkdir()
    (venv.site_packages / "sneaky").symlink_to(outside)
    before = venv.file_hashes()
    rel = str((venv.site_packages / "sneaky" / "leftpad.py").relative_to(venv.root))
    edit_snapshot(
        venv,
        lambda d: d["packages"][leftpad_index(d)]["stash"]["files"][0].update(path=rel),
    )
    assert_refused(venv, before, ("rollback", "1"), "resolves outside the environment")
    assert list(outside.iterdir()) == []


# -- a property: the loader accepts a valid file or refuses it clearly, never a traceback ---

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=20),
    st.just("../../etc/passwd"),
    st.just("/abs"),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


def _paths(data: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*prefix, index))
    return found


def _sample_snapshot() -> dict:  # type: ignore[type-arg]

    return full_snapshot().to_dict()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_edits_are_accepted_or_refused_clearly(data: st.DataObject, tmp_path: Path) -> None:
    snap = _sample_snapshot()
    for _ in range(data.draw(st.integers(1, 4))):
        paths = _paths(snap)
        where = data.draw(st.sampled_from(paths))
        parent: object = snap
        for key in where[:-1]:
            parent = parent[key]  # type: ignore[index]
        action = data.draw(st.sampled_from(["set", "delete"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif action == "delete" and isinstance(parent, list):
            parent.pop(where[-1])  # type: ignore[arg-type]
        else:
            value = data.draw(_VALUES)
            parent[where[-1]] = value  # type: ignore[index]
    path = SnapshotFolder(tmp_path).snapshot_file
    try:
        path.write_text(tomli_w.dumps(_drop_none(snap)))
    except (TypeError, ValueError):
        return  # not representable in TOML: nothing to load
    try:
        loaded = snapshot_file.load(path)
    except SnapshotInvalid as err:
        assert str(path) in err.message
        assert "\n" not in err.message
    else:
        assert loaded.to_dict() == snapshot_file.Snapshot.from_dict(loaded.to_dict()).to_dict()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.integers(min_value=0),
    flip=st.binary(min_size=1, max_size=4),
    at=st.integers(min_value=0),
)
def test_random_bytes_are_refused_clearly(cut: int, flip: bytes, at: int, tmp_path: Path) -> None:

    raw = snapshot_file.dumps(full_snapshot()).encode()
    raw = raw[: cut % (len(raw) + 1)]
    position = at % (len(raw) + 1)
    raw = raw[:position] + flip + raw[position + len(flip) :]
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_bytes(raw)
    try:
        snapshot_file.load(path)
    except SnapshotInvalid as err:
        assert str(path) in err.message


def _drop_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def test_prune_keeps_latest_and_journal_snapshot(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "toolpkg", "requests")
    for _ in range(3):
        assert venv.tool("snapshot").returncode == 0
    dry = venv.tool("prune", "--keep", "1", "--dry-run", "--json")
    assert json.loads(dry.stdout)["removed"][0]["id"] == "0001"
    assert len(list(venv.state.snapshots_dir.iterdir())) == 3
    # An unfinished transaction's snapshot is protected even when old.
    assert venv.tool("--no-probe", "leftpad", SAFE_UNINSTALL_FAULT="probe:KILL").returncode == -9
    pruned = venv.tool("prune", "--keep", "1", "--json")
    data = json.loads(pruned.stdout)
    assert pruned.returncode == 0, pruned.stderr
    assert [r["id"] for r in data["removed"]] == ["0001", "0002", "0003"]
    assert data["protected"] == ["0004"]
    assert venv.tool("recover", "--no-probe").returncode == 0
    assert "leftpad" in venv.installed()
    bad = venv.tool("prune")
    assert bad.returncode == 1 and "needs --keep" in bad.stderr
    size = venv.tool("prune", "--max-size", "lots")
    assert size.returncode == 2 and "is not a size" in size.stderr


def test_stash_folders_are_private(removed_leftpad: Venv) -> None:
    folder = snapshot_path(removed_leftpad).parent
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_snapshot_of_another_environment_is_refused(make_venv: MakeVenv, tmp_path: Path) -> None:
    first = make_venv("leftpad")
    second = make_venv("leftpad", "toolpkg")
    shared = tmp_path / "one-state-for-both"
    assert first.tool("--state-dir", str(shared), "snapshot").returncode == 0
    before = second.file_hashes()
    stderr = assert_refused(
        second, before, ("--state-dir", str(shared), "rollback", "1"), "not of this environment"
    )
    assert str(first.root) in stderr


def test_prune_max_size_counts_a_stash_shared_by_snapshots(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    from tests.wheels import build_wheel

    venv = make_venv("leftpad")
    wheel = build_wheel(tmp_path / "w", "bigpkg", "1.0", {"bigpkg/data.bin": os.urandom(1 << 20)})
    # Copied, not linked from uv's cache: a cache link would keep the bytes on disk anyway.
    venv.uv(
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--offline",
        "--link-mode",
        "copy",
        str(wheel),
    )
    assert venv.tool("snapshot").returncode == 0  # 0001: links the installed files
    assert venv.tool("snapshot").returncode == 0  # 0002: the same inodes again
    assert venv.tool("--no-probe", "bigpkg").returncode == 0  # 0003: now only stashes hold it
    data = json.loads(venv.tool("prune", "--max-size", "100K", "--json").stdout)
    assert [r["id"] for r in data["removed"]] == ["0001", "0002"]
    assert data["protected"] == ["0003"]
    assert data["held_after_bytes"] >= 1 << 20  # the latest keeps the only copy
    assert venv.tool("rollback", "--no-probe").returncode == 0
    assert "bigpkg" in venv.installed()


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_probe_timeout_must_be_a_real_duration(make_venv: MakeVenv, value: str) -> None:
    venv = make_venv("leftpad")
    run = venv.tool("--probe-timeout", value, "--no-probe", "leftpad")
    assert run.returncode == 2
    assert "leftpad" in venv.installed()


def test_state_dir_that_is_a_file_and_a_binary_requirements_file(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad")
    before = venv.file_hashes()
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("")
    listed = venv.tool("--state-dir", str(not_a_dir), "snapshots", "--json")
    assert listed.returncode == 1
    assert "Traceback" not in listed.stderr + listed.stdout
    binary = tmp_path / "reqs.txt"
    binary.write_bytes(b"\xff\xfe\x00leftpad\n")
    assert_refused(venv, before, ("-r", str(binary)), "not a UTF-8 text file")


# -- a journal that is not one the tool wrote ---------------------------------------------------


def _tree(root: Path) -> dict[str, str]:
    """Every file (sha256), symlink (its target) and folder under ``root``, caches included."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[rel] = "folder"
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths added, removed or changed: empty when nothing was touched."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _journal_text(**fields: object) -> str:
    entry = {
        "operation": "uninstall",
        "snapshot": "0001",
        "step": "stash",
        "pid": 4242,
        "started": "2026-11-30T10:00:00+00:00",
        "state": "/a/state/folder",  # valid: each journal below is wrong in one way only
    }
    entry.update(fields)
    return tomli_w.dumps({k: v for k, v in entry.items() if v is not None})


HOSTILE_JOURNALS = {
    # A snapshot that is a path: at step "stash", recover deleted the folder it named.
    "absolute path": lambda sibling: _journal_text(snapshot=str(sibling)),
    "up into the venv": lambda sibling: _journal_text(snapshot="../../lib"),
    "up out of the venv": lambda sibling: _journal_text(snapshot=f"../../../{sibling.name}"),
    "dot, every stash": lambda sibling: _journal_text(snapshot="."),
    "huge": lambda sibling: _journal_text(snapshot=".") + "#" * 100 + "\n" * 70_000,
    "not UTF-8": lambda sibling: _journal_text(snapshot="0002").encode() + b"# \xff\xfe\n",
    "pid a string": lambda sibling: _journal_text(snapshot="0002", pid="4242"),
    "pid a boolean": lambda sibling: _journal_text(snapshot="0002", pid=True),
    "snapshot a number": lambda sibling: _journal_text(snapshot=2),
    "started missing": lambda sibling: _journal_text(snapshot="0002", started=None),
    "unknown step": lambda sibling: _journal_text(step="format"),
    "unknown operation": lambda sibling: _journal_text(operation="rm"),
    "unknown key": lambda sibling: _journal_text() + 'then = "rollback"\n',
    "state relative": lambda sibling: _journal_text(state="state"),
    "state missing": lambda sibling: _journal_text(state=None),
    # recover kills what carries a child's marker: only a marker of the tool's own form
    "child marker PATH": lambda sibling: _journal_text(
        children=[{"marker": "PATH", "pid": 1, "started": 0}]
    ),
    "child pid a string": lambda sibling: _journal_text(
        children=[{"marker": "_SAFE_UNINSTALL_RUN_0123456789abcdef", "pid": "1", "started": 0}]
    ),
    "children not a list": lambda sibling: _journal_text(children="uv"),
}


@pytest.fixture
def state_with_snapshots(make_venv: MakeVenv, tmp_path: Path) -> tuple[Venv, Path]:
    """Snapshot 0001 (leftpad removed since, its stash kept), 0002 a folder that a killed stash
    left (no snapshot.toml), and a folder beside the venv that is nobody's business."""
    venv = make_venv("leftpad", "requests", "multipkg")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    # A second command caches the interpreter's answer (the first ran before the state folder
    # existed), so that a refused command below has nothing left to add.
    assert venv.tool("snapshots").returncode == 0
    unsaved = venv.snapshot("0002").package_stash("multipkg", "1.0")
    unsaved.mkdir(parents=True)
    (unsaved / "half.py").write_text("half a stash\n")
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (sibling / "precious.txt").write_text("keep me\n")
    return venv, sibling


def _journal(venv: Venv) -> Path:
    return venv.journal


def assert_unknown_state(run: Run, venv: Venv) -> None:
    """Refused: exit 1, the journal and the way out named, no claim that nothing changed."""
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert str(_journal(venv)) in run.stderr
    here = f"safe-uninstall --python {venv.python}"
    assert f"`{here} snapshots`" in run.stderr and f"`{here} rollback ID`" in run.stderr
    assert "the state of the environment is unknown" in run.stderr
    assert "was not changed" not in run.stderr


@pytest.mark.parametrize("write", HOSTILE_JOURNALS.values(), ids=HOSTILE_JOURNALS.keys())
def test_recover_with_a_hostile_journal_deletes_nothing(
    state_with_snapshots: tuple[Venv, Path], write: Callable[[Path], str | bytes]
) -> None:
    venv, sibling = state_with_snapshots
    content = write(sibling)
    data = content.encode() if isinstance(content, str) else content
    _journal(venv).write_bytes(data)
    venv_before, sibling_before = _tree(venv.root), _tree(sibling)

    run = venv.tool("recover", "--no-probe")

    assert_unknown_state(run, venv)
    assert _changed(venv_before, _tree(venv.root)) == []
    assert _changed(sibling_before, _tree(sibling)) == []


def test_recover_does_not_follow_a_symlinked_journal(
    state_with_snapshots: tuple[Venv, Path],
) -> None:
    venv, sibling = state_with_snapshots
    (sibling / "journal.toml").write_text(_journal_text(snapshot="."))
    _journal(venv).symlink_to(sibling / "journal.toml")
    venv_before, sibling_before = _tree(venv.root), _tree(sibling)

    run = venv.tool("recover", "--no-probe")

    assert_unknown_state(run, venv)
    assert "symbolic link" in run.stderr
    assert _changed(venv_before, _tree(venv.root)) == []
    assert _changed(sibling_before, _tree(sibling)) == []


def test_an_unreadable_journal_stops_every_change_and_the_way_out_works(
    state_with_snapshots: tuple[Venv, Path],
) -> None:
    venv, _ = state_with_snapshots
    _journal(venv).write_text(_journal_text(snapshot="."))
    before = _tree(venv.root)
    for args in (
        ("--no-probe", "multipkg"),
        ("rollback", "1", "--no-probe"),
        ("prune", "--keep", "1"),
    ):
        assert_unknown_state(venv.tool(*args), venv)
    assert _tree(venv.root) == before
    # What the message says to do: move the journal aside, list, roll back.
    _journal(venv).rename(f"{_journal(venv)}.unreadable")
    listed = venv.tool("snapshots")
    assert listed.returncode == 0 and "0001" in listed.stdout, listed.stdout + listed.stderr
    back = venv.tool("rollback", "1", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert "leftpad" in venv.installed()


def test_a_program_that_is_no_python_is_named_without_the_query(tmp_path: Path) -> None:
    from tests.conftest import run_tool

    run = run_tool("--python", "/bin/ls", "leftpad", cwd=tmp_path)

    assert run.returncode == 1
    assert "/bin/ls is not a working Python interpreter" in run.stderr
    assert "sysconfig" not in run.stderr  # the query script is not quoted back
    assert len(run.stderr.splitlines()) <= 3, run.stderr


def test_a_python_2_is_said_to_be_unsupported(tmp_path: Path) -> None:
    """Python 2 has no -I: it printed its usage text."""
    from tests.conftest import run_tool

    python2 = tmp_path / "python2"
    python2.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -I ]; then echo "Unknown option: -I" >&2; echo "usage: $0 [option]" >&2; '
        "exit 2; fi\n"
        "printf 2.7\n"
    )
    python2.chmod(0o755)

    run = run_tool("--python", str(python2), "leftpad")

    assert run.returncode == 1
    assert f"{python2} is Python 2.7, which is not supported" in run.stderr
    assert "usage" not in run.stderr


def test_a_venv_whose_python_link_dangles_says_so(tmp_path: Path) -> None:
    from tests.conftest import run_tool

    (tmp_path / "bin").mkdir()
    (tmp_path / "pyvenv.cfg").write_text("home = /gone/bin\n")
    (tmp_path / "bin" / "python").symlink_to("/gone/bin/python3.11")

    run = run_tool("--python", str(tmp_path), "leftpad")

    assert run.returncode == 1
    assert "is a link to /gone/bin/python3.11, which does not exist" in run.stderr
    assert "no bin/python" not in run.stderr
