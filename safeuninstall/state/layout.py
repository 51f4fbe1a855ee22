"""Where each file of a snapshot's folder is: the one place that names them.

A snapshot folder, ``<state>/snapshots/0007/``, holds::

    snapshot.toml          the snapshot itself (snapshot.py: its format), written once
    snapshot.json          its JSON twin, a cache of the same table, by its sha256 (store.py)
    head.json              what a listing needs of it, a cache, by its sha256 (store.py)
    outcome                what the operation ended as, a note (Store.set_outcome)
    removed                what stayed removed, when less than planned (Store.set_removed)
    stash/<name>-<version>/<path relative to the environment root>
                           the files of each distribution it kept (stash.py)
    stash-verified.json    the stamp and sha256 of each stashed file hashed (stash.py)
    stash-pruned           its stash was dropped by the retention policy, and why
    aside/<name>.dist-info/...
                           a second dist-info folder of a removed name, kept but never restored
    displaced/<path>       a file a restore found in the way, kept rather than overwritten

A snapshot records its stashes by their folder relative to this one (``stash/rich-14.0.0``,
``aside/rich-13.0.0.dist-info``): ``stash_of`` and ``aside_of`` make those names, ``holding``
finds one on disk.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

SNAPSHOTS = "snapshots"  # in the state folder: one folder per snapshot, named by its id
STASH = "stash"
ASIDE = "aside"


def stash_folder_name(name: str, version: str) -> str:
    """A distribution's folder inside ``stash/``."""
    return f"{name}-{version}"


def stash_of(name: str, version: str) -> str:
    """Where a distribution's stash goes, relative to the snapshot folder."""
    return f"{STASH}/{stash_folder_name(name, version)}"


def aside_of(dist_info_name: str) -> str:
    """Where a second dist-info folder is kept aside, relative to the snapshot folder."""
    return f"{ASIDE}/{dist_info_name}"


class SnapshotFolder(Struct, frozen=True):
    """One snapshot's folder, and the path of each thing in it."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def snapshot_file(self) -> Path:
        return self.path / "snapshot.toml"

    @property
    def twin_file(self) -> Path:
        """snapshot.toml as JSON, for the commands that read every snapshot."""
        return self.path / "snapshot.json"

    @property
    def head_file(self) -> Path:
        return self.path / "head.json"

    @property
    def outcome_file(self) -> Path:
        return self.path / "outcome"

    @property
    def removed_file(self) -> Path:
        return self.path / "removed"

    @property
    def stash_dir(self) -> Path:
        return self.path / STASH

    @property
    def verified_file(self) -> Path:
        """stash-verified.json: the stashed files whose bytes were hashed."""
        return self.path / "stash-verified.json"

    @property
    def pruned_mark(self) -> Path:
        """Present when the stash was dropped; its text says why."""
        return self.path / "stash-pruned"

    @property
    def aside_dir(self) -> Path:
        return self.path / ASIDE

    @property
    def displaced_dir(self) -> Path:
        return self.path / "displaced"

    def package_stash(self, name: str, version: str) -> Path:
        """The stash folder of ``name`` ``version`` (which may not exist)."""
        return self.path / stash_of(name, version)

    def holding(self, relative: str) -> Path:
        """A path the snapshot records relative to its folder (a stash's ``folder``, or that
        joined with a file's path)."""
        return self.path / relative
