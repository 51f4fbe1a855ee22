"""``bisect FILE``: the good state from another environment, as a file describes it.

Node A is fast; node B is A changed in six ways, one of which (part2 2.0) breaks the probe. On
B, ``bisect A-FILE --find-links HOUSE`` (HOUSE: the wheels copied from A) names part2 and ends
where B started, byte for byte, whatever form A's file has: the snapshot.toml the tool wrote,
``export``'s requirements or pylock.toml, ``uv pip freeze``'s output. A version no stash of B
holds comes from HOUSE; under ``--offline`` what HOUSE cannot supply either is refused before
anything changes, with the list.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv, described_files, error_line
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

A_SET = ("part0==1.0", "part1==1.0", "part2==1.0", "part3==1.0", "part4==2.0", "part5==1.0")
# B, from A: three upgrades (part2's breaks the probe), a downgrade, one removed, one added.
SIX = {"part0", "part1", "part2", "part4", "part5", "part6"}
PROBE = "import part0, part1, part2, part3, part4"
# What B's own stash holds of A's versions (B had it once, and a snapshot stashed it).
FROM_STASH = "part0==1.0"
FROM_HOUSE = ("part1==1.0", "part2==1.0", "part4==2.0", "part5==1.0")


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """A's wheelhouse: part0..part6 at 1.0 and 2.0; part2 2.0 fails to import."""
    folder = tmp_path / "house"
    for n in range(7):
        name = f"part{n}"
        for version in ("1.0", "2.0"):
            body = "raise ImportError('broken in 2.0')\n" if (n, version) == (2, "2.0") else ""
            build_wheel(folder, name, version, {f"{name}.py": f"V = {version!r}\n{body}"})
    return folder


def _node_a(make_venv: MakeVenv, house: Path) -> Venv:
    venv = make_venv()
    venv.install(*A_SET, find_links=house)
    return venv


def _node_b(make_venv: MakeVenv, house: Path) -> Venv:
    """A changed in six ways; on the way, a snapshot stashed part0 1.0."""
    venv = make_venv()
    venv.install("part0==1.0", "part1==2.0", "part2==2.0", "part3==1.0", find_links=house)
    venv.install("part4==1.0", "part6==1.0", find_links=house)
    snap = venv.tool("snapshot", "-q")
    assert snap.returncode == 0, snap.stderr
    venv.install("part0==2.0", find_links=house)
    return venv


@pytest.fixture
def nodes(make_venv: MakeVenv, house: Path, tmp_path: Path) -> tuple[Venv, dict[str, Path]]:
    files = described_files(_node_a(make_venv, house), house, tmp_path / "from-a")
    return _node_b(make_venv, house), files


def _at_start(venv: Venv) -> tuple[dict[str, str], dict[str, str], list[Path]]:
    return venv.installed(), venv.file_hashes(), sorted(venv.state.snapshots_dir.iterdir())


@pytest.mark.parametrize("form", ["snapshot", "export", "freeze", "pylock"])
def test_on_b_a_file_of_a_names_the_culprit_and_ends_where_b_started(
    nodes: tuple[Venv, dict[str, Path]], house: Path, form: str
) -> None:
    b, files = nodes
    installed, hashes, _ = _at_start(b)
    assert b.run_python(PROBE).returncode != 0

    done = b.tool(
        "--json", "bisect", str(files[form]), "--find-links", str(house), "--probe", PROBE
    )

    data = done.json()
    assert done.returncode == 0, data
    assert data["outcome"] == "bisected"
    found = data["bisect"]
    assert found["good"] == str(files[form])  # type: ignore[index]
    assert {n for unit in found["units"] for n in unit} == SIX  # type: ignore[index]
    assert found["culprits"] == [  # type: ignore[index]
        {"names": ["part2"], "good": ["part2==1.0"], "bad": ["part2==2.0"]}
    ]
    assert found["confirmed"] is True  # type: ignore[index]
    assert data["verification"]["ok"] is True  # type: ignore[index]
    assert str(data["next_command"]).endswith(
        f"run -- uv pip install --no-deps --find-links {house} part2==1.0"
    )
    assert b.installed() == installed
    assert b.file_hashes() == hashes
    assert not b.journal.exists()


def test_dry_run_says_which_versions_come_from_a_stash_and_which_from_find_links(
    nodes: tuple[Venv, dict[str, Path]], house: Path
) -> None:
    b, files = nodes
    start = _at_start(b)

    done = b.tool("bisect", str(files["freeze"]), "--find-links", str(house), "--dry-run")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"{FROM_STASH} from a stash (snapshot ") for line in lines)
    for pin in FROM_HOUSE:
        assert f"{pin} from --find-links" in lines, done.stdout
    assert f"part6: not in the file {files['freeze']}, uninstalled for its state" in lines
    without = b.tool("bisect", str(files["freeze"]), "--dry-run")
    assert "part1==1.0 from the index" in without.stdout.splitlines()
    assert _at_start(b) == start


@pytest.mark.parametrize("supplied", [(), ("part1", "part5")])
def test_offline_what_neither_a_stash_nor_find_links_holds_is_refused_with_the_list(
    nodes: tuple[Venv, dict[str, Path]], house: Path, tmp_path: Path, supplied: tuple[str, ...]
) -> None:
    b, files = nodes
    start = _at_start(b)
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in supplied:
        (wheel,) = house.glob(f"{name}-1.0-*.whl")
        shutil.copy(wheel, partial)
    links = ("--find-links", str(partial)) if supplied else ()

    done = b.tool("bisect", str(files["pylock"]), *links, "--offline", "--probe", PROBE)

    assert done.returncode == 1, done.stdout
    missing = ", ".join(p for p in FROM_HOUSE if p.partition("==")[0] not in supplied)
    nor = ", nor does --find-links" if supplied else ""
    assert error_line(done.stderr) == (
        f"safe-uninstall: error: no stash holds {missing} of the file {files['pylock']}{nor}, "
        "and --offline forbids the index; nothing was changed"
    )
    assert _at_start(b) == start
    assert not b.journal.exists()


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("a.toml", "this is = = not toml", "not a valid TOML file"),
        ("a.txt", "hello, world\n", "line 1: 'hello, world' is not a requirement"),
    ],
)
def test_a_garbage_file_is_refused_in_one_line_and_nothing_changes(
    nodes: tuple[Venv, dict[str, Path]], tmp_path: Path, name: str, content: str, said: str
) -> None:
    b, _ = nodes
    start = _at_start(b)
    path = tmp_path / name
    path.write_text(content)

    done = b.tool("bisect", str(path), "--probe", PROBE)

    assert done.returncode == 1, done.stdout
    assert error_line(done.stderr).startswith(f"safe-uninstall: error: {path}: {said}")
    assert [line for line in done.stderr.splitlines() if "error" in line] == [
        error_line(done.stderr)
    ]
    assert "Traceback" not in done.stderr
    as_json = b.tool("--json", "bisect", str(path), "--probe", PROBE)
    assert as_json.returncode == 1
    assert str(as_json.json()["error"]).startswith(f"{path}: {said}")
    assert _at_start(b) == start
