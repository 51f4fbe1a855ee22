"""What changed between two states of an environment: distributions added, removed, upgraded,
downgraded, and those whose version stayed while their files changed.

Pure: each side is a mapping of canonical names to ``Side`` entries (a version, and each file's
sha256 where it is known: a snapshot's stash, an installed RECORD). Reading them is the
operation's part (operations/diff.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from msgspec import Struct
from packaging.version import InvalidVersion, Version

from safeuninstall.state.snapshot import Snapshot

UNKNOWN = ""  # a file listed without a hash: present, its bytes not compared


class ChangeKind(enum.Enum):
    """How one distribution differs between the two sides."""

    ADDED = "added"
    REMOVED = "removed"
    UPGRADED = "upgraded"
    DOWNGRADED = "downgraded"
    # The versions differ and cannot be ordered (one is not a PEP 440 version).
    CHANGED = "changed"
    # The same version, other files: a rebuild, a local build, a file edited in place.
    FILES_DIFFER = "files-differ"


class Side(Struct, frozen=True):
    """One distribution on one side: its version, and its files (path relative to the
    environment root: sha256, or ``UNKNOWN`` for a file listed without a hash) where they are
    known; None where they are not (a snapshot that did not stash it). ``version`` None: not
    known either (a lock file's source tree names none): neither is compared."""

    version: str | None
    files: Mapping[str, str] | None = None
    size: int | None = None  # bytes of the files compared (``compared``), where they are known


class Change(Struct, frozen=True):
    name: str
    kind: ChangeKind
    before: str | None  # the version on side A (None: absent there)
    after: str | None
    size_before: int | None = None
    size_after: int | None = None
    files: tuple[str, ...] = ()  # same version: the paths whose bytes differ, or on one side only

    @property
    def change(self) -> str:
        """Its kind, as --json writes it."""
        return self.kind.value

    @property
    def pin_before(self) -> str | None:
        return None if self.before is None else f"{self.name}=={self.before}"

    @property
    def pin_after(self) -> str | None:
        return None if self.after is None else f"{self.name}=={self.after}"


class Diff(Struct, frozen=True):
    """Every change from side A to side B, by name; how many stayed the same; and the names
    whose files could not be compared (the same version, files unknown on a side; or a version
    unknown on a side)."""

    changes: tuple[Change, ...]
    unchanged: int
    not_compared: tuple[str, ...] = ()

    def of_kind(self, kind: ChangeKind) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind is kind)

    @property
    def counts(self) -> dict[str, int]:
        """How many changes of each kind."""
        return {kind.value: len(self.of_kind(kind)) for kind in ChangeKind}


def compare(before: Mapping[str, Side], after: Mapping[str, Side]) -> Diff:
    """The changes from ``before`` to ``after``, sorted by name."""
    changes: list[Change] = []
    unchanged = 0
    not_compared: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        kind: ChangeKind | None
        files: tuple[str, ...] = ()
        if a is None:
            kind = ChangeKind.ADDED
        elif b is None:
            kind = ChangeKind.REMOVED
        elif a.version is not None and b.version is not None and a.version != b.version:
            kind = version_change(a.version, b.version)
        elif a.version is None or b.version is None or a.files is None or b.files is None:
            kind = None
            not_compared.append(name)
        else:
            files = differing_files(a.files, b.files)
            kind = ChangeKind.FILES_DIFFER if files else None
        if kind is None:
            unchanged += 1
            continue
        changes.append(
            Change(
                name,
                kind,
                a.version if a else None,
                b.version if b else None,
                a.size if a else None,
                b.size if b else None,
                files,
            )
        )
    return Diff(tuple(changes), unchanged, tuple(not_compared))


def version_change(before: str, after: str) -> ChangeKind:
    """Upgraded or downgraded, by PEP 440 ordering; CHANGED where a version is not PEP 440 or
    the two are equal as versions though written apart (``1.0`` and ``1.0.0``)."""
    try:
        old, new = Version(before), Version(after)
    except InvalidVersion:
        return ChangeKind.CHANGED
    if new > old:
        return ChangeKind.UPGRADED
    if new < old:
        return ChangeKind.DOWNGRADED
    return ChangeKind.CHANGED


def differing_files(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[str, ...]:
    """Paths that one side has and the other not, or whose sha256 differs where both know it."""
    differ = before.keys() ^ after.keys()
    differ |= {
        path
        for path in before.keys() & after.keys()
        if UNKNOWN not in (before[path], after[path]) and before[path] != after[path]
    }
    return tuple(sorted(differ))


def snapshot_sides(snap: Snapshot) -> dict[str, Side]:
    """Each distribution of ``snap``: its files where its stash holds them all."""
    sides = {}
    for entry in snap.packages:
        stash = entry.stash
        if stash is None or not stash.complete:
            sides[entry.name] = Side(entry.version)
            continue
        kept = [f for f in stash.files if not f.swept and compared(f.path)]
        sides[entry.name] = Side(
            entry.version, {f.path: f.sha256 for f in kept}, sum(f.size for f in kept)
        )
    return sides


def compared(path: str) -> bool:
    """Whether a file's bytes say anything of the distribution: not bytecode, not the metadata
    folder (RECORD, INSTALLER, REQUESTED, direct_url.json, an installer's own notes), which
    change whenever anything is recompiled or installed again from elsewhere."""
    folder, _, name = path.rpartition("/")
    return not (name.endswith(".pyc") or ".dist-info/" in folder + "/")
