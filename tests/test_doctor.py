"""doctor's pieces, without an environment: which distributions are hollow, which
requirement lines apply."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from safeuninstall.doctor import _holds_without_extra
from safeuninstall.impact import applies_on_target
from safeuninstall.libraries import Ownership, hollow_distributions


def _owned(files: dict[str, list[Path]]) -> Ownership:
    paths = {name: tuple(str(p) for p in listed) for name, listed in files.items()}
    owners: dict[str, tuple[str, ...]] = {}
    for name, listed_paths in paths.items():
        for path in listed_paths:
            owners[path] = (*owners.get(path, ()), name)
    return Ownership(owners, paths)


def test_hollow_is_told_per_file_in_a_folder_several_distributions_share(tmp_path: Path) -> None:
    folder = tmp_path / "site" / "pkg"
    folder.mkdir(parents=True)
    for name in ("a.py", "b.py", "c.so", "gone.pyc"):
        (folder / name).write_text(name)
    os.symlink("nowhere", folder / "dangling")  # there, as lexists says, though it leads nowhere
    owned = _owned(
        {
            "whole": [folder / "a.py", folder / "dangling", folder / "gone.pyc"],
            "hollow": [folder / "b.py", folder / "missing.py"],
            "also-whole": [folder / "c.so"],
            "compiled-only": [folder / "never-there.pyc"],  # compiled caches aside
            "no-folder": [tmp_path / "absent" / "x.py"],
        }
    )
    installed = dict.fromkeys(owned.files)
    assert hollow_distributions(owned, installed) == ["hollow", "no-folder"]  # type: ignore[arg-type]
    (folder / "c.so").unlink()  # a later call lists the folder again
    assert hollow_distributions(owned, installed) == ["also-whole", "hollow", "no-folder"]  # type: ignore[arg-type]


def test_a_file_in_a_folder_that_cannot_be_listed_is_looked_up_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "a.py").write_text("")
    owned = _owned({"whole": [folder / "a.py"], "hollow": [folder / "b.py"]})

    def unreadable(path: str) -> list[str]:
        raise PermissionError(13, "Permission denied", path)  # a folder searchable, not readable

    monkeypatch.setattr(os, "listdir", unreadable)
    assert hollow_distributions(owned, dict.fromkeys(owned.files)) == ["hollow"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "line",
    [
        "a",
        "a; python_version >= '3'",
        "a; python_version < '3'",
        "a; extra == 'x'",
        "a; extra == 'x' or python_version >= '3'",
        "a; extra == 'x' and python_version >= '3'",
        "a; (sys_platform == 'linux' or sys_platform == 'win32') and extra == 'all'",
        "a; platform_release >= '5'",  # no version: compared as strings, or undefined
        "a; extra == ''",
    ],
)
def test_a_line_applies_without_an_extra_as_applies_on_target_says(line: str) -> None:
    markers = default_environment()
    requirement = Requirement(line)
    applies, extra = applies_on_target(requirement, markers)
    assert _holds_without_extra(requirement, markers) == (applies and extra is None)
