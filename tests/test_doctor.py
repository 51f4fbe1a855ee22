"""doctor's pieces, without an environment: which distributions are hollow (and the cache of
those found whole), which requirement lines apply."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from safeuninstall.environment import presence
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.presence import PresenceCache
from safeuninstall.judgement.doctor import _holds_without_extra
from safeuninstall.judgement.impact import applies_on_target
from safeuninstall.judgement.libraries import Ownership, hollow_distributions, ownership
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


# -- the cache of distributions found whole (presence.py) -------------------------------------


def _whole_site(tmp_path: Path) -> tuple[Path, dict[str, InstalledDistribution], Ownership]:
    """One distribution, ``pkg``, whose files and folders were last changed long ago (mtime
    set back; ctime is the kernel's, see _SETTLED_NS)."""
    site = tmp_path / "site"
    dist = install(site, "pkg", {"pkg/__init__.py": "", "pkg/sub/mod.py": "x", "pkg/lib.so": "y"})
    installed = {dist.key: dist}
    owned = ownership(installed)
    for folder in {os.path.dirname(p) for p in owned.files["pkg"]}:
        os.utime(folder, ns=(0, 10**9))
    return site, installed, owned


@pytest.fixture
def settled_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders count as settled however recent their ctime (which no test can set back)."""
    monkeypatch.setattr(presence, "_SETTLED_NS", 0)


def _check(
    cache_file: Path, owned: Ownership, installed: dict[str, InstalledDistribution]
) -> tuple[list[str], int]:
    cache = PresenceCache(cache_file)
    hollow = cache.hollow(owned.files, installed)
    cache.save()
    return hollow, cache.hits


@pytest.mark.usefixtures("settled_now")
def test_a_distribution_found_whole_is_looked_at_again_once_a_file_goes(tmp_path: Path) -> None:
    site, installed, owned = _whole_site(tmp_path)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    assert _check(cache_file, owned, installed) == ([], 1)  # from the cache
    (site / "pkg/sub/mod.py").unlink()  # its folder's mtime moves on
    assert _check(cache_file, owned, installed) == (["pkg"], 0)


@pytest.mark.usefixtures("settled_now")
def test_a_rewritten_record_is_looked_at_again(tmp_path: Path) -> None:
    """The same folders, untouched, but the RECORD (rewritten in place: its folder unchanged)
    now lists a file that is not there."""
    _, installed, owned = _whole_site(tmp_path)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    record = installed["pkg"].dist_info / "RECORD"
    with record.open("a") as stream:  # the same inode
        stream.write("pkg/sub/gone.py,,\n")
    assert _check(cache_file, ownership(installed), installed) == (["pkg"], 0)


@pytest.mark.usefixtures("settled_now")
def test_a_cache_that_leaves_out_a_folder_is_not_believed(tmp_path: Path) -> None:
    site, installed, owned = _whole_site(tmp_path)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    stored = json.loads(cache_file.read_text())
    (entry,) = stored["entries"].values()
    sub = str(os.path.realpath(site / "pkg/sub"))
    del entry["folders"][sub]
    cache_file.write_text(json.dumps(stored))
    (site / "pkg/sub/mod.py").unlink()
    assert _check(cache_file, owned, installed) == (["pkg"], 0)


@pytest.mark.parametrize("spoil", ["garbage", "wrong types", "another format", "a FIFO"])
@pytest.mark.usefixtures("settled_now")
def test_a_corrupt_cache_is_ignored(tmp_path: Path, spoil: str) -> None:
    site, installed, owned = _whole_site(tmp_path)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    stored = json.loads(cache_file.read_text())
    if spoil == "garbage":
        cache_file.write_bytes(b"\x00{")
    elif spoil == "wrong types":
        for entry in stored["entries"].values():
            entry["folders"] = {k: "x" for k in entry["folders"]}
        cache_file.write_text(json.dumps(stored))
    elif spoil == "another format":
        stored["version"] = 99
        cache_file.write_text(json.dumps(stored))
    else:
        cache_file.unlink()
        os.mkfifo(cache_file)
    (site / "pkg/lib.so").unlink()
    assert PresenceCache(cache_file).hollow(owned.files, installed) == ["pkg"]


def test_a_folder_changed_just_now_is_not_vouched_for(tmp_path: Path) -> None:
    """A removal in the same clock tick as the look would leave the folder's stamp as it was:
    a folder changed within _SETTLED_NS of the look is not kept as whole."""
    site = tmp_path / "site"
    dist = install(site, "fresh", {"fresh/__init__.py": ""})
    installed = {dist.key: dist}
    owned = ownership(installed)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    assert _check(cache_file, owned, installed) == ([], 0)  # looked at again, file by file


@pytest.mark.usefixtures("settled_now")
def test_a_shared_cache_keeps_the_other_environments_entries(tmp_path: Path) -> None:
    _, installed, owned = _whole_site(tmp_path / "one")
    _, other, other_owned = _whole_site(tmp_path / "two")
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == ([], 0)
    assert _check(cache_file, other_owned, other) == ([], 0)
    assert _check(cache_file, owned, installed) == ([], 1)  # still there
    assert _check(cache_file, other_owned, other) == ([], 1)
    assert len(json.loads(cache_file.read_text())["entries"]) == 2


@pytest.mark.usefixtures("settled_now")
def test_a_folder_listed_for_one_distribution_is_listed_again_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """site-packages is listed for the first distribution; a file of the second goes before
    the second's look. The first listing used to answer for it: found whole, and cached so."""
    site = tmp_path / "site"
    first = install(site, "first", {"first.py": "1"})
    second = install(site, "second", {"second.py": "2"})
    installed = {first.key: first, second.key: second}
    owned = ownership(installed)
    looked_at = presence._settled_keys
    calls: list[int] = []

    def settle_then_remove(folders: Iterable[str]) -> dict[str, presence.FolderKey] | None:
        calls.append(1)
        if len(calls) == 2:  # between the first distribution's look and the second's
            (site / "second.py").unlink()
        return looked_at(folders)

    monkeypatch.setattr(presence, "_settled_keys", settle_then_remove)
    cache_file = tmp_path / "presence-cache.json"
    assert _check(cache_file, owned, installed) == (["second"], 0)
    # first's entry holds site-packages' stat from before the removal: looked at again
    assert _check(cache_file, owned, installed) == (["second"], 0)
    assert _check(cache_file, owned, installed) == (["second"], 1)  # now from the cache
