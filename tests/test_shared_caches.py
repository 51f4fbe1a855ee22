"""The cache files of a state folder that several environments share (``--state-dir``):
each command keeps the entries of the other environments, but not of one that is gone. A
state folder shared by short-lived venvs (CI jobs) would otherwise keep every venv it ever
saw, 2 MB for a 235-distribution venv's record cache, for every later command to decode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.recordcache import RECORD_CACHE_FILE, RecordCache
from safeuninstall.environment.source import Source
from safeuninstall.libraries.index import ownership
from tests.conftest import UV, MakeVenv


def _dist(site: Path, name: str) -> InstalledDistribution:
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}-1.0.dist-info/RECORD,,\n")
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: base\n\n"
    )
    return InstalledDistribution(
        name=name,
        version="1.0",
        dist_info=dist_info,
        installer="uv",
        requested=True,
        source=Source(kind="index"),
    )


def _sites_in(cache_file: Path) -> set[str]:
    entries = json.loads(cache_file.read_text())["data"]
    return {str(Path(key).parent.parent) for key in entries}


def test_a_gone_environments_entries_are_dropped_and_a_living_ones_kept(tmp_path: Path) -> None:
    cache_file = tmp_path / "state" / RECORD_CACHE_FILE
    cache_file.parent.mkdir()
    sites = {name: tmp_path / name / "site-packages" for name in ("kept", "gone", "asked")}
    dists = {name: {name: _dist(site, name)} for name, site in sites.items()}

    def use(installed: dict[str, InstalledDistribution]) -> None:
        record_cache = RecordCache(cache_file)
        ownership(installed, record_cache)
        record_cache.save()

    for installed in dists.values():
        use(installed)
    assert _sites_in(cache_file) == {str(site) for site in sites.values()}
    shutil.rmtree(tmp_path / "gone")
    use(dists["asked"])  # nothing of its own changed: the cache is saved for the gone one
    assert _sites_in(cache_file) == {str(sites["kept"]), str(sites["asked"])}


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_a_shared_state_folder_forgets_a_deleted_venv(make_venv: MakeVenv, tmp_path: Path) -> None:
    """The real commands: two venvs, one state folder; the second venv deleted, a command on
    the first leaves nothing of the second in the record cache."""
    state = tmp_path / "shared-state"
    first, second = make_venv("leftpad==1.0"), make_venv("leftpad==1.0")
    for venv in (first, second):
        assert venv.tool("--state-dir", str(state), "check", "leftpad").returncode == 0
    cache_file = state / RECORD_CACHE_FILE
    assert _sites_in(cache_file) == {str(v.site_packages) for v in (first, second)}
    kept = str(first.site_packages)
    shutil.rmtree(second.root)
    assert first.tool("--state-dir", str(state), "check", "leftpad").returncode == 0
    assert _sites_in(cache_file) == {kept}
