"""Editable installs and source trees in a file that describes another environment.

A freeze file lists an editable install as ``-e`` and a source (``-e file:///src/x`` from
``uv pip freeze``, ``-e /src/x`` under pip's comment that names it, ``-e git+URL#egg=name``); a
pylock.toml or a snapshot.toml as a ``directory`` or ``vcs`` source. None of them gives a
version an index has: the file says the name is present as *some* install. ``diff`` says so
("not compared") and ``bisect`` keeps the install here as it is: never uninstalled, never
replaced because of the file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from safeuninstall.environment.installed import Source
from safeuninstall.state import described
from tests.conftest import UV, MakeVenv, Venv, run_tool
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

PROBE = "import part0, part1, part2, edpkg"


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """part0..part2 at 1.0 and 2.0; part2 2.0 fails to import."""
    folder = tmp_path / "house"
    for n in range(3):
        for version in ("1.0", "2.0"):
            body = "raise ImportError('broken in 2.0')\n" if (n, version) == (2, "2.0") else ""
            build_wheel(folder, f"part{n}", version, {f"part{n}.py": f"V = {version!r}\n{body}"})
    return folder


def _source_tree(folder: Path) -> Path:
    (folder / "edpkg").mkdir(parents=True)
    (folder / "edpkg" / "__init__.py").write_text("VALUE = 42\n")
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "edpkg"\nversion = "0.1"\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    shutil.copy(Path(__file__).parent / "fixtures" / "editable_backend.py", folder / "backend.py")
    return folder


def _node(make_venv: MakeVenv, house: Path, src: Path, *pins: str) -> Venv:
    venv = make_venv()
    venv.install(*pins, find_links=house)
    venv.uv("pip", "install", "--python", str(venv.python), "--offline", "-e", str(src))
    return venv


@pytest.fixture
def b_and_a_freeze(make_venv: MakeVenv, house: Path, tmp_path: Path) -> tuple[Venv, Path, Path]:
    """Node B (part1 and part2 upgraded since A; part2 2.0 breaks), A's ``uv pip freeze``, and
    the source tree both have edpkg installed from, editable."""
    src = _source_tree(tmp_path / "src")
    a = _node(make_venv, house, src, "part0==1.0", "part1==1.0", "part2==1.0")
    freeze = tmp_path / "a-freeze.txt"
    freeze.write_text(a.uv("pip", "freeze", "--python", str(a.python)).stdout)
    assert f"-e {src.as_uri()}" in freeze.read_text().splitlines()
    b = _node(make_venv, house, src, "part0==1.0", "part1==2.0", "part2==2.0")
    return b, freeze, src


def _bisected(b: Venv, good: Path, house: Path) -> dict[str, object]:
    installed, hashes = b.installed(), b.file_hashes()
    done = b.tool("--json", "bisect", str(good), "--find-links", str(house), "--probe", PROBE)
    data = done.json()
    assert done.returncode == 0, data
    assert b.installed() == installed
    assert b.file_hashes() == hashes
    return data


def _units(data: dict[str, object]) -> set[str]:
    return {n for unit in data["bisect"]["units"] for n in unit}  # type: ignore[index]


def test_bisect_keeps_the_editable_install_a_uv_freeze_names_by_its_tree(
    b_and_a_freeze: tuple[Venv, Path, Path], house: Path
) -> None:
    b, freeze, _ = b_and_a_freeze

    data = _bisected(b, freeze, house)

    assert _units(data) == {"part1", "part2"}
    assert data["bisect"]["culprits"] == [  # type: ignore[index]
        {"names": ["part2"], "good": ["part2==1.0"], "bad": ["part2==2.0"]}
    ]
    said = f"edpkg: an editable install in {freeze} (line 1): kept as it is, not bisected"
    assert said in data["messages"]  # type: ignore[operator]


@pytest.mark.parametrize(
    "line",
    [
        "# Editable install with no version control (edpkg==0.1)\n-e {src}\n",
        "-e git+https://example.org/edpkg.git@0123abcd#egg=edpkg\n",
        # A tree of another machine: which install here it is, the file cannot say.
        "-e file:///elsewhere/edpkg\n",
        "edpkg @ file:///elsewhere/edpkg\n",
    ],
)
def test_bisect_keeps_the_editable_install_whatever_form_the_line_has(
    b_and_a_freeze: tuple[Venv, Path, Path], house: Path, line: str
) -> None:
    b, freeze, src = b_and_a_freeze
    other = freeze.with_name("other.txt")
    kept = [x for x in freeze.read_text().splitlines() if not x.startswith("-e")]
    other.write_text("\n".join(kept) + "\n" + line.format(src=src))

    data = _bisected(b, other, house)

    assert _units(data) == {"part1", "part2"}
    assert any(
        str(m).startswith("edpkg: ") and str(m).endswith(": kept as it is, not bisected")
        for m in data["messages"]  # type: ignore[attr-defined]
    ), data["messages"]


def test_diff_says_the_editable_install_is_not_compared(
    b_and_a_freeze: tuple[Venv, Path, Path],
) -> None:
    b, freeze, _ = b_and_a_freeze

    found = b.tool("diff", str(freeze), "--json").json()
    text = b.tool("diff", str(freeze)).stdout.splitlines()

    assert {c["name"] for c in found["changes"]} == {"part1", "part2"}  # type: ignore[attr-defined]
    said = f"edpkg: an editable install in {freeze} (line 1): not compared"
    assert found["set_aside"] == [said]
    assert f"not compared: {said}" in text


def test_an_editable_a_file_names_and_this_environment_lacks_is_said_without_a_version(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad==1.0")
    frozen = tmp_path / "f.txt"
    frozen.write_text("leftpad==1.0\n-e git+https://example.org/x.git@abc#egg=edpkg\n")

    found = venv.tool("diff", str(frozen), "--json").json()
    text = venv.tool("diff", str(frozen)).stdout

    assert found["changes"] == [
        {
            "name": "edpkg",
            "change": "removed",
            "before": None,
            "after": None,
            "size_before": None,
            "size_after": None,
            "files": [],
        }
    ]
    assert "- edpkg (no version)  (removed)" in text
    assert "None" not in text


def _read(path: Path, text: str) -> described.DescribedState:
    path.write_text(text)
    return described.read(path)


def test_each_editable_form_of_a_freeze_file_is_read(tmp_path: Path) -> None:
    state = _read(
        tmp_path / "freeze.txt",
        "-e file:///src/unnamed\n"
        "# Editable install with no version control (Named_Tree==0.3)\n"
        "-e /src/named\n"
        "-e git+https://example.org/r.git@abc123#egg=r_pkg\n"
        "tree @ file:///src/tree\n",
    )

    packages = {p.name: (p.version, p.source.kind, p.where) for p in state.packages}
    assert packages == {
        "named-tree": (None, "editable", "line 3"),
        "r-pkg": (None, "editable", "line 4"),
        "tree": (None, "url", "line 5"),
    }
    assert [(e.where, e.url) for e in state.editables] == [("line 1", "file:///src/unnamed")]
    assert state.entries(None) == ()
    # Which installed distribution the unnamed line is: the one installed from its tree; none
    # is: every editable install here that the file does not name otherwise.
    here = {
        "unnamed": Source(kind="editable", url="file:///src/unnamed"),
        "other": Source(kind="editable", url="file:///src/other"),
        "leftpad": Source(kind="index"),
    }
    assert set(state.select(None, here)) == {"named-tree", "r-pkg", "tree", "unnamed"}
    del here["unnamed"]
    assert set(state.select(None, here)) == {"named-tree", "r-pkg", "tree", "other"}
    assert set(state.select(None)) == {"named-tree", "r-pkg", "tree"}


def test_a_lock_or_snapshot_gives_no_version_of_a_tree_or_a_checkout(tmp_path: Path) -> None:
    lock = _read(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n'
        '[[packages]]\nname = "tree"\nversion = "1.0"\n'
        'directory = {path = "/src/tree", editable = true}\n'
        '[[packages]]\nname = "checkout"\nversion = "2.0"\n'
        'vcs = {type = "git", url = "https://example.org/c.git", commit-id = "abc123"}\n'
        '[[packages]]\nname = "wheel-only"\n'
        'wheels = [{url = "https://x/wheel_only-3.0-py3-none-any.whl",'
        ' hashes = {sha256 = "cc"}}]\n',
    )

    assert {p.name: p.version for p in lock.packages} == {
        "tree": None,
        "checkout": None,
        "wheel-only": "3.0",
    }
    assert [e.pin for e in lock.entries(None)] == ["wheel-only==3.0"]


def test_a_snapshot_of_an_editable_install_gives_no_version_of_it(
    b_and_a_freeze: tuple[Venv, Path, Path], tmp_path: Path
) -> None:
    """A snapshot.toml from another machine lists the editable install with the version its
    metadata said: not a version an index has, so none is compared or brought back."""
    b = b_and_a_freeze[0]
    snapshot_id = b.tool("snapshot", "-q", "--no-stash").stdout.strip()

    state = described.read(b.snapshot(snapshot_id).snapshot_file)

    edpkg = next(p for p in state.packages if p.name == "edpkg")
    assert (edpkg.version, edpkg.source.kind) == (None, "editable")
    assert "edpkg" not in {e.name for e in state.entries(None)}
    assert {p.name: p.version for p in state.packages if p.name != "edpkg"} == {
        "part0": "1.0",
        "part1": "2.0",
        "part2": "2.0",
    }


def test_two_files_say_an_unnamed_editable_line_without_an_environment(tmp_path: Path) -> None:
    first = tmp_path / "a.txt"
    first.write_text("leftpad==1.0\n-e file:///src/project\n")
    second = tmp_path / "b.txt"
    second.write_text("leftpad==1.0\n")

    found = run_tool("diff", str(first), str(second), "--json").json()

    assert found["set_aside"] == [
        "line 2: an editable install (file:///src/project) that names no distribution: not compared"
    ]
