"""Export: a snapshot as requirements or pylock.toml, and the round trip through uv pip sync."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from safeuninstall.environment.source import Source
from safeuninstall.operations import export
from safeuninstall.state.snapshot import PackageEntry, Snapshot, Target
from tests.conftest import UV, MakeVenv, Venv
from tests.wheels import build_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

needs_uv = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENTRIES = {
    "index": PackageEntry("requests", "2.32.3"),
    "local": PackageEntry("torch", "2.11.0+cu130"),
    "file": PackageEntry(
        "localbuilt", "0.1", source=Source(kind="file", url="file:///w/localbuilt-0.1.whl")
    ),
    "url": PackageEntry(
        "remote", "1.0", source=Source(kind="url", url="https://example.org/remote-1.0.tar.gz")
    ),
    "directory": PackageEntry(
        "dirpkg", "0.2", source=Source(kind="directory", url="file:///src/dir%20pkg")
    ),
    "editable": PackageEntry("edpkg", "0.1", source=Source(kind="editable", url="file:///src/ed")),
    "vcs": PackageEntry(
        "vcspkg",
        "1.2",
        source=Source(
            kind="vcs",
            url="https://example.org/vcspkg.git",
            vcs="git",
            commit=COMMIT,
            requested_revision="main",
            subdirectory="python",
        ),
    ),
}


def snapshot_of(*kinds: str) -> Snapshot:
    return Snapshot(
        id="0007",
        created="2026-01-01T00:00:00+00:00",
        tool_version="0.1.0",
        command=("safe-uninstall", "snapshot"),
        operation="snapshot",
        target=Target(python="/v/bin/python", prefix="/v", version="3.11.7"),
        packages=tuple(sorted((ENTRIES[k] for k in kinds), key=lambda e: e.name)),
    )


def body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_requirements_one_line_per_source_kind() -> None:
    text = export.requirements(snapshot_of(*ENTRIES))
    assert body(text) == [
        "dirpkg @ file:///src/dir%20pkg",
        "-e file:///src/ed",
        "localbuilt @ file:///w/localbuilt-0.1.whl",
        "remote @ https://example.org/remote-1.0.tar.gz",
        "requests==2.32.3",
        "torch==2.11.0+cu130",
        f"vcspkg @ git+https://example.org/vcspkg.git@{COMMIT}#subdirectory=python",
    ]
    assert "# The exact set back in a fresh environment: uv pip sync THIS_FILE" in text
    # A +cu130 build names the index nobody recorded.
    assert "local builds such as torch==2.11.0+cu130 need their index" in text
    assert "need their index" not in export.requirements(snapshot_of("index"))


def test_pylock_from_source_trees_is_valid_pep_751() -> None:
    text = export.pylock(snapshot_of("vcs", "editable", "directory"))
    lock = Pylock.from_dict(tomllib.loads(text))
    assert str(lock.lock_version) == "1.0" and lock.created_by == "safe-uninstall"
    by_name = {str(p.name): p for p in lock.packages}
    assert sorted(by_name) == ["dirpkg", "edpkg", "vcspkg"]
    # PEP 751: no version for a source tree, it can't be guaranteed to match the code.
    assert all(p.version is None for p in lock.packages)
    vcs = by_name["vcspkg"].vcs
    assert vcs is not None
    assert (vcs.type, vcs.url, vcs.commit_id, vcs.subdirectory) == (
        "git",
        "https://example.org/vcspkg.git",
        COMMIT,
        "python",
    )
    directory, editable = by_name["dirpkg"].directory, by_name["edpkg"].directory
    assert directory is not None and editable is not None
    assert (directory.path, directory.editable) == ("/src/dir pkg", None)
    assert (editable.path, editable.editable) == ("/src/ed", True)


@pytest.mark.parametrize(
    ("kinds", "reason"),
    [
        (
            ("index", "local", "vcs"),
            "2 distributions from an index (the wheel's URL and sha256 are not recorded): "
            "requests, torch",
        ),
        (
            ("file", "editable"),
            "1 distribution an archive whose sha256 is not recorded: localbuilt",
        ),
        ((), "the snapshot lists no distribution"),
    ],
)
def test_pylock_refuses_what_the_snapshot_cannot_lock(kinds: tuple[str, ...], reason: str) -> None:
    with pytest.raises(export._NotLockable) as raised:
        export.pylock(snapshot_of(*kinds))
    assert raised.value.reason.startswith(reason)


# -- the real command, and the round trip ------------------------------------------------------


def source_tree(root: Path, name: str, version: str) -> Path:
    """A local project built by the tests' in-tree backend: no index, no setuptools."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(f"VALUE = {version!r}\n")
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "{version}"\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    shutil.copy(Path(__file__).parent / "fixtures" / "editable_backend.py", root / "backend.py")
    return root


def sources(venv: Venv) -> dict[str, str]:
    """{name: 'index' or the direct_url.json text} for every installed distribution."""
    found = {}
    for dist_info in venv.site_packages.glob("*.dist-info"):
        name = dist_info.name.split("-")[0].replace("_", "-")
        direct_url = dist_info / "direct_url.json"
        found[name] = direct_url.read_text() if direct_url.exists() else "index"
    return found


@needs_uv
def test_requirements_round_trip_through_uv_pip_sync(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    wheel = build_wheel(tmp_path / "local", "localbuilt", "0.0.1+local", {"localbuilt.py": ""})
    editable = source_tree(tmp_path / "ed", "edpkg", "0.1")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(wheel))
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", "-e", str(editable))
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    out = tmp_path / "exported" / "requirements.txt"

    run = venv.tool("export", "1", "-o", str(out))

    assert run.returncode == 0, run.stderr
    assert run.stdout == f"wrote {out}: 6 distributions (requirements)\n"
    lines = body(out.read_text())
    assert "leftpad==1.0" in lines and f"-e {editable.as_uri()}" in lines
    assert f"localbuilt @ file://{wheel}" in lines  # as uv recorded it

    fresh = make_venv()
    fresh.uv(
        "pip",
        "sync",
        "--python",
        str(fresh.python),
        "--no-index",
        "--find-links",
        str(venv.wheelhouse),
        str(out),
    )
    assert fresh.installed() == venv.installed()
    assert sources(fresh) == sources(venv)  # the editable is editable, the file is the file
    assert fresh.run_python("import edpkg, localbuilt, requests").returncode == 0


@needs_uv
def test_pylock_round_trip_and_refusal(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv()
    folder = source_tree(tmp_path / "dir", "dirpkg", "0.2")
    editable = source_tree(tmp_path / "ed", "edpkg", "0.1")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(folder))
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", "-e", str(editable))
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    lock = tmp_path / "pylock.toml"

    run = venv.tool("export", "--format", "pylock", "-o", str(lock))

    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    Pylock.from_dict(tomllib.loads(lock.read_text()))
    fresh = make_venv()
    fresh.uv("pip", "sync", "--python", str(fresh.python), "--offline", str(lock))
    assert fresh.installed() == venv.installed() == {"dirpkg": "0.2", "edpkg": "0.1"}
    assert sources(fresh) == sources(venv)

    # An index package makes a lock file impossible: an error naming it, and nothing written
    # (the lock file of the first export is left as it was).
    written = lock.read_text()
    venv.install("leftpad")
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    refused = venv.tool("export", "latest", "--format", "pylock", "-o", str(lock))
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "safe-uninstall: error: no pylock.toml can be written for snapshot 0002: 1 distribution "
        "from an index (the wheel's URL and sha256 are not recorded): leftpad; nothing was "
        "written. `--format requirements`"
    )
    assert not list(tmp_path.glob("pylock*.txt"))
    assert lock.read_text() == written


@needs_uv
def test_pylock_of_a_folder_whose_name_holds_a_percent_sign(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A folder's path is its file: URL decoded once: the folder named ``dir%25pkg`` (in its
    URL ``dir%2525pkg``), not ``dir%pkg``."""
    venv = make_venv()
    folder = source_tree(tmp_path / "dir%25pkg", "dirpkg", "0.2")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(folder))
    lock = tmp_path / "pylock.toml"

    run = venv.tool("export", "--format", "pylock", "-o", str(lock))

    assert run.returncode == 0, run.stderr
    (package,) = Pylock.from_dict(tomllib.loads(lock.read_text())).packages
    assert package.directory is not None and package.directory.path == str(folder)
    fresh = make_venv()
    fresh.uv("pip", "sync", "--python", str(fresh.python), "--offline", str(lock))
    assert sources(fresh) == sources(venv)


@needs_uv
def test_export_to_stdout_by_path_and_as_json(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    folder = venv.snapshot("0001")

    by_id = venv.tool("export", "1")
    assert body(by_id.stdout) == ["leftpad==1.0"]
    by_path = venv.tool("export", str(folder.snapshot_file))
    assert by_path.stdout == by_id.stdout
    as_json = venv.tool("export", str(folder.path), "--json").json()
    assert as_json["snapshot"] == "0001" and as_json["text"] == by_id.stdout
    missing = venv.tool("export", "9")
    assert missing.returncode == 1 and "no snapshot '9'" in missing.stderr


@needs_uv
def test_export_without_an_id_is_what_is_installed(make_venv: MakeVenv) -> None:
    """After a rollback the newest snapshot is the state before it: without an id, export
    writes what is installed now."""
    venv = make_venv("leftpad", "toolpkg")
    assert venv.tool("--no-probe", "leftpad").returncode == 0  # 0001: with leftpad
    assert venv.tool("--no-probe", "rollback").returncode == 0  # 0002: before it, without

    now = venv.tool("export")
    newest = venv.tool("export", "latest")

    assert now.returncode == 0, now.stderr
    assert body(now.stdout) == ["leftpad==1.0", "toolpkg==1.0"]
    assert body(newest.stdout) == ["toolpkg==1.0"]
    assert "the distributions installed in" in now.stdout
    assert venv.tool("export", "--json").json()["snapshot"] is None


@pytest.mark.parametrize("name", ["x.toml", "pylock.a.b.toml", "lock.toml", "pylock.txt"])
def test_a_lock_file_named_as_uv_pip_sync_refuses_is_not_written(
    make_venv: MakeVenv, tmp_path: Path, name: str
) -> None:
    venv = make_venv()
    folder = source_tree(tmp_path / "dir", "dirpkg", "0.2")
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", str(folder))

    run = venv.tool("export", "--format", "pylock", "-o", str(tmp_path / name))

    assert run.returncode == 1, run.stdout + run.stderr
    assert "pylock.toml or pylock.NAME.toml (PEP 751)" in run.stderr
    assert not (tmp_path / name).exists()
    good = venv.tool("export", "--format", "pylock", "-o", str(tmp_path / "pylock.dev.toml"))
    assert good.returncode == 0, good.stderr


def test_a_snapshot_not_found_says_the_list_is_the_newest_five(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    for _ in range(6):
        assert venv.tool("snapshot", "--no-stash").returncode == 0

    missing = venv.tool("export", "9")

    assert missing.returncode == 1
    assert "(have: the newest 5 of 6: 0002, 0003, 0004, 0005, 0006;" in missing.stderr
