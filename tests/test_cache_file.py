"""The one cache mechanism (base/cachefile.py), and what it stands on: a file's stamp, which
tells a file written in place with its mtime set back from the file it was (its ctime moved),
and the bounded reader, which reads no state file through a symbolic link."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from msgspec import Struct

from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.cachefile import CacheFile, FileStamp
from safeuninstall.state.layout import SnapshotFolder, stash_of
from safeuninstall.state.snapshot import PackageStash, StashedFile
from safeuninstall.transaction.transaction import _changed_files


class _Value(Struct, frozen=True):
    names: list[str]
    stamp: FileStamp


def _cache(path: Path) -> CacheFile[_Value]:
    return CacheFile(path, _Value, format="test-cache", version=1, max_bytes=1 << 20)


def _written_in_place_with_its_mtime_set_back(path: Path) -> FileStamp:
    """The stamp ``path`` had, once its bytes are rewritten in place (the same inode, the same
    size) and its mtime set back to what it was. Rewritten until the kernel's clock, which
    stamps the ctime, has moved on: a write in the same tick leaves the ctime as it was."""
    before = FileStamp.of(os.lstat(path))
    data = path.read_bytes()
    for turn in range(1_000_000):
        with open(path, "r+b") as stream:
            stream.write(bytes([data[0] ^ (1 + turn % 2)]))
        os.utime(path, ns=(before.mtime_ns, before.mtime_ns))
        now = os.lstat(path)
        if now.st_ctime_ns != before.ctime_ns:
            assert (now.st_ino, now.st_size, now.st_mtime_ns) == (
                before.ino,
                before.size,
                before.mtime_ns,
            )
            return before
    raise AssertionError("the ctime never moved")


def test_a_stamp_tells_a_file_written_in_place_with_its_mtime_set_back(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_bytes(b"good = True\n")
    before = _written_in_place_with_its_mtime_set_back(path)
    assert FileStamp.of(os.lstat(path)) != before
    assert FileStamp.at(path) != before


def test_a_file_written_in_place_with_its_mtime_set_back_is_not_unchanged_since_the_snapshot(
    tmp_path: Path,
) -> None:
    """The judgement of recover and of run's undo: is a distribution's installed file the one
    the stash hasher recorded before the change? Its size, inode and mtime say yes."""
    root = tmp_path / "env"
    (root / "pkg").mkdir(parents=True)
    installed = root / "pkg" / "mod.py"
    installed.write_bytes(b"good = True\n")
    digest = hashlib.sha256(installed.read_bytes()).hexdigest()
    folder = SnapshotFolder(tmp_path / "0001")
    stash = PackageStash(
        stash_of("pkg", "1.0"), (StashedFile("pkg/mod.py", digest, 12),), complete=True
    )
    hashed = {f"{stash.folder}/pkg/mod.py": (FileStamp.of(os.lstat(installed)), digest)}
    assert not _changed_files(stash, folder, root, hashed)
    _written_in_place_with_its_mtime_set_back(installed)
    assert _changed_files(stash, folder, root, hashed)


def _recorded(tmp_path: Path) -> tuple[Path, PackageStash, dict[str, tuple[FileStamp, str]]]:
    """An environment at ``tmp_path/env`` with one file, its stash, and the stash hasher's
    record of it."""
    root = tmp_path / "env"
    (root / "pkg").mkdir(parents=True)
    installed = root / "pkg" / "mod.py"
    installed.write_bytes(b"good = True\n")
    digest = hashlib.sha256(installed.read_bytes()).hexdigest()
    stash = PackageStash(
        stash_of("pkg", "1.0"), (StashedFile("pkg/mod.py", digest, 12),), complete=True
    )
    return root, stash, {f"{stash.folder}/pkg/mod.py": (FileStamp.of(os.lstat(installed)), digest)}


def _moved_ctime(path: Path, change: Callable[[int], None]) -> None:
    """``change(turn)`` made to ``path`` until the kernel's clock, which stamps the ctime, has
    moved on (a change in the same tick leaves the ctime as it was)."""
    before = os.lstat(path).st_ctime_ns
    for turn in range(1_000_000):
        change(turn)
        if os.lstat(path).st_ctime_ns != before:
            return
    raise AssertionError("the ctime never moved")


def test_a_new_hard_link_alone_is_no_change_to_a_file(tmp_path: Path) -> None:
    """Another venv linking the same inode (as uv links its cache's) moves the file's ctime
    and link count, not its bytes: the file is the one recorded."""
    root, stash, hashed = _recorded(tmp_path)
    installed = root / "pkg" / "mod.py"
    elsewhere = tmp_path / "another-venv"
    elsewhere.mkdir()

    def link(turn: int) -> None:
        os.link(installed, elsewhere / f"mod-{turn}.py")

    _moved_ctime(installed, link)
    assert not _changed_files(stash, SnapshotFolder(tmp_path / "0001"), root, hashed)


def test_a_chmod_alone_is_a_change_to_a_file(tmp_path: Path) -> None:
    """Its bytes are the ones recorded, its mode is not."""
    root, stash, hashed = _recorded(tmp_path)
    installed = root / "pkg" / "mod.py"
    os.chmod(installed, 0o777)
    assert _changed_files(stash, SnapshotFolder(tmp_path / "0001"), root, hashed)


def test_the_bounded_reader_reads_no_link_when_told_not_to(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_bytes(b"a regular file")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert read_bytes(link, 100) == b"a regular file"
    with pytest.raises(OSError):
        read_bytes(link, 100, follow_links=False)
    assert read_bytes(real, 100, follow_links=False) == b"a regular file"


def test_a_cache_file_round_trips_its_type(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "cache.json")
    assert cache.read() is None  # missing: no cache
    value = _Value(["a", os.fsdecode(b"\xff-not-utf8")], FileStamp(1, 2, 3, 4, 5, 0o100644))
    cache.write(value)
    assert _cache(tmp_path / "cache.json").read() == value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]  # no temp file left


def test_a_cache_file_through_a_symbolic_link_is_not_read(tmp_path: Path) -> None:
    """Even one that holds a well-formed value: a link can lead anywhere (/dev/zero, another
    user's file)."""
    elsewhere = tmp_path / "elsewhere.json"
    _cache(elsewhere).write(_Value(["a"], FileStamp(1, 2, 3, 4, 5, 0o100644)))
    assert _cache(elsewhere).read() is not None
    (tmp_path / "cache.json").symlink_to(elsewhere)
    assert _cache(tmp_path / "cache.json").read() is None


@pytest.mark.parametrize(
    "spoil",
    ["garbage", "another format", "another version", "wrong types", "unknown field", "deep"],
)
def test_a_spoilt_cache_file_is_no_cache(tmp_path: Path, spoil: str) -> None:
    path = tmp_path / "cache.json"
    _cache(path).write(_Value(["a"], FileStamp(1, 2, 3, 4, 5, 0o100644)))
    stored = json.loads(path.read_text())
    if spoil == "garbage":
        path.write_bytes(b"\x00{")
        stored = None
    elif spoil == "another format":
        stored["format"] = "other"
    elif spoil == "another version":
        stored["version"] = 2
    elif spoil == "wrong types":
        stored["data"]["stamp"] = [1, 2, 3, 4, "5"]
    elif spoil == "unknown field":
        stored["extra"] = 1
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
        stored = None
    if stored is not None:
        path.write_text(json.dumps(stored))
    assert _cache(path).read() is None


def test_a_cache_file_is_read_bounded(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    small: CacheFile[_Value] = CacheFile(path, _Value, format="test-cache", version=1, max_bytes=64)
    small.write(_Value(["a" * 100], FileStamp(1, 2, 3, 4, 5, 0o100644)))
    assert path.stat().st_size > 64
    assert small.read() is None


def test_a_fifo_in_place_of_a_cache_file_is_no_cache(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    os.mkfifo(path)
    assert _cache(path).read() is None  # without waiting for a writer
