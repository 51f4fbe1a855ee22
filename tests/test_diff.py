"""``diff``: what changed between two snapshots, or a snapshot and now."""

from __future__ import annotations

from pathlib import Path

import pytest

from safeuninstall.plans.diff import UNKNOWN, ChangeKind, Side, compare, differing_files
from tests.conftest import MakeVenv, Venv
from tests.wheels import build_wheel


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("1.0", "1.1", ChangeKind.UPGRADED),
        ("2.0", "1.9.9", ChangeKind.DOWNGRADED),
        ("1.0rc1", "1.0", ChangeKind.UPGRADED),
        ("1.10", "1.9", ChangeKind.DOWNGRADED),  # not by text
        ("2.0+cu130", "2.0+cu128", ChangeKind.DOWNGRADED),
        ("1.0", "1.0.0", ChangeKind.CHANGED),  # equal as versions, written apart
        ("not a version", "1.0", ChangeKind.CHANGED),
    ],
)
def test_versions_are_ordered_as_pep_440_orders_them(
    before: str, after: str, kind: ChangeKind
) -> None:
    diff = compare({"x": Side(before)}, {"x": Side(after)})
    assert [(c.name, c.kind, c.before, c.after) for c in diff.changes] == [
        ("x", kind, before, after)
    ]


@pytest.mark.parametrize(
    ("before", "after", "differ"),
    [
        ({"a": "1", "b": "2"}, {"a": "1", "b": "2"}, ()),
        ({"a": "1", "b": "2"}, {"a": "1", "b": "3"}, ("b",)),
        ({"a": "1"}, {"a": "1", "c": "4"}, ("c",)),
        ({"a": "1", "c": "4"}, {"a": "1"}, ("c",)),
        ({"a": UNKNOWN}, {"a": "1"}, ()),  # a hash one side lacks is not a difference
        ({"a": "1"}, {}, ("a",)),
    ],
)
def test_files_differ_by_hash_or_presence(
    before: dict[str, str], after: dict[str, str], differ: tuple[str, ...]
) -> None:
    assert differing_files(before, after) == differ


def test_compare_sorts_every_kind_and_counts_what_stayed() -> None:
    before = {
        "gone": Side("1.0", size=10),
        "same": Side("1.0", {"s.py": "1"}),
        "up": Side("1.0"),
        "rebuilt": Side("1.0", {"r.py": "1", "r2.py": "2"}, 20),
        "unknown": Side("1.0"),
    }
    after = {
        "new": Side("3.0", size=30),
        "same": Side("1.0", {"s.py": "1"}),
        "up": Side("2.0"),
        "rebuilt": Side("1.0", {"r.py": "9", "r2.py": "2"}, 21),
        "unknown": Side("1.0", {"u.py": "1"}),
    }
    diff = compare(before, after)
    assert [(c.name, c.kind.value, c.files) for c in diff.changes] == [
        ("gone", "removed", ()),
        ("new", "added", ()),
        ("rebuilt", "files-differ", ("r.py",)),
        ("up", "upgraded", ()),
    ]
    assert diff.unchanged == 2
    assert diff.not_compared == ("unknown",)
    rebuilt = diff.changes[2]
    assert (rebuilt.size_before, rebuilt.size_after) == (20, 21)


# -- the command -------------------------------------------------------------------------------


def _rebuilt_leftpad(tmp_path: Path) -> Path:
    """leftpad 1.0 again, other bytes: a local rebuild under the same version."""
    house = tmp_path / "rebuilt"
    build_wheel(house, "leftpad", "1.0", {"leftpad.py": "def pad(s): return '  ' + s\n"})
    return house


def _changed(venv: Venv, tmp_path: Path) -> None:
    """From urllib3 2.2.1, leftpad, toolpkg, multipkg: urllib3 upgraded, toolpkg removed,
    requests added, leftpad rebuilt; multipkg the same."""
    venv.install("urllib3==2.3.0", "requests==2.32.3")
    venv.uv("pip", "uninstall", "--python", str(venv.python), "toolpkg")
    venv.uv(
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--no-index",
        "--reinstall-package",
        "leftpad",
        "--find-links",
        str(_rebuilt_leftpad(tmp_path)),
        "leftpad==1.0",
    )


def test_diff_of_a_snapshot_against_now(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("urllib3==2.2.1", "leftpad==1.0", "toolpkg==1.0", "multipkg==1.0")
    assert venv.tool("snapshot").returncode == 0
    _changed(venv, tmp_path)

    done = venv.tool("diff", "--json")
    assert done.returncode == 0, done.stderr
    found = done.json()
    assert found["after"] == "now"
    changes = {c["name"]: c for c in found["changes"]}  # type: ignore[attr-defined]
    assert {name: c["change"] for name, c in changes.items()} == {
        "leftpad": "files-differ",
        "requests": "added",
        "toolpkg": "removed",
        "urllib3": "upgraded",
    }
    assert (changes["urllib3"]["before"], changes["urllib3"]["after"]) == ("2.2.1", "2.3.0")
    (site,) = (venv.root / "lib").glob("python3*/site-packages")
    assert changes["leftpad"]["files"] == [str((site / "leftpad.py").relative_to(venv.root))]
    assert changes["requests"]["size_after"] > 0
    assert found["unchanged"] == 1  # multipkg
    assert found["files_not_compared"] == []

    text = venv.tool("diff")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].endswith("-> now: 1 added, 1 removed, 1 upgraded, 1 files differ; 1 unchanged")
    assert "  ^ urllib3 2.2.1 -> 2.3.0  (upgraded" in text.stdout
    assert "  ~ leftpad 1.0  (files-differ" in text.stdout


def test_diff_between_two_snapshots_and_a_downgrade(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("urllib3==2.3.0", "leftpad==1.0")
    first = venv.tool("snapshot", "-q").stdout.strip()
    venv.install("urllib3==2.2.1")
    venv.uv("pip", "uninstall", "--python", str(venv.python), "leftpad")
    second = venv.tool("snapshot", "-q").stdout.strip()
    venv.install("leftpad==1.0")  # after the second snapshot: not part of A..B

    found = venv.tool("diff", first, second, "--json").json()
    assert (found["before"], found["after"]) == (first, second)
    assert [(c["name"], c["change"]) for c in found["changes"]] == [  # type: ignore[attr-defined]
        ("leftpad", "removed"),
        ("urllib3", "downgraded"),
    ]
    back = venv.tool("diff", second, first, "--json").json()
    assert [(c["name"], c["change"]) for c in back["changes"]] == [  # type: ignore[attr-defined]
        ("leftpad", "added"),
        ("urllib3", "upgraded"),
    ]
    assert venv.tool("diff", first, first, "-q").stdout.strip() == (
        f"{first} -> {first}: no change; 2 unchanged"
    )


def test_a_snapshot_without_a_stash_says_which_files_were_not_compared(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("leftpad==1.0", "urllib3==2.2.1")
    assert venv.tool("snapshot", "--no-stash").returncode == 0
    _changed(venv, tmp_path)
    found = venv.tool("diff", "--json").json()
    assert found["files_not_compared"] == ["leftpad"]
    assert "files not compared for 1 distribution" in venv.tool("diff").stdout


def test_diff_changes_nothing_and_an_unknown_snapshot_is_an_error(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad==1.0")
    assert venv.tool("diff").returncode == 1  # no snapshot yet
    venv.tool("snapshot")
    before = venv.file_hashes()
    state = sorted(p.name for p in venv.state.root.rglob("*"))
    assert venv.tool("diff").returncode == 0
    done = venv.tool("diff", "99", "--json")
    assert done.returncode == 1
    assert "no snapshot '99'" in done.json()["error"]  # type: ignore[operator]
    assert venv.file_hashes() == before
    assert sorted(p.name for p in venv.state.root.rglob("*")) == state
