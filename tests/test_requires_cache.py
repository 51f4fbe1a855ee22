"""The cache of each METADATA's Requires-Dist values (requirescache.py): it answers as reading
the headers does, or it is not used. A METADATA rewritten since (even with its size and mtime
kept), one that can't be read, and a corrupt or hostile cache file never change the answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from safeuninstall.environment.installed import InstalledDistribution, Source, requirement_index
from safeuninstall.environment.requirescache import RequiresCache
from tests.conftest import UV, MakeVenv
from tests.wheels import build_wheel


def _dist(site: Path, name: str, requires: list[str]) -> InstalledDistribution:
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    header = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{header}\nRequires-Dist: body\n"
    )
    return InstalledDistribution(
        name=name,
        version="1.0",
        dist_info=dist_info,
        installer="uv",
        requested=True,
        source=Source(kind="index"),
    )


def _site(tmp_path: Path) -> dict[str, InstalledDistribution]:
    site = tmp_path / "site"
    return {
        "app": _dist(site, "app", ["lib>=1", "extra-only; extra == 'x'"]),
        "lib": _dist(site, "lib", []),
    }


def _cached(installed: dict[str, InstalledDistribution], cache_file: Path) -> tuple[object, int]:
    cache = RequiresCache(cache_file)
    index = requirement_index(installed, cache.requires_dist)
    cache.save()
    return index, cache.hits


def test_the_cache_answers_as_reading_the_headers_does(tmp_path: Path) -> None:
    installed = _site(tmp_path)
    cache_file = tmp_path / "requires-cache.json"
    expected = requirement_index(installed)
    assert expected["lib"] == [("app", "lib>=1")]
    assert _cached(installed, cache_file) == (expected, 0)
    assert _cached(installed, cache_file) == (expected, 2)


def test_a_metadata_rewritten_in_place_with_its_size_and_mtime_is_read_again(
    tmp_path: Path,
) -> None:
    """Same inode, size and mtime: only ctime tells that app no longer requires lib."""
    installed = _site(tmp_path)
    cache_file = tmp_path / "requires-cache.json"
    _cached(installed, cache_file)
    metadata = installed["app"].dist_info / "METADATA"
    before = metadata.stat()
    text = metadata.read_text()
    with open(metadata, "r+") as handle:  # the same inode
        handle.write(text.replace("Requires-Dist: lib>=1", "Requires-Dist: lix>=1"))
    os.utime(metadata, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (metadata.stat().st_ino, metadata.stat().st_size) == (before.st_ino, before.st_size)
    index, hits = _cached(installed, cache_file)
    assert index == requirement_index(installed)
    assert "lib" not in index  # type: ignore[operator]
    assert hits == 1


def test_a_metadata_that_cannot_be_read_is_not_kept(tmp_path: Path) -> None:
    """A FIFO in place of METADATA: no values (as reading says), and nothing cached for it, so
    the METADATA written back later is read."""
    installed = _site(tmp_path)
    cache_file = tmp_path / "requires-cache.json"
    metadata = installed["app"].dist_info / "METADATA"
    text = metadata.read_text()
    metadata.unlink()
    os.mkfifo(metadata)
    index, _ = _cached(installed, cache_file)
    assert index == requirement_index(installed) == {}
    assert not any("app-1.0" in k for k in json.loads(cache_file.read_text())["entries"])
    metadata.unlink()
    metadata.write_text(text)
    assert _cached(installed, cache_file)[0] == requirement_index(installed)


def _hostile(kind: str, cache_file: Path) -> None:
    if kind == "garbage":
        cache_file.write_bytes(b"\x00{not json")
        return
    if kind == "fifo":
        cache_file.unlink()
        os.mkfifo(cache_file)
        return
    data = json.loads(cache_file.read_text())
    key = next(k for k in data["entries"] if "/app-1.0.dist-info/" in k)
    entry = data["entries"][key]
    if kind == "a value over two lines":
        entry[1] = ["nothing\nRequires-Dist: lib"]
    elif kind == "a value not stripped":
        entry[1] = [" lib>=1"]
    elif kind == "another version":
        data["version"] = 99
    elif kind == "wrong types":
        entry[1] = [1, 2]
    elif kind == "an unknown field":
        data["extra"] = 1
    cache_file.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "fifo",
        "a value over two lines",
        "a value not stripped",
        "another version",
        "wrong types",
        "an unknown field",
    ],
)
def test_a_corrupt_or_hostile_cache_file_changes_nothing(tmp_path: Path, kind: str) -> None:
    installed = _site(tmp_path)
    cache_file = tmp_path / "requires-cache.json"
    _cached(installed, cache_file)
    _hostile(kind, cache_file)
    cache = RequiresCache(cache_file)
    assert requirement_index(installed, cache.requires_dist) == requirement_index(installed)
    assert cache.hits <= 1  # lib's entry may still serve; app's never does


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_check_sees_a_dependent_another_process_installed_changed_and_removed(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Between two commands plain uv installs requests (it requires urllib3), reinstalls the
    same version from a build that requires nothing, then the first build again, then removes
    it: each `check` of urllib3 names the dependents as they are. A reinstall keeps the
    METADATA's path (requests-2.32.3.dist-info/METADATA) and changes its content: only the
    file's stat tells the cache that its entry is stale."""
    venv = make_venv("urllib3")
    apart = tmp_path / "requires-nothing"
    build_wheel(apart, "requests", "2.32.3", {"requests/__init__.py": "", "requests/api.py": ""})

    def dependents() -> object:
        return venv.tool("check", "--json", "urllib3").json()["impact"]["dependents"]  # type: ignore[index]

    def requires() -> list[str]:
        (metadata,) = venv.site_packages.glob("requests-2.32.3.dist-info/METADATA")
        return [line for line in metadata.read_text().splitlines() if "Requires-Dist" in line]

    assert dependents() == []
    assert (venv.root / ".safe-uninstall" / "requires-cache.json").is_file()
    venv.install("requests")
    assert dependents() == ["requests"]
    venv.install("--reinstall", "requests", find_links=apart)
    assert requires() == []
    assert dependents() == []
    venv.install("--reinstall", "requests")
    assert requires() == ["Requires-Dist: urllib3>=2"]
    assert dependents() == ["requests"]
    venv.uv("pip", "uninstall", "--python", str(venv.python), "requests")
    assert dependents() == []
