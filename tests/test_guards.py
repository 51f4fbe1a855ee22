"""The suite's own guards against a test that damages what later tests install from."""

from __future__ import annotations

import os
from pathlib import Path

from tests.realstack import linked_files, written_in_place


def _venv_linked_to_a_cache(tmp_path: Path) -> tuple[Path, Path]:
    cache, venv = tmp_path / "cache", tmp_path / "venv"
    (cache / "pkg").mkdir(parents=True)
    (venv / "lib" / "pkg").mkdir(parents=True)
    for name in ("a.py", "b.py"):
        (cache / "pkg" / name).write_text(f"{name} = 1\n")
        os.link(cache / "pkg" / name, venv / "lib" / "pkg" / name)
    (venv / "lib" / "own.py").write_text("not linked\n")
    return cache, venv


def test_a_file_written_in_place_is_named(tmp_path: Path) -> None:
    cache, venv = _venv_linked_to_a_cache(tmp_path)
    before = linked_files(venv)
    assert sorted(Path(path).name for path, _, _ in before.values()) == ["a.py", "b.py"]
    with open(venv / "lib" / "pkg" / "a.py", "a") as file:  # the cache's copy changes too
        file.write("b = 2\n")
    assert written_in_place(before, venv) == [str(venv / "lib" / "pkg" / "a.py")]
    assert "b = 2" in (cache / "pkg" / "a.py").read_text()


def test_files_replaced_removed_or_added_are_not(tmp_path: Path) -> None:
    _, venv = _venv_linked_to_a_cache(tmp_path)
    before = linked_files(venv)
    (venv / "lib" / "pkg" / "a.py").unlink()
    (venv / "lib" / "pkg" / "a.py").write_text("a new file, a new inode\n")
    (venv / "lib" / "pkg" / "b.py").unlink()
    (venv / "lib" / "own.py").write_text("written, but linked to nothing\n")
    (venv / "lib" / "new.py").write_text("added\n")
    assert written_in_place(before, venv) == []
