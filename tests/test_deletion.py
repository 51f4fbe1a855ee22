"""What uv's uninstall deletes (deletion.py), worked out on a file system in memory, the way
crates/uv-install-wheel/src/uninstall.rs walks it."""

from __future__ import annotations

import os

from safeuninstall.environment.deletion import Removed, plan_deletion
from safeuninstall.environment.records import RecordEntry

SITE = "/venv/lib/python3.12/site-packages"


class Tree:
    """Paths relative to the site folder; a trailing / is a folder."""

    def __init__(self, *paths: str) -> None:
        self.entries: dict[str, str] = {}
        for rel in paths:
            path = os.path.join(SITE, rel.rstrip("/"))
            self.entries[path] = "folder" if rel.endswith("/") else "file"
            parent = os.path.dirname(path)
            while parent.startswith("/venv") and parent not in self.entries:
                self.entries[parent] = "folder"
                parent = os.path.dirname(parent)

    def kind(self, path: str) -> str:
        return self.entries.get(path, "missing")

    def names(self, folder: str) -> list[str]:
        return [os.path.basename(p) for p in self.entries if os.path.dirname(p) == folder]


def removed(name: str, *paths: str) -> Removed:
    record = [RecordEntry(path=p, sha256=None, size=None) for p in paths]
    return Removed(name, SITE, record, f"{SITE}/{name}-1.0.dist-info")


def site(*rels: str) -> tuple[str, ...]:
    return tuple(os.path.join(SITE, rel) for rel in rels)


def test_a_shared_pycache_is_swept_whole() -> None:
    """pip's overlapping-package test: child's module in parent's package."""
    tree = Tree(
        "parent/__init__.py",
        "parent/plugins/__init__.py",
        "parent/plugins/child_plugin.py",
        "parent/plugins/__pycache__/__init__.cpython-312.pyc",
        "parent/plugins/__pycache__/child_plugin.cpython-312.pyc",
        "child/__init__.py",
        "child/__pycache__/__init__.cpython-312.pyc",
        "child-1.0.dist-info/RECORD",
    )
    child = removed(
        "child", "child/__init__.py", "parent/plugins/child_plugin.py", "child-1.0.dist-info/RECORD"
    )
    plan = plan_deletion([child], "/venv", tree)
    assert sorted(plan.swept["child"]) == sorted(
        site("parent/plugins/__pycache__", "child/__pycache__")
    )
    assert plan.folders == {} and plan.outside == {}


def test_a_sweep_climbs_only_through_folders_left_empty() -> None:
    tree = Tree(
        "ns/__pycache__/x.pyc",
        "ns/a/mod.py",
        "ns/a/__pycache__/mod.pyc",
        "ns/b/other.py",
        "a-1.0.dist-info/RECORD",
    )
    plan = plan_deletion([removed("a", "ns/a/mod.py")], "/venv", tree)
    # ns/a empties, so ns's own __pycache__ goes too; ns still holds b: the climb stops.
    assert plan.swept["a"] == site("ns/a/__pycache__", "ns/__pycache__")


def test_a_listed_folder_and_a_line_out_of_the_environment() -> None:
    tree = Tree("pkg/__init__.py", "pkg/data/big.bin", "pkg/data/deep/x")
    dist = removed("pkg", "pkg/__init__.py", "pkg/data", "../../../../etc/passwd", "../../../bin/x")
    plan = plan_deletion([dist], "/venv", tree)
    assert plan.folders == {"pkg": site("pkg/data")}
    assert plan.outside == {"pkg": ("../../../../etc/passwd",)}


def test_distributions_are_removed_in_dist_info_order() -> None:
    """b's file empties the folder a's sweep stopped at, once a has gone first."""
    tree = Tree("shared/a.py", "shared/b.py", "shared/__pycache__/a.pyc")
    plan = plan_deletion([removed("b", "shared/b.py"), removed("a", "shared/a.py")], "/venv", tree)
    assert plan.swept == {"a": site("shared/__pycache__")}
