"""Unit tests of the pure parts: planning, the snapshot format, names, RECORD, requirements."""

from __future__ import annotations

import datetime
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import tomli_w
from packaging.version import Version

from safeuninstall.base import process
from safeuninstall.base.bounded import Unusable
from safeuninstall.base.errors import JournalUnreadable, SnapshotInvalid
from safeuninstall.environment.backend import (
    PipBackend,
    UvBackend,
    find_links_offer,
    requirement_for,
)
from safeuninstall.environment.installed import InstalledDistribution, read_distribution
from safeuninstall.environment.records import _hex_from_record_hash, read_record, record_paths
from safeuninstall.environment.requirements import Wanted
from safeuninstall.environment.source import Source
from safeuninstall.plans.changes import (
    Installed,
    build_stash_index,
    choose_snapshot,
    compare_sets,
    plan_removal,
    plan_restore,
    plan_rollback,
)
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.reports.impact import Dependency, dependents_of
from safeuninstall.state import journal
from safeuninstall.state import snapshot as snapshot_file
from safeuninstall.state.layout import SnapshotFolder, stash_of
from safeuninstall.state.snapshot import PackageEntry, PackageStash, Snapshot, StashedFile, Target
from tests.conftest import returns_promptly

SHA = "a" * 64


def make_snapshot(
    snapshot_id: str = "0001", packages: tuple[PackageEntry, ...] = (), **kw: object
) -> Snapshot:
    return Snapshot(
        id=snapshot_id,
        created="2026-11-29T00:00:00+00:00",
        tool_version="0.1.0",
        command=("safe-uninstall", "x"),
        operation="uninstall",
        target=Target(python="/v/bin/python", prefix="/v", version="3.11.7"),
        packages=packages,
        **kw,  # type: ignore[arg-type]
    )


def stashed(name: str, version: str) -> PackageEntry:
    return PackageEntry(
        name=name,
        version=version,
        stash=PackageStash(
            folder=stash_of(name, version),
            files=(StashedFile(path=f"lib/{name}.py", sha256=SHA, size=3),),
            complete=True,
        ),
    )


# -- plans ----------------------------------------------------------------------------------


def installed_dist(
    name: str, version: str = "1.0", url: str | None = None
) -> InstalledDistribution:
    source = Source(kind="directory", url=url) if url else Source(kind="index")
    return InstalledDistribution(
        name=name,
        version=version,
        dist_info=Path(f"/venv/site/{name}-{version}.dist-info"),
        installer="uv",
        requested=True,
        source=source,
    )


def test_plan_removal_splits_present_and_absent() -> None:
    installed = {name: installed_dist(name) for name in ("c", "a", "z")}
    plan = plan_removal([Wanted(text=n, name=n) for n in ("a", "b", "c")], installed)
    assert plan.remove == ("a", "c")
    assert plan.absent == ("b",)


def test_plan_restore_prefers_own_snapshot_then_newest() -> None:
    older = make_snapshot("0001", (stashed("a", "1.0"),))
    newer = make_snapshot("0002", (stashed("a", "1.0"), stashed("b", "2.0")))
    index = build_stash_index([newer, older])
    wanted = [PackageEntry(name="a", version="1.0"), PackageEntry(name="c", version="3.0")]
    plan = plan_restore(wanted, index, preferred_snapshot="0001")
    ((entry, candidates),) = plan.from_stash
    assert entry.name == "a"
    assert [c.snapshot_id for c in candidates] == ["0001", "0002"]
    assert [e.name for e in plan.reinstall] == ["c"]


def test_stash_index_ignores_incomplete_and_duplicate_snapshots() -> None:
    incomplete = msgspec.structs.replace(
        stashed("a", "1.0"),
        stash=PackageStash(folder=stash_of("a", "1.0"), files=(), complete=False),
    )
    snap = make_snapshot("0003", (incomplete, stashed("b", "1.0")))
    index = build_stash_index([snap, snap])
    key = ("b", "1.0", Source(kind="index"))
    assert list(index) == [key]
    assert len(index[key]) == 1


def test_stash_index_keys_on_the_build_and_the_environment() -> None:
    local = msgspec.structs.replace(
        stashed("a", "1.0"), source=Source(kind="file", url="file:///w/a-1.0.whl")
    )
    other_env = msgspec.structs.replace(
        make_snapshot("0002", (stashed("a", "1.0"),)),
        target=Target(python="/w/bin/python", prefix="/w", version="3.12.1"),
    )
    index = build_stash_index(
        [make_snapshot("0001", (local,)), other_env], of_this_environment=lambda p: p == "/v"
    )
    # the index build is not the local one, and the other venv's stash does not count here
    plan = plan_restore([PackageEntry(name="a", version="1.0")], index)
    assert plan.from_stash == ()
    assert [e.pin for e in plan.reinstall] == ["a==1.0"]


def test_plan_restore_needs_exact_version() -> None:
    index = build_stash_index([make_snapshot("0001", (stashed("a", "1.0"),))])
    plan = plan_restore([PackageEntry(name="a", version="1.1")], index)
    assert plan.from_stash == ()
    assert [e.pin for e in plan.reinstall] == ["a==1.1"]


def test_plan_rollback_added_changed_missing() -> None:
    target = make_snapshot(
        packages=(
            PackageEntry(name="keep", version="1"),
            PackageEntry(name="gone", version="2"),
            PackageEntry(name="bumped", version="3"),
            PackageEntry(name="resourced", version="4"),
        )
    )
    index_source = Source(kind="index")
    installed = {
        "keep": Installed("keep", "1", index_source),
        "bumped": Installed("bumped", "3.1", index_source),
        "resourced": Installed("resourced", "4", Source(kind="editable", url="file:///src")),
        "new": Installed("new", "9", index_source),
    }
    plan = plan_rollback(target, installed)
    assert plan.added == ("new",)
    assert plan.missing == ("gone",)
    assert plan.changed == ("bumped", "resourced")
    assert plan.remove == ("bumped", "new", "resourced")
    assert [e.name for e in plan.restore] == ["bumped", "gone", "resourced"]


def test_plan_rollback_of_identical_set_is_empty() -> None:
    target = make_snapshot(packages=(PackageEntry(name="a", version="1"),))
    plan = plan_rollback(target, {"a": Installed("a", "1", Source(kind="index"))})
    assert plan.empty


def test_compare_sets_reports_pins() -> None:
    diff = compare_sets({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"})
    assert diff.missing == ("b==2",)
    assert diff.unexpected == ("b==3", "c==4")
    assert not diff.equal
    assert compare_sets({"a": "1"}, {"a": "1"}).equal


def test_dependents_transitive_and_optional() -> None:
    edges = [
        Dependency("requests", "urllib3", ">=2"),
        Dependency("app", "requests", ""),
        Dependency("extras-user", "urllib3", "", extra="socks"),
        Dependency("unrelated", "idna", ""),
    ]
    assert dependents_of(["urllib3"], edges) == ["app", "requests"]
    assert dependents_of(["urllib3"], edges, include_optional=True) == [
        "app",
        "extras-user",
        "requests",
    ]


def test_requires_dist_reads_header_only(tmp_path: Path) -> None:
    dist_info = tmp_path / "x-1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Name: x\nVersion: 1\nRequires-Dist: a>=1\nRequires-Dist: b; extra == 'y'\n\n"
        "Requires-Dist: body\n"
    )
    dist = read_distribution(dist_info)
    assert dist is not None
    assert dist.requires_dist() == ["a>=1", "b; extra == 'y'"]


# -- reinstall commands ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (Source(kind="index"), ["pkg==1.0"]),
        (Source(kind="editable", url="file:///src/pkg"), ["-e", "file:///src/pkg"]),
        (Source(kind="file", url="file:///w/pkg-1.0.whl"), ["pkg @ file:///w/pkg-1.0.whl"]),
        (
            Source(kind="vcs", url="https://h/r.git", vcs="git", commit="abc", subdirectory="s"),
            ["pkg @ git+https://h/r.git@abc#subdirectory=s"],
        ),
    ],
)
def test_requirement_for_each_source(source: Source, expected: list[str]) -> None:
    assert requirement_for(PackageEntry(name="pkg", version="1.0", source=source)) == expected


def test_install_command_is_one_pinned_no_deps_call() -> None:
    backend = UvBackend(Path("/v/bin/python"), "/bin/uv", env={})
    entries = [PackageEntry(name="a", version="1"), PackageEntry(name="b", version="2")]
    assert backend.install_argv(entries, offline=True) == [
        "/bin/uv",
        "pip",
        "install",
        "--python",
        "/v/bin/python",
        "--no-deps",
        "--offline",
        "a==1",
        "b==2",
    ]
    # A hollow distribution is installed at that version already: only a reinstall repairs it.
    reinstalling = backend.install_argv(entries, offline=False, reinstall=True)
    assert reinstalling[5:] == ["--no-deps", "--reinstall", "a==1", "b==2"]
    assert backend.uninstall_argv(["a", "b"]) == [
        "/bin/uv",
        "pip",
        "uninstall",
        "--python",
        "/v/bin/python",
        "a",
        "b",
    ]


def test_find_links_folders_go_to_every_install_and_no_uninstall() -> None:
    uv = UvBackend(Path("/v/bin/python"), "/bin/uv", env={})
    pip = PipBackend(Path("/v/bin/python"), env={})
    entries = [PackageEntry(name="a", version="1")]
    for backend, offline_flag in ((uv, "--offline"), (pip, "--no-index")):
        backend.find_links = ["/w/one", "/w/two"]
        argv = backend.install_argv(entries, offline=True)
        assert argv[-6:] == [
            offline_flag,
            "--find-links",
            "/w/one",
            "--find-links",
            "/w/two",
            "a==1",
        ]
        assert "--find-links" not in backend.uninstall_argv(["a"])


def test_find_links_offer_reads_wheel_and_sdist_names(tmp_path: Path) -> None:
    for name in (
        "Foo_Bar-1.0.0-py3-none-any.whl",
        "baz-2.1.tar.gz",
        "not-a-wheel.whl",
        "notes.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    offered = find_links_offer([str(tmp_path), str(tmp_path / "missing")])
    assert offered == {("foo-bar", Version("1.0")), ("baz", Version("2.1"))}


def test_pip_fallback_commands() -> None:
    backend = PipBackend(Path("/v/bin/python"), env={})
    assert backend.uninstall_argv(["a"])[-2:] == ["--yes", "a"]
    assert backend.install_argv([PackageEntry(name="a", version="1")], offline=True)[-2:] == [
        "--no-index",
        "a==1",
    ]


# -- RECORD ---------------------------------------------------------------------------------


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_read_record_decodes_hashes(tmp_path: Path) -> None:
    record = tmp_path / "RECORD"
    record.write_text(
        "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
        "pkg-1.dist-info/RECORD,,\n"
        '"pkg/with,comma.py",md5=abc,3\n'
    )
    entries = read_record(record)
    assert entries[0].sha256 == EMPTY_SHA256
    assert entries[0].size == 0
    assert entries[1].sha256 is None
    assert entries[2].path == "pkg/with,comma.py"
    assert entries[2].sha256 is None  # not a sha256: verified by our own hash instead


@pytest.mark.parametrize(
    "text",
    [
        "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\n"
        ',,\n"pkg/with,comma.py",md5=abc,3\npkg-1.dist-info/RECORD,,\n',
        "pkg/a.py,,12x\n",  # a size that is no number
        "pkg/a\0.py,,\n",  # a NUL byte
        '"pkg/a.py,,\n',  # not CSV: an unclosed quote
    ],
)
def test_record_paths_are_read_records_paths(tmp_path: Path, text: str) -> None:
    """The derived probe reads a RECORD's paths without its hashes: the same paths, and the
    same RECORDs refused."""
    record = tmp_path / "RECORD"
    record.write_text(text)
    try:
        expected: object = [entry.path for entry in read_record(record)]
    except Unusable as err:
        expected = type(err)
    try:
        paths: object = record_paths(record)
    except Unusable as err:
        paths = type(err)
    assert paths == expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU", EMPTY_SHA256),  # as wheels write it
        ("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=", EMPTY_SHA256),  # padded
        ("sha256=", None),
        ("sha256=a", None),  # not base64 of anything
        ("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFé", None),  # not ASCII
        ("md5=1B2M2Y8AsgTpgAmY7PhCfg", None),
    ],
)
def test_record_hash_field(field: str, expected: str | None) -> None:
    assert _hex_from_record_hash(field) == expected


# -- the snapshot file ----------------------------------------------------------------------


def full_snapshot() -> Snapshot:
    return make_snapshot(
        packages=(
            msgspec.structs.replace(
                stashed("urllib3", "2.2.1"), installer="uv", requested=True, dist_info="lib/u"
            ),
            PackageEntry(
                name="pkg",
                version="1.0",
                source=Source(kind="vcs", url="https://h/r", vcs="git", commit="abc"),
            ),
        ),
        removed=("urllib3",),
        outcome="removed",
    )


def test_snapshot_toml_round_trip(tmp_path: Path) -> None:
    snap = full_snapshot()
    path = SnapshotFolder(tmp_path).snapshot_file
    snapshot_file.save(snap, path)
    assert snapshot_file.load(path) == snap
    assert path.stat().st_mode & 0o777 == 0o600
    assert "format = 1" in path.read_text()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format=2), "format: unknown format version 2"),
        (lambda d: d.pop("target"), "target: missing"),
        (lambda d: d["packages"][1].update(version="not a version"), r"packages\[1\].version"),
        (lambda d: d["packages"][0].update(name="Not_Canonical"), r"packages\[0\].name"),
        (lambda d: d["packages"][0].update(requested="yes"), r"packages\[0\].requested"),
        (
            lambda d: d["packages"][0]["stash"]["files"][0].update(path="../../etc/passwd"),
            r"packages\[0\].stash.files\[0\].path",
        ),
        (
            lambda d: d["packages"][0]["stash"]["files"][0].update(path="/etc/passwd"),
            "is absolute",
        ),
        (
            lambda d: d["packages"][0]["stash"]["files"][0].update(sha256="xyz"),
            "64 lowercase hex",
        ),
        (lambda d: d["packages"][0]["source"].update(kind="ftp"), "unknown source kind"),
        (lambda d: d["packages"].append(d["packages"][0]), "listed twice"),
        (lambda d: d.update(removed=["a b"]), r"removed\[0\]"),
        (lambda d: d.update(returns_to="../0001"), "returns_to: '../0001' is not a snapshot id"),
    ],
)
def test_snapshot_validation_names_the_key(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    import tomli_w

    data = full_snapshot().to_dict()
    edit(data)
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(SnapshotInvalid, match=message) as info:
        snapshot_file.load(path)
    assert str(path) in info.value.message


@pytest.mark.parametrize("content", [b"", b"format = ", b"\xff\xfe", b"[[packages]\n"])
def test_corrupt_snapshot_is_refused(tmp_path: Path, content: bytes) -> None:
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_bytes(content)
    with pytest.raises(SnapshotInvalid, match=str(path)):
        snapshot_file.load(path)


FIXTURES = Path(__file__).parent / "fixtures"


def test_snapshot_written_by_an_earlier_version_loads_and_is_written_byte_for_byte() -> None:
    """The fixture was written by the tool before snapshots were read by typed decoding."""
    path = FIXTURES / "snapshot-format-1.toml"
    snap = snapshot_file.load(path)
    assert snapshot_file.dumps(snap).encode() == path.read_bytes()
    vcs = snap.package("vcspkg")
    assert vcs is not None and vcs.stash is not None
    assert vcs.source == Source(
        kind="vcs",
        url="https://git.example/vcspkg.git",
        vcs="git",
        commit="a" * 40,
        requested_revision="v0.3",
        subdirectory="src",
    )
    assert (vcs.stash.complete, vcs.stash.files[0].size) == (False, 1234567890123)


def _set_file(**values: object) -> Callable[[dict], None]:  # type: ignore[type-arg]
    return lambda d: d["packages"][0]["stash"]["files"][0].update(values)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # the types, checked by msgspec with the key path however deep
        (_set_file(size="3"), "packages[0].stash.files[0].size: expected `int`, got `str`"),
        (_set_file(size=True), "packages[0].stash.files[0].size: expected `int`, got `bool`"),
        (_set_file(size=-1), "packages[0].stash.files[0].size: expected `int` >= 0"),
        (
            lambda d: d["packages"][0]["stash"]["files"][0].pop("sha256"),
            "packages[0].stash.files[0].sha256: missing",
        ),
        (
            lambda d: d["packages"][1]["source"].update(commit=["abc"]),
            "packages[1].source.commit: expected `str | null`, got `array`",
        ),
        (
            lambda d: d["packages"][0].update(stash=[]),
            "packages[0].stash: expected `table | null`, got `array`",
        ),
        (
            lambda d: d.update(command=["safe-uninstall", 3]),
            "command[1]: expected `str`, got `int`",
        ),
        (lambda d: d.update(target="/v"), "target: expected `table`, got `str`"),
        (lambda d: d.update(packages={}), "packages: expected `array`, got `table`"),
        (
            lambda d: d.update(created=datetime.datetime(2026, 11, 29)),  # unquoted in TOML
            "created: expected `str`, got `datetime`",
        ),
        (lambda d: d.pop("id"), "id: missing"),
        (lambda d: d["target"].pop("prefix"), "target.prefix: missing"),
        # keys every file has, although records made in code may leave them out
        (lambda d: d["packages"][1].pop("installer"), "packages[1].installer: missing"),
        (lambda d: d["packages"][1].pop("requested"), "packages[1].requested: missing"),
        (lambda d: d["packages"][0].pop("source"), "packages[0].source: missing"),
        (lambda d: d.pop("outcome"), "outcome: missing"),
        (
            lambda d: d.update(outcome="restored"),
            "outcome: unknown outcome 'restored': not one this tool writes",
        ),
        (lambda d: d.pop("removed"), "removed: missing"),
        # the format first, whatever else the file holds
        (lambda d: d.pop("format"), "format: missing"),
        (
            lambda d: d.update(format=True),
            "format: unknown format version True (this tool reads 1)",
        ),
        (lambda d: d.update(format="1"), "format: unknown format version '1' (this tool reads 1)"),
    ],
)
def test_snapshot_decoding_errors_name_the_key(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = full_snapshot().to_dict()
    edit(data)
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(SnapshotInvalid) as info:
        snapshot_file.load(path)
    assert info.value.message == f"{path}: {message}"


def test_snapshot_keys_it_does_not_know_are_ignored(tmp_path: Path) -> None:
    data = full_snapshot().to_dict()
    data["note"] = "added by hand"
    data["target"]["implementation"] = "cpython"
    data["packages"][0]["source"]["archive_info"] = {"hash": "sha256=..."}
    data["packages"][0]["stash"]["files"][0]["mode"] = 0o644
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text(tomli_w.dumps(data))
    assert snapshot_file.load(path) == full_snapshot()


def test_snapshot_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text("format = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(SnapshotInvalid, match=f"^{path}: not a valid TOML file"):
        snapshot_file.load(path)


def test_snapshot_read_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_file, "_MAX_BYTES", 1 << 20)
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text(snapshot_file.dumps(full_snapshot()) + "#" * (1 << 20))  # valid, too long
    with pytest.raises(SnapshotInvalid, match=f"^{path}: larger than 1 MiB"):
        snapshot_file.load(path)


def test_snapshot_that_is_a_device_is_refused(tmp_path: Path) -> None:
    path = SnapshotFolder(tmp_path).snapshot_file
    path.symlink_to("/dev/zero")
    with pytest.raises(SnapshotInvalid) as info:
        snapshot_file.load(path)
    assert info.value.message == f"{path}: not a regular file"


def test_snapshot_in_place_of_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = SnapshotFolder(tmp_path).snapshot_file
    os.mkfifo(path)
    errors: list[str] = []

    def load() -> None:
        try:
            snapshot_file.load(path)
        except SnapshotInvalid as err:
            errors.append(err.message)

    assert returns_promptly(load, path)
    assert errors == [f"{path}: not a regular file"]


def test_restore_links_metadata_last() -> None:
    from safeuninstall.state.stash import _metadata_last

    files = [
        StashedFile(path="lib/p/x-1.dist-info/METADATA", sha256=SHA, size=1),
        StashedFile(path="lib/p/x/__init__.py", sha256=SHA, size=1),
        StashedFile(path="lib/p/x-1.dist-info/RECORD", sha256=SHA, size=1),
        StashedFile(path="bin/x", sha256=SHA, size=1),
    ]
    ordered = [f.path for f in sorted(files, key=_metadata_last)]
    assert ordered[-1].endswith("METADATA")
    assert ordered[-2].endswith("RECORD")
    assert set(ordered[:2]) == {"lib/p/x/__init__.py", "bin/x"}


def test_plan_prune_counts_files_shared_by_snapshots_once() -> None:
    from safeuninstall.plans.changes import plan_prune
    from safeuninstall.state.holdings import Holdings

    big, small, installed = (1, 1), (1, 2), (1, 3)
    holdings = Holdings(
        files={
            "0001": {big: 800, installed: 50},
            "0002": {big: 800, small: 10},
            "0003": {small: 10},
        },
        only_in_snapshots=frozenset({big, small}),  # `installed` is still in the venv
    )
    assert holdings.held(["0001"]) == 800
    assert holdings.held(["0001", "0002"]) == 810  # the shared 800 once
    # 810 > 100: 0001 goes, but 0002 still holds the big file; 0003 is protected.
    ids = ["0001", "0002", "0003"]
    assert plan_prune(ids, holdings, {"0003"}, keep=None, max_size=100) == ["0001", "0002"]
    assert plan_prune(ids, holdings, {"0003"}, keep=None, max_size=1000) == []
    assert plan_prune(ids, holdings, {"0003"}, keep=1, max_size=None) == ["0001", "0002"]
    assert plan_prune(ids, holdings, {"0001", "0003"}, keep=1, max_size=None) == ["0002"]


def test_find_uv_agrees_with_the_uv_package() -> None:
    """find_uv checks uv's first place itself (no import of uv): the same binary is found."""
    from uv import find_uv_bin

    from safeuninstall.environment.interpreter import find_uv

    assert find_uv({}) == find_uv_bin()
    assert find_uv({"SAFE_UNINSTALL_UV": "none"}) is None


def test_relative_to_root() -> None:
    from safeuninstall.state.stash import relative_to_root

    assert relative_to_root("/venv/lib/x.py", "/venv") == "lib/x.py"
    assert relative_to_root("/venv/lib/../bin/y", "/venv/") == "bin/y"
    assert relative_to_root("/venv/../etc/passwd", "/venv") is None
    assert relative_to_root("/venvx/a", "/venv") is None
    assert relative_to_root("/venv", "/venv") == "."
    assert relative_to_root("//x", "/") is None  # POSIX keeps a leading "//": not under "/"
    assert relative_to_root("/x", "/") == "x"


def test_real_dir_equals_realpath(tmp_path: Path) -> None:
    """paths._real_dir builds a folder's real path on its parent's; it must agree with
    os.path.realpath through symlinks (absolute, relative, nested), missing parts and '..'."""
    import os

    from safeuninstall.environment.paths import _real_dir

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    os.symlink(tmp_path / "a" / "b", tmp_path / "x" / "abs")  # absolute target
    os.symlink("../a", tmp_path / "x" / "rel")  # relative target
    os.symlink(tmp_path / "x" / "rel", tmp_path / "chain")  # a link to a link
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    for folder in [
        tmp_path / "a" / "b" / "c",
        tmp_path / "x" / "abs" / "c",
        tmp_path / "x" / "rel" / "b" / "c",
        tmp_path / "chain" / "b",
        tmp_path / "x" / "abs" / "missing" / "deeper",
        tmp_path / "x" / "rel" / ".." / "x",
        tmp_path / "loop1" / "inside",
        Path("/"),
    ]:
        text = str(folder)
        _real_dir.cache_clear()
        assert _real_dir(text) == os.path.realpath(text), text


# -- the journal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", sorted(journal.OPERATIONS))
@pytest.mark.parametrize("step", sorted(journal.STEPS))
def test_every_step_the_journal_writes_it_reads_back(
    tmp_path: Path, operation: str, step: str
) -> None:
    book = journal.Journal(tmp_path / "journal.toml", tmp_path)
    entry = book.step(book.begin(operation, "0007", "stash"), step)
    assert book.read() == entry


def test_the_journal_records_the_children_of_a_step_until_the_next_step(tmp_path: Path) -> None:
    book = journal.Journal(tmp_path / "journal.toml", tmp_path)
    entry = book.begin("uninstall", "0007", "uninstall")
    marker = process.new_marker()
    entry = book.child(entry, journal.Child(marker))  # before it starts
    assert book.read() == entry
    entry = book.child(entry, journal.Child(marker, 4242, 17))  # started
    assert entry.children == (journal.Child(marker, 4242, 17),)
    assert book.read() == entry
    entry = book.step(entry, "restore")
    assert entry.children == ()
    assert book.read() == entry


def test_the_journal_is_fsynced_before_it_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed first, a power cut could leave a journal of no bytes, or of old ones, in place:
    recover would then act on the wrong step, or refuse."""
    calls: list[tuple[str, str]] = []
    fsync, replace = os.fsync, os.replace

    def fsynced(fd: int) -> None:
        calls.append(("fsync", "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"))
        fsync(fd)

    def replaced(source: str, target: str) -> None:
        calls.append(("replace", os.path.basename(target)))
        replace(source, target)

    monkeypatch.setattr(os, "fsync", fsynced)
    monkeypatch.setattr(os, "replace", replaced)
    book = journal.Journal(tmp_path / "journal.toml", tmp_path)
    entry = book.begin("uninstall", "0007", "stash")
    book.step(entry, "uninstall")
    once = [("fsync", "file"), ("replace", "journal.toml"), ("fsync", "folder")]
    assert calls == once * 2


def test_an_atomic_write_killed_before_its_rename_leaves_no_temp_file(tmp_path: Path) -> None:
    """Killed as it fsyncs the new bytes (the longest part of a write), nothing is left beside
    the file: the bytes had no name yet."""
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from safeuninstall.base.atomicfile import write_atomically\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
        "write_atomically(Path(sys.argv[1]), b'new')\n"
    )
    (tmp_path / "journal.toml").write_bytes(b"old")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "journal.toml")])
    assert done.returncode == -signal.SIGKILL
    assert os.listdir(tmp_path) == ["journal.toml"]
    assert (tmp_path / "journal.toml").read_bytes() == b"old"


def test_the_journal_refuses_to_write_what_it_could_not_read_back(tmp_path: Path) -> None:
    book = journal.Journal(tmp_path / "journal.toml", tmp_path)
    with pytest.raises(ValueError, match="step: 'reticulate' is not a step"):
        book.begin("uninstall", "0007", "reticulate")
    with pytest.raises(ValueError, match=re.escape("snapshot: '../x' is not a snapshot id")):
        book.begin("uninstall", "../x", "stash")
    assert book.read() is None


def test_a_journal_that_is_not_a_file_is_unreadable_without_waiting(tmp_path: Path) -> None:
    """A FIFO would block a plain open until someone writes to it; a folder can't be read."""
    book = journal.Journal(tmp_path / "journal.toml", tmp_path)
    os.mkfifo(book.path)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            book.read()
        except BaseException as err:
            outcome.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)  # a guard against a hang, not a measurement: it returns at once
    assert [type(err) for err in outcome] == [JournalUnreadable]
    book.path.unlink()
    book.path.mkdir()
    with pytest.raises(JournalUnreadable, match="not a regular file"):
        book.read()


@pytest.mark.parametrize(
    ("fault", "fires_after"),
    [
        (None, None),
        ("stash-file:3:RAISE", 3),
        ("stash-file:1:RAISE", 1),
        ("restore-file:3:RAISE", None),  # another loop's
        ("stash-file:0:RAISE", None),
        ("stash-file:x:RAISE", None),
        ("stash:RAISE", None),  # a step boundary, not a file
    ],
)
def test_a_file_fault_fires_after_the_nth_file_of_its_own_loop(
    monkeypatch: pytest.MonkeyPatch, fault: str | None, fires_after: int | None
) -> None:
    if fault is not None:
        monkeypatch.setenv(journal.FAULT_VARIABLE, fault)
    after_file = journal.file_fault("stash-file")
    if fires_after is None:
        assert after_file is None
        return
    assert after_file is not None
    for _ in range(fires_after - 1):
        after_file()
    with pytest.raises(RuntimeError, match="fault injected at stash-file"):
        after_file()
    after_file()  # once only


# -- a probe that cannot start, a baseline cache that someone edited ---------------------------


def test_a_probe_without_a_working_folder_is_a_failed_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full disk may refuse the probe's temporary folder after a change: a failed probe, not
    an exception that would say "the environment was not changed"."""
    import tempfile

    from safeuninstall.environment.interpreter import Interpreter
    from safeuninstall.probe.runner import Probe, RunSettings, run_probe

    def no_room(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_room)
    interpreter = Interpreter("/v/bin/python", "/v", "/usr", "3.11.7", "/v/l", "/v/l", "/v/bin", {})
    probe = Probe(kind=ProbeKind.PYTHON, code="pass", origin="--probe")
    result = run_probe(probe, interpreter, settings=RunSettings(timeout=5.0, env={}))
    assert not result.passed
    assert "cannot create its working folder: No space left on device" in result.output


@pytest.mark.parametrize(
    "entry",
    [
        {"libraries": [None], "seconds": ["x"]},
        {"libraries": [None], "seconds": [None]},
        {"libraries": [None], "seconds": [True]},
        {"libraries": [[1, 2]], "seconds": [0.5]},
        {"libraries": ["not a list"], "seconds": [0.5]},
    ],
)
def test_an_edited_baseline_cache_entry_is_no_cache(
    tmp_path: Path, entry: dict[str, object]
) -> None:
    import json as json_module

    from safeuninstall.context.baseline import CACHE_FILE, BaselineCache, _key
    from safeuninstall.probe.runner import Probe, ProbeSettings

    settings = ProbeSettings(probes=(Probe(kind=ProbeKind.PYTHON, code="pass", origin="--probe"),))

    def stored(fields: dict[str, object]) -> None:
        data = {_key(settings, "env"): {"candidates": [[]], **fields}}
        envelope = {"format": "safeuninstall-baseline-cache", "version": 2, "data": data}
        (tmp_path / CACHE_FILE).write_text(json_module.dumps(envelope))

    stored({"libraries": [None], "seconds": [0.5]})
    assert BaselineCache(tmp_path).get(settings, "env") is not None  # as the tool writes it
    stored(entry)
    assert BaselineCache(tmp_path).get(settings, "env") is None


# -- legacy installs (legacy.py): uv's removal rule, easy-install.pth, the snapshot --------------

ORIGINAL_PTH = b"/some/where\r\n/proj/a\n\n/proj/b\n./old-1.0-py3.11.egg"


@pytest.mark.parametrize(
    ("current", "line", "expected"),
    [
        # what uv leaves (its line out, every line ended by \n): the original comes back,
        # byte for byte (a CRLF, no final newline)
        (b"/some/where\n\n/proj/b\n./old-1.0-py3.11.egg\n", "/proj/a", ORIGINAL_PTH),
        # the removal of two: each put back in turn gives the original
        (b"/some/where\n\n/proj/b\n./old-1.0-py3.11.egg\n", "/proj/a", None),
        # uv never got there (killed before): nothing to add
        (ORIGINAL_PTH, "/proj/a", ORIGINAL_PTH),
        # the file gone: the original's line alone
        (None, "/proj/a", b"/proj/a\n"),
        # a line added since stays, after the original's
        (b"/some/where\n/proj/b\n\n./old-1.0-py3.11.egg\n/new\n", "/proj/a", None),
    ],
    ids=["as-uv-left-it", "one-of-two", "untouched", "file-gone", "line-added-since"],
)
def test_put_line_back(current: bytes | None, line: str, expected: bytes | None) -> None:
    from safeuninstall.environment.legacy import has_line, put_line_back

    merged = put_line_back(ORIGINAL_PTH, current, line)

    if expected is not None:
        assert merged == expected
    assert has_line(merged, line)
    assert merged.count(b"/proj/a") == 1
    if current is not None:  # nothing that was there is lost
        kept = {raw.strip() for raw in current.split(b"\n") if raw.strip()}
        assert kept <= {raw.strip() for raw in merged.split(b"\n")}


def test_put_line_back_after_two_were_taken_out_gives_the_original() -> None:
    from safeuninstall.environment.legacy import put_line_back

    after_uv = b"/some/where\n\n./old-1.0-py3.11.egg\n"  # uv took /proj/a, then /proj/b
    once = put_line_back(ORIGINAL_PTH, after_uv, "/proj/a")
    assert put_line_back(ORIGINAL_PTH, once, "/proj/b") == ORIGINAL_PTH


def test_put_line_back_of_a_duplicate_line_adds_the_one_uv_took() -> None:
    from safeuninstall.environment.legacy import put_line_back

    original = b"/proj/a\n/x\n/proj/a\n"
    assert put_line_back(original, b"/x\n/proj/a\n", "/proj/a") == original
    assert put_line_back(original, original, "/proj/a") == original  # untouched: as it is


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("package", True),
        ("_package2", True),
        ("paquet_é", True),
        ("", False),
        (".", False),
        ("..", False),
        ("1package", False),
        ("package-name", False),
        ("package.name", False),
        ("../package", False),
        ("package/name", False),
        ("/abs/path", False),
        ("C:target", False),
    ],
)
def test_top_level_names_are_uvs_identifiers(name: str, valid: bool) -> None:
    """uv's test_top_level_entry_safe_name: never a path."""
    from safeuninstall.environment.legacy import is_identifier

    assert is_identifier(name) is valid


def test_egg_info_removal_follows_uvs_rule(tmp_path: Path) -> None:
    """top_level.txt names: a folder whole, else the first of .py, .pyc, .pyo; namespace
    packages, blank lines and non-identifiers skipped; the .egg-info folder; nothing else."""
    from safeuninstall.environment.legacy import EGG_INFO, removal

    site = tmp_path
    for path in (
        "pkg/__init__.py",
        "pkg/sub/__pycache__/m.cpython-311.pyc",
        "mod.py",
        "mod.pyc",
        "only_pyc.pyc",
        "ns/inner.py",
        "other/__init__.py",
        "__pycache__/mod.cpython-311.pyc",
        "e-1.0.egg-info/PKG-INFO",
        "e-1.0.egg-info/installed-files.txt",
    ):
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text("x")
    (site / "e-1.0.egg-info" / "top_level.txt").write_text(
        "pkg\r\nmod\n\n  \nonly_pyc\nns\nmissing\n../other\nother.sub\n"
    )
    (site / "e-1.0.egg-info" / "namespace_packages.txt").write_text("ns\n")

    found = removal(EGG_INFO, site / "e-1.0.egg-info", site)

    assert found.refused is None
    assert sorted(f.path for f in found.files) == [
        "e-1.0.egg-info/PKG-INFO",
        "e-1.0.egg-info/installed-files.txt",
        "e-1.0.egg-info/namespace_packages.txt",
        "e-1.0.egg-info/top_level.txt",
        "mod.py",
        "only_pyc.pyc",
        "pkg/__init__.py",
        "pkg/sub/__pycache__/m.cpython-311.pyc",
    ]
    assert found.skipped == ("../other", "other.sub")
    assert all(f.sha256 is None and f.size == 1 for f in found.files if ".txt" not in f.path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["packages"][0].update(layout="egg"), r"packages\[0\].layout: unknown layout"),
        (
            lambda d: d["packages"][0]["stash"]["lines"][0].update(path="lib/x.pth"),
            r"packages\[0\].stash.lines\[0\].path: 'lib/x.pth' is not an easy-install.pth",
        ),
        (
            lambda d: d["packages"][0]["stash"]["lines"][0].update(line="/a\n/b"),
            r"packages\[0\].stash.lines\[0\].line: expected one stripped line",
        ),
        (
            lambda d: d["packages"][0]["stash"]["lines"][0].update(line=" /a"),
            r"packages\[0\].stash.lines\[0\].line",
        ),
        (
            lambda d: d["packages"][0]["stash"]["lines"][0].update(path="../easy-install.pth"),
            r"packages\[0\].stash.lines\[0\].path",
        ),
    ],
)
def test_a_legacy_entry_is_validated_like_the_rest(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    from safeuninstall.state.snapshot import PthLine

    stash = PackageStash(
        folder=stash_of("e", "1.0"),
        files=(StashedFile(path="lib/p/e.egg-link", sha256=SHA, size=5),),
        complete=True,
        lines=(PthLine(path="lib/p/easy-install.pth", line="/proj", sha256=SHA, size=6),),
    )
    entry = PackageEntry(name="e", version="1.0", layout="egg-link", stash=stash)
    good = tmp_path / "good.toml"
    snapshot_file.save(make_snapshot(packages=(entry,)), good)
    assert snapshot_file.load(good).packages == (entry,)
    data = make_snapshot(packages=(entry,)).to_dict()
    edit(data)
    path = SnapshotFolder(tmp_path).snapshot_file
    path.write_text(tomli_w.dumps(data))

    with pytest.raises(SnapshotInvalid, match=message):
        snapshot_file.load(path)


def test_plan_rollback_repairs_a_half_removed_legacy_install_without_uninstalling() -> None:
    """A legacy install of the snapshot's version that lost files is only brought back (uv
    may stop on it); one of another version or layout is removed and brought back."""
    entries = (stashed("a", "1.0"), stashed("b", "1.0"), stashed("c", "1.0"))
    entries = tuple(msgspec.structs.replace(e, layout="egg-info") for e in entries)
    installed = {
        "a": Installed("a", "1.0", Source(kind="index"), intact=False, layout="egg-info"),
        "b": Installed("b", "2.0", Source(kind="index"), intact=False, layout="egg-info"),
        "c": Installed("c", "1.0", Source(kind="index"), layout="dist-info"),
    }

    plan = plan_rollback(make_snapshot(packages=entries), installed)

    assert plan.changed == ("a", "b", "c")
    assert plan.remove == ("b", "c")
    assert [e.name for e in plan.restore] == ["a", "b", "c"]


def test_restore_links_a_legacy_installs_metadata_last() -> None:
    from safeuninstall.state.stash import _metadata_last

    files = [
        StashedFile(path="lib/p/x-1.egg-info/PKG-INFO", sha256=SHA, size=1),
        StashedFile(path="lib/p/x.egg-link", sha256=SHA, size=1),
        StashedFile(path="lib/p/x/__init__.py", sha256=SHA, size=1),
        StashedFile(path="lib/p/x-1.egg-info/top_level.txt", sha256=SHA, size=1),
    ]
    ordered = [f.path for f in sorted(files, key=_metadata_last)]
    assert ordered[0] == "lib/p/x/__init__.py"
    assert ordered[1].endswith("top_level.txt")
    assert set(ordered[2:]) == {"lib/p/x-1.egg-info/PKG-INFO", "lib/p/x.egg-link"}


@pytest.mark.parametrize("made", ["x-1.0-py3.11.egg-info", "x.egg-link", "easy-install.pth"])
def test_the_baseline_fingerprint_sees_legacy_installs(tmp_path: Path, made: str) -> None:
    """A cached baseline is for the installed set it ran in: a legacy install (or a .pth line
    that puts an editable on the path) added or removed is another one."""
    from safeuninstall.context.baseline import fingerprint
    from safeuninstall.environment.interpreter import Interpreter

    site = str(tmp_path)
    interpreter = Interpreter("/v/bin/python", "/v", "/usr", "3.11.7", site, site, "/v/bin", {})
    before = fingerprint(interpreter, {})
    (tmp_path / made).write_text("")
    assert fingerprint(interpreter, {}) != before


def test_deferred_leaves_an_ignored_signal_ignored_and_keeps_the_ctrl_c_after_it() -> None:
    """Under nohup a hang-up is ignored: one arriving inside a deferred block must not be
    noted first and raised into SIG_IGN on the way out, losing the Ctrl-C noted after it."""
    import signal

    from safeuninstall.base import interrupts

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.deferred() as noted:
            signal.raise_signal(signal.SIGHUP)
            signal.raise_signal(signal.SIGINT)
            assert noted == [signal.SIGINT]
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


# -- which snapshot a plain rollback returns to (plan.choose_snapshot) ------------------------


def _state(snapshot_id: str, names: str, operation: str, outcome: str, **kw: object) -> Snapshot:
    """A snapshot of the packages ``names`` (one letter each) taken before ``operation``."""
    packages = tuple(PackageEntry(name=n, version="1") for n in sorted(names))
    snap = make_snapshot(snapshot_id, packages, outcome=outcome, **kw)
    return msgspec.structs.replace(snap, operation=operation)


REQ, URL, IDNA = "r", "u", "i"  # requests, urllib3, idna


@pytest.mark.parametrize(
    ("history", "env", "chosen", "skipped"),
    [
        pytest.param(  # Removal, rollback, then idna removed outside the tool
            [
                _state("0002", REQ + IDNA, "rollback", "rollback-to-0001", returns_to="0001"),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + URL,
            "0001",
            ["0002"],
            id="rollback-then-outside-change",
        ),
        pytest.param(  # the same, its rollback snapshot from before returns_to existed
            [
                _state("0002", REQ + IDNA, "rollback", "rollback-to-0001"),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + URL,
            "0001",
            ["0002"],
            id="target-read-from-the-outcome",
        ),
        pytest.param(  # nothing since the rollback: the removal it undid is not in effect
            [
                _state("0002", REQ + IDNA, "rollback", "rollback-to-0001", returns_to="0001"),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + URL + IDNA,
            None,
            ["0002", "0001"],
            id="rollback-is-the-latest-change",
        ),
        pytest.param(  # a removal, then another one whose probe failed and that was restored
            [
                _state("0002", REQ + IDNA, "uninstall", "probe-failed-restored", removed=("i",)),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + IDNA,
            "0001",
            ["0002"],
            id="restored-removal-passed-over",
        ),
        pytest.param(  # the same when the probe still failed after the restore
            [
                _state("0002", REQ + IDNA, "uninstall", "restored-probe-fails", removed=("i",)),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + IDNA + "z",  # and z installed since, outside the tool
            "0001",
            ["0002"],
            id="restored-removal-whose-probe-still-fails-passed-over",
        ),
        pytest.param(  # a rollback undone by its failing probe changed nothing
            [
                _state(
                    "0002",
                    REQ + IDNA + URL,
                    "rollback",
                    "rollback-probe-failed-restored",
                    returns_to="0001",
                ),
                _state("0001", REQ + IDNA, "snapshot", "taken"),
            ],
            REQ + IDNA + URL,
            "0001",
            ["0002"],
            id="undone-rollback-passed-over",
        ),
        pytest.param(  # the rollbacks between a rollback's target and itself are undone
            [
                _state("0003", REQ + IDNA, "rollback", "rollback-to-0001", returns_to="0001"),
                _state("0002", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
                _state("0001", REQ + URL + IDNA + "x", "uninstall", "removed", removed=("x",)),
                _state("0000", REQ + URL + IDNA + "xy", "uninstall", "removed", removed=("y",)),
            ],
            REQ + URL + IDNA + "x",
            "0000",
            ["0003", "0002", "0001"],
            id="what-a-rollback-undid-is-passed-over",
        ),
        pytest.param(  # rollback ID of a rollback's own snapshot redoes the removal
            [
                _state("0003", REQ + URL + IDNA, "rollback", "rollback-to-0002", returns_to="0002"),
                _state("0002", REQ + IDNA, "rollback", "rollback-to-0001", returns_to="0001"),
                _state("0001", REQ + URL + IDNA, "uninstall", "removed", removed=("u",)),
            ],
            REQ + IDNA,
            "0001",
            ["0003", "0002"],
            id="a-redone-removal-is-in-effect-again",
        ),
        pytest.param(  # a removal undone outside the tool (reinstalled by hand)
            [
                _state("0002", "ab", "uninstall", "removed", removed=("b",)),
                _state("0001", "a", "snapshot", "taken"),
            ],
            "ab",
            "0001",
            ["0002"],
            id="matching-snapshot-passed-over",
        ),
        pytest.param(  # an interrupted removal that recover put back
            [
                _state("0002", "y", "recover", "recover-to-0001", returns_to="0001"),
                _state("0001", "xy", "uninstall", "recovered", removed=("x",)),
            ],
            "xy",
            None,
            ["0002", "0001"],
            id="recovered-removal",
        ),
        pytest.param(
            [_state("0001", "ab", "snapshot", "taken")], "abc", "0001", [], id="manual-snapshot"
        ),
    ],
)
def test_choose_snapshot(
    history: list[Snapshot], env: str, chosen: str | None, skipped: list[str]
) -> None:
    by_id = {s.id: s for s in history}
    choice = choose_snapshot(
        [(s.id, s) for s in history],
        lambda snap: {p.name for p in snap.packages} == set(env),
        by_id.get,
    )
    assert not choice.blocked
    assert choice.snapshot == chosen, choice
    assert [s.snapshot for s in choice.skipped] == skipped
    assert choice.reason


@pytest.mark.parametrize(
    ("history", "stops_at"),
    [
        ([("0002", "snapshot.toml: not a valid TOML file")], "not a valid TOML file"),
        (  # which snapshot it returned to is not known: nothing past it can be judged
            [
                ("0002", _state("0002", "a", "rollback", "pending")),
                ("0001", _state("0001", "ab", "uninstall", "removed")),
            ],
            "does not say which snapshot it returned to",
        ),
        (  # its target was pruned
            [("0002", _state("0002", "a", "rollback", "rollback-to-0001", returns_to="0001"))],
            "returned to snapshot 0001, which is gone",
        ),
    ],
)
def test_choose_snapshot_stops_where_it_cannot_see(
    history: list[tuple[str, Snapshot | str]], stops_at: str
) -> None:
    by_id = {i: s for i, s in history if isinstance(s, Snapshot)}
    choice = choose_snapshot(history, lambda snap: False, by_id.get)
    assert choice.blocked and choice.snapshot is None
    assert stops_at in choice.reason


def test_returns_to_is_written_only_for_a_rollback(tmp_path: Path) -> None:
    snap = _state("0002", "a", "rollback", "pending", returns_to="0001")
    path = SnapshotFolder(tmp_path).snapshot_file
    snapshot_file.save(snap, path)
    assert snapshot_file.load(path).returns_to == "0001"
    assert "returns_to" not in _state("0001", "a", "uninstall", "pending").to_dict()


# -- doctor: where a missing piece comes back from, and the one repair -----------------------


def recorded(name: str, version: str, url: str | None = None) -> PackageEntry:
    source = Source(kind="url", url=url) if url else Source(kind="index")
    return PackageEntry(name=name, version=version, source=source)


@pytest.mark.parametrize(
    ("requirement", "snapshots", "expected"),
    [
        # A stash that satisfies it, newest first.
        (
            "idna<4",
            [make_snapshot("0002", (stashed("idna", "3.20"),))],
            ("idna==3.20", "0002", None, False),
        ),
        # Only recorded, files not kept: that version, said to come from the record.
        (
            "idna<4",
            [make_snapshot("0002", (recorded("idna", "3.20"),))],
            ("idna==3.20", None, "0002", False),
        ),
        # A recorded version outside the range is no answer; nothing else is either.
        ("idna<3", [make_snapshot("0002", (recorded("idna", "3.20"),))], (None, None, None, False)),
        # The requirement's own pin, with no snapshot at all.
        (
            "nvidia-nccl-cu13==2.30.7; platform_system == 'Linux'",
            [],
            ("nvidia-nccl-cu13==2.30.7", None, None, True),
        ),
        ("torch===2.14.1+cu130", [], ("torch==2.14.1+cu130", None, None, True)),
        ("numpy==2.*", [], (None, None, None, False)),
        ("numpy>=2,==2.1", [], (None, None, None, False)),
    ],
)
def test_doctor_finds_where_a_missing_requirement_comes_back_from(
    requirement: str, snapshots: list[Snapshot], expected: tuple[object, ...]
) -> None:
    from packaging.requirements import Requirement

    from safeuninstall.reports.doctor import _requirement_finding

    found = _requirement_finding("dependent", Requirement(requirement), snapshots)
    assert (found.provider, found.snapshot, found.recorded_in, found.pinned) == expected


def test_doctor_repairs_with_a_rollback_only_where_a_stash_holds_everything() -> None:
    from safeuninstall.reports.doctor import Finding, Repair, plan_repair

    installed = {"requests": Installed("requests", "2.34.2", Source(kind="index"))}
    kept = make_snapshot("0001", (stashed("requests", "2.34.2"), stashed("idna", "3.20")))
    only_recorded = make_snapshot("0002", (stashed("requests", "2.34.2"), recorded("idna", "3.20")))
    missing = Finding("requirement", "idna<4", "requests", "idna==3.20", "0001")
    assert plan_repair([missing], [only_recorded, kept], installed) == Repair(snapshot="0001")
    from_record = Finding("requirement", "idna<4", "requests", "idna==3.20", recorded_in="0002")
    assert plan_repair([from_record], [only_recorded], installed) == Repair(
        install=(recorded("idna", "3.20"),)
    )


def test_doctor_repairs_from_a_stash_first_and_the_index_for_the_rest() -> None:
    """One rollback: what its stash holds comes from there, what it only recorded is
    reinstalled; an install of everything from the index only where no snapshot has them."""
    from safeuninstall.reports.doctor import Finding, Repair, plan_repair

    installed = {
        "a": Installed("a", "1", Source(kind="index"), intact=False),
        "b": Installed("b", "2", Source(kind="index"), intact=False),
    }
    findings = [
        Finding("hollow", "a==1", "", "a==1", reinstall=True),
        Finding("hollow", "b==2", "", "b==2", reinstall=True),
    ]
    some = make_snapshot("0001", (stashed("a", "1"), recorded("b", "2")))
    assert plan_repair(findings, [some], installed) == Repair(snapshot="0001")
    neither = make_snapshot("0002", (recorded("a", "1"), recorded("b", "2")))
    assert plan_repair(findings, [neither], installed) == Repair(
        install=(recorded("a", "1"), recorded("b", "2")), reinstall=True
    )


def test_doctor_expects_a_library_back_with_its_consumers_missing_requirements() -> None:
    from safeuninstall.reports.doctor import Finding, Repair, plan_repair

    pins = ("nvidia-cudnn-cu13==9.24.0.43", "nvidia-nccl-cu13==2.30.7")
    findings = [
        Finding("library", "libnccl.so.2", "torch", expected_with=pins),
        *(Finding("requirement", pin, "torch", pin, pinned=True) for pin in pins),
    ]
    repair = plan_repair(findings, [], {})
    assert repair == Repair(install=tuple(recorded(*pin.split("==")) for pin in pins))
    # With the source a snapshot recorded for that release (a URL, a local build), not the bare pin.
    source = make_snapshot("0001", (recorded("nvidia-nccl-cu13", "2.30.7", "https://x/nccl.whl"),))
    assert plan_repair(findings, [source], {}) == Repair(
        install=(recorded("nvidia-cudnn-cu13", "9.24.0.43"), source.packages[0])
    )
    # A library that nothing is expected to bring back: no repair can be promised.
    assert plan_repair([Finding("library", "libx.so.1", "torch")], [], {}) is None


def test_hashing_stops_between_chunks_when_asked(tmp_path: Path) -> None:
    """The stash hasher of a --no-probe removal is cancelled, not waited for through the rest
    of a large library: sha256_file gives up at the next chunk."""
    import errno

    from safeuninstall.environment.records import sha256_file

    big = tmp_path / "lib.so"
    big.write_bytes(bytes(3 * 1024 * 1024))
    asked = []

    def stop() -> bool:
        asked.append(None)
        return len(asked) == 2

    with pytest.raises(OSError) as raised:
        sha256_file(big, big.lstat(), stop=stop)
    assert raised.value.errno == errno.ECANCELED
    assert len(asked) == 2
    assert sha256_file(big, big.lstat(), stop=lambda: False) == sha256_file(big)


@pytest.mark.parametrize(
    "line",
    [
        'torch[cuda]; extra == "gpu"',
        "numpy>=1; extra=='all' and python_version >= '3'",
        'rich; (extra == "cli") and sys_platform == "linux"',
        'rich; extra == "cli" or python_version >= "3"',
        'rich; python_version >= "3" or extra == "cli"',
        'rich; extra == ""',
        'rich; extra != "cli"',
        'rich; "cli" == extra',
        'rich; platform_system == "Linux"',
        "rich",
        'rich; extraneous == "x"',
    ],
)
def test_doctor_skips_only_lines_that_need_an_extra(line: str) -> None:
    """doctor's shortcut (no parse for a line behind an extra) says what evaluating the
    marker without extras says, or nothing: it never skips a line that applies."""
    from packaging.requirements import Requirement

    from safeuninstall.reports.doctor import _needs_an_extra

    requirement = Requirement(line) if "extraneous" not in line else None
    if _needs_an_extra(line):
        assert requirement is not None and requirement.marker is not None
        markers = {"python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux"}
        assert not requirement.marker.evaluate({**markers, "extra": ""})


def test_giving_up_says_what_it_could_not_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nothing was changed` is said only when the give-up deleted the snapshot and the journal."""
    from safeuninstall.transaction import transaction

    class _Journal:
        path = tmp_path / "journal.toml"

        def finish(self) -> None:
            raise PermissionError(13, "Permission denied")

    class _Context:
        def journal(self) -> _Journal:
            return _Journal()

    folder = tmp_path / "0001"
    folder.mkdir()
    monkeypatch.setattr(transaction.shutil, "rmtree", lambda *args, **kwargs: None)
    txn = transaction.Transaction(_Context(), "uninstall")  # type: ignore[arg-type]
    txn._folder = SnapshotFolder(folder)
    with pytest.raises(KeyboardInterrupt), txn:
        raise KeyboardInterrupt

    assert txn.unchanged("interrupted before anything was removed") == (
        "interrupted before anything was removed; the environment was not changed, but giving "
        f"the operation up could not delete the snapshot folder {folder} and the journal "
        f"{tmp_path / 'journal.toml'} (Permission denied)"
    )


def test_a_target_whose_site_folder_is_on_the_tools_path_is_the_tools_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool installed in a base interpreter and run from a ``--system-site-packages`` venv
    over it imports from the base's site-packages: a removal there is a removal from the tool's
    own environment (the restore's modules are loaded first), though the prefixes differ."""
    import sys

    from safeuninstall.context.context import Context
    from safeuninstall.environment.interpreter import Interpreter

    site = tmp_path / "base" / "lib" / "site-packages"
    site.mkdir(parents=True)
    base = str(tmp_path / "base")
    interpreter = Interpreter(
        f"{base}/bin/python", base, base, "3.11.7", str(site), str(site), f"{base}/bin", {}
    )
    ctx = object.__new__(Context)
    ctx.interpreter = interpreter
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(site)])
    assert not ctx.is_tool_environment
    monkeypatch.setattr(
        sys, "path", [*sys.path, str(tmp_path / "base" / "lib" / "." / "site-packages")]
    )
    assert ctx.is_tool_environment


@pytest.mark.parametrize(
    ("keep", "max_size", "expected"),
    [
        (2, None, ["0002"]),  # the newest 2 beside 0001 (not counted): 0003 and 0004
        (1, None, ["0002", "0003"]),
        (None, 100, ["0002", "0003"]),  # 0001's 800 bytes stay, over the bound: all else goes
        (None, 1000, []),  # 0001 counted, 810 <= 1000
        (3, 10_000, []),
    ],
)
def test_plan_prune_keeps_only_copies_outside_keep_and_inside_max_size(
    keep: int | None, max_size: int | None, expected: list[str]
) -> None:
    from safeuninstall.plans.changes import plan_prune
    from safeuninstall.state.holdings import Holdings

    only, small = (1, 1), (1, 2)
    holdings = Holdings(
        files={"0001": {only: 800}, "0002": {small: 10}, "0003": {}, "0004": {}},
        only_in_snapshots=frozenset({only, small}),
    )
    ids = ["0001", "0002", "0003", "0004"]

    doomed = plan_prune(ids, holdings, {"0004"}, keep=keep, max_size=max_size, only_copies={"0001"})

    assert doomed == expected
    assert "0001" in plan_prune(ids, holdings, {"0004"}, keep=1, max_size=None)  # unguarded
    # The latest (protected) holding an only copy still counts among the newest `keep`.
    both = {"0001", "0004"}
    assert plan_prune(ids, holdings, {"0004"}, keep=1, max_size=None, only_copies=both) == [
        "0002",
        "0003",
    ]


@pytest.mark.parametrize(
    ("request_", "is_path"),
    [
        ("3.11", False),  # an existing folder of that name: still a version, as uv reads it
        ("CPython@3.12", False),
        ("PyPy", False),
        ("any", False),
        ("myvenv", True),  # an existing folder uv would not read as a version
        ("nosuchname", False),  # an executable name: uv looks for it
        ("./3.11", True),
    ],
)
def test_python_request_is_a_path_as_uv_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request_: str, is_path: bool
) -> None:
    from safeuninstall.environment.interpreter import is_path_request

    for folder in ("3.11", "CPython@3.12", "PyPy", "any", "myvenv"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path)
    assert is_path_request(request_) is is_path


def test_prune_text_names_no_empty_list_of_only_copy_keepers() -> None:
    """Over --max-size with no only copy kept (protected ones alone over): no 'and  for'."""
    from safeuninstall.cli.render.snapshots import prune_summary
    from safeuninstall.operations.results import PruneResult

    result = PruneResult((), (("0001", 7270),), ("0001",), dry_run=True, over_max_size=7269)

    text = prune_summary(result)

    assert "the snapshots kept hold 7.1 KiB over --max-size: those never deleted\n" in text
    assert "for their only copies" not in text
