"""doctor's pieces, without an environment: which distributions are hollow, which requirement
lines apply."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from safeuninstall.base.cachefile import FileStamp
from safeuninstall.environment import presence
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.libraries.index import Ownership, hollow_distributions, ownership
from safeuninstall.reports.doctor import _holds_without_extra
from safeuninstall.reports.impact import applies_on_target
from tests.test_audit import install


def _owned(
    tmp_path: Path, files: dict[str, list[Path]]
) -> tuple[Ownership, dict[str, InstalledDistribution]]:
    """Distributions (metadata in ``tmp_path/meta``) that list ``files``, as given."""
    paths = {name: tuple(str(p) for p in listed) for name, listed in files.items()}
    owners: dict[str, tuple[str, ...]] = {}
    for name, listed_paths in paths.items():
        for path in listed_paths:
            owners[path] = (*owners.get(path, ()), name)
    installed = {name: install(tmp_path / "meta", name, {}) for name in files}
    return Ownership(owners, paths), installed


def test_hollow_is_told_per_file_in_a_folder_several_distributions_share(tmp_path: Path) -> None:
    folder = tmp_path / "site" / "pkg"
    folder.mkdir(parents=True)
    for name in ("a.py", "b.py", "c.so", "gone.pyc"):
        (folder / name).write_text(name)
    os.symlink("nowhere", folder / "dangling")  # there, as lexists says, though it leads nowhere
    owned, installed = _owned(
        tmp_path,
        {
            "whole": [folder / "a.py", folder / "dangling", folder / "gone.pyc"],
            "hollow": [folder / "b.py", folder / "missing.py"],
            "also-whole": [folder / "c.so"],
            "compiled-only": [folder / "never-there.pyc"],  # compiled caches aside
            "no-folder": [tmp_path / "absent" / "x.py"],
        },
    )
    assert hollow_distributions(owned, installed) == ["hollow", "no-folder"]
    (folder / "c.so").unlink()  # a later call lists the folder again
    assert hollow_distributions(owned, installed) == ["also-whole", "hollow", "no-folder"]


def test_a_file_in_a_folder_that_cannot_be_listed_is_looked_up_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "a.py").write_text("")
    owned, installed = _owned(tmp_path, {"whole": [folder / "a.py"], "hollow": [folder / "b.py"]})

    def unreadable(path: str) -> list[str]:
        raise PermissionError(13, "Permission denied", path)  # a folder searchable, not readable

    monkeypatch.setattr(os, "listdir", unreadable)
    assert hollow_distributions(owned, installed) == ["hollow"]


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


# -- a folder's listing, reused while the folder is unchanged (presence.py) ------------------


def test_a_folder_listed_for_one_distribution_is_listed_again_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """site-packages is listed for the first distribution; a file of the second goes before
    the second's look: the first listing must not answer for it."""
    monkeypatch.setattr(presence, "_SETTLED_NS", 0)  # however recent the folders' ctime
    site = tmp_path / "site"
    first = install(site, "first", {"first.py": "1"})
    second = install(site, "second", {"second.py": "2"})
    installed = {first.key: first, second.key: second}
    owned = ownership(installed)
    looked_at = presence._folder_keys
    calls: list[int] = []

    def keys_then_remove(folders: set[str]) -> dict[str, FileStamp]:
        calls.append(1)
        if len(calls) == 2:  # between the first distribution's look and the second's
            (site / "second.py").unlink()
        return looked_at(folders)

    monkeypatch.setattr(presence, "_folder_keys", keys_then_remove)
    assert hollow_distributions(owned, installed) == ["second"]
