"""``diff FILE``: another environment's set, from a file, against this one (or another file).

Node A's set is written in each form a user has (the snapshot.toml the tool wrote, ``export``'s
and ``uv pip freeze``'s requirements, a pylock.toml); node B differs from A in six ways. On B,
``diff A-FILE`` names exactly those six, whatever the form. A file is untrusted: whatever is
not one of those forms is refused with one line, exit 1.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest

from safeuninstall.state import described
from safeuninstall.state.described import DescribedFormat, DescribedState
from tests.conftest import UV, MakeVenv, Venv, described_files, error_line, run_tool
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

A_SET = ("urllib3==2.2.1", "alpha==2.0", "beta==1.0", "leftpad==1.0", "multipkg==1.0")
# What B is, from A: each of these, and requests (the same on both) besides.
SIX = {
    "urllib3": ("upgraded", "2.2.1", "2.3.0"),
    "beta": ("upgraded", "1.0", "2.0"),
    "alpha": ("downgraded", "2.0", "1.0"),
    "toolpkg": ("added", None, "1.0"),
    "leftpad": ("removed", "1.0", None),
    "multipkg": ("removed", "1.0", None),
}


@pytest.fixture
def more_wheels(tmp_path: Path) -> Path:
    house = tmp_path / "more-wheels"
    for name in ("alpha", "beta"):
        for version in ("1.0", "2.0"):
            build_wheel(house, name, version, {f"{name}.py": f"V = {version!r}\n"})
    return house


def _node_a(make_venv: MakeVenv, house: Path) -> Venv:
    venv = make_venv()
    venv.install(*A_SET, "requests==2.32.3", find_links=(venv.wheelhouse, house))
    return venv


def _node_b(make_venv: MakeVenv, house: Path) -> Venv:
    """A, changed in six ways."""
    venv = _node_a(make_venv, house)
    venv.install(
        "urllib3==2.3.0",
        "beta==2.0",
        "alpha==1.0",
        "toolpkg==1.0",
        find_links=(venv.wheelhouse, house),
    )
    venv.uv("pip", "uninstall", "--python", str(venv.python), "leftpad", "multipkg")
    return venv


def test_on_b_a_file_of_a_names_exactly_the_six_changes(
    make_venv: MakeVenv, more_wheels: Path, tmp_path: Path
) -> None:
    files = described_files(_node_a(make_venv, more_wheels), more_wheels, tmp_path / "from-a")
    b = _node_b(make_venv, more_wheels)
    before = b.file_hashes()

    for form, path in files.items():
        done = b.tool("diff", str(path), "--json")
        assert done.returncode == 0, (form, done.stderr)
        found = done.json()
        changes = {
            c["name"]: (c["change"], c["before"], c["after"])
            for c in found["changes"]  # type: ignore[attr-defined]
        }
        assert changes == SIX, form
        assert (found["before"], found["after"]) == (str(path), "now"), form
        assert (found["before_kind"], found["after_kind"]) == ("file", "now"), form
        assert found["unchanged"] == 1, form  # requests
        assert found["set_aside"] == [], form

    text = b.tool("diff", str(files["freeze"]))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"{files['freeze']} -> now: 1 added, 2 removed, 2 upgraded, 1 downgraded; 1 unchanged"
    )
    assert "  ^ urllib3 2.2.1 -> 2.3.0  (upgraded" in text.stdout
    assert lines[-1] == f"files not compared: {files['freeze']} gives versions only"
    # The other way round: B's set now against A's file.
    reverse = b.tool("diff", "now", str(files["pylock"]), "--json").json()
    assert {c["name"]: c["change"] for c in reverse["changes"]} == {  # type: ignore[attr-defined]
        "urllib3": "downgraded",
        "beta": "downgraded",
        "alpha": "upgraded",
        "toolpkg": "removed",
        "leftpad": "added",
        "multipkg": "added",
    }
    assert b.file_hashes() == before  # diff reads only


def test_two_files_compare_without_an_environment(
    make_venv: MakeVenv, more_wheels: Path, tmp_path: Path
) -> None:
    """Two files of one set: no change, and no environment is looked for (there is none)."""
    files = described_files(_node_a(make_venv, more_wheels), more_wheels, tmp_path / "from-a")
    nowhere = tmp_path / "no-venv-here"
    nowhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    done = run_tool(
        "diff", str(files["snapshot"]), str(files["pylock"]), "--json", cwd=nowhere, env=env
    )

    assert done.returncode == 0, done.stderr
    found = done.json()
    assert found["changes"] == []
    assert found["unchanged"] == 6
    assert (found["before_kind"], found["after_kind"]) == ("file", "file")


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


HOSTILE: dict[str, tuple[str, str | bytes, str]] = {
    # name: (file name, content, what the error says after "PATH: ")
    "garbage": ("a.txt", b"\x00\xff\xfe garbage \x80", described._NOT_TEXT),
    # UTF-16 by its mark, then an odd byte out: no text either.
    "utf16-cut": ("a.txt", codecs.BOM_UTF16_LE + "a==1.0\n".encode("utf-16-le")[:-1], "not text"),
    "utf16-lone-surrogate": ("a.txt", codecs.BOM_UTF16_LE + b"a\x00\x00\xd8=\x00", "not text"),
    "not-toml": ("a.toml", "this is = = not toml", "not a valid TOML file"),
    "neither": ("a.toml", "[tool]\nx = 1\n", "a TOML file that is neither a snapshot"),
    "deep": ("a.toml", "x = " + "[" * 100_000, "not a valid TOML file"),
    "bad-pylock": (
        "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n',
        "not a valid pylock.toml",
    ),
    "pylock-path-name": (
        "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "../../etc"\n'
        'version = "1.0"\narchive = {url = "https://x/a.tar.gz", hashes = {sha256 = "00"}}\n',
        "not a valid pylock.toml",
    ),
    "snapshot-bad-version": (
        "snapshot.toml",
        'format = 1\nid = "0001"\ncreated = ""\ntool_version = ""\ncommand = []\n'
        'operation = "snapshot"\noutcome = "pending"\nremoved = []\n'
        'target = {python = "", prefix = "", version = ""}\n'
        '[[packages]]\nname = "a"\nversion = "1.0; rm -rf"\ninstaller = ""\n'
        'requested = false\nsource = {kind = "index"}\n',
        "packages[0].version: '1.0; rm -rf' is not a version this tool can record",
    ),
    "unpinned": ("r.txt", "a==1.0\nb>=2\n", "line 2: 'b>=2' is not pinned to one version"),
    "include": ("r.txt", "-r other.txt\n", "line 1: '-r other.txt' includes another file"),
    "option": ("r.txt", "--something\n", "line 1: '--something' is an option"),
    "not-a-requirement": ("r.txt", "a==1.0\n\n$(rm -rf /)\n", "line 3: '$(rm -rf /)' is not"),
    "empty": ("r.txt", "# nothing\n\n", "no `name==version` line"),
    "twice": ("r.txt", "a==1.0\nb==1\nA==2.0\n", "line 3: a is listed again (line 1); both apply"),
    "bad-version": ("r.txt", "a===1.0/../x\n", "line 1: '1.0/../x' is not a version"),
    "too-many": (
        "r.txt",
        "".join(f"p{n}==1.0\n" for n in range(described.MAX_PACKAGES + 1)),
        f"line {described.MAX_PACKAGES + 1}: more than {described.MAX_PACKAGES} distributions",
    ),
    "too-many-locked": (
        "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n'
        + '[[packages]]\nname = "p"\n' * (described.MAX_PACKAGES + 1),
        f"more than {described.MAX_PACKAGES} distributions",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_file_that_describes_no_environment_is_refused_in_one_line(
    make_venv: MakeVenv, tmp_path: Path, case: str
) -> None:
    venv = make_venv("leftpad")
    name, content, said = HOSTILE[case]
    path = _write(tmp_path / name, content)

    done = venv.tool("diff", str(path), "--json")

    assert done.returncode == 1
    found = done.json()
    assert found["outcome"] == "error"
    assert str(found["error"]).startswith(f"{path}: {said}"), found["error"]
    text = venv.tool("diff", str(path))
    assert text.returncode == 1
    assert error_line(text.stderr).startswith(f"safe-uninstall: error: {path}: {said}")


@pytest.mark.parametrize("kind", ["missing", "folder", "fifo", "device", "huge"])
def test_what_is_not_a_readable_file_is_refused_without_reading_it(
    make_venv: MakeVenv, tmp_path: Path, kind: str
) -> None:
    venv = make_venv("leftpad")
    path = tmp_path / "A.txt"
    said = {
        "missing": "no such file",
        "folder": "a folder, not a file",
        "fifo": "cannot read it: not a regular file",  # and no wait for a writer
        "device": "cannot read it: not a regular file",
        "huge": "cannot read it: larger than 16 MiB",
    }[kind]
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as stream:  # sparse: costs no disk
            stream.truncate(17 << 20)

    done = venv.tool("diff", str(path))

    assert done.returncode == 1
    assert error_line(done.stderr).startswith(f"safe-uninstall: error: {path}: {said}")


# -- reading, without an environment -----------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "is_file"),
    [
        ("7", False),
        ("0007", False),
        ("latest", False),
        ("now", False),
        ("./7", True),
        ("A.toml", True),
        ("freeze.txt", True),
        ("golden", True),
        ("/srv/golden/pylock.toml", True),
    ],
)
def test_a_snapshot_is_named_by_number_latest_or_now_anything_else_is_a_file(
    reference: str, is_file: bool
) -> None:
    assert described.is_file_reference(reference) is is_file


def test_a_freeze_file_with_hashes_urls_markers_and_an_editable(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "freeze.txt",
        "# from uv pip freeze\n"
        "--index-url https://example.org/simple\n"
        "Alpha_Pkg==1.0 \\\n"
        "    --hash=sha256:aaaa \\\n"
        "    --hash=sha256:bbbb  # two hashes\n"
        "wheel-made @ file:///w/wheel_made-2.1-py3-none-any.whl\n"
        "checkout @ git+https://example.org/c.git@abc123\n"
        "-e file:///src/project\n"
        "windows-only==1.0 ; sys_platform == 'win32'\n",
    )

    state = described.read(path)

    assert isinstance(state, DescribedState)
    assert state.format is DescribedFormat.REQUIREMENTS
    packages = {p.name: p for p in state.packages}
    assert packages["alpha-pkg"].pin == "alpha-pkg==1.0"
    assert packages["alpha-pkg"].hashes == ("sha256:aaaa", "sha256:bbbb")
    assert packages["alpha-pkg"].from_index
    assert packages["alpha-pkg"].where == "line 3"
    assert (packages["wheel-made"].version, packages["wheel-made"].from_index) == ("2.1", False)
    assert packages["checkout"].version is None
    assert packages["checkout"].source.url == "git+https://example.org/c.git@abc123"
    # Which distribution the editable install is, only an environment can say.
    assert state.set_aside == ()
    assert [(e.where, e.url) for e in state.editables] == [("line 8", "file:///src/project")]
    linux = {"sys_platform": "linux", "python_version": "3.12"}
    assert "windows-only" not in state.select(linux)
    assert "windows-only" in state.select(None)  # no environment: markers not evaluated
    # As a snapshot's entries: what has a version, sorted, with its source.
    assert [(e.pin, e.source.kind) for e in state.entries(linux)] == [
        ("alpha-pkg==1.0", "index"),
        ("wheel-made==2.1", "url"),
    ]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_freeze_file_is_read_as_uv_reads_it(
    make_venv: MakeVenv, tmp_path: Path, encoding: str
) -> None:
    """``uv pip freeze > f.txt`` in Windows PowerShell writes UTF-16 with a byte-order mark: uv
    reads such a file with ``-r``, and ``diff`` reads it the same way."""
    venv = make_venv("leftpad==1.0")
    mark = codecs.BOM_UTF16_LE if encoding == "utf-16-le" else codecs.BOM_UTF16_BE
    path = _write(tmp_path / "freeze.txt", mark + "leftpad==0.9\r\n".encode(encoding))

    done = venv.tool("diff", str(path), "--json")

    assert done.returncode == 0, done.stderr
    changes = done.json()["changes"]
    assert [(c["name"], c["before"], c["after"]) for c in changes] == [  # type: ignore[attr-defined]
        ("leftpad", "0.9", "1.0")
    ]


def test_pylock_versions_hashes_and_sources(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "pylock.prod.toml",
        'lock-version = "1.0"\ncreated-by = "someone"\nrequires-python = ">=3.10"\n'
        "[[packages]]\n"
        'name = "wheel-only"\n'
        'wheels = [{url = "https://x/wheel_only-3.0-py3-none-any.whl",'
        ' hashes = {sha256 = "cc"}}]\n'
        "[[packages]]\n"
        'name = "tree"\ndirectory = {path = "/src/tree", editable = true}\n',
    )

    state = described.read(path)

    assert state.format is DescribedFormat.PYLOCK
    assert state.python == ">=3.10"
    wheel_only, tree = state.packages
    assert (wheel_only.name, wheel_only.version, wheel_only.hashes) == (
        "wheel-only",
        "3.0",
        ("sha256:cc",),
    )
    assert wheel_only.from_index
    assert (tree.version, tree.source.kind, tree.where) == (None, "editable", "packages[1]")


def test_a_version_a_file_does_not_give_is_not_compared(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A source tree in a lock file names no version: present on both sides, it is neither
    changed nor unchanged-by-version, it is listed as not compared."""
    venv = make_venv("leftpad==1.0")
    lock = _write(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n'
        '[[packages]]\nname = "leftpad"\ndirectory = {path = "/src/leftpad"}\n',
    )

    found = venv.tool("diff", str(lock), "--json").json()

    assert found["changes"] == []
    assert found["files_not_compared"] == ["leftpad"]


def test_an_editable_line_is_set_aside_and_said(make_venv: MakeVenv, tmp_path: Path) -> None:
    """``-e`` names no version, and here no distribution either (no editable install here is
    from its tree): left out, said in the text and in ``set_aside``; the rest is compared."""
    venv = make_venv("leftpad==1.0", "urllib3==2.3.0")
    frozen = _write(
        tmp_path / "other.txt", "leftpad==1.0\n-e file:///src/project\nurllib3==2.2.1\n"
    )

    found = venv.tool("diff", str(frozen), "--json").json()
    text = venv.tool("diff", str(frozen)).stdout.splitlines()

    assert [(c["name"], c["change"]) for c in found["changes"]] == [  # type: ignore[attr-defined]
        ("urllib3", "upgraded")
    ]
    said = (
        "line 2: an editable install (file:///src/project) that names no distribution, and "
        "none here is from its tree: not compared"
    )
    assert found["set_aside"] == [said]
    assert text[-1] == f"not compared: {said}"
